//! The prose of the multipath report: the setup, the paper's numbers beside ours (the
//! comparisons are computed from the run), and why they differ.

#![forbid(unsafe_code)]

use std::fmt::Write as _;

use crate::experiments::{MultipathPoint, MultipathResults};

/// The measured points of series `name` of experiment `e`, by σ.
fn series<'a>(r: &'a MultipathResults, e: u8, name: &str) -> Vec<&'a MultipathPoint> {
    let mut v: Vec<&MultipathPoint> = r
        .points
        .iter()
        .filter(|p| p.experiment == e && p.series == name && p.error.is_none())
        .collect();
    v.sort_by_key(|p| p.buffer_kib);
    v
}

/// The smallest σ at which `name` reaches `frac` of `target` Mbit/s, if any.
fn saturates_at(r: &MultipathResults, e: u8, name: &str, target: f64, frac: f64) -> Option<u32> {
    series(r, e, name)
        .iter()
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
    exp1_notes(md, r, best);
}

/// Why experiment 1 differs from the paper: the figures are this run's.
fn exp1_notes(md: &mut String, r: &MultipathResults, best: f64) {
    md.push_str("Differences and agreements, one by one (figures from this run):\n\n");
    let _ = writeln!(
        md,
        "- **Full rate.** Our ceiling is 2 × 9.28 Mbit/s of payload, not 19.2: each 1,444-byte \
message travels in a 1,500-byte IP packet (UDP encapsulation costs 8 bytes of the \
paper's 1,452), which predicts 19.25; the rest is what the user-space bridge's token \
bucket charges per packet beyond the IP length (not traced further). Best 10/10 ms \
point: {best:.2} Mbit/s."
    );
    let sat = |db: u64, kind: &str| saturates_at(r, 1, &format!("{kind}, δB={db} ms"), best, 0.95);
    let _ = writeln!(
        md,
        "- **Which scheduler saturates first.** 95 % of full rate: at δB=50 ms Fixed at {}, \
RR at {}; at δB=75 ms Fixed at {}, RR at {} (the paper: Fixed before RR, 224 against \
288 KiB at 75 ms).",
        kib(sat(50, "Fixed")),
        kib(sat(50, "RR")),
        kib(sat(75, "Fixed")),
        kib(sat(75, "RR"))
    );
    let curve = |name: &str| -> String {
        series(r, 1, name)
            .iter()
            .map(|p| format!("{:.1}", p.mbit))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let _ = writeln!(
        md,
        "- **No collapse, no dip.** Earlier runs had Fixed at about 3 Mbit/s at some buffer \
sizes, bistable between runs, and RR falling as σ grew. The mechanism: usrsctp applied \
Max.Burst by cutting a path's congestion window to its flight plus 4 packets whenever \
it sent short of its window (`sctp_use_cwnd_based_maxburst`), and with CMT its stream \
scheduler serves streams in turn whatever path asks, so a path with a pinned stream \
often sent short and kept a window of 5-9 packets for the whole run, without a single \
loss (docs/sctp.md, \"Multihoming\", has the trace). With Max.Burst counted per send \
instead (the settings above), this run's curves by σ: Fixed δB=50 ms {}; RR δB=50 ms \
{}; Fixed δB=75 ms {}; RR δB=75 ms {} Mbit/s.",
        curve("Fixed, δB=50 ms"),
        curve("RR, δB=50 ms"),
        curve("Fixed, δB=75 ms"),
        curve("RR, δB=75 ms")
    );
    // Delays where the rate is full.
    let full: Vec<&MultipathPoint> = r
        .points
        .iter()
        .filter(|p| p.experiment == 1 && p.error.is_none() && p.mbit >= 0.95 * best)
        .filter(|p| !p.series.ends_with("δB=10 ms"))
        .collect();
    let range = |fixed: bool, stream: usize| -> String {
        let v: Vec<f64> = full
            .iter()
            .filter(|p| p.fixed == fixed)
            .filter_map(|p| p.streams.get(stream).map(|s| s.1))
            .filter(|d| d.is_finite())
            .collect();
        if v.is_empty() {
            return "–".into();
        }
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        format!("{lo:.0}-{hi:.0} ms")
    };
    let _ = writeln!(
        md,
        "- **Delays** behave as in figure 5: where the rate is full on 10/50 and 10/75 ms, \
Fixed gives stream #0 (path A) {} and stream #1 (path B) {}; RR gives both the same \
({} / {}), growing with σ (the send buffer's queue).",
        range(true, 0),
        range(true, 1),
        range(false, 0),
        range(false, 1)
    );
    let _ = writeln!(
        md,
        "- **Run length.** {:.0} s of warm-up and {:.0} s measured against the paper's 19 s and \
300 s, one run per point against 24: a single retransmission timeout (RTO min 1 s) costs \
a quarter of our window, so single points scatter more than the paper's means; the \
intervals the paper gives are not reproduced yet.\n",
        r.timing.warmup_ms as f64 / 1e3,
        r.timing.measure_ms as f64 / 1e3
    );
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
    md.push_str(EXP2_NOTES);
}

/// Why experiment 2 differs from the paper.
const EXP2_NOTES: &str =
    "Differences, one by one (written from the development runs of 2026-11-24: the figures \
quoted in these notes are from those runs and can differ from this run's tables above):\n\n\
- **Fixed without the queue information** reproduces the paper exactly: the application \
hands over one message per stream in turn, each send waits for buffer space, so stream \
#1 gets no more than stream #0: 9.3 / 9.3 Mbit/s whatever ρB.\n\
- **Fixed filling by unsent bytes** (`Association::unsent_bytes`, read by the \
multihoming shim from usrsctp's stream and send queues: the paper's sender queue info) \
lets stream #1 use path B: the sum approaches ρA + ρB (our ceiling is 0.928 of the \
link rates, see experiment 1). At σ=96 KiB the window, not the rate, limits stream #1.\n\
- **RR** splits the rate equally between the streams, as in the paper, but reaches \
(ρA + ρB)/2 per stream only with ρB = 25 Mbit/s; with 50 Mbit/s it needs more than 288 \
KiB (usrsctp's per-path half of σ on path B; the paper's figure 6 uses larger σ).\n\n";

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
    md.push_str(EXP3_NOTES);
}

/// Why experiment 3 differs from the paper.
const EXP3_NOTES: &str =
    "Differences, one by one (written from the development runs of 2026-11-24: the figures \
quoted in these notes are from those runs and can differ from this run's tables above):\n\n\
- **The sender fills streams by their unsent bytes here** (the paper's saturated \
sender keeps every stream supplied). Filling in turn instead (the extra curve) caps the \
association at seven times stream #0's rate on the 1 Mbit/s path C: 6.5 Mbit/s at any σ.\n\
- **Fixed + NR-SACK** matches the paper: about 19.5 Mbit/s (our ceiling for 21 Mbit/s \
of links) from σ=128 KiB at 43 ms mean delay (paper: about 20 Mbit/s at about 60 ms). \
Stream #0 alone, on path C, waits hundreds of ms: the mean is over all messages. At 256 \
KiB the windows overflow the 100-packet queues of paths B and C (drops table) and the \
rate falls.\n\
- **Fixed without NR-SACK** is worse than in the paper (about 2.8 Mbit/s against slightly \
above 5 up to 192 KiB): without non-renegable acknowledgements usrsctp frees the send \
buffer only up to the cumulative TSN, which path C's slow chunks hold back, so the \
buffer fills with data already received; at 256 KiB it reached about 8 Mbit/s.\n\
- **RR** is better than in the paper (about 5-9.5 Mbit/s at 130-350 ms against below 3 \
Mbit/s above 600 ms): usrsctp's buffer splitting limits what path C (1 Mbit/s, 100 ms \
RTT) may hold to a third of σ, so fewer chunks wait behind path C than in the paper's \
model. As in the paper, NR-SACK changes RR little.\n\n";
