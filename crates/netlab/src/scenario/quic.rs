//! QUIC raced against TLS/TCP (`{"security": "require"}`) against the lab's secure server,
//! `taps listen 443 --cert --key --echo`, which serves both on port 443 (QUIC on UDP): a
//! blackholed UDP port costs QUIC's 100 ms head start and no more, and the CIB then
//! leaves QUIC out (`quic-blocked`); with UDP open, QUIC wins on its one-round-trip
//! handshake before TLS/TCP is due to start (`quic-wins`).

#![forbid(unsafe_code)]

use std::net::IpAddr;
use std::time::Duration;

use taps_testkit::TestPki;

use super::checks::{check_connected, check_stack, first_started_over, millis_f64, millis_u64};
use super::runner::{Ctx, Outcome};
use super::setup::rtt_rules;
use super::tls::{
    check_echo, pki_for, secure_with, show_secure, start_server, LINE, MARGIN, TLS_TCP,
};
use crate::lab::{addresses, fqdn, Lab, QUIC_BLOCKED_HOST, QUIC_HOST, TLS_PORT};
use crate::rules::{Match, Rule};
use crate::taps::{Attempt, FlowReport};
use crate::tls_server::TlsServer;

/// NEAT properties that require security and leave the stack to taps: QUIC and TLS/TCP
/// race, QUIC first.
pub(super) const SECURE_ANY: &str = r#"{"security": "require"}"#;
/// The stack taps reports for QUIC.
pub(super) const QUIC: &str = "QUIC";
/// The head start an unproven QUIC gets over TLS/TCP (taps-core's
/// `race::UNPROVEN_QUIC_DELAY`).
const QUIC_HEAD_START: Duration = Duration::from_millis(100);
/// The RTT of both scenarios.
const RTT: Duration = Duration::from_millis(50);
/// What the race's start event of an unproven QUIC says about the next start.
const NEXT_NO_HISTORY: &str = "(next in 100 ms: no history)";

/// The (one, IPv4) address of zone name `name`.
pub(super) fn addr_of(name: &str) -> Result<IpAddr, String> {
    addresses(name)
        .first()
        .map(|r| r.addr)
        .ok_or_else(|| format!("zone name {name} has no address"))
}

/// Starts the secure server on `ip` with a certificate for `host` and checks it listens
/// with QUIC as well as over TCP (`listening: TLS/MPTCP on ...`: a TCP listener that
/// takes MPTCP; plain TCP clients connect as TLS/TCP).
fn start_secure_server(
    lab: &Lab,
    out: &mut Outcome,
    ip: IpAddr,
    host: &str,
) -> Result<(TlsServer, TestPki), String> {
    let pki = pki_for(host)?;
    let server = start_server(lab, out, ip, &pki, host)?;
    let quic = server.wait_listening(QUIC, Duration::from_secs(2));
    let tcp = server.wait_listening("TLS/MPTCP", Duration::ZERO)
        || server.wait_listening(TLS_TCP, Duration::ZERO);
    out.check(
        quic && tcp,
        format!(
            "the server listens over TCP and with QUIC on the same port ({})",
            server.listening().join(", ")
        ),
    );
    Ok((server, pki))
}

/// The first started attempt over `stack` and its id in the race (`#N`; ids count
/// skipped candidates too, in the report's order), if any.
fn started_with_id<'a>(f: &'a FlowReport, stack: &str) -> Option<(usize, &'a Attempt)> {
    f.attempts
        .iter()
        .enumerate()
        .find(|(_, a)| a.started() && a.stack == stack)
        .map(|(i, a)| (i + 1, a))
}

/// The timeline's `start #N ...` event of attempt `id`.
fn start_event(f: &FlowReport, id: usize) -> Option<&str> {
    let prefix = format!("start #{id} ");
    f.timeline
        .iter()
        .find(|(_, e)| e.starts_with(&prefix))
        .map(|(_, e)| e.as_str())
}

/// The attempts that started, for log lines.
fn started_list(f: &FlowReport) -> String {
    let v: Vec<String> = f
        .attempts
        .iter()
        .filter(|a| a.started())
        .map(|a| format!("{} {} ({})", a.stack, a.remote, a.outcome))
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Checks the QUIC attempt started with the unproven head start in the trace: `start #N
/// QUIC ... (next in 100 ms: no history)`.
fn check_head_start_event(out: &mut Outcome, label: &str, f: &FlowReport) {
    let event = started_with_id(f, QUIC).and_then(|(id, _)| start_event(f, id));
    out.check(
        event.is_some_and(|e| e.ends_with(NEXT_NO_HISTORY)),
        format!(
            "{label} the trace gives QUIC its unproven head start: {:?} (expected to end with {NEXT_NO_HISTORY:?})",
            event.unwrap_or("no start event for a QUIC attempt")
        ),
    );
}

/// Checks the secure server accepted `n` connections over `stack`, each with the line.
fn check_server_got(out: &mut Outcome, server: &TlsServer, n: usize, stack: &str) {
    let conns = server.wait_closed(n, Duration::from_secs(5));
    let expected = LINE.len() as u64 + 1;
    out.check(
        conns.len() == n
            && conns
                .iter()
                .all(|c| c.accepted.starts_with(&format!("{stack} ")) && c.bytes == Some(expected)),
        format!(
            "the server accepted {} connection(s) ({}), receiving {:?} bytes (expected {n} over {stack}, {expected} bytes each)",
            conns.len(),
            conns.iter().map(|c| c.accepted.as_str()).collect::<Vec<_>>().join("; "),
            conns.iter().map(|c| c.bytes).collect::<Vec<_>>()
        ),
    );
}

/// `quic-blocked`: the secure server on `rqx` with its UDP port 443 blackholed, RTT 50 ms.
/// #1: QUIC starts first and never answers; TLS/TCP starts 100 ms later and wins after
/// TCP's and TLS 1.3's round trips. The CIB records QUIC as failed; #2 (same CIB) does
/// not start QUIC and connects over TLS/TCP within 2 RTT.
pub(super) fn quic_blocked(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let host = fqdn(QUIC_BLOCKED_HOST);
    let ip = addr_of(QUIC_BLOCKED_HOST)?;
    let mut rules = vec![Rule::new(Match::host(ip).udp().port(TLS_PORT)).blackhole()];
    rules.extend(rtt_rules(RTT, RTT));
    lab.set_rules(rules);
    out.say(format!(
        "  rules: UDP port {TLS_PORT} (QUIC) of {ip} blackholed; RTT {} ms to every zone address",
        millis_u64(RTT)
    ));
    let (server, pki) = start_secure_server(lab, out, ip, &host)?;
    out.say(format!("  properties: {SECURE_ANY}"));
    first_falls_back(lab, ctx, out, &host, &pki)?;
    cib_ranks_quic_last(lab, ctx, out, &host)?;
    let r = ctx.connect(lab, secure_with(&host, &pki, SECURE_ANY))?;
    show_secure(out, "#2 (same CIB)", &r);
    let f = r.flow();
    check_connected(
        out,
        "#2",
        f,
        Some("IPv4"),
        2 * RTT + MARGIN,
        &format!(
            "2 RTT (TCP, TLS 1.3) {} + {}, QUIC not waited for",
            millis_u64(2 * RTT),
            millis_u64(MARGIN)
        ),
    );
    check_stack(out, "#2", f, TLS_TCP);
    let quic = f.attempts.iter().find(|a| a.stack == QUIC);
    out.check(
        first_started_over(f, QUIC).is_none(),
        format!(
            "#2 started no QUIC attempt (started: {}; QUIC candidate: {})",
            started_list(f),
            quic.map_or("not listed".to_string(), |a| format!(
                "{}, history \"{}\"",
                a.outcome, a.history
            ))
        ),
    );
    check_echo(out, "#2", f);
    check_server_got(out, &server, 2, TLS_TCP);
    Ok(())
}

/// Connection #1 of `quic-blocked`: QUIC first, unanswered; TLS/TCP 100 ms later wins.
fn first_falls_back(
    lab: &Lab,
    ctx: &Ctx,
    out: &mut Outcome,
    host: &str,
    pki: &TestPki,
) -> Result<(), String> {
    let r = ctx.connect(lab, secure_with(host, pki, SECURE_ANY))?;
    show_secure(out, "#1", &r);
    let f = r.flow();
    // QUIC's head start, then TLS/TCP's two round trips: TCP's handshake, TLS 1.3's.
    let bound = QUIC_HEAD_START + 2 * RTT + MARGIN;
    check_connected(
        out,
        "#1",
        f,
        Some("IPv4"),
        bound,
        &format!(
            "QUIC's head start {} + 2 RTT (TCP, TLS 1.3) {} + {}",
            millis_u64(QUIC_HEAD_START),
            millis_u64(2 * RTT),
            millis_u64(MARGIN)
        ),
    );
    check_stack(out, "#1", f, TLS_TCP);
    check_head_start_event(out, "#1", f);
    let quic = started_with_id(f, QUIC);
    let tls = first_started_over(f, TLS_TCP);
    let tls_start = tls.map_or(f64::NAN, |a| a.start_ms);
    let answered = quic.is_some_and(|(id, _)| {
        f.timeline.iter().any(|(_, e)| {
            e.starts_with(&format!("#{id} reachable"))
                || e.starts_with(&format!("#{id} transport up"))
        })
    });
    out.check(
        quic.is_some_and(|(_, a)| a.start_ms < tls_start && a.outcome != "won") && !answered,
        format!(
            "#1 QUIC was tried first and never answered: {}",
            quic.map_or("no QUIC attempt".to_string(), |(_, a)| format!(
                "started at {:.1} ms, {} at {:.1} ms, TLS/TCP started at {tls_start:.1} ms{}",
                a.start_ms,
                a.outcome,
                a.end_ms.unwrap_or(f64::NAN),
                if answered {
                    ", but the timeline says it answered"
                } else {
                    ""
                }
            ))
        ),
    );
    let gap = tls_start - quic.map_or(f64::NAN, |(_, a)| a.start_ms);
    let head = millis_f64(QUIC_HEAD_START);
    out.check(
        gap >= head - 1.0 && gap <= head + 10.0,
        format!(
            "#1 TLS/TCP started {gap:.1} ms after QUIC (head start {} .. {} + 10)",
            millis_u64(QUIC_HEAD_START),
            millis_u64(QUIC_HEAD_START)
        ),
    );
    // The TLS part alone: TCP's handshake and TLS 1.3's, one RTT each.
    let took = tls
        .and_then(|a| a.end_ms)
        .map_or(f64::NAN, |e| e - tls_start);
    out.check(
        took >= millis_f64(2 * RTT) - 1.0 && took <= millis_f64(2 * RTT + MARGIN),
        format!(
            "#1 TLS/TCP took {took:.1} ms from its start to its win (2 RTT (TCP, TLS 1.3) {} .. + {})",
            millis_u64(2 * RTT),
            millis_u64(MARGIN)
        ),
    );
    check_echo(out, "#1", f);
    let blackholed = lab.stats().to_server.blackholed;
    out.check(
        blackholed > 0,
        format!("the bridge blackholed {blackholed} packet(s) to UDP port {TLS_PORT} (QUIC)"),
    );
    Ok(())
}

/// What the CIB learned from #1 (`taps candidates` with the same CIB file): QUIC failed
/// (overtaken) and ranks after TLS/TCP, which connected.
fn cib_ranks_quic_last(lab: &Lab, ctx: &Ctx, out: &mut Outcome, host: &str) -> Result<(), String> {
    let ranked = lab.taps_candidates(host, TLS_PORT, Some(SECURE_ANY), &ctx.cib)?;
    out.say("  CIB after #1 (`taps candidates` with the same CIB file): race order");
    for c in &ranked {
        out.say(format!(
            "      {}. {} {}  history: {}",
            c.rank, c.stack, c.remote, c.history
        ));
    }
    let find = |stack: &str| ranked.iter().find(|c| c.stack == stack);
    let (quic, tls) = (find(QUIC), find(TLS_TCP));
    out.check(
        quic.is_some_and(|c| c.history.starts_with("failed") && c.history.contains("overtaken")),
        format!(
            "CIB: QUIC recorded as failed, overtaken by TLS/TCP (history: {})",
            quic.map_or("not listed", |c| c.history.as_str())
        ),
    );
    out.check(
        tls.is_some_and(|c| c.history.starts_with("connected")),
        format!(
            "CIB: TLS/TCP recorded as connected (history: {})",
            tls.map_or("not listed", |c| c.history.as_str())
        ),
    );
    out.check(
        matches!((tls, quic), (Some(t), Some(q)) if t.rank < q.rank)
            && quic.is_some_and(|q| ranked.iter().all(|c| c.rank <= q.rank)),
        format!(
            "CIB: QUIC now ranks last, after TLS/TCP (TLS/TCP {}, QUIC {}, of {})",
            tls.map_or(0, |c| c.rank),
            quic.map_or(0, |c| c.rank),
            ranked.len()
        ),
    );
    Ok(())
}

/// `quic-wins`: the secure server on `rq`, UDP open, RTT 50 ms. QUIC (no history) starts
/// first with a 100 ms head start; its handshake takes one RTT, so it wins at about 50 ms
/// and TLS/TCP never starts.
pub(super) fn quic_wins(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let host = fqdn(QUIC_HOST);
    let ip = addr_of(QUIC_HOST)?;
    lab.set_rules(rtt_rules(RTT, RTT));
    out.say(format!(
        "  rules: RTT {} ms to every zone address (UDP open)",
        millis_u64(RTT)
    ));
    let (server, pki) = start_secure_server(lab, out, ip, &host)?;
    out.say(format!(
        "  properties: {SECURE_ANY}; TLS/TCP would start {} ms after QUIC, QUIC's handshake should end after {} ms",
        millis_u64(QUIC_HEAD_START),
        millis_u64(RTT)
    ));
    let r = ctx.connect(lab, secure_with(&host, &pki, SECURE_ANY))?;
    show_secure(out, "#1", &r);
    let f = r.flow();
    // QUIC's handshake: the client's Initial, the server's Initial and Handshake flight
    // (its Finished) one RTT later; the client is connected then.
    check_connected(
        out,
        "#1",
        f,
        Some("IPv4"),
        RTT + MARGIN,
        &format!(
            "1 RTT (QUIC handshake) {} + {}",
            millis_u64(RTT),
            millis_u64(MARGIN)
        ),
    );
    check_stack(out, "#1", f, QUIC);
    check_head_start_event(out, "#1", f);
    out.check(
        first_started_over(f, TLS_TCP).is_none(),
        format!(
            "#1 no TLS/TCP attempt was needed (started: {})",
            started_list(f)
        ),
    );
    check_echo(out, "#1", f);
    check_server_got(out, &server, 1, QUIC);
    Ok(())
}
