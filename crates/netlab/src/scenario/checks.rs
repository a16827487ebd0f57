//! What the scenarios share to log and check a `taps connect` report: connection and
//! attempt lines, the race timeline, bounds on the time to connect and the winner.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::time::Duration;

use super::runner::Outcome;
use crate::lab::is_dead;
use crate::packet::Proto;
use crate::sink::SinkRecord;
use crate::taps::{Attempt, ConnectReport, FlowReport};

/// `d` in milliseconds, with the fraction (for bounds on taps' `*_ms` numbers and logs).
pub(super) fn millis_f64(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `d` in whole milliseconds, rounded down (for log lines).
pub(super) fn millis_u64(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// Logs one connection (each flow): result line, then each attempt.
pub(super) fn show_connection(out: &mut Outcome, label: &str, r: &ConnectReport) {
    for (i, f) in r.flows.iter().enumerate() {
        let label = if r.flows.len() > 1 {
            format!("{label} flow {}", i + 1)
        } else {
            label.to_string()
        };
        show_flow(out, &label, f, r);
    }
}

fn show_flow(out: &mut Outcome, label: &str, f: &FlowReport, r: &ConnectReport) {
    match (&f.winner, &f.error) {
        (Some(w), None) => out.say(format!(
            "  {label}: connected over {} ({} to {}) in {:.1} ms [process {:.1} ms]",
            w.family,
            w.stack,
            w.remote,
            f.total_ms,
            millis_f64(r.wall)
        )),
        (_, Some(e)) => out.say(format!(
            "  {label}: failed after {:.1} ms [process {:.1} ms]: {e}",
            f.total_ms,
            millis_f64(r.wall)
        )),
        (None, None) => out.say(format!("  {label}: no winner and no error?")),
    }
    let mut skipped = 0;
    for a in &f.attempts {
        if !a.started() {
            skipped += 1;
            continue;
        }
        let dead = if a.remote_ip().is_some_and(is_dead) {
            " (dead)"
        } else {
            ""
        };
        let end = a
            .end_ms
            .map_or("    …  ".to_string(), |e| format!("{e:7.1}"));
        let err = a
            .error
            .as_deref()
            .map_or(String::new(), |e| format!(": {e}"));
        let via = a
            .interface
            .as_deref()
            .map_or(String::new(), |i| format!(" via {i}"));
        out.say(format!(
            "      attempt {:7.1} -> {end} ms  {} {}{via}{dead}  {}{err}",
            a.start_ms, a.stack, a.remote, a.outcome
        ));
    }
    if skipped > 0 {
        let why = f
            .attempts
            .iter()
            .find(|a| !a.started())
            .and_then(|a| a.error.clone())
            .unwrap_or_default();
        out.say(format!("      ({skipped} candidates skipped: {why})"));
    }
}

/// When the race's first address answer came (ms since the race began), if its
/// timeline has one (a name's lookup; a literal has none).
pub(super) fn first_answer_ms(f: &FlowReport) -> Option<f64> {
    f.timeline
        .iter()
        .find(|(_, e)| e.starts_with("A answered") || e.starts_with("AAAA answered"))
        .map(|(t, _)| *t)
}

/// Checks a connection succeeded within `bound` (and over `family` if given), counted
/// from the first DNS answer when there was a lookup (the attempts and their stagger
/// start there; the lookup's own time, a few ms to the lab's DNS server and more in a
/// debug build, is not what the bounds are about), else from the race's start.
pub(super) fn check_connected(
    out: &mut Outcome,
    label: &str,
    f: &FlowReport,
    family: Option<&str>,
    bound: Duration,
    why: &str,
) -> bool {
    let Some(w) = &f.winner else {
        out.check(
            false,
            format!(
                "{label} connected (it failed: {})",
                f.error.as_deref().unwrap_or("?")
            ),
        );
        return false;
    };
    let mut ok = true;
    if let Some(fam) = family {
        ok &= out.check(
            w.family == fam,
            format!("{label} winner is {fam} (got {} {})", w.family, w.remote),
        );
    }
    let remote_ip = w.remote.parse::<SocketAddr>().map(|a| a.ip());
    ok &= out.check(
        remote_ip.is_ok_and(|ip| !is_dead(ip)),
        format!("{label} winner {} is a live address", w.remote),
    );
    let (taken, since) = match first_answer_ms(f) {
        Some(answer) => (
            f.total_ms - answer,
            format!(" after the first DNS answer (at {answer:.1} ms)"),
        ),
        None => (f.total_ms, String::new()),
    };
    ok &= out.check(
        taken <= millis_f64(bound),
        format!(
            "{label} time to connect {taken:.1} ms{since} <= {} ms ({why})",
            millis_u64(bound)
        ),
    );
    ok
}

/// Logs a connection's race timeline: the events `taps connect --trace` prints, among
/// them SCTP's `#N reachable (peer answered): committing to it` (its INIT-ACK).
pub(super) fn show_timeline(out: &mut Outcome, label: &str, f: &FlowReport) {
    out.say(format!(
        "      {label} race timeline (ms since the race began):"
    ));
    for (at, event) in &f.timeline {
        out.say(format!("        {at:7.1}  {event}"));
    }
}

/// Checks that a connection won over `stack` (`TCP`, `SCTP`).
pub(super) fn check_stack(out: &mut Outcome, label: &str, f: &FlowReport, stack: &str) -> bool {
    let got = f.winner.as_ref().map_or("nothing", |w| w.stack.as_str());
    out.check(
        got == stack,
        format!("{label} won over {stack} (got {got})"),
    )
}

/// The first attempt over `stack` that actually started.
pub(super) fn first_started_over<'a>(f: &'a FlowReport, stack: &str) -> Option<&'a Attempt> {
    f.attempts.iter().find(|a| a.started() && a.stack == stack)
}

/// The protocols of sink records, for log lines (`TCP`, `SCTP`, `TCP+SCTP`, `none`).
pub(super) fn protocol_names(recs: &[SinkRecord]) -> String {
    let mut names: Vec<&str> = recs
        .iter()
        .map(|r| match r.protocol {
            Proto::Sctp => "SCTP",
            Proto::Tcp => "TCP",
            _ => "other",
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        "none".into()
    } else {
        names.join("+")
    }
}
