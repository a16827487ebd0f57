//! The prose of the multipath report's experiment 2 (bandwidth dissimilarity): the
//! paper's numbers beside ours, computed from the run.

#![forbid(unsafe_code)]

use std::fmt::Write as _;

use super::multipath_stats::{Group, Groups};
use super::multipath_text::{full_rate, per_srtt};
use crate::experiments::{PATH_A, SEND_SPLIT_ONLY};

/// Experiment 2: stream #1 with and without filling by queue.
pub(crate) fn exp2(md: &mut String, g: &Groups<'_>) {
    let s = g.sigmas(2).last().copied().unwrap_or(0);
    md.push_str(
        "| at the largest σ | paper | ours: stream #0 / stream #1 (sum), Mbit/s | ours, send buffer split only |\n|---|---|---|---|\n",
    );
    let show = |series: &str, sigma: u32| {
        g.at(2, series, sigma).map_or("–".into(), |p| {
            format!(
                "{} / {} ({})",
                p.stream(0, false),
                p.stream(1, false),
                p.mbit
            )
        })
    };
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
            let _ = writeln!(
                md,
                "| {series}, σ={s} KiB | {paper} | {} | {} |",
                show(&series, s),
                show(&format!("{series}{SEND_SPLIT_ONLY}"), s)
            );
        }
    }
    md.push('\n');
    // Payload per Mbit/s of link: our full rate over the 20 Mbit/s of experiment 1.
    let eff = full_rate(g) / 20.0;
    let low = g.sigmas(2).first().copied().unwrap_or(0);
    let rr_stream = |rb: u32| {
        g.at(2, &format!("RR, ρB={rb} Mbit/s"), s)
            .map_or("–".into(), |p| {
                format!("{} and {}", p.stream(0, false), p.stream(1, false))
            })
    };
    let _ = writeln!(
        md,
        "Differences and agreements, one by one (figures from this run):\n\n\
- **Fixed without the queue information** reproduces the paper: the application hands \
over one message per stream in turn, each send waits for buffer space, so stream #1 gets \
no more than stream #0: {} at ρB=25 and {} at ρB=50 Mbit/s (σ={s} KiB).\n\
- **Fixed filling by unsent bytes** (`Association::unsent_bytes`, read by the multihoming \
shim from usrsctp's stream and send queues: the paper's sender queue info) lets stream #1 \
use path B: at σ={s} KiB {} at ρB=25 (ceiling {:.1}) and {} at ρB=50 (ceiling {:.1}), the \
ceilings being ρA + ρB times this run's payload share of the link rate ({eff:.3}, from \
experiment 1). At σ={low} KiB the window, not the rate, limits stream #1: {} and {}.\n\
- **RR** splits the rate equally between the streams, as in the paper: per stream {} at \
ρB=25 (half the ceiling: {:.1}) and {} at ρB=50 ({:.1}); with 50 Mbit/s it needs more than \
{s} KiB (usrsctp gives path B its share of σ; the paper's figure 6 uses larger σ).\n",
        show("Fixed, ρB=25 Mbit/s", s),
        show("Fixed, ρB=50 Mbit/s", s),
        show("Fixed + fill by queue, ρB=25 Mbit/s", s),
        35.0 * eff,
        show("Fixed + fill by queue, ρB=50 Mbit/s", s),
        60.0 * eff,
        show("Fixed + fill by queue, ρB=25 Mbit/s", low),
        show("Fixed + fill by queue, ρB=50 Mbit/s", low),
        rr_stream(25),
        17.5 * eff,
        rr_stream(50),
        30.0 * eff,
    );
    rr_send_split_only(md, g, s);
}

/// Experiment 2's RR at σ = `s` with only the send buffer split: path A's flight, its
/// smoothed RTT against the run with both split, and the rate σ per path A's RTT allows.
fn rr_send_split_only(md: &mut String, g: &Groups<'_>, s: u32) {
    let mut parts = Vec::new();
    for rb in [25, 50] {
        let both = format!("RR, ρB={rb} Mbit/s");
        let Some(p) = g.at(2, &format!("{both}{SEND_SPLIT_ONLY}"), s) else {
            return;
        };
        let end_a = |p: &Group<'_>| p.end_paths.first().map(|(c, r)| (c.mean, r.mean));
        let Some((cwnd_a, srtt_a)) = end_a(p) else {
            return;
        };
        let srtt_both = g
            .at(2, &both, s)
            .and_then(end_a)
            .map_or("–".into(), |(_, r)| format!("{r:.0}"));
        parts.push(format!(
            "at ρB={rb} Mbit/s {} in all, path A ending with a window of {:.0} KB and a \
smoothed RTT of {srtt_a:.0} ms (both split: {srtt_both} ms), so σ/srtt_A is {:.1} Mbit/s",
            p.mbit,
            cwnd_a / 1e3,
            per_srtt(p, f64::from(s) * 1024.0, 0),
        ));
    }
    let _ = writeln!(
        md,
        "- **RR with the send buffer split alone** goes no faster than the slow path allows: \
{}. The split lets path A, the slow one, keep σ/2 in flight ({:.0} KB at σ={s} KiB) \
against a bandwidth-delay product of {:.0} KB, so its queue fills; every stream has \
chunks on path A, the data sent on path B waits at the receiver for them (held, not \
freed, until delivered), and the association moves about σ per path A's RTT. With the \
receive window split too, usrsctp caps each path at its share of the peer's advertised \
window (`peers_rwnd + total_flight`, sctp_output.c), which the chunks held out of order \
shrink, so path A's queue stays short. The paper's simulator, INET, run the same way, \
does the same under either setting (docs/bench/multipath-inet.md): the paper's figure 6 \
is what both give with the receive window split too.\n",
        parts.join("; "),
        f64::from(s) * 512.0 / 1e3,
        PATH_A.mbit * 1e6 / 8.0 * (2 * PATH_A.delay_ms) as f64 / 1e3 / 1e3,
    );
}
