//! HTTP/3 raced against HTTP/2 by taps' HTTP client (`taps get`, `taps::http::Client`)
//! against Debian's caddy (quic-go's HTTP/3, Go's HTTP/2), a server no one here wrote,
//! in the server namespace, with a real RTT:
//! - `h3-blackhole`: caddy serves h3 and h2 on port 443 of `rgx`. With UDP open (and an
//!   empty CIB) the request goes over HTTP/3; with UDP 443 blackholed the first request
//!   goes over HTTP/2 once QUIC's head start is over (head start + 2 RTT: TCP's
//!   handshake, TLS 1.3's), and the next `taps get` process with the same CIB file skips
//!   QUIC, which the CIB marks broken.
//! - `h3-https-rr`: `rgh`'s HTTPS record says `alpn=h3 port=8443`; caddy serves HTTP/2
//!   only on the URL's port 443 and h3 on 8443; the DNS server is one RTT away. The first
//!   request to `https://rgh.netlab.test:443/` goes to 8443 over HTTP/3, before TLS/TCP
//!   starts (the head start counts from QUIC's first attempt, after the lookups); with
//!   the record gone, the same request gets port 443's HTTP/2 (the control).
//!
//! The times come from `taps get`'s race line: the head start, when QUIC's first attempt
//! began, each leg's outcome.
//!
//! Without caddy both say "skipped" (and fail where a skip must fail: as root with
//! `TAPS_REQUIRE_ROOT_TESTS` or `CI` set).

#![forbid(unsafe_code)]

use std::net::IpAddr;
use std::time::Duration;

use taps_testkit::TestPki;

use super::checks::{millis_f64, millis_u64};
use super::https_rr::record;
use super::quic::addr_of;
use super::runner::{Ctx, Outcome};
use super::setup::rtt_rules;
use super::tls::{pki_for, MARGIN};
use crate::caddy::{have_caddy, CaddyServer, CaddySite};
use crate::dns::RecordType;
use crate::lab::{
    fqdn, Lab, DNS_V4, DNS_V6, H3_BLACKHOLE_HOST, H3_HTTPS_RR_HOST, HTTPS_RR_PORT, TLS_PORT,
};
use crate::rules::{Match, Rule};
use crate::taps_get::{Get, GetReport};

/// The RTT to the zone's addresses (50 ms each way). The time checks tell round trips
/// apart ([`rounds_bound`]), so the RTT is long against what a busy machine adds to a
/// handshake (scheduling delays of `taps get`, caddy and the bridge, and their CPU work).
const RTT: Duration = Duration::from_millis(100);

/// The bound, ms, of a step that takes `rounds` round trips: it must end before one more
/// round trip would have (a step that waited an extra round trip, or a timer of that
/// size, fails), whatever the load adds below an RTT.
fn rounds_bound(rounds: u32) -> f64 {
    millis_f64(RTT * (rounds + 1))
}

/// QUIC's head start (`taps get --quic-head-start`): taps' own on first contact, 100 ms,
/// is HEv3's for paths shorter than [`RTT`]; three RTTs let QUIC's one-RTT handshake win
/// within it on a busy machine, and TLS/TCP start only after it.
const HEAD_START: Duration = Duration::from_millis(300);
/// What `h3-blackhole`'s caddy answers.
const BODY: &str = "caddy: h3 and h2 on one port";
/// What `h3-https-rr`'s caddy answers on the URL's port (HTTP/2 only).
const ORIGIN_BODY: &str = "caddy: the URL's port, HTTP/2 only";
/// What `h3-https-rr`'s caddy answers on the record's port (HTTP/3).
const RECORD_BODY: &str = "caddy: the HTTPS record's port, HTTP/3";
const HTTP3: &str = "HTTP/3.0";
const HTTP2: &str = "HTTP/2.0";

/// Whether caddy is here; if not, says "skipped" (a failed check where skips must fail).
fn caddy_here(out: &mut Outcome) -> bool {
    if have_caddy() {
        return true;
    }
    let why = "caddy is not installed (scripts/deps.sh installs it)";
    out.say(format!("  skipped: {why}"));
    if taps_testkit::skips_must_fail() {
        out.check(false, format!("this run must not skip: {why}"));
    }
    false
}

/// Starts caddy for `host` on `ip` with `sites` and logs them.
fn start_caddy(
    lab: &Lab,
    out: &mut Outcome,
    host: &str,
    ip: IpAddr,
    sites: &[CaddySite],
    pki: &TestPki,
) -> Result<CaddyServer, String> {
    let caddy = lab
        .start_caddy(host, ip, sites, &pki.cert, &pki.key)
        .map_err(|e| format!("cannot start caddy: {e}"))?;
    for s in sites {
        out.say(format!(
            "  caddy on {ip}:{}: {} ({:?}); certificate for {host} from a test CA made for this run",
            s.port,
            if s.h3 { "HTTP/3 (UDP), HTTP/2, HTTP/1.1" } else { "HTTP/2 and HTTP/1.1 (TCP only)" },
            s.body
        ));
    }
    Ok(caddy)
}

/// Logs one `taps get`: result, race, times, the winning leg's address race.
fn show(out: &mut Outcome, label: &str, r: &GetReport) {
    let opt = |v: Option<f64>| v.map_or("?".to_string(), |v| format!("{v:.1}"));
    out.say(format!(
        "  {label}: exit {:?}, status {:?}, {} over {} to {}, body {:?}",
        r.exit_code,
        r.status,
        r.protocol.as_deref().unwrap_or("no protocol"),
        r.stack.as_deref().unwrap_or("?"),
        r.remote.map_or("?".to_string(), |a| a.to_string()),
        r.body
    ));
    out.say(format!(
        "      QUIC (h3) to {}: {}{}{}",
        r.quic_target.as_deref().unwrap_or("?"),
        r.quic,
        r.head_start_ms
            .map_or(String::new(), |h| format!(" (head start {h:.0} ms)")),
        r.quic_began_ms
            .map_or(String::new(), |b| format!(" [first attempt at {b:.1} ms]"))
    ));
    out.say(format!("      TLS/TCP (h2, http/1.1): {}", r.tcp));
    out.say(format!(
        "      time: race {} ms, connect {} ms (preconnections built, then the race), first byte {} ms",
        opt(r.race_ms()),
        opt(r.connect_ms),
        opt(r.first_byte_ms)
    ));
    for (at, e) in &r.trace {
        out.say(format!("      {at:>9.3}  {e}"));
    }
    if r.status.is_none() {
        out.say(format!(
            "      stdout: {}; stderr: {}",
            r.stdout.trim(),
            r.stderr.trim()
        ));
    }
}

/// Checks the request got a 200 with `body` over `protocol`.
fn check_response(out: &mut Outcome, label: &str, r: &GetReport, protocol: &str, body: &str) {
    out.check(
        r.ok() && r.protocol.as_deref() == Some(protocol) && r.body == body,
        format!(
            "{label} got 200 over {protocol} with {body:?} (exit {:?}, status {:?}, {}, {:?})",
            r.exit_code,
            r.status,
            r.protocol.as_deref().unwrap_or("no protocol"),
            r.body
        ),
    );
}

/// `h3-blackhole` (see the module docs).
pub(super) fn h3_blackhole(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    if !caddy_here(out) {
        return Ok(());
    }
    let host = fqdn(H3_BLACKHOLE_HOST);
    let ip = addr_of(H3_BLACKHOLE_HOST)?;
    lab.set_rules(rtt_rules(RTT, RTT));
    let pki = pki_for(&host)?;
    let site = CaddySite {
        port: TLS_PORT,
        h3: true,
        body: BODY.into(),
    };
    let _caddy = start_caddy(lab, out, &host, ip, &[site], &pki)?;
    let url = format!("https://{host}:{TLS_PORT}/");
    out.say(format!(
        "  control: UDP open, RTT {} ms, empty CIB: taps get {url}",
        millis_u64(RTT)
    ));
    let mut get = Get {
        url,
        ca: pki.ca.clone(),
        cib: None,
        quic_head_start: Some(HEAD_START),
    };
    let r = lab.taps_get(&get)?;
    show(out, "control", &r);
    check_response(out, "control", &r, HTTP3, BODY);
    check_quic_won(out, "control", &r, "control_h3_ms");
    let mut rules = vec![Rule::new(Match::host(ip).udp().port(TLS_PORT)).blackhole()];
    rules.extend(rtt_rules(RTT, RTT));
    lab.set_rules(rules);
    out.say(format!(
        "  rules: UDP port {TLS_PORT} (QUIC) of {ip} blackholed; RTT {} ms; taps get --cib {}",
        millis_u64(RTT),
        ctx.cib.display()
    ));
    get.cib = Some(ctx.cib.clone());
    let before = lab.stats().to_server.blackholed;
    let r = lab.taps_get(&get)?;
    show(out, "#1", &r);
    first_falls_back(out, &r);
    let blackholed = lab.stats().to_server.blackholed - before;
    out.check(
        blackholed > 0,
        format!("#1 the bridge blackholed {blackholed} packet(s) to UDP port {TLS_PORT} (QUIC)"),
    );
    let r = lab.taps_get(&get)?;
    show(out, "#2 (a new taps get, same CIB file)", &r);
    check_response(out, "#2", &r, HTTP2, BODY);
    out.check(
        r.quic.starts_with("skipped: the CIB marks it broken"),
        format!("#2 QUIC skipped as broken: {:?}", r.quic),
    );
    check_skipped_quic_fast(out, &r);
    Ok(())
}

/// Checks `#2` of `h3-blackhole` did not wait for QUIC: no head start (taps reports one
/// whenever QUIC runs), and TLS/TCP's handshakes took 2 RTT (TCP, TLS 1.3), not 3, from
/// its start.
fn check_skipped_quic_fast(out: &mut Outcome, r: &GetReport) {
    let (race, handshake) = (r.race_ms(), r.handshake_ms());
    if let Some(t) = race {
        out.figure("second_h2_ms", t);
    }
    out.check(
        r.head_start_ms.is_none() && r.quic_began_ms.is_none(),
        format!(
            "#2 no head start and no QUIC attempt: TLS/TCP started at once ({})",
            r.stdout
                .lines()
                .find(|l| l.starts_with("race: "))
                .unwrap_or("no race line")
        ),
    );
    let bound = rounds_bound(2);
    out.check(
        handshake.is_some_and(|h| h < bound),
        format!(
            "#2 TLS/TCP connected {} ms after its start, within 2 RTT (TCP, TLS 1.3): < {bound:.0} ms; the race took {} ms",
            handshake.map_or("?".to_string(), |h| format!("{h:.1}")),
            race.map_or("?".to_string(), |t| format!("{t:.1}"))
        ),
    );
}

/// Checks QUIC won within its head start as taps reports it, counted from its first
/// attempt (so TLS/TCP never started), and its handshake took 1 RTT, not 2, from the
/// attempt's start (the address race's `connected in`); records the race's time as
/// figure `figure`.
fn check_quic_won(out: &mut Outcome, label: &str, r: &GetReport, figure: &str) {
    let race = r.race_ms();
    if let Some(t) = race {
        out.figure(figure, t);
    }
    out.check(
        r.quic.starts_with("won in ") && r.tcp.starts_with("not started"),
        format!(
            "{label} QUIC won before TLS/TCP started: QUIC {:?}, TLS/TCP {:?}",
            r.quic, r.tcp
        ),
    );
    if let Some((head, began)) = head_start_of(out, label, r) {
        let took = race.map_or(f64::NAN, |t| t - began);
        out.check(
            took <= head,
            format!(
                "{label} QUIC won {took:.1} ms after its first attempt (at {began:.1} ms), within its head start {head:.0} ms"
            ),
        );
    }
    let handshake = r.handshake_ms();
    let bound = rounds_bound(1);
    out.check(
        handshake.is_some_and(|h| h < bound),
        format!(
            "{label} QUIC's handshake took {} ms from the attempt's start, within 1 RTT: < {bound:.0} ms",
            handshake.map_or("?".to_string(), |h| format!("{h:.1}"))
        ),
    );
}

/// QUIC's head start and when its first attempt started (ms from the race's start), as
/// `taps get` reports them; a failed check when either is missing.
fn head_start_of(out: &mut Outcome, label: &str, r: &GetReport) -> Option<(f64, f64)> {
    let found = r.head_start_ms.zip(r.quic_began_ms);
    if found.is_none() {
        out.check(
            false,
            format!(
                "{label} taps get reported QUIC's head start ({:?}) and its first attempt ({:?})",
                r.head_start_ms, r.quic_began_ms
            ),
        );
    }
    found
}

/// The checks of `h3-blackhole`'s first request with UDP blackholed: HTTP/2 once the head
/// start taps reports is over, within head start + 2 RTT (not 3) of QUIC's first attempt
/// (where the head start counts from); the response one RTT later (not 2).
fn first_falls_back(out: &mut Outcome, r: &GetReport) {
    check_response(out, "#1", r, HTTP2, BODY);
    out.check(
        r.quic.ends_with("given up") && r.tcp.starts_with("won in "),
        format!(
            "#1 QUIC still connecting when TLS/TCP won: QUIC {:?}, TLS/TCP {:?}",
            r.quic, r.tcp
        ),
    );
    let Some((head, began)) = head_start_of(out, "#1", r) else {
        return;
    };
    out.figure("head_start_ms", head);
    out.figure("quic_began_ms", began);
    let rtt = millis_f64(RTT);
    let race = r.race_ms().unwrap_or(f64::NAN);
    if race.is_finite() {
        out.figure("fallback_h2_ms", race);
    }
    let took = race - began;
    let bound = head + rounds_bound(2);
    out.figure("fallback_bound_ms", bound);
    out.check(
        took < bound,
        format!(
            "#1 HTTP/2 connected {took:.1} ms after QUIC's first attempt (at {began:.1} ms; race {race:.1} ms), within head start {head:.0} (as taps reports it) + 2 RTT (TCP, TLS 1.3): < {bound:.0} ms"
        ),
    );
    // The bound HTTP/3's issue set, told but not checked: what a busy machine adds to
    // the two handshakes can pass its 30 ms.
    let quiet = head + 2.0 * rtt + millis_f64(MARGIN);
    out.say(format!(
        "  #1 within head start + 2 RTT + {} = {quiet:.0} ms (the bound on a quiet machine): {}",
        millis_u64(MARGIN),
        if took <= quiet { "yes" } else { "no" }
    ));
    // TLS/TCP cannot be faster than its two round trips after the head start.
    out.check(
        took >= head + 2.0 * rtt - 1.0,
        format!(
            "#1 TLS/TCP waited for the head start: won {took:.1} ms after QUIC's first attempt >= head start {head:.0} + 2 RTT {:.0}",
            2.0 * rtt
        ),
    );
    // The response: one more RTT (the request; TLS 1.3's Finished goes with it) after
    // the connection, whose own time the check above bounds. The process's times count
    // from the call, which first builds the preconnections.
    let response = match (r.first_byte_ms, r.connect_ms) {
        (Some(f), Some(c)) => f - (c - race) - began,
        _ => f64::NAN,
    };
    if response.is_finite() {
        out.figure("fallback_response_ms", response);
    }
    let bound = took + rounds_bound(1);
    out.check(
        response < bound,
        format!(
            "#1 the HTTP/2 response {response:.1} ms after QUIC's first attempt, within HTTP/2 connected {took:.1} + 1 RTT: < {bound:.0} ms"
        ),
    );
}

/// `h3-https-rr` (see the module docs).
pub(super) fn h3_https_rr(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    if !caddy_here(out) {
        return Ok(());
    }
    let host = fqdn(H3_HTTPS_RR_HOST);
    let ip = addr_of(H3_HTTPS_RR_HOST)?;
    // The DNS server as far away as the host: QUIC's lookups take one RTT, and its head
    // start counts from its first attempt, after them.
    let mut rules: Vec<Rule> = [IpAddr::V4(DNS_V4), IpAddr::V6(DNS_V6)]
        .into_iter()
        .map(|dns| Rule::new(Match::host(dns)).rtt(RTT))
        .collect();
    rules.extend(rtt_rules(RTT, RTT));
    lab.set_rules(rules);
    let pki = pki_for(&host)?;
    let sites = [
        CaddySite {
            port: TLS_PORT,
            h3: false,
            body: ORIGIN_BODY.into(),
        },
        CaddySite {
            port: HTTPS_RR_PORT,
            h3: true,
            body: RECORD_BODY.into(),
        },
    ];
    let _caddy = start_caddy(lab, out, &host, ip, &sites, &pki)?;
    lab.dns()
        .set_https(&host, &[record(ip, &["h3"])])
        .map_err(|e| format!("cannot set the HTTPS record: {e}"))?;
    let url = format!("https://{host}:{TLS_PORT}/");
    out.say(format!(
        "  HTTPS record of {host}: 1 . alpn=h3 port={HTTPS_RR_PORT} ipv4hint={ip}; RTT {} ms to the host and to the DNS server; taps get {url}",
        millis_u64(RTT)
    ));
    let before = lab.dns().queries(RecordType::HTTPS);
    let get = Get {
        url,
        ca: pki.ca.clone(),
        cib: Some(ctx.cib.clone()),
        quic_head_start: Some(HEAD_START),
    };
    let r = lab.taps_get(&get)?;
    show(out, "#1", &r);
    out.check(
        lab.dns().queries(RecordType::HTTPS) > before,
        "#1 taps asked for the HTTPS record",
    );
    check_response(out, "#1", &r, HTTP3, RECORD_BODY);
    let port = r.remote.map(|a| a.port());
    if let Some(p) = port {
        out.figure("rr_port", f64::from(p));
    }
    out.check(
        r.stack.as_deref() == Some("QUIC") && port == Some(HTTPS_RR_PORT),
        format!(
            "#1 went over QUIC to the record's port {HTTPS_RR_PORT} (stack {}, remote {})",
            r.stack.as_deref().unwrap_or("?"),
            r.remote.map_or("?".to_string(), |a| a.to_string())
        ),
    );
    let answered = r
        .trace
        .iter()
        .find(|(_, e)| e.starts_with("HTTPS answered: "));
    out.check(
        answered.is_some_and(|(_, e)| {
            e.contains("alpn=h3") && e.contains(&format!("port={HTTPS_RR_PORT}"))
        }),
        format!(
            "#1 the QUIC leg's address race read the record: {:?}",
            answered.map_or("no `HTTPS answered` event", |(_, e)| e.as_str())
        ),
    );
    check_quic_won(out, "#1", &r, "rr_h3_ms");
    without_record(lab, out, &host, &get)
}

/// The control of `h3-https-rr`: without the record (and with an empty CIB) the same URL
/// is answered by the URL's port, over HTTP/2.
fn without_record(lab: &Lab, out: &mut Outcome, host: &str, get: &Get) -> Result<(), String> {
    lab.dns()
        .set_https(host, &[])
        .map_err(|e| format!("cannot clear the HTTPS record: {e}"))?;
    out.say("  control: the HTTPS record removed; taps get with an empty CIB");
    let get = Get {
        cib: None,
        ..get.clone()
    };
    let r = lab.taps_get(&get)?;
    show(out, "control", &r);
    check_response(out, "control", &r, HTTP2, ORIGIN_BODY);
    out.check(
        r.remote.is_some_and(|a| a.port() == TLS_PORT),
        format!(
            "control went to the URL's port {TLS_PORT} (remote {})",
            r.remote.map_or("?".to_string(), |a| a.to_string())
        ),
    );
    Ok(())
}
