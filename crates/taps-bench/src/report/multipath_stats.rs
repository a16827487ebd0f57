//! The runs of `taps-bench multipath` grouped by point (experiment, series, σ): mean and
//! 95 % confidence interval of each figure, as the paper reports its 24 runs. The tables,
//! plots and prose of the report all read these groups.

#![forbid(unsafe_code)]

use std::fmt;

use crate::experiments::{MultipathPoint, MultipathResults};

/// Student's t, 97.5 % quantile, for 1 to 30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// Mean of a figure over a point's runs, with the half-width of its 95 % confidence
/// interval (Student's t; NaN with fewer than two runs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Stat {
    /// Mean over the runs that measured it (NaN if none did).
    pub(crate) mean: f64,
    /// Half-width of the 95 % confidence interval of the mean.
    pub(crate) half: f64,
    /// Runs that measured it.
    pub(crate) n: usize,
}

impl Stat {
    /// The mean and interval of the finite values of `xs`. One pass to collect, two over
    /// the values.
    pub(crate) fn of(xs: impl IntoIterator<Item = f64>) -> Stat {
        let v: Vec<f64> = xs.into_iter().filter(|x| x.is_finite()).collect();
        let n = v.len();
        if n == 0 {
            return Stat {
                mean: f64::NAN,
                half: f64::NAN,
                n,
            };
        }
        let mean = v.iter().sum::<f64>() / n as f64;
        let half = if n < 2 {
            f64::NAN
        } else {
            let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let t = T975.get(n - 2).copied().unwrap_or(1.96);
            t * (var / n as f64).sqrt()
        };
        Stat { mean, half, n }
    }

    /// The lower end of the interval (the mean when there is none).
    pub(crate) fn low(&self) -> f64 {
        self.mean
            - if self.half.is_finite() {
                self.half
            } else {
                0.0
            }
    }

    /// The upper end of the interval (the mean when there is none).
    pub(crate) fn high(&self) -> f64 {
        self.mean
            + if self.half.is_finite() {
                self.half
            } else {
                0.0
            }
    }

    /// Formatted with `digits` decimals: `18.5 ± 0.3`, `18.5` with one run, `–` with none.
    pub(crate) fn show(&self, digits: usize) -> String {
        if !self.mean.is_finite() {
            return "–".into();
        }
        if self.half.is_finite() {
            format!("{:.*} ± {:.*}", digits, self.mean, digits, self.half)
        } else {
            format!("{:.*}", digits, self.mean)
        }
    }
}

impl fmt::Display for Stat {
    /// One decimal: [`Stat::show`]`(1)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.show(1))
    }
}

/// Every run of one point, summarised.
#[derive(Debug, Clone)]
pub(crate) struct Group<'a> {
    /// Experiment 1, 2 or 3.
    pub(crate) experiment: u8,
    /// The curve.
    pub(crate) series: &'a str,
    /// σ, KiB.
    pub(crate) buffer_kib: u32,
    /// Runs made.
    pub(crate) runs: usize,
    /// Runs that failed (left out of the figures).
    pub(crate) failed: usize,
    /// Association throughput, Mbit/s.
    pub(crate) mbit: Stat,
    /// Mean message delay over all streams, ms.
    pub(crate) delay_ms: Stat,
    /// Per stream: (Mbit/s, delay ms).
    pub(crate) streams: Vec<(Stat, Stat)>,
    /// Per link: queue drops per run, mean.
    pub(crate) queue_drops: Vec<f64>,
    /// Per link: its share of the new data on the wire (0 … 1), mean over the runs that
    /// counted it.
    pub(crate) link_share: Vec<f64>,
    /// Runs with a stall of 200 ms or more that began after [`START_UP`] (the receiver
    /// reading by then).
    pub(crate) stalled_runs: usize,
    /// Stalls of 200 ms or more that began within [`START_UP`], over all runs.
    pub(crate) start_up_stalls: usize,
    /// Messages out of order within their stream, over all runs.
    pub(crate) out_of_order: u64,
    /// Per path at the end of the runs, as the client saw it: (congestion window, bytes;
    /// smoothed RTT, ms).
    pub(crate) end_paths: Vec<(Stat, Stat)>,
    /// What the SACKs said the sender held (runs that recorded it): mean per run of the
    /// per-SACK means (TSNs outstanding, of them renegably and non-renegably acked;
    /// a_rwnd in bytes).
    pub(crate) held: Option<HeldStats>,
}

/// [`Group::held`]: one [`Stat`] per figure of [`netlab::sctp_ledger::Held`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeldStats {
    /// TSNs sent and not cumulatively acked.
    pub(crate) outstanding: Stat,
    /// Of those, gap-acked (renegably, in an NR-SACK).
    pub(crate) gap_acked: Stat,
    /// Of those, NR-acked.
    pub(crate) nr_acked: Stat,
    /// The receiver's advertised window, bytes.
    pub(crate) a_rwnd: Stat,
}

/// [`HeldStats`] over the runs that recorded what was held; `None` if none did.
fn held_stats(ok: &[&MultipathPoint]) -> Option<HeldStats> {
    let held: Vec<netlab::sctp_ledger::Held> = ok.iter().filter_map(|p| p.held).collect();
    let stat = |f: fn(&netlab::sctp_ledger::Held) -> f64| Stat::of(held.iter().map(f));
    (!held.is_empty()).then(|| HeldStats {
        outstanding: stat(|h| h.outstanding),
        gap_acked: stat(|h| h.gap_acked),
        nr_acked: stat(|h| h.nr_acked),
        a_rwnd: stat(|h| h.a_rwnd),
    })
}

impl Group<'_> {
    /// Stream `s`'s rate (or its delay).
    pub(crate) fn stream(&self, s: usize, delay: bool) -> Stat {
        self.streams
            .get(s)
            .map_or(Stat::of([]), |x| if delay { x.1 } else { x.0 })
    }

    /// Whether no run measured the point.
    pub(crate) fn all_failed(&self) -> bool {
        self.failed == self.runs
    }
}

/// The first part of a run's wire timeline (from the lab's start of the run) in which
/// the receiving peer may not read yet: it reads once it has confirmed every path
/// itself (heartbeats 1 s apart), while the sender starts as soon as its own are; its
/// window closes meanwhile. The measured window starts 2 s after the receiver's first
/// read, so stalls in this part fall outside it.
pub(crate) const START_UP: u64 = 1500;

/// Whether a stall, as the run's JSON tells it ("no new DATA on any link from A to B
/// ms ..."), began within [`START_UP`].
fn in_start_up(stall: &str) -> bool {
    stall
        .split_once(" from ")
        .and_then(|(_, rest)| rest.split(' ').next())
        .and_then(|a| a.parse::<u64>().ok())
        .is_some_and(|a| a < START_UP)
}

fn group<'a>(runs: &[&'a MultipathPoint]) -> Group<'a> {
    let first = runs[0];
    let ok: Vec<&MultipathPoint> = runs.iter().copied().filter(|p| p.error.is_none()).collect();
    let width = ok.iter().map(|p| p.streams.len()).max().unwrap_or(0);
    let links = runs.iter().map(|p| p.queue_drops.len()).max().unwrap_or(0);
    Group {
        experiment: first.experiment,
        series: &first.series,
        buffer_kib: first.buffer_kib,
        runs: runs.len(),
        failed: runs.len() - ok.len(),
        mbit: Stat::of(ok.iter().map(|p| p.mbit)),
        delay_ms: Stat::of(ok.iter().map(|p| p.delay_ms)),
        streams: (0..width)
            .map(|s| {
                let get = |p: &&MultipathPoint, d: bool| {
                    p.streams
                        .get(s)
                        .map_or(f64::NAN, |x| if d { x.1 } else { x.0 })
                };
                (
                    Stat::of(ok.iter().map(|p| get(p, false))),
                    Stat::of(ok.iter().map(|p| get(p, true))),
                )
            })
            .collect(),
        queue_drops: (0..links)
            .map(|l| {
                ok.iter()
                    .map(|p| p.queue_drops.get(l).copied().unwrap_or(0) as f64)
                    .sum::<f64>()
                    / ok.len().max(1) as f64
            })
            .collect(),
        link_share: (0..links)
            .map(|l| {
                let shares: Vec<f64> = ok
                    .iter()
                    .filter_map(|p| {
                        let new = |w: &Vec<[u64; 2]>| w.iter().map(|x| x[0]).sum::<u64>();
                        let all: u64 = p.wire.iter().map(new).sum();
                        (all > 0).then(|| p.wire.get(l).map_or(0, new) as f64 / all as f64)
                    })
                    .collect();
                Stat::of(shares).mean
            })
            .collect(),
        stalled_runs: ok
            .iter()
            .filter(|p| p.stalls.iter().any(|s| !in_start_up(s)))
            .count(),
        start_up_stalls: ok
            .iter()
            .flat_map(|p| &p.stalls)
            .filter(|s| in_start_up(s))
            .count(),
        out_of_order: runs.iter().map(|p| p.out_of_order).sum(),
        end_paths: (0..links)
            .map(|l| {
                let get = |key: &str| {
                    Stat::of(ok.iter().map(|p| {
                        end_path(p, l)
                            .and_then(|v| v.get(key))
                            .and_then(serde_json::Value::as_f64)
                            .unwrap_or(f64::NAN)
                    }))
                };
                (get("cwnd"), get("srtt_ms"))
            })
            .collect(),
        held: held_stats(&ok),
    }
}

/// Path `l` of a run as its client saw it at the end (`{"path", "cwnd", "srtt_ms", ...}`).
pub(crate) fn end_path(p: &MultipathPoint, l: usize) -> Option<&serde_json::Value> {
    p.paths
        .as_array()?
        .iter()
        .find(|v| v.get("path").and_then(serde_json::Value::as_u64) == Some(l as u64))
}

/// The points of a run, each with its runs summarised, in the order first run.
#[derive(Debug, Clone)]
pub(crate) struct Groups<'a> {
    /// Every point.
    pub(crate) all: Vec<Group<'a>>,
}

impl<'a> Groups<'a> {
    /// Groups the runs of `r` by (experiment, series, σ). Quadratic in the number of
    /// points (a few hundred runs of under a hundred points).
    pub(crate) fn of(r: &'a MultipathResults) -> Groups<'a> {
        let mut keys: Vec<(u8, &str, u32)> = Vec::new();
        for p in &r.points {
            let k = (p.experiment, p.series.as_str(), p.buffer_kib);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let all = keys
            .into_iter()
            .map(|(e, s, b)| {
                let runs: Vec<&MultipathPoint> = r
                    .points
                    .iter()
                    .filter(|p| p.experiment == e && p.series == s && p.buffer_kib == b)
                    .collect();
                group(&runs)
            })
            .collect();
        Groups { all }
    }

    /// The points of series `name` of experiment `e` that measured something, by σ.
    pub(crate) fn series(&self, e: u8, name: &str) -> Vec<&Group<'a>> {
        let mut v: Vec<&Group<'a>> = self
            .all
            .iter()
            .filter(|g| g.experiment == e && g.series == name && !g.all_failed())
            .collect();
        v.sort_by_key(|g| g.buffer_kib);
        v
    }

    /// The series of experiment `e`, in first-run order.
    pub(crate) fn names(&self, e: u8) -> Vec<&'a str> {
        let mut v: Vec<&'a str> = Vec::new();
        for g in self.all.iter().filter(|g| g.experiment == e) {
            if !v.contains(&g.series) {
                v.push(g.series);
            }
        }
        v
    }

    /// The σ values of experiment `e`, ascending.
    pub(crate) fn sigmas(&self, e: u8) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .all
            .iter()
            .filter(|g| g.experiment == e)
            .map(|g| g.buffer_kib)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The point of `name` at σ, if it measured something.
    pub(crate) fn at(&self, e: u8, name: &str, sigma: u32) -> Option<&Group<'a>> {
        self.all.iter().find(|g| {
            g.experiment == e && g.series == name && g.buffer_kib == sigma && !g.all_failed()
        })
    }

    /// The smallest σ at which the mean of `name` reaches `level` Mbit/s, if any.
    pub(crate) fn saturates_at(&self, e: u8, name: &str, level: f64) -> Option<&Group<'a>> {
        self.series(e, name)
            .into_iter()
            .find(|g| g.mbit.mean >= level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_interval() {
        let s = Stat::of([10.0, 12.0, f64::NAN, 14.0]);
        assert_eq!(s.n, 3);
        assert!((s.mean - 12.0).abs() < 1e-9);
        // s = 2, t(2) = 4.303: 4.303 × 2 / √3.
        assert!((s.half - 4.303 * 2.0 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(s.show(1), "12.0 ± 5.0");
        assert_eq!(Stat::of([3.0]).show(1), "3.0");
        assert_eq!(Stat::of([]).show(0), "–");
        assert_eq!(Stat::of([3.0]).low(), 3.0);
    }

    #[test]
    fn start_up_stalls_are_told_by_their_start() {
        assert!(in_start_up(
            "no new DATA on any link from 484 to 707 ms (223 ms); x"
        ));
        assert!(!in_start_up(
            "no new DATA on any link from 5861 to 6070 ms (210 ms)"
        ));
        assert!(!in_start_up("something else"));
    }
}
