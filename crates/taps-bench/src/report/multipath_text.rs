//! The prose of the multipath report: the setup, the paper's numbers beside ours (the
//! comparisons are computed from the run), and why they differ.

#![forbid(unsafe_code)]

use std::fmt::Write as _;

use crate::experiments::{MultipathPoint, MultipathResults};

/// The smallest σ at which `name` reaches `frac` of `target` Mbit/s, if any.
fn saturates_at(r: &MultipathResults, e: u8, name: &str, target: f64, frac: f64) -> Option<u32> {
    let mut v: Vec<&MultipathPoint> = r
        .points
        .iter()
        .filter(|p| p.experiment == e && p.series == name && p.error.is_none())
        .collect();
    v.sort_by_key(|p| p.buffer_kib);
    v.iter()
        .find(|p| p.mbit >= target * frac)
        .map(|p| p.buffer_kib)
}

/// The point of `name` at σ, if measured.
fn at<'a>(r: &'a MultipathResults, e: u8, name: &str, sigma: u32) -> Option<&'a MultipathPoint> {
    r.points.iter().find(|p| {
        p.experiment == e && p.series == name && p.buffer_kib == sigma && p.error.is_none()
    })
}

/// The largest σ measured in experiment `e`.
fn max_sigma(r: &MultipathResults, e: u8) -> u32 {
    r.points
        .iter()
        .filter(|p| p.experiment == e)
        .map(|p| p.buffer_kib)
        .max()
        .unwrap_or(0)
}

fn kib(s: Option<u32>) -> String {
    s.map_or("not within the grid".into(), |s| format!("{s} KiB"))
}

/// Setup, knobs and timing.
pub(crate) fn intro(md: &mut String, r: &MultipathResults) {
    let _ = writeln!(
        md,
        "The three experiments of the CMT-SCTP scheduling paper (the seed cmt-sctp-scheduling), \
         on netlab with real usrsctp 0.9.5 at both ends (`netlab sctp-mp-peer`, one process per \
         namespace, SCTP over UDP, paths added with the multihoming shim). The sender is \
         saturated: it keeps every stream supplied, one message per stream in turn (or, where \
         said, the stream with the fewest unsent bytes next). RR = no pinning, CMT spreads the \
         data over the paths; Fixed = each stream pinned to one path (`send_on_path`, \
         SCTP_ADDR_OVER). Each point is one association: {:.1} s of warm-up, then a {:.1} s \
         window at the receiver (the paper: 19 s settling, 300 s measured, 24 runs with \
         confidence intervals; ours: one run per point, so single points can be off by the \
         noise of a shared 2-CPU machine). The whole run took {:.0} s.\n",
        r.timing.warmup_ms as f64 / 1e3,
        r.timing.measure_ms as f64 / 1e3,
        r.duration_s
    );
    md.push_str("Settings:\n\n");
    for k in &r.knobs {
        let _ = writeln!(md, "- {k}");
    }
    md.push('\n');
    let bad: u64 = r.points.iter().map(|p| p.out_of_order).sum();
    let _ = writeln!(
        md,
        "Every stream's messages were checked for order at the receiver: {bad} out of order.\n"
    );
}

/// Experiment 1: where each curve saturates, against the paper.
pub(crate) fn exp1(md: &mut String, r: &MultipathResults) {
    // The paper's full rate: 19.2 Mbit/s; ours is the best any point reached on 10/10.
    let best = r
        .points
        .iter()
        .filter(|p| p.experiment == 1 && p.series.ends_with("δB=10 ms"))
        .map(|p| p.mbit)
        .fold(0.0, f64::max);
    let _ = writeln!(
        md,
        "| | paper | ours |\n|---|---|---|\n| full rate (10/10 ms) | 19.2 Mbit/s at σ=64 KiB, either scheduler | {best:.1} Mbit/s (best 10/10 point); RR at 64 KiB {}, Fixed at 64 KiB {} |",
        at(r, 1, "RR, δB=10 ms", 64).map_or("–".into(), |p| format!("{:.1}", p.mbit)),
        at(r, 1, "Fixed, δB=10 ms", 64).map_or("–".into(), |p| format!("{:.1}", p.mbit)),
    );
    for db in [50, 75] {
        let f = saturates_at(r, 1, &format!("Fixed, δB={db} ms"), best, 0.95);
        let rr = saturates_at(r, 1, &format!("RR, δB={db} ms"), best, 0.95);
        let paper = if db == 75 {
            "Fixed 224 KiB, RR 288 KiB"
        } else {
            "Fixed before RR (figure 4)"
        };
        let _ = writeln!(
            md,
            "| σ for 95 % of full rate, δB={db} ms | {paper} | Fixed {}, RR {} |",
            kib(f),
            kib(rr)
        );
    }
    let s = max_sigma(r, 1);
    if let (Some(f), Some(rr)) = (at(r, 1, "Fixed, δB=75 ms", s), at(r, 1, "RR, δB=75 ms", s)) {
        let _ = writeln!(
            md,
            "| message delay at σ={s} KiB, δB=75 ms, stream #0 / #1 | Fixed: #0 well below #1; RR: #0 ≈ #1 | Fixed {:.0} / {:.0} ms; RR {:.0} / {:.0} ms |",
            f.streams.first().map_or(f64::NAN, |x| x.1),
            f.streams.get(1).map_or(f64::NAN, |x| x.1),
            rr.streams.first().map_or(f64::NAN, |x| x.1),
            rr.streams.get(1).map_or(f64::NAN, |x| x.1),
        );
    }
    md.push('\n');
}

/// Experiment 2: stream #1 with and without filling by queue.
pub(crate) fn exp2(md: &mut String, r: &MultipathResults) {
    let s = max_sigma(r, 2);
    md.push_str(
        "| at the largest σ | paper | ours: stream #0 / stream #1 (sum), Mbit/s |\n|---|---|---|\n",
    );
    for rb in [25, 50] {
        for (name, paper) in [
            ("RR", "about (ρA+ρB)/2 per stream"),
            ("Fixed", "stream #1 stuck near 10 Mbit/s, like stream #0"),
            (
                "Fixed + fill by queue",
                "stream #1 uses ρB: sum about ρA+ρB",
            ),
        ] {
            let series = format!("{name}, ρB={rb} Mbit/s");
            let ours = at(r, 2, &series, s).map_or("–".into(), |p| {
                format!(
                    "{:.1} / {:.1} ({:.1})",
                    p.streams.first().map_or(f64::NAN, |x| x.0),
                    p.streams.get(1).map_or(f64::NAN, |x| x.0),
                    p.mbit
                )
            });
            let _ = writeln!(md, "| {series}, σ={s} KiB | {paper} | {ours} |");
        }
    }
    md.push('\n');
}

/// Experiment 3: RR against Fixed + NR-SACK.
pub(crate) fn exp3(md: &mut String, r: &MultipathResults) {
    md.push_str("| | paper | ours |\n|---|---|---|\n");
    let rows = [
        (
            "RR, NR-SACK on",
            256,
            "below 3 Mbit/s, delay above 600 ms (σ=256 KiB)",
        ),
        (
            "Fixed, NR-SACK off",
            256,
            "slightly above 5 Mbit/s, about 150 ms",
        ),
        (
            "Fixed, NR-SACK on",
            128,
            "about 20 Mbit/s at about 60 ms from σ=128 KiB",
        ),
    ];
    for (series, s, paper) in rows {
        let ours = at(r, 3, series, s).map_or("–".into(), |p| {
            format!("{:.1} Mbit/s, {:.0} ms", p.mbit, p.delay_ms)
        });
        let _ = writeln!(md, "| {series}, σ={s} KiB | {paper} | {ours} |");
    }
    md.push('\n');
}
