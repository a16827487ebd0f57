//! Both address families work: IPv6 wins a fair race (`rd`), IPv6 alone (`r6`), and a
//! slow AAAA answer does not hold the race back beyond the Resolution Delay (`aaaa-slow`).

#![forbid(unsafe_code)]

use std::time::Duration;

use super::checks::{check_connected, millis_f64, millis_u64, show_connection};
use super::runner::{Ctx, Outcome};
use super::setup::{
    answer_first, connect_tcp, describe_rules, rtt_rules, DNS_SKEW, RESOLUTION_DELAY, SLACK,
};
use crate::dns::RecordType;
use crate::lab::Lab;

pub(super) fn rd(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let (rtt4, rtt6) = (Duration::from_millis(50), Duration::from_millis(40));
    lab.set_rules(rtt_rules(rtt4, rtt6));
    out.say(describe_rules(rtt4, rtt6));
    // The harder order: A first, so the race must not sit out the whole Resolution Delay.
    answer_first(lab, RecordType::A);
    out.say(format!(
        "  A answered first (AAAA held back {} ms)",
        millis_u64(DNS_SKEW)
    ));
    let r = connect_tcp(lab, ctx, "rd");
    lab.dns().clear_delays();
    let r = r?;
    show_connection(out, "#1", &r);
    check_connected(
        out,
        "#1",
        r.flow(),
        Some("IPv6"),
        rtt6 + SLACK,
        "IPv6 RTT 40 + 25",
    );
    Ok(())
}

pub(super) fn r6(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let rtt = Duration::from_millis(40);
    lab.set_rules(rtt_rules(rtt, rtt));
    out.say(describe_rules(rtt, rtt));
    let r = connect_tcp(lab, ctx, "r6")?;
    show_connection(out, "#1", &r);
    check_connected(
        out,
        "#1",
        r.flow(),
        Some("IPv6"),
        rtt + SLACK,
        "RTT 40 + 25",
    );
    Ok(())
}

pub(super) fn aaaa_slow(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let (rtt4, rtt6) = (Duration::from_millis(50), Duration::from_millis(40));
    let slow = Duration::from_millis(300);
    lab.set_rules(rtt_rules(rtt4, rtt6));
    lab.dns().set_delay(RecordType::AAAA, slow);
    out.say(describe_rules(rtt4, rtt6));
    out.say(format!(
        "  DNS: AAAA answers delayed {} ms",
        millis_u64(slow)
    ));
    let r = connect_tcp(lab, ctx, "rd");
    lab.dns().clear_delays();
    let r = r?;
    show_connection(out, "#1", &r);
    let bound = RESOLUTION_DELAY + rtt4 + Duration::from_millis(20);
    let f = r.flow();
    check_connected(
        out,
        "#1",
        f,
        Some("IPv4"),
        bound,
        "Resolution Delay 50 + IPv4 RTT 50 + 20, not 300",
    );
    let v4_start = f
        .attempts
        .iter()
        .filter(|a| a.started() && a.remote_ip().is_some_and(|ip| ip.is_ipv4()))
        .map(|a| a.start_ms)
        .fold(f64::NAN, f64::min);
    out.check(
        v4_start >= millis_f64(RESOLUTION_DELAY) - 5.0,
        format!(
            "#1 IPv4 attempt started at {v4_start:.1} ms, after the Resolution Delay (>= 45 ms)"
        ),
    );
    Ok(())
}
