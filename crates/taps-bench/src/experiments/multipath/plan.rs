//! The grid of `taps-bench multipath`: every point of the paper's three experiments, and
//! how many runs each gets.

#![forbid(unsafe_code)]

use super::LinkSpec;

/// One planned point.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) experiment: u8,
    pub(super) series: String,
    pub(super) buffer_kib: u32,
    pub(super) links: Vec<LinkSpec>,
    pub(super) map: Option<Vec<usize>>,
    pub(super) fill_by_queue: bool,
    pub(super) nr_sack: bool,
    pub(super) nr_on_arrival: bool,
    pub(super) send_split_only: bool,
    pub(super) streams: u16,
    pub(super) runs: u32,
}

/// What the names of the curves run with only the send buffer split among the paths end
/// with ([`super::MultipathPoint::send_split_only`]).
pub(crate) const SEND_SPLIT_ONLY: &str = ", send split only";

/// Runs of a point the paper's claims rest on: every σ of experiment 1 at δB = 50 and
/// 75 ms and at σ = 64 KiB on 10/10 ms, and the four compared points of experiment 3.
pub(crate) const CLAIM_RUNS: u32 = 10;
/// Runs of every other point.
pub(crate) const OTHER_RUNS: u32 = 3;

/// Whether the point carries one of the paper's claims (see [`CLAIM_RUNS`]).
fn carries_claim(experiment: u8, series: &str, sigma: u32) -> bool {
    match experiment {
        1 => !series.ends_with("δB=10 ms") || sigma == 64,
        3 => matches!(
            (series, sigma),
            ("RR, NR-SACK off", 256)
                | ("RR, NR-SACK on", 256)
                | ("RR, NR-SACK on arrival", 256)
                | ("Fixed, NR-SACK off", 256)
                | ("Fixed, NR-SACK on", 128)
                | ("RR, NR-SACK off, send split only", 256)
                | ("RR, NR-SACK on, send split only", 256)
                | ("Fixed, NR-SACK off, send split only", 256)
                | ("Fixed, NR-SACK on, send split only", 128)
        ),
        _ => false,
    }
}

/// Path A of every experiment (and path B of experiment 3): 10 Mbit/s, 10 ms one way.
pub(crate) const PATH_A: LinkSpec = LinkSpec {
    mbit: 10.0,
    delay_ms: 10,
};

/// The splits a point runs with: both buffers, and also the send buffer alone if `too`.
fn splits(too: bool) -> &'static [bool] {
    if too {
        &[false, true]
    } else {
        &[false]
    }
}

fn two(b_mbit: f64, b_delay: u64) -> Vec<LinkSpec> {
    vec![
        PATH_A,
        LinkSpec {
            mbit: b_mbit,
            delay_ms: b_delay,
        },
    ]
}

/// Experiment 1's σ, KiB; 176 and 240 KiB are where the send-buffer split lets Fixed
/// reach full rate at δB = 50 and 75 ms (σ/2 against path B's bandwidth-delay product).
const EXP1_SIGMAS: &[u32] = &[64, 128, 176, 192, 224, 240, 256, 288];

/// The grid: `quick` keeps the points the paper's claims rest on.
pub(super) fn plan(quick: bool) -> Vec<Plan> {
    let mut v = Vec::new();
    let sig1: &[u32] = if quick { &[64, 224, 288] } else { EXP1_SIGMAS };
    // Each δB and σ with both buffers split among the paths; at δB = 50 and 75 ms and
    // the σ where full rate is reached (from 176 KiB) also with only the send buffer
    // split, the setting under which the paper's simulator gives its figure 7.
    for &db in &[10u64, 50, 75] {
        for &s in sig1 {
            for &send_only in splits(!quick && db != 10 && s >= 176) {
                for fixed in [false, true] {
                    v.push(Plan {
                        experiment: 1,
                        series: format!(
                            "{}, δB={db} ms{}",
                            if fixed { "Fixed" } else { "RR" },
                            if send_only { SEND_SPLIT_ONLY } else { "" }
                        ),
                        buffer_kib: s,
                        links: two(10.0, db),
                        map: fixed.then(|| vec![0, 1]),
                        fill_by_queue: false,
                        nr_sack: true,
                        nr_on_arrival: false,
                        send_split_only: send_only,
                        streams: 2,
                        runs: 1,
                    });
                }
            }
        }
    }
    // Figure 6 is at σ = 288 KiB: there also with only the send buffer split.
    let sig2: &[u32] = if quick { &[288] } else { &[96, 192, 288] };
    for &rb in &[25.0, 50.0] {
        for &s in sig2 {
            for &send_only in splits(!quick && s == 288) {
                for (name, map, q) in [
                    ("RR", None, false),
                    ("Fixed", Some(vec![0, 1]), false),
                    ("Fixed + fill by queue", Some(vec![0, 1]), true),
                ] {
                    v.push(Plan {
                        experiment: 2,
                        series: format!(
                            "{name}, ρB={rb} Mbit/s{}",
                            if send_only { SEND_SPLIT_ONLY } else { "" }
                        ),
                        buffer_kib: s,
                        links: two(rb, 10),
                        map,
                        fill_by_queue: q,
                        nr_sack: true,
                        nr_on_arrival: false,
                        send_split_only: send_only,
                        streams: 2,
                        runs: 1,
                    });
                }
            }
        }
    }
    v.extend(plan_exp3(quick));
    if !quick {
        v.iter_mut().for_each(set_runs);
    }
    v
}

/// Experiment 3's points: three paths, seven streams, Fixed and RR with and without
/// NR-SACK by σ.
fn plan_exp3(quick: bool) -> Vec<Plan> {
    let mut v = Vec::new();
    let sig3: &[u32] = if quick {
        &[128, 256]
    } else {
        &[64, 128, 192, 256]
    };
    let three = vec![
        PATH_A,
        PATH_A,
        LinkSpec {
            mbit: 1.0,
            delay_ms: 50,
        },
    ];
    // The application fills the streams by their unsent bytes (the paper's sender keeps
    // every stream supplied); one more curve fills them in turn, where the 1 Mbit/s
    // stream #0 paces all seven; one more RR curve has the receiver NR-ack every chunk on
    // arrival, as the paper's simulator does (usrsctp NR-acks what it delivered); and the
    // four compared curves again with only the send buffer split among the paths, the
    // setting under which INET gives the paper's curves 3 and 4 (docs/bench/multipath-inet.md).
    for &s in sig3 {
        for (fixed, nr, by_queue, on_arrival, send_only) in [
            (true, true, true, false, false),
            (true, false, true, false, false),
            (false, true, true, false, false),
            (false, false, true, false, false),
            (true, true, false, false, false),
            (false, true, true, true, false),
            (true, true, true, false, true),
            (true, false, true, false, true),
            (false, true, true, false, true),
            (false, false, true, false, true),
        ] {
            v.push(Plan {
                experiment: 3,
                series: format!(
                    "{}, NR-SACK {}{}{}",
                    if fixed { "Fixed" } else { "RR" },
                    match (nr, on_arrival) {
                        (true, true) => "on arrival",
                        (true, false) => "on",
                        (false, _) => "off",
                    },
                    if by_queue { "" } else { ", fill in turn" },
                    if send_only { SEND_SPLIT_ONLY } else { "" }
                ),
                buffer_kib: s,
                links: three.clone(),
                // Streams 1, 3, 5 on A (path 0), 2, 4, 6 on B (path 1), 0 on C (path 2).
                map: fixed.then(|| vec![2, 0, 1, 0, 1, 0, 1]),
                fill_by_queue: by_queue,
                nr_sack: nr,
                nr_on_arrival: on_arrival,
                send_split_only: send_only,
                streams: 7,
                runs: 1,
            });
        }
    }
    v
}

/// [`CLAIM_RUNS`] for a point that carries a claim, [`OTHER_RUNS`] for the others.
fn set_runs(p: &mut Plan) {
    p.runs = if carries_claim(p.experiment, &p.series, p.buffer_kib) {
        CLAIM_RUNS
    } else {
        OTHER_RUNS
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grid: 136 points and 877 runs in full, 44 points once each with `--quick`;
    /// experiment 3 at σ = 256 KiB runs its compared curves (RR with NR-SACK on arrival
    /// among them) 10 times.
    #[test]
    fn the_grid_has_its_points_and_runs() {
        let full = plan(false);
        assert_eq!(full.len(), 136);
        assert_eq!(full.iter().map(|p| p.runs).sum::<u32>(), 877);
        assert_eq!(plan(true).len(), 44);
        let at_256: Vec<(&str, u32)> = full
            .iter()
            .filter(|p| p.experiment == 3 && p.buffer_kib == 256)
            .map(|p| (p.series.as_str(), p.runs))
            .collect();
        assert!(at_256.contains(&("RR, NR-SACK on arrival", CLAIM_RUNS)));
        assert!(at_256.contains(&("Fixed, NR-SACK on, fill in turn", OTHER_RUNS)));
        assert!(at_256.contains(&("RR, NR-SACK off, send split only", CLAIM_RUNS)));
    }
}
