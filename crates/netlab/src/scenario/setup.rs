//! What the scenarios share to set a lab up and connect: taps' default delays, the
//! TCP-only properties, RTT rules for the zone, the order of the DNS answers.

#![forbid(unsafe_code)]

use std::net::IpAddr;
use std::time::Duration;

use super::checks::millis_u64;
use super::runner::Ctx;
use crate::dns::RecordType;
use crate::lab::{self, fqdn, Lab};
use crate::rules::{Match, Rule};
use crate::taps::{Connect, ConnectReport};

/// The Connection Attempt Delay taps uses by default (RFC 8305's 250 ms; taps-core's
/// `race::DEFAULT_ATTEMPT_DELAY`).
pub(super) const ATTEMPT_DELAY: Duration = Duration::from_millis(250);
/// The Resolution Delay taps uses by default (RFC 8305's 50 ms; taps-core's
/// `race::DEFAULT_RESOLUTION_DELAY`).
pub(super) const RESOLUTION_DELAY: Duration = Duration::from_millis(50);

/// What a connection that waits for nothing takes beyond the path's RTT in the checks:
/// the DNS answer (held back up to [`DNS_SKEW`]), a debug-build `taps` process, and under
/// `cargo test` the other scenarios sharing this machine's 2 CPUs (a connection was seen
/// 16 ms late there; 10 ms failed about one run in four with both CPUs busy). Still well
/// under the [`RESOLUTION_DELAY`] and the [`ATTEMPT_DELAY`] these checks tell apart.
pub(super) const SLACK: Duration = Duration::from_millis(25);

/// NEAT properties that allow TCP only. The address-family scenarios (rd ... load) race
/// TCP: taps prefers SCTP by default (RFC 9622's multistreaming preference), and their
/// bounds are TCP's one-round-trip handshake. The sctp-* scenarios race SCTP.
const TCP_ONLY: &str = r#"{"transport": {"value": "TCP", "precedence": 2}}"#;

/// How much one family's DNS answer is held back to fix the order the answers arrive in
/// (the order decides how a race starts, so scenarios that care test both orders).
pub(super) const DNS_SKEW: Duration = Duration::from_millis(1);

/// Makes the answers of `first` arrive [`DNS_SKEW`] before the other family's.
pub(super) fn answer_first(lab: &Lab, first: RecordType) {
    lab.dns().clear_delays();
    let other = if first == RecordType::AAAA {
        RecordType::A
    } else {
        RecordType::AAAA
    };
    lab.dns().set_delay(other, DNS_SKEW);
}

/// RTT rules for every zone address: `rtt4` for IPv4, `rtt6` for IPv6.
pub(super) fn rtt_rules(rtt4: Duration, rtt6: Duration) -> Vec<Rule> {
    let (n4, l4) = lab::ZONE_NET_V4;
    let (n6, l6) = lab::ZONE_NET_V6;
    vec![
        Rule::new(Match::net(IpAddr::V4(n4), l4)).rtt(rtt4),
        Rule::new(Match::net(IpAddr::V6(n6), l6)).rtt(rtt6),
    ]
}

pub(super) fn describe_rules(rtt4: Duration, rtt6: Duration) -> String {
    format!(
        "  rules: RTT {} ms to IPv4 zone addresses, {} ms to IPv6; dead addresses blackholed",
        millis_u64(rtt4),
        millis_u64(rtt6)
    )
}

/// A connection to zone name `name` that may use TCP only.
pub(super) fn tcp_to(name: &str) -> Connect {
    let mut c = Connect::new(fqdn(name));
    c.props = Some(TCP_ONLY.to_string());
    c
}

/// Runs `taps connect` to zone name `name`, TCP only, with this run's CIB.
pub(super) fn connect_tcp(lab: &Lab, ctx: &Ctx, name: &str) -> Result<ConnectReport, String> {
    ctx.connect(lab, tcp_to(name))
}
