//! The SCTP-against-TCP goals (issue 14, part 3): bulk throughput of one flow through taps
//! on loopback, SCTP at least half of TCP's.

use super::{not_measured, Judge};
use crate::experiments::{Failures, SpeedPoint, LOOPBACK};
use crate::{Goal, Results};

/// SCTP's transfer time against TCP's on loopback: at most 2 × (throughput at least
/// 0.5 × TCP's), as the median of per-repetition ratios; CPU per byte is listed with it.
pub(super) fn sctp_speed_goals(r: &Results, planned: bool, g: &mut Vec<Goal>) {
    const TARGET: &str = "≥ 0.5 × TCP's throughput (time ≤ 2 × TCP's)";
    let name = "SCTP throughput, one flow through taps, loopback".to_string();
    if !planned {
        return;
    }
    let Some(p) = r.sctp_speed.iter().find(|p| p.path == LOOPBACK) else {
        g.push(not_measured(name, TARGET, 2.0));
        return;
    };
    let j = speed_judge(p);
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

/// What can make an SCTP-against-TCP point not count: a failed transfer on either side,
/// or a missing or zero time or CPU figure.
pub(super) fn speed_judge(p: &SpeedPoint) -> Judge {
    let mut j = Judge::default();
    j.faults("TCP", p.tcp.faults())
        .faults("SCTP", p.sctp.faults())
        .samples("TCP time", &p.tcp.elapsed_us, true)
        .samples("SCTP time", &p.sctp.elapsed_us, true)
        .samples("TCP CPU", &p.tcp.total_cpu_us, true)
        .samples("SCTP CPU", &p.sctp.total_cpu_us, true);
    j
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::{SpeedPoint, Summary, TransferSide};

    fn side(elapsed: &[f64], cpu: &[f64]) -> TransferSide {
        TransferSide {
            elapsed_us: Summary::of(elapsed.to_vec()),
            total_cpu_us: Summary::of(cpu.to_vec()),
            ..TransferSide::default()
        }
    }

    fn goal_of(tcp: TransferSide, sctp: TransferSide) -> Goal {
        let mut r = super::super::tests::results();
        r.sctp_speed.push(SpeedPoint {
            path: "loopback".into(),
            bytes: 100_000_000,
            throughput_ratio: crate::experiments::pairwise(
                &tcp.elapsed_us,
                &sctp.elapsed_us,
                crate::measure::ratio,
            ),
            cpu_ratio: 1.0,
            tcp,
            sctp,
        });
        let mut g = Vec::new();
        sctp_speed_goals(&r, true, &mut g);
        assert_eq!(g.len(), 1);
        g.remove(0)
    }

    #[test]
    fn sctp_within_twice_tcp_s_time_is_met() {
        let g = goal_of(
            side(&[40.0, 50.0], &[40.0; 2]),
            side(&[70.0, 90.0], &[90.0; 2]),
        );
        assert!(g.met, "{g:?}");
        let g = goal_of(
            side(&[40.0, 50.0], &[40.0; 2]),
            side(&[120.0, 150.0], &[90.0; 2]),
        );
        assert!(!g.met, "{g:?}");
    }

    #[test]
    fn a_failed_flow_or_a_zero_time_is_not_met() {
        let mut failed = side(&[50.0, 50.0], &[90.0; 2]);
        failed.failed = 1;
        let g = goal_of(side(&[40.0, 50.0], &[40.0; 2]), failed);
        assert!(!g.met && g.problem.is_some(), "{g:?}");
        let g = goal_of(
            side(&[40.0, 50.0], &[40.0; 2]),
            side(&[0.0, 0.0], &[90.0; 2]),
        );
        assert!(!g.met && g.problem.is_some(), "{g:?}");
    }

    #[test]
    fn a_planned_comparison_that_is_missing_is_not_met() {
        let r = super::super::tests::results();
        let mut g = Vec::new();
        sctp_speed_goals(&r, true, &mut g);
        assert!(g.len() == 1 && !g[0].met, "{g:?}");
        g.clear();
        sctp_speed_goals(&r, false, &mut g);
        assert!(g.is_empty());
    }
}
