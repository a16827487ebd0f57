//! The SCTP-against-TCP goals (issue 14, part 3): bulk throughput of one flow through taps
//! on loopback, SCTP at least half of TCP's.

use super::{not_measured, Judge};
use crate::experiments::Failures;
use crate::{Goal, Results};

/// SCTP's transfer time against TCP's on loopback: at most 2 × (throughput at least
/// 0.5 × TCP's), as the median of per-repetition ratios; CPU per byte is listed with it.
pub(super) fn sctp_speed_goals(r: &Results, planned: bool, g: &mut Vec<Goal>) {
    const TARGET: &str = "≥ 0.5 × TCP's throughput (time ≤ 2 × TCP's)";
    let name = "SCTP throughput, one flow through taps, loopback".to_string();
    if !planned {
        return;
    }
    let Some(p) = r.sctp_speed.iter().find(|p| p.path == "loopback") else {
        g.push(not_measured(name, TARGET, 2.0));
        return;
    };
    let mut j = Judge::default();
    j.faults("TCP", p.tcp.faults())
        .faults("SCTP", p.sctp.faults())
        .samples("TCP time", &p.tcp.elapsed_us, true)
        .samples("SCTP time", &p.sctp.elapsed_us, true)
        .samples("TCP CPU", &p.tcp.total_cpu_us, true)
        .samples("SCTP CPU", &p.sctp.total_cpu_us, true);
    let time_ratio = 1.0 / p.throughput_ratio;
    let mb = p.bytes as f64 / 1e6;
    let rate = |us: f64| mb / (us / 1e6);
    g.push(j.goal(
        format!("{name}, {mb:.0} MB"),
        TARGET,
        2.0,
        time_ratio,
        format!(
            "{:.2} × TCP's throughput ({:.0} vs {:.0} MB/s; medians {:.1} vs {:.1} ms); \
             CPU per byte (sender + receiver) {:.2} × TCP's",
            p.throughput_ratio,
            rate(p.sctp.elapsed_us.median),
            rate(p.tcp.elapsed_us.median),
            p.sctp.elapsed_us.median / 1e3,
            p.tcp.elapsed_us.median / 1e3,
            p.cpu_ratio,
        ),
    ));
}
