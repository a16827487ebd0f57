//! Faults: a path that dies mid-transfer (`path-dies`), reordering and duplication
//! (`reorder-dup`), broken DNS (`dns-faults`) and the client's link going down and up
//! (`iface-flap`). Each shows that taps ends with a clear error within a bounded time,
//! never a hang, or gets every byte across.

#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use super::checks::{millis_f64, protocol_names, show_connection};
use super::runner::{Ctx, Outcome};
use crate::dns::FaultDns;
use crate::lab::{self, fqdn, sctp_server_addr, Lab, SCTP_HOST, SCTP_UDP_PORT, TUN_NAME};
use crate::packet::Proto;
use crate::rules::{Match, Rule};
use crate::taps::{Connect, ConnectReport};

/// The abort timeout `path-dies` sets (RFC 9622 `connTimeout`).
const ABORT_TIMEOUT: Duration = Duration::from_secs(2);
/// What `path-dies` allows beyond the abort timeout: TCP checks it on its retransmission
/// timer, SCTP gives up on its 5th timeout in a row (each at most a fifth of it), and
/// the process then closes and prints its report; the machine is noisy.
const ABORT_MARGIN: Duration = Duration::from_millis(2500);
/// How long `path-dies` lets the transfer run before the path dies.
const RUN_BEFORE_DEATH: Duration = Duration::from_millis(1500);

/// The client's TCP-only and SCTP-only properties, with `extra` JSON members.
fn props(transport: &str, extra: &str) -> String {
    format!(r#"{{"transport": {{"value": "{transport}", "precedence": 2}}{extra}}}"#)
}

/// RTT 20 ms and 8 Mbit/s to every zone address (a transfer takes long enough to be cut).
fn slow_zone() -> Vec<Rule> {
    let (n4, l4) = lab::ZONE_NET_V4;
    let (n6, l6) = lab::ZONE_NET_V6;
    let rtt = Duration::from_millis(20);
    vec![
        Rule::new(Match::net(IpAddr::V4(n4), l4))
            .rtt(rtt)
            .rate(8_000_000),
        Rule::new(Match::net(IpAddr::V6(n6), l6))
            .rtt(rtt)
            .rate(8_000_000),
    ]
}

pub(super) fn path_dies(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    out.say(format!(
        "  abort timeout (connTimeout) {} ms; RTT 20 ms, 8 Mbit/s; the path is blackholed {} ms into a 256 MiB transfer",
        ABORT_TIMEOUT.as_millis(),
        RUN_BEFORE_DEATH.as_millis()
    ));
    let timeout = format!(r#", "connTimeout": {}"#, ABORT_TIMEOUT.as_secs_f64());
    let rd: Vec<IpAddr> = lab::addresses("rd").iter().map(|r| r.addr).collect();
    let dead: Vec<Rule> = rd
        .iter()
        .map(|a| Rule::new(Match::host(*a)).blackhole())
        .collect();
    let mut c = Connect::new(fqdn("rd"));
    c.props = Some(props("TCP", &timeout));
    cut_mid_transfer(lab, ctx, out, "TCP", c, dead)?;
    let sctp = Rule::new(Match::host(sctp_server_addr()).udp().port(SCTP_UDP_PORT)).blackhole();
    let mut c = Connect::new(fqdn(SCTP_HOST));
    c.props = Some(props("SCTP", &timeout));
    cut_mid_transfer(lab, ctx, out, "SCTP", c, vec![sctp])
}

/// Starts a long transfer with `c`, blackholes the path with `dead` after
/// [`RUN_BEFORE_DEATH`], and checks that `taps connect` fails (connected over `stack`
/// first) within the abort timeout and [`ABORT_MARGIN`] of the blackhole.
fn cut_mid_transfer(
    lab: &Lab,
    ctx: &Ctx,
    out: &mut Outcome,
    stack: &str,
    mut c: Connect,
    dead: Vec<Rule>,
) -> Result<(), String> {
    lab.set_rules(slow_zone());
    c.send_bytes = Some(256 * 1024 * 1024);
    c.limit = Duration::from_secs(40);
    let started = Instant::now();
    let (report, died) = std::thread::scope(|s| {
        let killer = s.spawn(|| {
            std::thread::sleep(RUN_BEFORE_DEATH);
            let mut rules = dead;
            rules.extend(slow_zone());
            lab.set_rules(rules);
            Instant::now()
        });
        let r = ctx.connect(lab, c);
        (
            r,
            killer.join().expect("the blackhole thread does not panic"),
        )
    });
    let r = report.map_err(|e| format!("{stack}: {e}"))?;
    show_connection(out, stack, &r);
    let f = r.flow();
    let detected = (started + r.wall).saturating_duration_since(died);
    let won = f.winner.as_ref().map_or("none", |w| w.stack.as_str());
    out.check(
        won == stack,
        format!("{stack}: connected over {won} before the path died"),
    );
    let err = f.error.clone().unwrap_or_default();
    out.check(
        r.exit_code.is_some_and(|c| c != 0) && err.starts_with("after connecting"),
        format!(
            "{stack}: taps connect failed after connecting (exit {:?}): {err}",
            r.exit_code
        ),
    );
    let bound = ABORT_TIMEOUT + ABORT_MARGIN;
    out.check(
        detected <= bound && detected >= ABORT_TIMEOUT / 2,
        format!(
            "{stack}: the error came {:.0} ms after the blackhole (abort timeout {} ms; bound {} .. {} ms)",
            millis_f64(detected),
            ABORT_TIMEOUT.as_millis(),
            (ABORT_TIMEOUT / 2).as_millis(),
            bound.as_millis()
        ),
    );
    let st = lab.stats();
    out.say(format!(
        "  {stack}: bridge blackholed {} packets to the server so far",
        st.to_server.blackholed
    ));
    lab.set_rules(Vec::new());
    Ok(())
}

pub(super) fn reorder_dup(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let (n4, l4) = lab::ZONE_NET_V4;
    let (n6, l6) = lab::ZONE_NET_V6;
    let shape = |m: Match| {
        Rule::new(m)
            .rtt(Duration::from_millis(20))
            .reorder(0.05, Duration::from_millis(10))
            .duplicate(0.02)
    };
    lab.set_rules(vec![
        shape(Match::net(IpAddr::V4(n4), l4)),
        shape(Match::net(IpAddr::V6(n6), l6)),
    ]);
    out.say("  rules: RTT 20 ms; 5% of packets held back 10 ms (overtaken), 2% sent twice; both directions");
    // SCTP gets less: usrsctp takes ~3 s per MiB here (its fast retransmits on reordering).
    const MIB: u64 = 1024 * 1024;
    for (stack, host, proto, size) in [
        ("TCP", "rd", Proto::Tcp, 4 * MIB),
        ("SCTP", SCTP_HOST, Proto::Sctp, 2 * MIB),
    ] {
        lab.sink().clear();
        let before = lab.stats();
        let mut c = Connect::new(fqdn(host));
        c.props = Some(props(stack, ""));
        c.send_bytes = Some(size);
        c.limit = Duration::from_secs(30);
        let r = ctx.connect(lab, c)?;
        show_connection(out, stack, &r);
        let f = r.flow();
        let won = f.winner.as_ref().map_or("none", |w| w.stack.as_str());
        out.check(
            won == stack && f.error.is_none() && r.exit_code == Some(0) && f.bytes_sent == size,
            format!(
                "{stack}: connected over {won}, sent {} bytes, exit {:?}",
                f.bytes_sent, r.exit_code
            ),
        );
        let recs = lab.sink().wait_for(1, Duration::from_secs(5));
        let got: u64 = recs.iter().map(|s| s.bytes).sum();
        let bad: u64 = recs.iter().map(|s| s.mismatched).sum();
        out.check(
            recs.len() == 1
                && got == size
                && bad == 0
                && recs.iter().all(|s| s.clean_close && s.protocol == proto),
            format!(
                "{stack}: the server got {got} bytes over {} ({bad} wrong), closed cleanly (expected exactly {size})",
                protocol_names(&recs)
            ),
        );
        let st = lab.stats();
        let reordered = st.to_server.reordered + st.to_client.reordered
            - before.to_server.reordered
            - before.to_client.reordered;
        let duplicated = st.to_server.duplicated + st.to_client.duplicated
            - before.to_server.duplicated
            - before.to_client.duplicated;
        out.check(
            reordered > 0 && duplicated > 0,
            format!(
                "{stack}: the bridge reordered {reordered} and duplicated {duplicated} packets"
            ),
        );
    }
    Ok(())
}

/// The fault server's address (added to the server namespace by `dns-faults`).
const FAULT_DNS: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 54);

/// How long a lookup that gets no answer may take: taps' resolver (`ResolverConfig`'s
/// defaults, which `taps connect` keeps) waits 5 s per try and retries twice: 15 s
/// (measured 15.0 s), plus a 2 s margin.
const SILENT_BOUND: Duration = Duration::from_secs(17);

pub(super) fn dns_faults(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    lab.server()
        .ip_batch(&format!("address add {FAULT_DNS}/32 dev {TUN_NAME}\n"))
        .map_err(|e| format!("cannot add the fault server's address: {e}"))?;
    let (udp, tcp) = lab
        .server()
        .run(|| -> std::io::Result<_> {
            Ok((
                std::net::UdpSocket::bind((FAULT_DNS, 53))?,
                std::net::TcpListener::bind((FAULT_DNS, 53))?,
            ))
        })
        .and_then(|r| r)
        .map_err(|e| format!("cannot bind the fault server: {e}"))?;
    let records: Vec<IpAddr> = lab::addresses("rd").iter().map(|r| r.addr).collect();
    let dns = FaultDns::start(udp, tcp, records)
        .map_err(|e| format!("cannot start the fault server: {e}"))?;
    out.say(format!(
        "  fault DNS server on {}: servfail, silent, tc (truncated over UDP), nx6 (AAAA NXDOMAIN, good A) under {}",
        dns.addr(),
        crate::dns::FAULT_ZONE
    ));
    lab.set_rules(super::setup::rtt_rules(
        Duration::from_millis(20),
        Duration::from_millis(20),
    ));
    let lookup = |name: &str| -> Result<(String, ConnectReport), String> {
        let host = format!("{name}.{}", crate::dns::FAULT_ZONE.trim_end_matches('.'));
        let mut c = Connect::new(host.clone());
        c.props = Some(props("TCP", ""));
        c.name_server = Some(SocketAddr::new(IpAddr::V4(FAULT_DNS), 53));
        c.limit = Duration::from_secs(30);
        Ok((host, ctx.connect(lab, c)?))
    };
    // SERVFAIL: a clear error naming the name, at once.
    let (host, r) = lookup("servfail")?;
    show_connection(out, "servfail", &r);
    check_dns_error(out, "servfail", &host, &r, Duration::from_secs(2));
    // A server that never answers: a clear error within the resolver's timeouts.
    let (host, r) = lookup("silent")?;
    show_connection(out, "silent", &r);
    check_dns_error(out, "silent", &host, &r, SILENT_BOUND);
    // Truncated over UDP: the resolver asks again over TCP and connects.
    let (udp0, tcp0) = dns.queries();
    let (_, r) = lookup("tc")?;
    show_connection(out, "tc", &r);
    let (udp1, tcp1) = dns.queries();
    let f = r.flow();
    out.check(
        f.winner.is_some() && r.exit_code == Some(0) && r.wall <= Duration::from_secs(2),
        format!(
            "tc: connected ({:?}) in {:.0} ms (bound 2000 ms)",
            f.winner.as_ref().map(|w| w.remote.as_str()),
            millis_f64(r.wall)
        ),
    );
    out.check(
        udp1 > udp0 && tcp1 > tcp0,
        format!(
            "tc: the resolver asked over UDP ({}) and, truncated, again over TCP ({})",
            udp1 - udp0,
            tcp1 - tcp0
        ),
    );
    // AAAA NXDOMAIN with a good A: connects over IPv4.
    let (_, r) = lookup("nx6")?;
    show_connection(out, "nx6", &r);
    let f = r.flow();
    let family = f.winner.as_ref().map_or("none", |w| w.family.as_str());
    out.check(
        family == "IPv4" && r.exit_code == Some(0) && r.wall <= Duration::from_secs(2),
        format!(
            "nx6: connected over {family} in {:.0} ms (AAAA NXDOMAIN, A good; bound 2000 ms)",
            millis_f64(r.wall)
        ),
    );
    drop(dns);
    Ok(())
}

/// Checks that `r` failed without connecting, within `bound`, with an error naming
/// `host` and saying it does not resolve.
fn check_dns_error(out: &mut Outcome, label: &str, host: &str, r: &ConnectReport, bound: Duration) {
    let f = r.flow();
    let err = f.error.clone().unwrap_or_default();
    out.check(
        f.winner.is_none()
            && r.exit_code.is_some_and(|c| c != 0)
            && err.contains(host)
            && err.contains("does not resolve"),
        format!("{label}: failed naming the name: {err}"),
    );
    out.check(
        r.wall <= bound,
        format!(
            "{label}: failed after {:.0} ms (bound {} ms)",
            millis_f64(r.wall),
            bound.as_millis()
        ),
    );
}

/// Restores what taking the client's link down removed: its IPv6 address and both
/// default routes (the kernel drops them with the link).
fn client_link_up() -> String {
    format!(
        "link set {TUN_NAME} up\n\
         address replace {}/128 dev {TUN_NAME} nodad\n\
         route replace 0.0.0.0/0 dev {TUN_NAME} src {}\n\
         route replace ::/0 dev {TUN_NAME} src {}\n",
        lab::CLIENT_V6,
        lab::CLIENT_V4,
        lab::CLIENT_V6
    )
}

/// The establishment timeout of `iface-flap`'s race that loses its link.
const FLAP_TIMEOUT: Duration = Duration::from_secs(2);

pub(super) fn iface_flap(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let rtt = Duration::from_millis(600);
    lab.set_rules(super::setup::rtt_rules(rtt, rtt));
    out.say(
        "  rules: RTT 600 ms to every zone address (attempts are still pending when the link goes)",
    );
    let client = lab.client();
    let down = || {
        client
            .ip_batch(&format!("link set {TUN_NAME} down\n"))
            .map_err(|e| format!("cannot take the link down: {e}"))
    };
    let up = || {
        client
            .ip_batch(&client_link_up())
            .map_err(|e| format!("cannot bring the link up: {e}"))
    };
    // 1. The link goes down 150 ms into a race (both families' attempts pending): the
    //    watcher's event fails the attempts that have no way out any more, so the race
    //    ends at once (well before its establishment timeout) with an error.
    let mut c = Connect::new(fqdn("rd"));
    c.props = Some(props(
        "TCP",
        &format!(
            r#", "establishmentTimeout": {}"#,
            FLAP_TIMEOUT.as_secs_f64()
        ),
    ));
    let (r, went) = std::thread::scope(|s| {
        let flap = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(150));
            down()
        });
        (ctx.connect(lab, c.clone()), flap.join().expect("no panic"))
    });
    went?;
    let r = r?;
    show_connection(out, "mid-race", &r);
    let f = r.flow();
    let bound = Duration::from_secs(1);
    out.check(
        f.winner.is_none() && r.exit_code.is_some_and(|c| c != 0) && r.wall <= bound,
        format!(
            "link down mid-race: failed in {:.0} ms, not at the establishment timeout ({} ms; bound {} ms, process included): {}",
            millis_f64(r.wall),
            FLAP_TIMEOUT.as_millis(),
            bound.as_millis(),
            f.error.as_deref().unwrap_or("")
        ),
    );
    // 2. Link still down, a new race: its candidates are ruled out at once (the
    //    interface list has no address that can reach the server) with a clear error.
    //    rd's IPv4 address literally: no name server is reachable either.
    let mut lit = Connect::new(lab::addresses("rd")[1].addr.to_string());
    lit.props = Some(props("TCP", ""));
    let r = ctx.connect(lab, lit.clone())?;
    show_connection(out, "down", &r);
    let f = r.flow();
    let err = f.error.clone().unwrap_or_default();
    out.check(
        f.winner.is_none()
            && r.exit_code.is_some_and(|c| c != 0)
            && r.wall <= Duration::from_secs(2)
            && (err.contains("can reach it") || err.contains("unreachable")),
        format!(
            "link down: failed in {:.0} ms (bound 2000 ms) saying why: {err}",
            millis_f64(r.wall)
        ),
    );
    // 3. Up again: the same race connects, within 1 RTT + 200 ms (a noisy machine).
    up()?;
    let r = ctx.connect(lab, lit)?;
    show_connection(out, "up", &r);
    let f = r.flow();
    out.check(
        f.winner.is_some() && r.exit_code == Some(0) && f.total_ms <= millis_f64(rtt) + 200.0,
        format!("link up: connected in {:.0} ms (bound 800 ms)", f.total_ms),
    );
    Ok(())
}
