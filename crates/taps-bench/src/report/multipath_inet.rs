//! The multipath report's item on the paper's own simulator: experiment 3 in INET 4.6.0
//! (run once by hand, docs/bench/multipath-inet.md) beside ours, with the receive window
//! split among the paths and with the send buffer split alone.

#![forbid(unsafe_code)]

use std::fmt::Write as _;

use super::multipath_stats::{Group, Groups};
use crate::experiments::SEND_SPLIT_ONLY;

/// The σ INET was run at, KiB.
const SIGMA: u32 = 256;

/// One curve of the paper's figure 7 in INET: our series' name, the paper's number for
/// it, and INET's (Mbit/s, mean delay ms) with the buffers of both sides split and with
/// the send buffer's alone. The model is deterministic: every run gives these.
struct InetCurve {
    series: &'static str,
    paper: &'static str,
    both: (f64, f64),
    send_only: (f64, f64),
}

const CURVES: [InetCurve; 4] = [
    InetCurve {
        series: "Fixed, NR-SACK on",
        paper: "1: about 20 Mbit/s, about 60 ms",
        both: (20.23, 95.0),
        send_only: (20.23, 95.0),
    },
    InetCurve {
        series: "Fixed, NR-SACK off",
        paper: "2: slightly above 5 Mbit/s, about 150 ms",
        both: (6.49, 211.0),
        send_only: (6.49, 211.0),
    },
    InetCurve {
        series: "RR, NR-SACK on",
        paper: "3: only a small effect against curve 4",
        both: (9.20, 394.0),
        send_only: (3.56, 993.0),
    },
    InetCurve {
        series: "RR, NR-SACK off",
        paper: "4: below 3 Mbit/s, above 600 ms",
        both: (2.98, 646.0),
        send_only: (2.93, 662.0),
    },
];

/// Ours at σ: rate and delay with their intervals and the number of runs.
fn ours(p: Option<&Group<'_>>) -> String {
    p.map_or("–".into(), |p| {
        format!(
            "{} Mbit/s, {} ms (n={})",
            p.mbit,
            p.delay_ms.show(0),
            p.mbit.n
        )
    })
}

/// NR-SACK's effect on RR: the rate with it over the rate without, as a change in %.
fn gain(on: f64, off: f64) -> String {
    if on.is_finite() && off.is_finite() && off > 0.0 {
        format!("{:+.0} %", 100.0 * (on / off - 1.0))
    } else {
        "–".into()
    }
}

/// Writes the paragraph (after experiment 3's list) if the curves with the send buffer
/// split alone were run at [`SIGMA`].
pub(crate) fn paper_simulator(md: &mut String, g: &Groups<'_>) {
    let send_only = |series: &str| g.at(3, &format!("{series}{SEND_SPLIT_ONLY}"), SIGMA);
    if CURVES.iter().all(|c| send_only(c.series).is_none()) {
        return;
    }
    let _ = writeln!(
        md,
        "**The paper's own simulator, and which buffer is split.** Experiment 3 in INET \
4.6.0 with NetPerfMeter, the paper's tools, at σ={SIGMA} KiB (run once, deterministic: \
docs/bench/multipath-inet.md), beside ours. The paper says only that buffer splitting \
was on; INET meets its claims for curves 1, 3 and 4 with the send buffer split alone, \
not with the receive window split too (usrsctp's sctp_buffer_splitting 1 and 3; ours \
above ran 3); its curve 2 is the same either way. Mbit/s and mean message delay:\n"
    );
    md.push_str(
        "| curve (paper) | INET, both split | ours, both split | INET, send buffer only | ours, send buffer only |\n\
|---|---|---|---|---|\n",
    );
    for c in &CURVES {
        let _ = writeln!(
            md,
            "| {} | {:.2} Mbit/s, {:.0} ms | {} | {:.2} Mbit/s, {:.0} ms | {} |",
            c.paper,
            c.both.0,
            c.both.1,
            ours(g.at(3, c.series, SIGMA)),
            c.send_only.0,
            c.send_only.1,
            ours(send_only(c.series)),
        );
    }
    let rate = |p: Option<&Group<'_>>| p.map_or(f64::NAN, |p| p.mbit.mean);
    let [_, _, rr_on, rr_off] = &CURVES;
    let _ = writeln!(
        md,
        "\nNR-SACK's effect on RR (curve 3 against curve 4): INET {} with both split, {} \
with the send buffer alone; ours {} and {}. INET charges a path, against its share of the \
send buffer, every chunk it carried until the chunk is freed (`queuedBytes`); usrsctp \
only its flight, so a gap-acked chunk waiting for the cumulative ack no longer counts. \
With usrsctp changed to charge such chunks too and the send buffer split alone, curve 4 \
meets the paper's bound and INET's figure, while curve 2 falls to half of INET's \
(docs/bench/multipath-usrsctp-candidates.md, a separate run).\n",
        gain(rr_on.both.0, rr_off.both.0),
        gain(rr_on.send_only.0, rr_off.send_only.0),
        gain(
            rate(g.at(3, rr_on.series, SIGMA)),
            rate(g.at(3, rr_off.series, SIGMA))
        ),
        gain(
            rate(send_only(rr_on.series)),
            rate(send_only(rr_off.series))
        ),
    );
}
