//! The lab: a client namespace and a server namespace joined by the bridge, with the
//! test zone's addresses, a DNS server, a TCP sink and an SCTP server (on
//! [`SCTP_HOST`]'s address) in the server namespace.
//!
//! ```text
//!  client ns nl<pid>-<n>c                          server ns nl<pid>-<n>s
//!  198.51.100.2, 2001:db8:c::2                     zone addresses (192.0.2.0/24,
//!  default routes -> nltun0                         2001:db8:5::/48), DNS 203.0.113.53 and
//!        nltun0 <== bridge threads (rules) ==>      2001:db8:53::53, default routes -> nltun0
//!                                                  TCP sink on port 80 (every address)
//!                                                  and 443 (rts's IPv6 only),
//!                                                  SCTP on port 80 in UDP 9899 (r4 only)
//! ```
//!
//! Only documentation ranges are used (TEST-NET-1/2/3, 2001:db8::/32), inside namespaces
//! that have no other interface: nothing can leave them. Dead zone addresses are
//! configured on the server but blackholed by the bridge, so connection attempts to them
//! get no answer at all (no RST, no ICMP), like a broken path.

#![forbid(unsafe_code)]

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::Command;
use std::time::Duration;

use crate::bridge::{Bridge, BridgeStats, LinkSwitch};
use crate::dns::DnsServer;
use crate::links::{self, LinkEvent, LinkSchedule, MAX_LINKS};
use crate::netns::{self, Captured, Netns};
use crate::rules::{Match, Rule};
use crate::sctp_server::SctpServer;
use crate::sink::Sink;
use crate::tun;

/// The test zone.
pub const ZONE: &str = "netlab.test.";
/// The TCP port the sink listens on, on every server address; also the SCTP port of the
/// SCTP server.
pub const SERVICE_PORT: u16 = 80;
/// The UDP port SCTP is encapsulated in (RFC 6951's 9899), on both sides: the SCTP
/// server listens on it and `taps connect` is given it (`--sctp-udp-port`).
pub const SCTP_UDP_PORT: u16 = 9899;
/// The zone name whose (one, IPv4) address runs the SCTP server. The other addresses
/// answer SCTP with ICMP port unreachable (see [`crate::sctp_server`] for why one).
pub const SCTP_HOST: &str = "r4";
/// The TCP port of the TLS scenarios: the TLS servers they start listen on it, and the
/// TCP sink also accepts on it on [`TLS_STUCK_HOST`]'s IPv6 address (where TLS never
/// answers).
pub const TLS_PORT: u16 = 443;
/// The zone name whose IPv6 address accepts TCP on [`TLS_PORT`] (the sink) but never
/// answers TLS; its IPv4 address is where `tls-stuck` runs a TLS server.
pub const TLS_STUCK_HOST: &str = "rts";
/// The zone name (IPv4 only) where `bad-cert` runs a TLS server presenting a
/// certificate for another name.
pub const BAD_CERT_HOST: &str = "rtb";
/// The zone name (IPv4 only) where `quic-wins` runs the lab's secure server, which serves
/// TLS/TCP and QUIC (UDP) on [`TLS_PORT`].
pub const QUIC_HOST: &str = "rq";
/// The zone name (IPv4 only) where `quic-blocked` runs the secure server with its UDP
/// port blackholed (a host of its own, so a CIB kept across scenarios with `--cib` does
/// not carry QUIC's failure there over to `quic-wins`).
pub const QUIC_BLOCKED_HOST: &str = "rqx";
/// The zone name whose HTTPS record https-rr sets (alpn, port, ipv4hint).
pub const HTTPS_RR_HOST: &str = "rh";
/// The port https-rr's HTTPS record names and its secure server listens on (the
/// origin's port, [`TLS_PORT`], serves nothing there).
pub const HTTPS_RR_PORT: u16 = 8443;
/// The zone name (IPv4 only) where `h3-blackhole` runs caddy (HTTP/3 and HTTP/2 on
/// [`TLS_PORT`]) and blackholes its UDP port.
pub const H3_BLACKHOLE_HOST: &str = "rgx";
/// The zone name (IPv4 only) whose HTTPS record `h3-https-rr` sets to `alpn=h3` and
/// [`HTTPS_RR_PORT`], where it runs caddy's HTTP/3 (HTTP/2 only on [`TLS_PORT`]).
pub const H3_HTTPS_RR_HOST: &str = "rgh";
/// The TCP port of the MPTCP sink: an MPTCP listener on the server's IPv4 addresses
/// (every one, including each link's own) that reads like the TCP sink and records into
/// the same list. Plain TCP clients are served too (MPTCP falls back).
pub const MPTCP_PORT: u16 = 8090;
/// The client's IPv4 address.
pub const CLIENT_V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
/// The client's IPv6 address.
pub const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xc, 0, 0, 0, 0, 2);
/// The DNS server's IPv4 address (port 53).
pub const DNS_V4: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 53);
/// The DNS server's IPv6 address (port 53).
pub const DNS_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x53, 0, 0, 0, 0, 0x53);
/// The zone's IPv4 addresses lie in this /24.
pub const ZONE_NET_V4: (Ipv4Addr, u8) = (Ipv4Addr::new(192, 0, 2, 0), 24);
/// The zone's IPv6 addresses lie in this /48.
pub const ZONE_NET_V6: (Ipv6Addr, u8) = (Ipv6Addr::new(0x2001, 0xdb8, 5, 0, 0, 0, 0, 0), 48);
/// The TUN device's name inside each namespace (the namespaces make it unique; a fixed
/// name keeps what taps learns about the path comparable between runs).
pub const TUN_NAME: &str = "nltun0";

/// One address record of the test zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneRecord {
    /// The name, relative to [`ZONE`].
    pub name: &'static str,
    /// The address (A for IPv4, AAAA for IPv6).
    pub addr: IpAddr,
    /// Whether it answers; dead addresses are blackholed by the bridge.
    pub live: bool,
}

const fn v4(d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(192, 0, 2, d))
}

const fn v6(sub: u16, host: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 5, sub, 0, 0, 0, host))
}

const fn rec(name: &'static str, addr: IpAddr, live: bool) -> ZoneRecord {
    ZoneRecord { name, addr, live }
}

/// The test zone, named after the dual-stack study: `r` = a name, then one letter per
/// address class: `d` both families work, `x` dead IPv6, `z` dead IPv4, `4`/`6` one live
/// address of that family.
pub const ZONE_RECORDS: &[ZoneRecord] = &[
    // rd: both families work.
    rec("rd", v6(1, 1), true),
    rec("rd", v4(11), true),
    // rx: the IPv6 address is dead.
    rec("rx", v6(2, 1), false),
    rec("rx", v4(21), true),
    // rxxx: three dead IPv6 addresses, one live IPv4.
    rec("rxxx", v6(3, 1), false),
    rec("rxxx", v6(3, 2), false),
    rec("rxxx", v6(3, 3), false),
    rec("rxxx", v4(31), true),
    // rxz4: one dead IPv6; one dead and one live IPv4.
    rec("rxz4", v6(4, 1), false),
    rec("rxz4", v4(41), false),
    rec("rxz4", v4(42), true),
    // rxxzz: two dead of each family.
    rec("rxxzz", v6(5, 1), false),
    rec("rxxzz", v6(5, 2), false),
    rec("rxxzz", v4(51), false),
    rec("rxxzz", v4(52), false),
    // r6: IPv6 only.
    rec("r6", v6(6, 1), true),
    // r4: IPv4 only; the SCTP server's address (SCTP_HOST).
    rec("r4", v4(61), true),
    // rts (TLS_STUCK_HOST): TLS on port 443 stuck on IPv6 (the TCP sink accepts and
    // never answers), a TLS server on IPv4 when tls-stuck starts one.
    rec("rts", v6(7, 1), true),
    rec("rts", v4(71), true),
    // rtb (BAD_CERT_HOST): IPv4 only; a TLS server on port 443 with a certificate for
    // another name when bad-cert starts one.
    rec("rtb", v4(81), true),
    // rq (QUIC_HOST): IPv4 only; the secure server (TLS/TCP and QUIC on port 443) when
    // quic-wins starts one.
    rec("rq", v4(91), true),
    // rqx (QUIC_BLOCKED_HOST): IPv4 only; the secure server when quic-blocked starts one,
    // which blackholes its UDP port 443 (QUIC), not TCP.
    rec("rqx", v4(92), true),
    // rh (HTTPS_RR_HOST): IPv4 only; its HTTPS record (set by https-rr) sends clients to
    // the secure server on HTTPS_RR_PORT, which https-rr starts there.
    rec("rh", v4(93), true),
    // rgx (H3_BLACKHOLE_HOST): IPv4 only; caddy (h3 and h2 on port 443) when h3-blackhole
    // starts it, which blackholes its UDP port 443.
    rec("rgx", v4(94), true),
    // rgh (H3_HTTPS_RR_HOST): IPv4 only; its HTTPS record (set by h3-https-rr) sends
    // HTTP clients to caddy's HTTP/3 on HTTPS_RR_PORT; caddy's port 443 has HTTP/2 only.
    rec("rgh", v4(95), true),
];

/// The fully qualified name of a zone record name (`"rx"` → `"rx.netlab.test"`, without
/// the trailing dot, the way applications write it).
pub fn fqdn(name: &str) -> String {
    format!("{name}.{}", ZONE.trim_end_matches('.'))
}

/// The addresses of `name` in the zone (live and dead), IPv6 first, in zone order.
pub fn addresses(name: &str) -> Vec<ZoneRecord> {
    let mut v: Vec<ZoneRecord> = ZONE_RECORDS
        .iter()
        .filter(|r| r.name == name)
        .copied()
        .collect();
    v.sort_by_key(|r| r.addr.is_ipv4());
    v
}

/// The address of [`SCTP_HOST`], where the SCTP server listens.
pub fn sctp_server_addr() -> IpAddr {
    addresses(SCTP_HOST)[0].addr
}

/// The address of [`TLS_STUCK_HOST`] whose [`TLS_PORT`] is the TCP sink's: it accepts
/// TCP and never answers TLS.
pub fn tls_stuck_addr() -> IpAddr {
    addresses(TLS_STUCK_HOST)[0].addr
}

/// Whether `addr` is a dead zone address.
pub fn is_dead(addr: IpAddr) -> bool {
    ZONE_RECORDS.iter().any(|r| r.addr == addr && !r.live)
}

/// Options of a lab.
#[derive(Debug, Clone, Copy)]
pub struct LabOptions {
    /// Seed for the bridge's loss and jitter.
    pub seed: u64,
}

impl Default for LabOptions {
    fn default() -> Self {
        LabOptions {
            seed: 0x6e65_746c_6162,
        }
    }
}

/// A running lab. Everything it created is removed by [`Lab::teardown`] or on drop (and
/// by the panic hook and, in the binary, on SIGINT/SIGTERM/SIGHUP).
pub struct Lab {
    id: u64,
    client: Netns,
    server: Netns,
    // Dropped in this order by teardown: services, runtime, bridge, namespaces.
    sctp: Option<SctpServer>,
    sink: Option<Sink>,
    dns: Option<DnsServer>,
    runtime: Option<tokio::runtime::Runtime>,
    bridge: Option<Bridge>,
    /// Links 1 and 2 (index 0 here is link 1), added by [`Lab::add_link`].
    extra: std::sync::Mutex<Vec<Bridge>>,
    seed: u64,
    torn_down: bool,
}

impl std::fmt::Debug for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lab")
            .field("client", &self.client.name())
            .field("server", &self.server.name())
            .finish_non_exhaustive()
    }
}

/// Tears a half-built lab down unless defused.
struct SetupGuard(Option<u64>);

impl Drop for SetupGuard {
    fn drop(&mut self) {
        if let Some(id) = self.0 {
            for p in netns::teardown_lab(id) {
                eprintln!("netlab: teardown after failed setup: {p}");
            }
        }
    }
}

impl Lab {
    /// Builds the lab: two namespaces, two TUN devices and the bridge, addresses and
    /// routes, the DNS server, the TCP sink and the SCTP server (a child process,
    /// `netlab serve-sctp`). Needs root (see
    /// [`unsupported_reason`](crate::unsupported_reason)). On error nothing is left.
    pub fn start(opts: LabOptions) -> io::Result<Lab> {
        if let Some(why) = netns::unsupported_reason() {
            return Err(io::Error::new(io::ErrorKind::Unsupported, why));
        }
        let id = netns::register_lab();
        let mut guard = SetupGuard(Some(id));
        let base = format!("{}{id}", netns::prefix());
        let client = Netns::create(id, format!("{base}c"))?;
        let server = Netns::create(id, format!("{base}s"))?;
        let ctun = client.run(|| tun::create(TUN_NAME))??;
        let stun = server.run(|| tun::create(TUN_NAME))??;
        client.ip_batch(&links::client_script(0))?;
        server.ip_batch(&server_script())?;
        let bridge = Bridge::start(ctun, stun, opts.seed)?;

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("netlab-server")
            .enable_all()
            .build()?;
        let (udp, tcp, sink_listeners) = server.run(|| -> io::Result<_> {
            let mut udp = Vec::new();
            let mut tcp = Vec::new();
            for ip in [IpAddr::V4(DNS_V4), IpAddr::V6(DNS_V6)] {
                udp.push(std::net::UdpSocket::bind((ip, 53))?);
                tcp.push(std::net::TcpListener::bind((ip, 53))?);
            }
            // Dual-stack: IPv4 clients arrive as v4-mapped addresses.
            let sink = std::net::TcpListener::bind((Ipv6Addr::UNSPECIFIED, SERVICE_PORT))?;
            // The TLS port of the stuck address: TCP accepted, TLS never answered.
            let stuck = std::net::TcpListener::bind((tls_stuck_addr(), TLS_PORT))?;
            let mut sinks = vec![sink, stuck];
            // A kernel without MPTCP has no MPTCP sink; the MPTCP scenarios say so.
            if let Ok(l) = crate::mptcp::listener((Ipv4Addr::UNSPECIFIED, MPTCP_PORT).into()) {
                sinks.push(l);
            }
            Ok((udp, tcp, sinks))
        })??;
        let (dns, sink) = {
            let _enter = runtime.enter();
            let records: Vec<(String, IpAddr)> = ZONE_RECORDS
                .iter()
                .map(|r| (r.name.to_string(), r.addr))
                .collect();
            (
                DnsServer::start_on(ZONE, &records, crate::dns::TTL, udp, tcp)?,
                Sink::start(sink_listeners)?,
            )
        };
        let sctp = SctpServer::start(
            id,
            &server,
            &[sctp_server_addr()],
            SERVICE_PORT,
            SCTP_UDP_PORT,
            SocketAddr::new(IpAddr::V4(DNS_V4), 53),
            sink.recorder(),
        )?;
        guard.0 = None;
        let lab = Lab {
            id,
            client,
            server,
            sctp: Some(sctp),
            sink: Some(sink),
            dns: Some(dns),
            runtime: Some(runtime),
            bridge: Some(bridge),
            extra: std::sync::Mutex::new(Vec::new()),
            seed: opts.seed,
            torn_down: false,
        };
        lab.set_rules(Vec::new());
        Ok(lab)
    }

    /// The client namespace.
    pub fn client(&self) -> &Netns {
        &self.client
    }

    /// The server namespace.
    pub fn server(&self) -> &Netns {
        &self.server
    }

    /// The bridge (to read its counters or set raw rules).
    pub fn bridge(&self) -> &Bridge {
        self.bridge.as_ref().expect("running")
    }

    /// The bridge's counters.
    pub fn stats(&self) -> BridgeStats {
        self.bridge().stats()
    }

    /// The DNS server (to delay answers per record type).
    pub fn dns(&self) -> &DnsServer {
        self.dns.as_ref().expect("running")
    }

    /// The DNS server's IPv4 address and port, for `--name-server`.
    pub fn dns_addr(&self) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(DNS_V4), 53)
    }

    /// The sink: what every connection to the TCP sink on [`SERVICE_PORT`] (and on
    /// [`TLS_PORT`] of [`tls_stuck_addr`]) and to the SCTP server brought.
    pub fn sink(&self) -> &Sink {
        self.sink.as_ref().expect("running")
    }

    /// The SCTP server (on [`SCTP_HOST`]'s address, SCTP port [`SERVICE_PORT`], UDP
    /// [`SCTP_UDP_PORT`]).
    pub fn sctp_server(&self) -> &SctpServer {
        self.sctp.as_ref().expect("running")
    }

    /// Sets the bridge's rules: the zone's dead addresses stay blackholed (first), then
    /// `rules` in order; unmatched packets pass unchanged.
    pub fn set_rules(&self, rules: Vec<Rule>) {
        let mut all: Vec<Rule> = ZONE_RECORDS
            .iter()
            .filter(|r| !r.live)
            .map(|r| Rule::new(Match::host(r.addr)).blackhole())
            .collect();
        all.extend(rules);
        self.bridge().set_rules(all);
    }

    /// Adds the next link (1, then 2; see [`crate::links`]): a TUN device in each
    /// namespace, addresses, routes and a bridge of its own with no rules (everything
    /// passes). Returns its number. Fails past [`MAX_LINKS`].
    pub fn add_link(&self) -> io::Result<usize> {
        let mut extra = crate::sink::lock(&self.extra);
        let n = extra.len() + 1;
        if n >= MAX_LINKS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a lab has at most {MAX_LINKS} links"),
            ));
        }
        let dev = links::device(n);
        let ctun = self.client.run(|| tun::create(&dev))??;
        let stun = self.server.run(|| tun::create(&dev))??;
        self.client.ip_batch(&links::client_script(n))?;
        let rule = links::client_rule_v6(n);
        self.client
            .ip(&rule.iter().map(String::as_str).collect::<Vec<_>>())?;
        self.server.ip_batch(&links::server_script(n))?;
        let bridge = Bridge::start(ctun, stun, self.seed.wrapping_add(n as u64))?;
        extra.push(bridge);
        drop(extra);
        self.set_link_rules(n, Vec::new());
        Ok(n)
    }

    /// How many links the lab has (1 + those added).
    pub fn link_count(&self) -> usize {
        1 + crate::sink::lock(&self.extra).len()
    }

    fn with_link<R>(&self, n: usize, f: impl FnOnce(&Bridge) -> R) -> R {
        if n == 0 {
            return f(self.bridge());
        }
        let extra = crate::sink::lock(&self.extra);
        f(extra.get(n - 1).unwrap_or_else(|| panic!("no link {n}")))
    }

    /// Sets link `n`'s rules, like [`Lab::set_rules`] (the dead zone addresses stay
    /// blackholed first). Panics if the link does not exist.
    pub fn set_link_rules(&self, n: usize, rules: Vec<Rule>) {
        let mut all: Vec<Rule> = ZONE_RECORDS
            .iter()
            .filter(|r| !r.live)
            .map(|r| Rule::new(Match::host(r.addr)).blackhole())
            .collect();
        all.extend(rules);
        self.with_link(n, |b| b.set_rules(all));
    }

    /// Link `n`'s rules (as its bridge holds them, the dead addresses' blackholes
    /// first). Panics if the link does not exist.
    pub fn link_rules(&self, n: usize) -> Vec<Rule> {
        self.with_link(n, Bridge::rules)
    }

    /// Starts a ledger of the SCTP DATA chunks every link carries toward the server
    /// (see [`SctpLedger`](crate::sctp_ledger::SctpLedger)) and returns it; the links
    /// keep it until the lab ends.
    pub fn sctp_ledger(&self) -> std::sync::Arc<crate::sctp_ledger::SctpLedger> {
        let ledger = std::sync::Arc::new(crate::sctp_ledger::SctpLedger::default());
        for n in 0..self.link_count() {
            self.with_link(n, |b| b.keep_sctp_ledger(Some((n, ledger.clone()))));
        }
        ledger
    }

    /// Link `n`'s counters (its bridge's). Panics if the link does not exist.
    pub fn link_stats(&self, n: usize) -> BridgeStats {
        self.with_link(n, Bridge::stats)
    }

    /// Cuts link `n` (`false`: every packet dropped silently, a dead path; the devices,
    /// addresses and routes stay) or restores it.
    pub fn set_link_up(&self, n: usize, up: bool) {
        self.with_link(n, |b| b.set_up(up));
    }

    /// A handle to cut and restore link `n` from another thread.
    pub fn link_switch(&self, n: usize) -> LinkSwitch {
        self.with_link(n, Bridge::switch)
    }

    /// Applies `events` (link cuts and restores) at their times from now, on a thread;
    /// the returned schedule says when each was applied.
    pub fn schedule_links(&self, events: Vec<LinkEvent>) -> LinkSchedule {
        let switches = (0..self.link_count())
            .map(|n| self.link_switch(n))
            .collect();
        LinkSchedule::start(switches, events)
    }

    /// The lab's number (children registered under it are killed by its teardown).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Runs `cmd` (built with [`Netns::command`]) as a registered child, killed after
    /// `limit`, with its output captured.
    pub fn run_child(&self, cmd: Command, limit: Duration) -> io::Result<Captured> {
        netns::run_child(self.id, cmd, limit)
    }

    /// Removes everything the lab created, in order: services (the SCTP server process
    /// is killed and reaped), bridge (and with it the TUN devices), child processes,
    /// namespaces. Returns the problems met.
    pub fn teardown(mut self) -> Result<(), String> {
        let problems = self.teardown_inner();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    fn teardown_inner(&mut self) -> Vec<String> {
        if self.torn_down {
            return Vec::new();
        }
        self.torn_down = true;
        drop(self.sctp.take());
        drop(self.sink.take());
        drop(self.dns.take());
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
        if let Some(mut b) = self.bridge.take() {
            b.stop();
        }
        for mut b in crate::sink::lock(&self.extra).drain(..) {
            b.stop();
        }
        netns::teardown_lab(self.id)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for p in self.teardown_inner() {
            eprintln!("netlab: teardown: {p}");
        }
    }
}

fn server_script() -> String {
    let mut s = format!("link set {TUN_NAME} up\n");
    let dns = [IpAddr::V4(DNS_V4), IpAddr::V6(DNS_V6)];
    for ip in ZONE_RECORDS.iter().map(|r| r.addr).chain(dns) {
        match ip {
            IpAddr::V4(a) => s.push_str(&format!("address add {a}/32 dev {TUN_NAME}\n")),
            IpAddr::V6(a) => s.push_str(&format!("address add {a}/128 dev {TUN_NAME} nodad\n")),
        }
    }
    s.push_str(&format!("route add 0.0.0.0/0 dev {TUN_NAME}\n"));
    s.push_str(&format!("route add ::/0 dev {TUN_NAME}\n"));
    s
}
