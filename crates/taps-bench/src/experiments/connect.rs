//! Experiment 1, connection establishment: N flows at once, from context creation to
//! the last connected.

#![forbid(unsafe_code)]

use serde::Serialize;

use super::runner::{run_trial, Progress};
use super::summary::{faults, pairwise, summarize, Failures, Faults, Summary};
use super::variant::Variant;
use super::Config;
use crate::measure::{self, median, ratio};
use crate::process::{Expect, Launcher, Server, Trial};
use crate::worker::phases::{self, CONTEXT_END, CONTEXT_START};
use crate::worker::{ClientSpec, Impl, Listen, Proto, ServeMode, ServerSpec};

/// One implementation at one flow count.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConnectSide {
    /// Client CPU (user+sys) from context creation to the last flow connected, µs.
    pub client_cpu_us: Summary,
    /// Server CPU from the client's start to the last flow accepted, µs.
    pub server_cpu_us: Summary,
    /// Client RSS growth over the window, KiB.
    pub rss_growth_kib: Summary,
    /// The anonymous part of it (heap, stacks; without code pages faulted in), KiB.
    pub anon_growth_kib: Summary,
    /// Server RSS growth over the window, KiB.
    pub server_rss_growth_kib: Summary,
    /// Window wall time, µs.
    pub elapsed_us: Summary,
    /// Median per-flow connect delay (call to connected), µs.
    pub delay_median_us: Summary,
    /// Largest per-flow connect delay, µs.
    pub delay_max_us: Summary,
    /// Connection attempts (handshakes) per flow: 1, or about 1/N with flow mapping.
    pub attempts_per_flow: Summary,
    /// Flows that failed (all repetitions).
    pub failed: usize,
    /// The first failure.
    pub first_error: Option<String>,
    /// Trials in which the server did not see every flow the client connected in time.
    #[serde(default)]
    pub server_timeouts: usize,
}

impl Failures for ConnectSide {
    fn faults(&self) -> Faults {
        Faults {
            failed: self.failed,
            first_error: self.first_error.clone(),
            server_timeouts: self.server_timeouts,
            short_transfers: 0,
        }
    }
}

/// One taps variant against raw at one flow count (medians of per-repetition figures).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConnectRatios {
    /// Client CPU taps/raw.
    pub client_cpu_ratio: f64,
    /// Server CPU taps/raw.
    pub server_cpu_ratio: f64,
    /// (taps RSS growth − raw RSS growth) / flows, KiB.
    pub rss_extra_per_flow_kib: f64,
    /// taps − raw median per-flow delay, ms.
    pub delay_median_diff_ms: f64,
    /// taps − raw largest per-flow delay, ms.
    pub delay_max_diff_ms: f64,
}

impl ConnectRatios {
    /// `taps` against `raw` at `flows` flows.
    fn of(taps: &ConnectSide, raw: &ConnectSide, flows: usize) -> ConnectRatios {
        ConnectRatios {
            client_cpu_ratio: pairwise(&taps.client_cpu_us, &raw.client_cpu_us, ratio),
            server_cpu_ratio: pairwise(&taps.server_cpu_us, &raw.server_cpu_us, ratio),
            rss_extra_per_flow_kib: pairwise(&taps.rss_growth_kib, &raw.rss_growth_kib, |a, b| {
                (a - b) / flows as f64
            }),
            delay_median_diff_ms: pairwise(&taps.delay_median_us, &raw.delay_median_us, |a, b| {
                (a - b) / 1e3
            }),
            delay_max_diff_ms: pairwise(&taps.delay_max_us, &raw.delay_max_us, |a, b| {
                (a - b) / 1e3
            }),
        }
    }
}

/// taps against raw at one flow count; comparisons are medians over repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct ConnectPoint {
    /// Protocol.
    pub protocol: Proto,
    /// Concurrent flows.
    pub flows: usize,
    /// taps (over SCTP: flow mapping off, one association per flow, like raw).
    pub taps: ConnectSide,
    /// Raw tokio (TCP) or raw usrsctp (SCTP).
    pub raw: ConnectSide,
    /// Client CPU taps/raw.
    pub client_cpu_ratio: f64,
    /// Server CPU taps/raw.
    pub server_cpu_ratio: f64,
    /// (taps RSS growth − raw RSS growth) / flows, KiB.
    pub rss_extra_per_flow_kib: f64,
    /// taps − raw median per-flow delay, ms.
    pub delay_median_diff_ms: f64,
    /// taps − raw largest per-flow delay, ms.
    pub delay_max_diff_ms: f64,
    /// SCTP only: taps with flow mapping on (every flow a stream of one association).
    pub taps_mapped: Option<ConnectSide>,
    /// SCTP only: taps with flow mapping on against raw.
    pub mapped_vs_raw: Option<ConnectRatios>,
    /// TCP only: the raw client against a taps `Listener` (its server figures are the
    /// listener's; the client's are raw's).
    pub taps_listener: Option<ConnectSide>,
    /// TCP only: server CPU, a taps `Listener` against a tokio `TcpListener`, both
    /// serving the raw client (median of per-repetition ratios).
    pub listener_server_cpu_ratio: Option<f64>,
}

/// The summary of one side's trials.
fn connect_side(trials: &[Trial]) -> ConnectSide {
    let f = faults(trials);
    ConnectSide {
        client_cpu_us: summarize(trials, |t| t.client.cpu.total_us() as f64),
        server_cpu_us: summarize(trials, |t| t.server_cpu_us as f64),
        rss_growth_kib: summarize(trials, |t| {
            t.client.rss_after_kib as f64 - t.client.rss_before_kib as f64
        }),
        anon_growth_kib: summarize(trials, |t| {
            t.client.anon_after_kib as f64 - t.client.anon_before_kib as f64
        }),
        server_rss_growth_kib: summarize(trials, |t| t.server_rss_growth_kib as f64),
        elapsed_us: summarize(trials, |t| t.client.elapsed_us as f64),
        delay_median_us: summarize(trials, |t| median(&t.client.delays_us)),
        delay_max_us: summarize(trials, |t| measure::max(&t.client.delays_us)),
        attempts_per_flow: summarize(trials, |t| {
            t.client.attempts as f64 / t.client.ok.max(1) as f64
        }),
        failed: f.failed,
        first_error: f.first_error,
        server_timeouts: f.server_timeouts,
    }
}

/// The flow counts of experiment 1.
pub(crate) fn connect_flows(cfg: &Config) -> Vec<usize> {
    cfg.flows.clone().unwrap_or_else(|| {
        if cfg.quick {
            vec![1, 16, 64]
        } else {
            (0..=8).map(|i| 1 << i).collect()
        }
    })
}

/// The trials of experiment 1 over `proto`.
pub(super) fn connect_trials(cfg: &Config, proto: Proto) -> usize {
    connect_flows(cfg).len() * cfg.reps() * Variant::connect(proto).len()
}

/// Experiment 1 over `proto`: N flows at once, from context creation to the last
/// connected. A fresh server per trial (so its RSS growth is visible), client and server
/// of the same implementation (the mapped taps client talks to a taps server).
pub(crate) fn run_connect(
    cfg: &Config,
    proto: Proto,
    launcher: &Launcher,
    progress: &mut Progress,
) -> Result<Vec<ConnectPoint>, String> {
    let variants = Variant::connect(proto);
    let mut points = Vec::new();
    for n in connect_flows(cfg) {
        let mut by_variant: Vec<Vec<Trial>> = vec![Vec::new(); variants.len()];
        for rep in 0..cfg.reps() {
            for (i, v) in variants.iter().enumerate() {
                progress.step(&format!(
                    "connect {proto} {n} flows {v:?} rep {}/{}",
                    rep + 1,
                    cfg.reps()
                ));
                let spec = ServerSpec {
                    imp: v.server_imp(),
                    mode: ServeMode::Sink,
                    dual: false,
                    listen: Listen::only(proto),
                    secure: None,
                };
                let mut server = Server::start(launcher, spec)?;
                let client = ClientSpec::Connect {
                    target: v.target(proto, &server),
                    flows: n,
                };
                let none = Expect {
                    accepted: 0,
                    closed: 0,
                };
                let t = run_trial(progress, launcher, &mut server, &client, none, |r| Expect {
                    accepted: r.ok as u64,
                    closed: 0,
                })?;
                if v.client_imp() == Impl::Taps {
                    // Fair only if taps pays its context in the window, as raw pays its
                    // first socket there.
                    phases::window_covers(&t.client.phases, CONTEXT_START, CONTEXT_END)
                        .map_err(|e| format!("connect {proto} {n} flows {v:?}: {e}"))?;
                }
                by_variant[i].push(t);
            }
        }
        let side = |want: Variant| {
            let i = variants.iter().position(|v| *v == want)?;
            Some(connect_side(&by_variant[i]))
        };
        let (Some(taps), Some(raw)) = (side(Variant::Taps), side(Variant::Raw)) else {
            return Err("experiment 1 runs taps and raw".into());
        };
        let r = ConnectRatios::of(&taps, &raw, n);
        let mapped = side(Variant::TapsMapped);
        let listener = side(Variant::TapsListener);
        points.push(ConnectPoint {
            protocol: proto,
            flows: n,
            client_cpu_ratio: r.client_cpu_ratio,
            server_cpu_ratio: r.server_cpu_ratio,
            rss_extra_per_flow_kib: r.rss_extra_per_flow_kib,
            delay_median_diff_ms: r.delay_median_diff_ms,
            delay_max_diff_ms: r.delay_max_diff_ms,
            mapped_vs_raw: mapped.as_ref().map(|m| ConnectRatios::of(m, &raw, n)),
            taps_mapped: mapped,
            listener_server_cpu_ratio: listener
                .as_ref()
                .map(|l| pairwise(&l.server_cpu_us, &raw.server_cpu_us, ratio)),
            taps_listener: listener,
            taps,
            raw,
        });
    }
    Ok(points)
}
