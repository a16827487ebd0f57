//! Dead (blackholed) addresses: the race gets past them within its attempt delays, and
//! the CIB makes later connections skip them (`rx`, `rxxx`, `rxz4`); with every address
//! dead the connection fails within the establishment timeout (`rxxzz`).

#![forbid(unsafe_code)]

use std::time::Duration;

use super::checks::{check_connected, millis_f64, millis_u64, show_connection};
use super::runner::{Ctx, Outcome};
use super::setup::{
    answer_first, connect_tcp, describe_rules, rtt_rules, ATTEMPT_DELAY, DNS_SKEW, SLACK,
};
use crate::dns::RecordType;
use crate::lab::{addresses, fqdn, is_dead, Lab};
use crate::taps::Connect;

/// The establishment timeout the all-dead scenario sets (`establishmentTimeout`), to keep it short.
const SHORT_CONN_TIMEOUT: Duration = Duration::from_secs(2);

/// A name with dead addresses and one live IPv4 address: the first connection needs
/// `delays` attempt delays at most; later ones (same CIB) none and try no dead address,
/// whichever DNS answer arrives first.
fn dead_then_cached(
    lab: &Lab,
    ctx: &Ctx,
    out: &mut Outcome,
    name: &str,
    delays: u32,
) -> Result<(), String> {
    let rtt = Duration::from_millis(50);
    lab.set_rules(rtt_rules(rtt, rtt));
    out.say(describe_rules(rtt, rtt));
    let dead: Vec<String> = addresses(name)
        .iter()
        .filter(|r| !r.live)
        .map(|r| r.addr.to_string())
        .collect();
    out.say(format!(
        "  {}: dead addresses {}",
        fqdn(name),
        dead.join(", ")
    ));
    out.say(format!(
        "  #1 and #2: AAAA answered first (A held back {} ms)",
        millis_u64(DNS_SKEW)
    ));
    answer_first(lab, RecordType::AAAA);
    let first = connect_tcp(lab, ctx, name)?;
    show_connection(out, "#1", &first);
    let bound = ATTEMPT_DELAY * delays + rtt + Duration::from_millis(20);
    let why = if delays == 1 {
        "attempt delay 250 + RTT 50 + 20".to_string()
    } else {
        format!("{delays} x attempt delay 250 + RTT 50 + 20")
    };
    check_connected(out, "#1", first.flow(), Some("IPv4"), bound, &why);
    for (label, order) in [("#2", RecordType::AAAA), ("#3", RecordType::A)] {
        answer_first(lab, order);
        if order == RecordType::A {
            out.say(format!(
                "  #3: A answered first (AAAA held back {} ms)",
                millis_u64(DNS_SKEW)
            ));
        }
        let again = connect_tcp(lab, ctx, name)?;
        show_connection(out, &format!("{label} (same CIB)"), &again);
        check_connected(
            out,
            label,
            again.flow(),
            Some("IPv4"),
            rtt + SLACK,
            "RTT 50 + 25, dead addresses skipped",
        );
        let tried_dead: Vec<&str> = again
            .flow()
            .attempts
            .iter()
            .filter(|a| a.started() && a.remote_ip().is_some_and(is_dead))
            .map(|a| a.remote.as_str())
            .collect();
        out.check(
            tried_dead.is_empty(),
            format!(
                "{label} attempted no dead address (attempted: {})",
                if tried_dead.is_empty() {
                    "none".into()
                } else {
                    tried_dead.join(", ")
                }
            ),
        );
    }
    lab.dns().clear_delays();
    Ok(())
}

pub(super) fn rx(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    dead_then_cached(lab, ctx, out, "rx", 1)
}

pub(super) fn rxxx(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    dead_then_cached(lab, ctx, out, "rxxx", 1)
}

pub(super) fn rxz4(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    dead_then_cached(lab, ctx, out, "rxz4", 2)
}

pub(super) fn rxxzz(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let rtt = Duration::from_millis(50);
    lab.set_rules(rtt_rules(rtt, rtt));
    out.say(describe_rules(rtt, rtt));
    let timeout = SHORT_CONN_TIMEOUT;
    let mut c = Connect::new(fqdn("rxxzz"));
    c.props = Some(format!(
        "{{\"transport\": {{\"value\": \"TCP\", \"precedence\": 2}}, \"establishmentTimeout\": {}}}",
        timeout.as_secs_f64()
    ));
    out.say(format!(
        "  establishment timeout (establishmentTimeout) {} ms",
        millis_u64(timeout)
    ));
    let r = ctx.connect(lab, c)?;
    show_connection(out, "#1", &r);
    let f = r.flow();
    out.check(
        f.winner.is_none() && f.error.is_some() && r.exit_code.is_some_and(|c| c != 0),
        format!("#1 failed (exit code {:?})", r.exit_code),
    );
    let bound = timeout + Duration::from_millis(50);
    out.check(
        f.total_ms <= millis_f64(bound),
        format!(
            "#1 failed after {:.1} ms <= {} ms (establishment timeout + 50)",
            f.total_ms,
            millis_u64(bound)
        ),
    );
    let failed: Vec<_> = f
        .attempts
        .iter()
        .filter(|a| {
            a.started()
                && a.outcome == "failed"
                && a.error.as_deref().is_some_and(|e| !e.is_empty())
        })
        .collect();
    out.check(
        failed.len() == 4,
        format!(
            "#1 four attempts failed with a cause (got {})",
            failed.len()
        ),
    );
    let err = f.error.clone().unwrap_or_default();
    let missing: Vec<String> = addresses("rxxzz")
        .iter()
        .map(|r| r.addr.to_string())
        .filter(|a| !err.contains(a.as_str()))
        .collect();
    out.check(
        missing.is_empty(),
        format!(
            "#1 error lists a cause for each of the four addresses{}",
            if missing.is_empty() {
                String::new()
            } else {
                format!(" (missing {})", missing.join(", "))
            }
        ),
    );
    Ok(())
}
