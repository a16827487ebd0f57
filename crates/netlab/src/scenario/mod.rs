//! Scenarios: a lab, rules, `taps connect` runs (or plain-socket probes) and the bounds
//! they must meet. [`run`] builds a fresh lab, runs one scenario, tears the lab down and
//! returns what happened and which checks passed.
//!
//! The scenarios live one group per file (address families, dead addresses, loss, load,
//! SCTP, TLS, QUIC, faults, the plain-socket probe); `runner` runs one and records its checks,
//! `setup` and `checks` hold what the groups share (rules, connections; log lines,
//! bounds).
//!
//! To add a scenario: write a `fn(&Lab, &Ctx, &mut Outcome) -> Result<(), String>` that
//! sets rules (and DNS delays), runs connections with `Ctx::connect` and records checks
//! with `Outcome::check`; then list it in [`all`] with a name and a summary.

#![forbid(unsafe_code)]

mod address_families;
mod checks;
mod dead_addresses;
mod faults;
mod first_contact;
mod http;
mod http3;
mod https_rr;
mod interfaces;
mod load;
mod loss;
mod multipath;
mod plain_sockets;
mod pm;
mod quic;
mod runner;
mod sctp;
mod sctp_multihomed;
mod sctp_multipath;
mod setup;
mod tls;

use crate::lab::Lab;
pub use http::{http_get_binary, HTTP_GET_ENV, HTTP_PORT};
use runner::Ctx;
pub use runner::{run, Check, Outcome, RunOptions, LOSS_TRANSFER};

/// A named scenario.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Its name, for `netlab run NAME`.
    pub name: &'static str,
    /// One line on what it shows.
    pub summary: &'static str,
    /// Whether it runs the `taps` binary (the probes do not).
    pub needs_taps: bool,
    body: fn(&Lab, &Ctx, &mut Outcome) -> Result<(), String>,
}

/// Every scenario, in the order the suite runs them.
pub fn all() -> &'static [Scenario] {
    ALL
}

/// The scenarios [`all`] returns.
const ALL: &[Scenario] = &[
    Scenario {
        name: "probe",
        summary: "plain sockets: 50 ms each way gives a 100 ms TCP connect; blackhole, DNS delay, rate limit and loss work",
        needs_taps: false,
        body: plain_sockets::probe,
    },
    Scenario {
        name: "rd",
        summary: "TCP, both families work, IPv4 RTT 50 ms, IPv6 RTT 40 ms: IPv6 wins within RTT + 25 ms",
        needs_taps: true,
        body: address_families::rd,
    },
    Scenario {
        name: "r6",
        summary: "TCP, IPv6 only, RTT 40 ms: connects within RTT + 25 ms",
        needs_taps: true,
        body: address_families::r6,
    },
    Scenario {
        name: "rx",
        summary: "TCP, IPv6 address dead, RTT 50 ms: connect within attempt delay + RTT + 20 ms; twice more (same CIB, either DNS order) within RTT + 25 ms",
        needs_taps: true,
        body: dead_addresses::rx,
    },
    Scenario {
        name: "pm-rx",
        summary: "TCP, IPv6 address dead, RTT 50 ms, taps pm running: a second taps connect process skips the dead address (RTT + 25 ms); with the daemon stopped both still connect, as first contacts",
        needs_taps: true,
        body: pm::pm_rx,
    },
    Scenario {
        name: "rxxx",
        summary: "TCP, three dead IPv6, one live IPv4, RTT 50 ms: within attempt delay + RTT + 20 ms; twice more (same CIB, either DNS order) within RTT + 25 ms",
        needs_taps: true,
        body: dead_addresses::rxxx,
    },
    Scenario {
        name: "rxz4",
        summary: "TCP, one dead IPv6, one dead and one live IPv4, RTT 50 ms: within 2 attempt delays + RTT + 20 ms; twice more (same CIB, either DNS order) within RTT + 25 ms",
        needs_taps: true,
        body: dead_addresses::rxz4,
    },
    Scenario {
        name: "rxxzz",
        summary: "TCP, two dead of each family: failure within the establishment timeout, listing four causes",
        needs_taps: true,
        body: dead_addresses::rxxzz,
    },
    Scenario {
        name: "rx-first",
        summary: "TCP, first contact, RTT 50 ms to the hosts and to the DNS server, IPv6 dead: the lookup's time sets the stagger: connected within 180 ms of the first DNS answer, before curl (--resolve, 200 ms)",
        needs_taps: true,
        body: first_contact::rx_first,
    },
    Scenario {
        name: "rd-first",
        summary: "TCP, first contact, RTT 50 ms to the DNS server, both families work (IPv6 RTT 40 ms): IPv6 still wins with one attempt",
        needs_taps: true,
        body: first_contact::rd_first,
    },
    Scenario {
        name: "aaaa-slow",
        summary: "TCP, AAAA answers delayed 300 ms: connects over IPv4 after the Resolution Delay, not after 300 ms",
        needs_taps: true,
        body: address_families::aaaa_slow,
    },
    Scenario {
        name: "loss",
        summary: "2% loss, 100 ms RTT: a transfer over TCP (10 MiB unless the run sets another size) completes, bytes verified",
        needs_taps: true,
        body: loss::loss,
    },
    Scenario {
        name: "load",
        summary: "TCP, 50 flows at once to rd (RTT 40/50 ms): all connect over IPv6",
        needs_taps: true,
        body: load::load,
    },
    // SCTP (user-space, inside UDP port 9899, RFC 6951) against the lab's SCTP
    // server on r4 (192.0.2.61), with SCTP preferred over TCP.
    Scenario {
        name: "sctp-blocked",
        summary: "SCTP preferred but UDP 9899 blackholed, RTT 50 ms: TCP wins within attempt delay + RTT + 20 ms; again (same CIB) the CIB skips SCTP: within RTT + 25 ms",
        needs_taps: true,
        body: sctp::sctp_blocked,
    },
    Scenario {
        name: "sctp-fair",
        summary: "SCTP preferred, TCP 30 ms later, RTT 100 ms: SCTP wins on its INIT-ACK (1 RTT), TCP cancelled, connected within 2 RTT + 20 ms",
        needs_taps: true,
        body: sctp::sctp_fair,
    },
    Scenario {
        name: "sctp-loss",
        summary: "2% loss, 100 ms RTT: a transfer over SCTP (10 MiB unless the run sets another size) completes, bytes verified; timed against TCP with CUBIC and with the kernel default",
        needs_taps: true,
        body: loss::sctp_loss,
    },
    // TLS over TCP ({"security": "require"}) on port 443 against taps' own TLS
    // listener, certificates from a test CA made for the run.
    Scenario {
        name: "tls-stuck",
        summary: "TLS, IPv6 accepts TCP but never answers TLS, IPv4 runs a TLS server, RTT 50 ms: the stuck attempt's transport comes up but it does not win; IPv4 wins within attempt delay + 2 RTT + 30 ms",
        needs_taps: true,
        body: tls::tls_stuck,
    },
    Scenario {
        name: "bad-cert",
        summary: "TLS, the server's certificate (trusted CA) is for another name, RTT 50 ms: taps connect fails within 2 RTT + 30 ms naming the host and the mismatch, no plain attempt, no application data",
        needs_taps: true,
        body: tls::bad_cert,
    },
    // QUIC raced against TLS/TCP ({"security": "require"}) on port 443 against the
    // same listener, which serves QUIC on UDP 443 beside TLS/TCP.
    Scenario {
        name: "quic-blocked",
        summary: "QUIC vs TLS/TCP, UDP 443 blackholed, RTT 50 ms: QUIC starts first, TLS/TCP 100 ms later wins within 100 + 2 RTT + 30 ms; again (same CIB) QUIC is not started: TLS/TCP within 2 RTT + 30 ms",
        needs_taps: true,
        body: quic::quic_blocked,
    },
    Scenario {
        name: "quic-wins",
        summary: "QUIC vs TLS/TCP, UDP open, RTT 50 ms: QUIC wins within RTT + 30 ms, before TLS/TCP is due (100 ms): no TLS/TCP attempt",
        needs_taps: true,
        body: quic::quic_wins,
    },
    Scenario {
        name: "https-rr",
        summary: "HTTPS record alpn=h3,h2 port=8443 ipv4hint, A held back 300 ms, RTT 50 ms: QUIC to 8443 on the hint wins before the A answer, its handshake within RTT + 30 ms; with alpn=h2 only, no QUIC: TLS/TCP to 8443 within 2 RTT + 30 ms",
        needs_taps: true,
        body: https_rr::https_rr,
    },
    // Faults: paths that die, reordering and duplication, broken DNS, a link flap.
    Scenario {
        name: "path-dies",
        summary: "TCP, then SCTP, abort timeout (connTimeout) 2 s: the path is blackholed mid-transfer; taps connect fails within 2 s + 2.5 s, never hangs",
        needs_taps: true,
        body: faults::path_dies,
    },
    Scenario {
        name: "reorder-dup",
        summary: "RTT 20 ms, 5% reordered by 10 ms, 2% duplicated: 4 MiB over TCP and 2 MiB over SCTP arrive exactly",
        needs_taps: true,
        body: faults::reorder_dup,
    },
    Scenario {
        name: "dns-faults",
        summary: "SERVFAIL and a silent server fail naming the name (within 2 s and 17 s); truncated UDP answers are asked again over TCP and connect; AAAA NXDOMAIN with a good A connects over IPv4",
        needs_taps: true,
        body: faults::dns_faults,
    },
    Scenario {
        name: "iface-flap",
        summary: "RTT 600 ms, the client's only link goes down 150 ms into a race: the interface watcher fails its attempts at once (within 1 s, not at the 2 s establishment timeout); a race while down fails within 2 s saying no local address can reach the server; link up: connects within RTT + 200 ms",
        needs_taps: true,
        body: faults::iface_flap,
    },
    // HTTP clients: hyper-util's legacy client over taps' connector against hyper-util's
    // own HttpConnector (taps' `http_get` example, built with `--features http`).
    Scenario {
        name: "http-rx",
        summary: "HTTP GET to rx (dead IPv6, RTT 50 ms), two requests, new client each: taps' connector within attempt delay + RTT + first DNS 70 + 30, then RTT + 30 (CIB); hyper-util's HttpConnector after its 300 ms fallback both times",
        needs_taps: true,
        body: http::http_rx,
    },
    // taps' HTTP client (`taps get`: HTTP/3 raced against HTTP/2) against caddy, a real
    // HTTP/3 server, in the server namespace.
    Scenario {
        name: "h3-blackhole",
        summary: "taps get --quic-head-start 300 against caddy (h3+h2 on port 443), RTT 100 ms: UDP open gives HTTP/3 within the head start; UDP 443 blackholed: HTTP/2 within the head start taps reports + 2 RTT (before a third); the next taps get (same CIB file) skips QUIC as broken and does not wait for it",
        needs_taps: true,
        body: http3::h3_blackhole,
    },
    Scenario {
        name: "h3-https-rr",
        summary: "taps get https://rgh.netlab.test:443/ with an HTTPS record alpn=h3 port=8443, caddy h3 on 8443 and HTTP/2 only on 443, RTT 100 ms, --quic-head-start 300: HTTP/3 to 8443 within the head start, QUIC's handshake within 1 RTT (before a second); without the record, HTTP/2 from 443",
        needs_taps: true,
        body: http3::h3_https_rr,
    },
    // Several paths: a second link (its own bridge, rules and counters); interface racing.
    Scenario {
        name: "iface-dead",
        summary: "two links, link 0 dead to the servers, RTT 40 ms on link 1: without the interface property the OS route fails; with interface [nltun0, nltun1] link 1 wins within 2 attempt delays + RTT + 50 ms; taps candidates ranks nltun1 first (CIB per interface); #2 via nltun1 sooner than one attempt delay + RTT (the delay the CIB saves), no nltun0 attempt",
        needs_taps: true,
        body: interfaces::iface_dead,
    },
    Scenario {
        name: "iface-slow",
        summary: "two links, RTT 1500 ms on link 0 and 40 ms on link 1: the fast link wins within 2 attempt delays + RTT + 50 ms; #2 (same CIB) via nltun1 sooner than one attempt delay + RTT, no nltun0 attempt",
        needs_taps: true,
        body: interfaces::iface_slow,
    },
    Scenario {
        name: "iface-prop",
        summary: "two links, RTT 40 ms each: interface require/prefer nltun1, avoid/prohibit nltun0 each win via nltun1 (require and prohibit never touch nltun0); require nosuch0 fails at once naming the property",
        needs_taps: true,
        body: interfaces::iface_prop,
    },
    // MPTCP over two links. (its own bridge, rules and counters), MPTCP over both.
    Scenario {
        name: "mptcp-aggregate",
        summary: "MPTCP, multipathPolicy aggregate, two paths of 10 Mbit/s and 10 ms each way: one connection moves 10 MB at >= 18 Mbit/s, each path carrying >= 35% (bridge counters)",
        needs_taps: true,
        body: multipath::mptcp_aggregate,
    },
    Scenario {
        name: "mptcp-handover",
        summary: "MPTCP, multipathPolicy handover (backup subflow), two paths of 10 Mbit/s and 10 ms: the first path dies 2 s into a 10 MB transfer; every byte arrives, the longest stall < 1 s, both paths carried data",
        needs_taps: true,
        body: multipath::mptcp_handover,
    },
    Scenario {
        name: "sctp-failover",
        summary: "SCTP multihoming (usrsctp at both ends), two paths of 10 Mbit/s and 10 ms: set_primary moves 1 MB to path 1; link 0 dies 2 s into a 10 MB transfer: every byte arrives in order, the longest stall < 2 s, path 0 reported unreachable, link 1 carried the rest",
        needs_taps: false,
        body: sctp_multipath::sctp_failover,
    },
    Scenario {
        name: "sctp-taps-failover",
        summary: "SCTP multihoming through taps at both ends (listener and taps connect ask for multihoming on two addresses each; no out-of-band step): both ends list both paths; link 0 cut 2 s into a 6 MB transfer: every byte arrives once and in order, the data on link 1 within 2 x connTimeout",
        needs_taps: true,
        body: sctp_multihomed::sctp_taps_failover,
    },
    Scenario {
        name: "sctp-taps-late-path",
        summary: "SCTP multihoming through taps at both ends, link 1 cut while the association comes up (the first heartbeat on its path is lost) and restored at 1 s: the path over it is confirmed anyway, so when link 0 is cut at 5 s of a 12 MB transfer every byte arrives once and in order, the data on link 1 within 2 x connTimeout",
        needs_taps: true,
        body: sctp_multihomed::sctp_taps_late_path,
    },
    Scenario {
        name: "sctp-taps-asconf",
        summary: "SCTP multihoming through taps, the client's second address added after the handshake (taps connect --add-local: ASCONF ADD-IP), both links up (packets to the server's link-1 address leave from the address usrsctp chose, not the unlisted one routing would pick): the server's association lists one client address when accepted and both at the end; link 0 cut at 5 s of a 12 MB transfer: every byte arrives once and in order, the data on link 1 within 2 x connTimeout",
        needs_taps: true,
        body: sctp_multihomed::sctp_taps_asconf,
    },
    Scenario {
        name: "sctp-taps-aggregate",
        summary: "SCTP multihoming through taps at both ends over two 10 Mbit/s 10 ms links: 12 MB with multipathPolicy handover, then aggregate (CMT, per association), three rounds in turn in the same run: aggregate >= 1.8x handover's rate over the rounds, each link >= 35% of it; stalls explained from the wire",
        needs_taps: true,
        body: sctp_multihomed::sctp_taps_aggregate,
    },
    Scenario {
        name: "sctp-taps-fixed",
        summary: "SCTP multihoming through taps with CMT on (multipathPolicy aggregate): two flows on one association, each pinned to one path (taps connect --fixed-paths); a ledger of the DATA chunks on each link: each stream's new data all on its own link, none on the other (retransmissions usrsctp's CMT policy moves are reported)",
        needs_taps: true,
        body: sctp_multihomed::sctp_taps_fixed,
    },
];

/// The scenario called `name`.
pub fn find(name: &str) -> Option<&'static Scenario> {
    all().iter().find(|s| s.name == name)
}
