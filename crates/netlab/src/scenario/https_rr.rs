//! `https-rr`: a name's HTTPS record (RFC 9460) decides the race. The record of `rh` says
//! `alpn=h3,h2 port=8443 ipv4hint=<rh's address>`; the secure server listens on port 8443
//! only (nothing serves the origin's port 443), and the A answer is held back 300 ms. So
//! a client that reads the record races QUIC (h3) to port 8443 on the hinted address as
//! soon as the HTTPS answer is in, and is connected (one RTT later) long before the A
//! answer; a client
//! that did not would wait for A and find nothing on 443. Then the record is changed to
//! `alpn=h2` only: the same client leaves QUIC out and connects over TLS/TCP to 8443.

#![forbid(unsafe_code)]

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use taps::taps_core::ServiceRecord;
use taps_testkit::TestPki;

use super::checks::{check_connected, check_stack, millis_f64, millis_u64};
use super::quic::{addr_of, QUIC, SECURE_ANY};
use super::runner::{Ctx, Outcome};
use super::setup::rtt_rules;
use super::tls::{check_echo, pki_for, secure_with, show_secure, MARGIN, TLS_TCP};
use crate::dns::RecordType;
use crate::lab::{fqdn, Lab, HTTPS_RR_HOST, HTTPS_RR_PORT, TLS_PORT};
use crate::taps::FlowReport;

/// The RTT to the zone's addresses.
const RTT: Duration = Duration::from_millis(50);
/// How long the A answer is held back: the race must not wait for it.
const A_DELAY: Duration = Duration::from_millis(300);

/// The record `rh` serves (and `rgh`, the HTTP/3 scenario's): `alpn`, the secure
/// server's port, the address as a hint.
pub(super) fn record(ip: IpAddr, alpn: &[&str]) -> ServiceRecord {
    ServiceRecord {
        priority: 1,
        target: ".".into(),
        alpn: alpn.iter().map(|a| a.to_string()).collect(),
        port: Some(HTTPS_RR_PORT),
        hints: vec![ip],
        ..ServiceRecord::default()
    }
}

/// Every started attempt went to `port` (none to the origin's port).
fn check_ports(out: &mut Outcome, label: &str, f: &FlowReport, port: u16) {
    let started: Vec<&str> = f
        .attempts
        .iter()
        .filter(|a| a.started())
        .map(|a| a.remote.as_str())
        .collect();
    out.check(
        !started.is_empty()
            && started
                .iter()
                .all(|r| r.parse::<SocketAddr>().is_ok_and(|a| a.port() == port)),
        format!("{label} every attempt went to the record's port {port} (started: {started:?})"),
    );
}

/// The body of `https-rr` (see the module docs).
pub(super) fn https_rr(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let host = fqdn(HTTPS_RR_HOST);
    let ip = addr_of(HTTPS_RR_HOST)?;
    lab.set_rules(rtt_rules(RTT, RTT));
    lab.dns().clear_delays();
    lab.dns().set_delay(RecordType::A, A_DELAY);
    lab.dns()
        .set_https(&host, &[record(ip, &["h3", "h2"])])
        .map_err(|e| format!("cannot set the HTTPS record: {e}"))?;
    out.say(format!(
        "  HTTPS record of {host}: 1 . alpn=h3,h2 port={HTTPS_RR_PORT} ipv4hint={ip}; A answers held back {} ms; RTT {} ms",
        millis_u64(A_DELAY),
        millis_u64(RTT)
    ));
    let pki = pki_for(&host)?;
    let server = lab
        .start_tls_server(SocketAddr::new(ip, HTTPS_RR_PORT), &pki.cert, &pki.key)
        .map_err(|e| e.to_string())?;
    let listening = server.wait_listening(QUIC, Duration::from_secs(2))
        && server.wait_listening(TLS_TCP, Duration::ZERO)
        || server.wait_listening("TLS/MPTCP", Duration::ZERO);
    out.check(
        listening,
        format!(
            "the secure server listens on {ip}:{HTTPS_RR_PORT} over TCP and QUIC ({}); nothing on {TLS_PORT}",
            server.listening().join(", ")
        ),
    );
    let before = lab.dns().queries(RecordType::HTTPS);
    let r = ctx.connect(lab, secure_with(&host, &pki, SECURE_ANY));
    lab.dns().clear_delays();
    let r = r?;
    show_secure(out, "#1 (alpn=h3,h2)", &r);
    let f = r.flow();
    out.check(
        lab.dns().queries(RecordType::HTTPS) > before,
        "#1 taps asked for the HTTPS record".to_string(),
    );
    // Connected on the hint, long before the A answer; QUIC's handshake took one RTT.
    check_connected(
        out,
        "#1",
        f,
        Some("IPv4"),
        A_DELAY,
        &format!(
            "on the hint: before the A answer ({} ms)",
            millis_u64(A_DELAY)
        ),
    );
    let quic = f.attempts.iter().find(|a| a.started() && a.stack == QUIC);
    let took = quic.and_then(|a| a.end_ms.map(|e| e - a.start_ms));
    out.check(
        took.is_some_and(|t| t <= millis_f64(RTT + MARGIN)),
        format!(
            "#1 QUIC's handshake took {} ms (1 RTT {} + {})",
            took.map_or("?".to_string(), |t| format!("{t:.1}")),
            millis_u64(RTT),
            millis_u64(MARGIN)
        ),
    );
    check_stack(out, "#1", f, QUIC);
    check_ports(out, "#1", f, HTTPS_RR_PORT);
    check_echo(out, "#1", f);
    without_h3(lab, ctx, out, &host, ip, &pki)
}

/// Connection #2 of `https-rr`: the record without `h3` leaves QUIC out.
fn without_h3(
    lab: &Lab,
    ctx: &Ctx,
    out: &mut Outcome,
    host: &str,
    ip: IpAddr,
    pki: &TestPki,
) -> Result<(), String> {
    lab.dns()
        .set_https(host, &[record(ip, &["h2"])])
        .map_err(|e| format!("cannot set the HTTPS record: {e}"))?;
    out.say("  HTTPS record changed to alpn=h2 (no h3); A answers now immediate");
    let r = ctx.connect(lab, secure_with(host, pki, SECURE_ANY))?;
    show_secure(out, "#2 (alpn=h2)", &r);
    let f = r.flow();
    check_connected(
        out,
        "#2",
        f,
        Some("IPv4"),
        2 * RTT + MARGIN,
        &format!(
            "TLS/TCP's 2 RTT (TCP, TLS 1.3) {} + {}",
            millis_u64(2 * RTT),
            millis_u64(MARGIN)
        ),
    );
    check_stack(out, "#2", f, TLS_TCP);
    out.check(
        f.attempts.iter().all(|a| !(a.started() && a.stack == QUIC)),
        "#2 no QUIC attempt: the record does not offer h3".to_string(),
    );
    check_ports(out, "#2", f, HTTPS_RR_PORT);
    check_echo(out, "#2", f);
    lab.dns()
        .set_https(host, &[])
        .map_err(|e| format!("cannot clear the HTTPS record: {e}"))?;
    Ok(())
}
