//! TLS over TCP against taps' own TLS listener (`taps listen --cert --key --echo`, see
//! [`crate::tls_server`]), certificates made at run time by a throw-away test CA: a TCP
//! port that accepts but never answers TLS must not win (`tls-stuck`); a valid
//! certificate for another name is rejected, naming the host, with no plain-text
//! fallback (`bad-cert`).

#![forbid(unsafe_code)]

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use taps_testkit::TestPki;

use super::checks::{
    check_connected, check_stack, millis_f64, millis_u64, show_connection, show_timeline,
};
use super::runner::{Ctx, Outcome};
use super::setup::{answer_first, describe_rules, rtt_rules, ATTEMPT_DELAY};
use crate::dns::RecordType;
use crate::lab::{self, addresses, fqdn, Lab, BAD_CERT_HOST, TLS_PORT, TLS_STUCK_HOST};
use crate::taps::{Connect, ConnectReport, FlowReport};
use crate::tls_server::TlsServer;

/// NEAT properties that require security over TCP: TLS/TCP is what these scenarios are
/// about (a TCP that answers while TLS does not; a certificate rejected after TCP
/// connected), so QUIC, which the lab's TLS server also serves, is left out.
const SECURE: &str = r#"{"security": "require", "transport": {"value": "TCP", "precedence": 2}}"#;
/// The stack taps reports for TLS over TCP.
pub(super) const TLS_TCP: &str = "TLS/TCP";
/// What a verification failure for a certificate of another name says.
const NAME_MISMATCH: &str = "certificate is for another name";
/// The name `bad-cert`'s certificate is for (not the host asked for).
const OTHER_NAME: &str = "other.netlab.test";
/// The line the clients send (the TLS server echoes it).
pub(super) const LINE: &str = "hello over TLS";
/// Margin on the TLS bounds: DNS, the handshake's crypto in a debug build, the bridge.
pub(super) const MARGIN: Duration = Duration::from_millis(30);

/// A connection to `host` on [`TLS_PORT`] with [`SECURE`], trusting `pki`'s CA, sending
/// [`LINE`].
fn secure_to(host: &str, pki: &TestPki) -> Connect {
    secure_with(host, pki, SECURE)
}

/// A connection to `host` on [`TLS_PORT`] with properties `props`, trusting `pki`'s CA,
/// sending [`LINE`].
pub(super) fn secure_with(host: &str, pki: &TestPki, props: &str) -> Connect {
    let mut c = Connect::new(host);
    c.port = TLS_PORT;
    c.props = Some(props.to_string());
    c.ca = vec![pki.ca.clone()];
    c.line = Some(LINE.to_string());
    c
}

/// Starts the TLS server on `ip`:[`TLS_PORT`] with `pki`'s certificate and logs it.
pub(super) fn start_server(
    lab: &Lab,
    out: &mut Outcome,
    ip: IpAddr,
    pki: &TestPki,
    names: &str,
) -> Result<TlsServer, String> {
    let server = lab
        .start_tls_server(SocketAddr::new(ip, TLS_PORT), &pki.cert, &pki.key)
        .map_err(|e| e.to_string())?;
    out.say(format!(
        "  TLS server: `taps listen {TLS_PORT} --local {ip} --cert --key --echo` ({}), certificate for {names} from a test CA made for this run",
        server.listening().join(", ")
    ));
    Ok(server)
}

/// A test PKI with a leaf for `name`.
pub(super) fn pki_for(name: &str) -> Result<TestPki, String> {
    TestPki::new(&[name]).map_err(|e| format!("cannot make test certificates: {e}"))
}

/// Logs a secure connection: its result and attempts (labelled `label`), the race's
/// timeline and what the winner negotiated (labelled with `label`'s first word).
pub(super) fn show_secure(out: &mut Outcome, label: &str, r: &ConnectReport) {
    show_connection(out, label, r);
    let short = label.split(' ').next().unwrap_or(label);
    let f = r.flow();
    show_timeline(out, short, f);
    show_tls(out, short, f);
}

/// Logs what the winner negotiated and what came back.
pub(super) fn show_tls(out: &mut Outcome, label: &str, f: &FlowReport) {
    if let Some(s) = f.winner.as_ref().and_then(|w| w.security.as_deref()) {
        out.say(format!("      {label} security: {s}"));
    }
    for r in &f.replies {
        out.say(format!("      {label} reply: {r}"));
    }
}

/// Whether `stack` is a secure one (TLS or DTLS over a transport, or QUIC).
fn is_secure(stack: &str) -> bool {
    stack.starts_with("TLS/") || stack.starts_with("DTLS/") || stack == "QUIC"
}

/// Checks every candidate is a secure stack (no plain one raced or was even listed) and
/// every attempt that started ran over TLS/TCP.
fn check_all_secure(out: &mut Outcome, label: &str, f: &FlowReport) -> bool {
    let started: Vec<String> = f
        .attempts
        .iter()
        .filter(|a| a.started())
        .map(|a| format!("{} {}", a.stack, a.remote))
        .collect();
    let mut stacks: Vec<&str> = f.attempts.iter().map(|a| a.stack.as_str()).collect();
    stacks.sort_unstable();
    stacks.dedup();
    out.check(
        !started.is_empty()
            && f.attempts.iter().all(|a| is_secure(&a.stack))
            && f.attempts
                .iter()
                .filter(|a| a.started())
                .all(|a| a.stack == TLS_TCP),
        format!(
            "{label} no plain stack: candidates {} (all secure), attempted {}",
            stacks.join(", "),
            started.join(", ")
        ),
    )
}

/// Checks the echoed line came back.
pub(super) fn check_echo(out: &mut Outcome, label: &str, f: &FlowReport) -> bool {
    out.check(
        f.replies == [LINE],
        format!(
            "{label} the TLS server echoed {LINE:?} (replies: {:?})",
            f.replies
        ),
    )
}

/// `tls-stuck`: IPv6 accepts TCP on 443 (the sink) and never answers TLS; IPv4 runs a
/// TLS server. RTT 50 ms. The stuck attempt's transport comes up after one RTT but it
/// does not win; IPv4 starts one attempt delay after it and wins after TCP's and TLS
/// 1.3's round trips.
pub(super) fn tls_stuck(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let rtt = Duration::from_millis(50);
    let host = fqdn(TLS_STUCK_HOST);
    let stuck = lab::tls_stuck_addr();
    let live = addresses(TLS_STUCK_HOST)
        .iter()
        .find(|r| r.addr.is_ipv4())
        .map(|r| r.addr)
        .ok_or("the TLS-stuck host has no IPv4 address")?;
    lab.set_rules(rtt_rules(rtt, rtt));
    out.say(describe_rules(rtt, rtt));
    let pki = pki_for(&host)?;
    let server = start_server(lab, out, live, &pki, &host)?;
    out.say(format!(
        "  [{stuck}]:{TLS_PORT} is the TCP sink: it accepts and never answers TLS; properties: {SECURE}; AAAA answered first"
    ));
    answer_first(lab, RecordType::AAAA);
    lab.sink().clear();
    let r = ctx.connect(lab, secure_to(&host, &pki))?;
    show_secure(out, "#1", &r);
    let f = r.flow();
    // Attempt delay, then the IPv4 attempt's TCP handshake (1 RTT) and TLS 1.3's (1 RTT).
    let bound = ATTEMPT_DELAY + 2 * rtt + MARGIN;
    check_connected(
        out,
        "#1",
        f,
        Some("IPv4"),
        bound,
        &format!(
            "attempt delay {} + 2 RTT (TCP, TLS 1.3) {} + {}",
            millis_u64(ATTEMPT_DELAY),
            millis_u64(2 * rtt),
            millis_u64(MARGIN)
        ),
    );
    check_stack(out, "#1", f, TLS_TCP);
    check_all_secure(out, "#1", f);
    check_stuck_attempt(out, f, SocketAddr::new(stuck, TLS_PORT), rtt);
    check_echo(out, "#1", f);
    check_servers_saw(lab, out, &server, stuck);
    Ok(())
}

/// The stuck attempt started first, its transport came up about one RTT later (the
/// timeline's `#N transport up, security handshake running`), and it did not win.
fn check_stuck_attempt(out: &mut Outcome, f: &FlowReport, stuck: SocketAddr, rtt: Duration) {
    let stuck_text = stuck.to_string();
    let Some((i, a)) = f
        .attempts
        .iter()
        .enumerate()
        .find(|(_, a)| a.started() && a.remote == stuck_text)
    else {
        out.check(
            false,
            format!("#1 an attempt to {stuck} started (none did)"),
        );
        return;
    };
    let id = format!("#{} transport up", i + 1);
    let up = f
        .timeline
        .iter()
        .find(|(_, e)| e.starts_with(&id))
        .map(|(at, _)| *at);
    let winner_start = f
        .attempts
        .iter()
        .find(|a| a.outcome == "won")
        .map_or(f64::NAN, |a| a.start_ms);
    out.check(
        up.is_some_and(|at| {
            let took = at - a.start_ms;
            took >= millis_f64(rtt) - 1.0 && took <= millis_f64(rtt) + 20.0
        }),
        match up {
            Some(at) => format!(
                "#1 the stuck attempt {} (started at {:.1} ms) reported \"{id}\" at {at:.1} ms, {:.1} ms later (RTT {} .. RTT + 20)",
                i + 1,
                a.start_ms,
                at - a.start_ms,
                millis_u64(rtt)
            ),
            None => format!("#1 the timeline has no \"{id}\" for the stuck attempt to {stuck}"),
        },
    );
    out.check(
        a.outcome != "won" && a.start_ms < winner_start,
        format!(
            "#1 the stuck attempt to {stuck} started first ({:.1} ms, the winner at {winner_start:.1} ms) and did not win: {} at {:.1} ms",
            a.start_ms,
            a.outcome,
            a.end_ms.unwrap_or(f64::NAN)
        ),
    );
}

/// The sink accepted the stuck attempt's TCP connection and got its ClientHello (and
/// never answered); the TLS server got the line over one connection.
fn check_servers_saw(lab: &Lab, out: &mut Outcome, server: &TlsServer, stuck: IpAddr) {
    let recs = lab.sink().wait_for(1, Duration::from_secs(5));
    let at_stuck: Vec<_> = recs
        .iter()
        .filter(|r| r.local == SocketAddr::new(stuck, TLS_PORT))
        .collect();
    out.check(
        at_stuck.len() == 1 && at_stuck[0].bytes > 0,
        format!(
            "the sink accepted {} TCP connection(s) on [{stuck}]:{TLS_PORT} and got {} bytes there (the ClientHello), answering nothing (expected 1 connection, > 0 bytes)",
            at_stuck.len(),
            at_stuck.iter().map(|r| r.bytes).sum::<u64>()
        ),
    );
    let conns = server.wait_closed(1, Duration::from_secs(5));
    let expected = LINE.len() as u64 + 1;
    out.check(
        conns.len() == 1 && conns[0].bytes == Some(expected),
        format!(
            "the TLS server accepted {} connection(s) ({}) and received {:?} bytes (expected 1, {expected} bytes)",
            conns.len(),
            conns.iter().map(|c| c.accepted.as_str()).collect::<Vec<_>>().join("; "),
            conns.iter().map(|c| c.bytes).collect::<Vec<_>>()
        ),
    );
}

/// `bad-cert`: the TLS server presents a certificate from the trusted test CA but for
/// another name. RTT 50 ms. `taps connect` fails (exit code non-zero) naming the host
/// and the reason, after TCP's and TLS's round trips, with no plain-text attempt; the
/// server saw no application data. A control connection that asks for the certificate's
/// name connects through the same server.
pub(super) fn bad_cert(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let rtt = Duration::from_millis(50);
    let host = fqdn(BAD_CERT_HOST);
    let ip = addresses(BAD_CERT_HOST)[0].addr;
    lab.set_rules(rtt_rules(rtt, rtt));
    out.say(describe_rules(rtt, rtt));
    let pki = pki_for(OTHER_NAME)?;
    let server = start_server(lab, out, ip, &pki, OTHER_NAME)?;
    out.say(format!(
        "  properties: {SECURE}; the client trusts the test CA and asks for {host}"
    ));
    let r = ctx.connect(lab, secure_to(&host, &pki))?;
    show_connection(out, "#1", &r);
    let f = r.flow();
    show_timeline(out, "#1", f);
    check_rejected(out, &r, &host, rtt);
    check_all_secure(out, "#1", f);
    // The client's alert ends the server's handshake; give the server a moment to say
    // whether it accepted anything.
    std::thread::sleep(Duration::from_millis(200));
    let seen = server.connections();
    out.check(
        seen.is_empty() && f.bytes_sent == 0,
        format!(
            "#1 no application data: the TLS server finished {} handshake(s){} (expected none: the client's alert ends it), the client sent {} bytes",
            seen.len(),
            seen.iter()
                .map(|c| format!(", {} ({:?} bytes)", c.accepted, c.bytes))
                .collect::<String>(),
            f.bytes_sent
        ),
    );
    control_connection(lab, ctx, out, &server, &pki, &host, rtt)
}

/// Checks `taps connect` failed non-zero within 2 RTT + margin, its error naming `host`
/// and the name mismatch, every started attempt failing with it.
fn check_rejected(out: &mut Outcome, r: &ConnectReport, host: &str, rtt: Duration) {
    let f = r.flow();
    let error = f.error.clone().unwrap_or_default();
    out.check(
        f.winner.is_none() && r.exit_code.is_some_and(|c| c != 0),
        format!(
            "#1 taps connect failed with exit code {:?} (expected non-zero, no winner)",
            r.exit_code
        ),
    );
    let named = format!("certificate of {host} rejected");
    out.check(
        error.contains(&named) && error.contains(NAME_MISMATCH) && r.stderr.contains(&named),
        format!("#1 the error (JSON and stderr) says \"{named}: {NAME_MISMATCH}\": {error}"),
    );
    let started: Vec<_> = f.attempts.iter().filter(|a| a.started()).collect();
    out.check(
        !started.is_empty()
            && started.iter().all(|a| {
                a.outcome == "failed"
                    && a.error
                        .as_deref()
                        .is_some_and(|e| e.contains(NAME_MISMATCH))
            }),
        format!(
            "#1 every attempt failed on the certificate ({})",
            started
                .iter()
                .map(|a| format!(
                    "{} {}: {} {}",
                    a.stack,
                    a.remote,
                    a.outcome,
                    a.error.as_deref().unwrap_or("")
                ))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    );
    // TCP's round trip, then the server's first flight (certificate) one RTT later.
    let bound = 2 * rtt + MARGIN;
    out.check(
        f.total_ms <= millis_f64(bound),
        format!(
            "#1 failed after {:.1} ms <= {} ms (2 RTT: TCP, then the server's certificate; + {}), no waiting for a timeout",
            f.total_ms,
            millis_u64(bound),
            millis_u64(MARGIN)
        ),
    );
}

/// Connection #2 asks for the certificate's own name (`--server-name`): it connects
/// through the same server and the line comes back, so #1 failed on the name alone.
fn control_connection(
    lab: &Lab,
    ctx: &Ctx,
    out: &mut Outcome,
    server: &TlsServer,
    pki: &TestPki,
    host: &str,
    rtt: Duration,
) -> Result<(), String> {
    let mut c = secure_to(host, pki);
    c.server_name = Some(OTHER_NAME.to_string());
    let r = ctx.connect(lab, c)?;
    show_connection(
        out,
        &format!("#2 (control, --server-name {OTHER_NAME})"),
        &r,
    );
    let f = r.flow();
    show_tls(out, "#2", f);
    check_connected(
        out,
        "#2",
        f,
        Some("IPv4"),
        2 * rtt + MARGIN,
        &format!("2 RTT (TCP, TLS 1.3) + {}", millis_u64(MARGIN)),
    );
    check_stack(out, "#2", f, TLS_TCP);
    check_echo(out, "#2", f);
    let conns = server.wait_closed(1, Duration::from_secs(5));
    out.check(
        conns.len() == 1 && conns[0].bytes == Some(LINE.len() as u64 + 1),
        format!(
            "#2 the TLS server accepted {} connection(s) in all, receiving {:?} bytes (expected 1, the control's {})",
            conns.len(),
            conns.iter().map(|c| c.bytes).collect::<Vec<_>>(),
            LINE.len() + 1
        ),
    );
    Ok(())
}
