//! Many flows at once (`load`): 50 concurrent races to one name all connect over IPv6.

#![forbid(unsafe_code)]

use std::time::Duration;

use super::checks::millis_f64;
use super::runner::{Ctx, Outcome};
use super::setup::{describe_rules, rtt_rules, tcp_to};
use crate::lab::Lab;
use crate::taps::FlowReport;

pub(super) fn load(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    const FLOWS: usize = 50;
    let (rtt4, rtt6) = (Duration::from_millis(50), Duration::from_millis(40));
    lab.set_rules(rtt_rules(rtt4, rtt6));
    out.say(describe_rules(rtt4, rtt6));
    lab.sink().clear();
    let mut c = tcp_to("rd");
    c.flows = FLOWS;
    let r = ctx.connect(lab, c)?;
    let connected: Vec<&FlowReport> = r.flows.iter().filter(|f| f.winner.is_some()).collect();
    let v6 = connected
        .iter()
        .filter(|f| f.winner.as_ref().is_some_and(|w| w.family == "IPv6"))
        .count();
    let mut times: Vec<f64> = connected.iter().map(|f| f.total_ms).collect();
    times.sort_by(f64::total_cmp);
    let percentile = |p: f64| {
        times
            .get(((times.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    out.say(format!(
        "  {} of {FLOWS} flows connected ({v6} over IPv6); time to connect median {:.1} ms, max {:.1} ms [process {:.1} ms]",
        connected.len(),
        percentile(0.5),
        percentile(1.0),
        millis_f64(r.wall)
    ));
    out.check(
        r.flows.len() == FLOWS && connected.len() == FLOWS,
        format!("all {FLOWS} flows connected (got {})", connected.len()),
    );
    out.check(
        v6 == FLOWS,
        format!("every flow won over IPv6 ({v6} of {FLOWS})"),
    );
    let recs = lab.sink().wait_for(FLOWS, Duration::from_secs(5));
    out.check(
        recs.len() == FLOWS,
        format!(
            "the server saw {} connections close (expected {FLOWS})",
            recs.len()
        ),
    );
    Ok(())
}
