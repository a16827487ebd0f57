//! The benchmark issue's goals, evaluated on whatever points a run measured.

#![forbid(unsafe_code)]

use serde::Serialize;

use crate::experiments::{human_bytes, ConnectPoint, HeVariant, Proto, TransferPoint};
use crate::measure;
use crate::Results;

/// A goal of the benchmark issue and whether it is met.
#[derive(Debug, Clone, Serialize)]
pub struct Goal {
    /// What is measured.
    pub name: String,
    /// The target, in words.
    pub target: String,
    /// The measured value, in words.
    pub measured: String,
    /// The measured value.
    pub value: f64,
    /// The limit.
    pub limit: f64,
    /// Whether it is met.
    pub met: bool,
}

/// Evaluates the goals on whatever points were measured.
pub(crate) fn goals(r: &Results) -> Vec<Goal> {
    let mut g = Vec::new();
    connect_goals(r, &mut g);
    transfer_goals(r, &mut g);
    race_goals(r, &mut g);
    g
}

/// The connection-establishment goals, at the largest TCP flow count.
fn connect_goals(r: &Results, g: &mut Vec<Goal>) {
    let tcp: Vec<&ConnectPoint> = r
        .connect
        .iter()
        .filter(|p| p.protocol == Proto::Tcp)
        .collect();
    let Some(p) = tcp.iter().max_by_key(|p| p.flows) else {
        return;
    };
    let n = p.flows;
    // Per-flow (marginal) figures, without the one-time context cost: the slope
    // between the smallest and the largest flow count.
    let marginal = tcp
        .iter()
        .min_by_key(|q| q.flows)
        .filter(|q| q.flows < n)
        .map(|q| {
            let d = (n - q.flows) as f64;
            let cpu = measure::ratio(
                p.taps.client_cpu_us.median - q.taps.client_cpu_us.median,
                p.raw.client_cpu_us.median - q.raw.client_cpu_us.median,
            );
            let rss = ((p.taps.rss_growth_kib.median - q.taps.rss_growth_kib.median)
                - (p.raw.rss_growth_kib.median - q.raw.rss_growth_kib.median))
                / d;
            let fixed_cpu = (q.taps.client_cpu_us.median - q.raw.client_cpu_us.median) / 1e3;
            let fixed_rss = q.taps.rss_growth_kib.median - q.raw.rss_growth_kib.median;
            (q.flows, cpu, rss, fixed_cpu, fixed_rss)
        });
    g.push(Goal {
        name: format!("client CPU, {n} TCP flows"),
        target: "≤ 1.15 × raw".into(),
        measured: format!(
            "{:.2} × raw ({:.2} ms vs {:.2} ms){}",
            p.client_cpu_ratio,
            p.taps.client_cpu_us.median / 1e3,
            p.raw.client_cpu_us.median / 1e3,
            marginal.map_or(String::new(), |(f, cpu, _, fixed, _)| format!(
                "; per added flow (slope from {f} flow(s)) {cpu:.2} × raw; \
                 one-time extra at {f} flow(s) {fixed:.2} ms"
            ))
        ),
        value: p.client_cpu_ratio,
        limit: 1.15,
        met: p.client_cpu_ratio <= 1.15,
    });
    g.push(Goal {
        name: format!("client RSS growth per flow above raw, {n} TCP flows"),
        target: "≤ 2 KiB".into(),
        measured: format!(
            "{:+.2} KiB/flow (taps {:.0} KiB, raw {:.0} KiB in total; of it anonymous \
             memory, i.e. heap and stacks, {:+.2} KiB/flow, the rest code pages faulted in \
             on first use){}",
            p.rss_extra_per_flow_kib,
            p.taps.rss_growth_kib.median,
            p.raw.rss_growth_kib.median,
            (p.taps.anon_growth_kib.median - p.raw.anon_growth_kib.median) / n as f64,
            marginal.map_or(String::new(), |(f, _, rss, _, fixed)| format!(
                "; per added flow {rss:+.2} KiB; one-time extra at {f} flow(s) {fixed:.0} KiB"
            ))
        ),
        value: p.rss_extra_per_flow_kib,
        limit: 2.0,
        met: p.rss_extra_per_flow_kib <= 2.0,
    });
    g.push(Goal {
        name: format!("median per-flow connect delay, {n} TCP flows"),
        target: "within 0.1 ms of raw".into(),
        measured: format!(
            "{:+.3} ms ({:.3} ms vs {:.3} ms)",
            p.delay_median_diff_ms,
            p.taps.delay_median_us.median / 1e3,
            p.raw.delay_median_us.median / 1e3
        ),
        value: p.delay_median_diff_ms,
        limit: 0.1,
        met: p.delay_median_diff_ms <= 0.1,
    });
}

/// The transfer goal at the largest size, per protocol: the CPU of the whole transfer
/// (sender + receiver, every flow count pooled) against raw. On loopback the kernel
/// charges packet processing to whichever side happens to run, so a side alone swings by
/// several per cent from run to run while the sum does not; the per-flow-count totals
/// and each side's figures are listed with it.
fn transfer_goals(r: &Results, g: &mut Vec<Goal>) {
    let Some(max_bytes) = r.transfer.iter().map(|p| p.bytes).max() else {
        return;
    };
    let mut protocols: Vec<Proto> = Vec::new();
    for p in &r.transfer {
        if !protocols.contains(&p.protocol) {
            protocols.push(p.protocol);
        }
    }
    for proto in protocols {
        let points: Vec<&TransferPoint> = r
            .transfer
            .iter()
            .filter(|p| p.bytes == max_bytes && p.protocol == proto)
            .collect();
        let pooled = measure::ratio(
            points.iter().map(|p| p.taps.total_cpu_us.median).sum(),
            points.iter().map(|p| p.raw.total_cpu_us.median).sum(),
        );
        let list = |f: &dyn Fn(&TransferPoint) -> f64| -> String {
            points
                .iter()
                .map(|p| format!("{} flow(s) {:.3}", p.flows, f(p)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        g.push(Goal {
            name: format!(
                "transfer CPU (sender + receiver), {} per flow, {proto}",
                human_bytes(max_bytes)
            ),
            target: "≤ 1.05 × raw".into(),
            measured: format!(
                "{pooled:.3} × raw over all flow counts (totals {}; sender {}; receiver {})",
                list(&|p| p.total_cpu_ratio),
                list(&|p| p.sender_cpu_ratio),
                list(&|p| p.receiver_cpu_ratio),
            ),
            value: pooled,
            limit: 1.05,
            met: pooled <= 1.05,
        });
    }
}

/// The race goal at 80 % cache hits, for every race variant measured there.
fn race_goals(r: &Results, g: &mut Vec<Goal>) {
    for variant in [
        HeVariant::RaceSctpDead,
        HeVariant::RaceBothAlive,
        HeVariant::RaceV6Dead,
    ] {
        let Some(p) =
            r.he.iter()
                .find(|p| p.variant == variant && p.hit_percent == Some(80))
        else {
            continue;
        };
        let single = r.he.iter().find(|s| s.variant == p.single);
        g.push(Goal {
            name: format!("{} at 80% cache hits, client CPU", variant.label()),
            target: "≤ 1.2 × single-protocol connect".into(),
            measured: format!(
                "{:.2} × {} ({:.2} × raw); {:.1} µs vs {:.1} µs per connection; \
                 {:.2} attempts/conn",
                p.client_vs_single,
                p.single.label(),
                p.client_vs_raw,
                p.client_cpu_per_conn_us.median,
                single.map_or(0.0, |s| s.client_cpu_per_conn_us.median),
                p.attempts_per_conn.median,
            ),
            value: p.client_vs_single,
            limit: 1.2,
            met: p.client_vs_single <= 1.2,
        });
    }
}
