//! Experiment 2, data transfer: flows connected before the window; in it each sends its
//! bytes and waits for the receiver to close.

#![forbid(unsafe_code)]

use serde::Serialize;

use super::runner::{run_trial, Progress};
use super::summary::{faults, pairwise, summarize, Failures, Faults, Summary};
use super::variant::Variant;
use super::{human_bytes, Config};
use crate::measure::ratio;
use crate::process::{Expect, Launcher, Server, Trial};
use crate::worker::{ClientSpec, Impl, Listen, Proto, ServeMode, ServerSpec};

/// One implementation at one size and flow count.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TransferSide {
    /// Sender (client) CPU over the transfer, µs.
    pub sender_cpu_us: Summary,
    /// Receiver (server) CPU over the transfer, µs.
    pub receiver_cpu_us: Summary,
    /// Sender + receiver CPU, µs.
    pub total_cpu_us: Summary,
    /// Transfer wall time, µs.
    pub elapsed_us: Summary,
    /// Flows that failed.
    pub failed: usize,
    /// The first failure.
    pub first_error: Option<String>,
    /// Trials in which the server did not see every flow connect or close in time.
    #[serde(default)]
    pub server_timeouts: usize,
    /// Trials in which the server received other than flows × bytes in the window.
    #[serde(default)]
    pub short_transfers: usize,
}

impl Failures for TransferSide {
    fn faults(&self) -> Faults {
        Faults {
            failed: self.failed,
            first_error: self.first_error.clone(),
            server_timeouts: self.server_timeouts,
            short_transfers: self.short_transfers,
        }
    }
}

/// One taps variant against raw at one size and flow count.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TransferRatios {
    /// Sender CPU taps/raw.
    pub sender_cpu_ratio: f64,
    /// Receiver CPU taps/raw.
    pub receiver_cpu_ratio: f64,
    /// Sender + receiver CPU taps/raw.
    pub total_cpu_ratio: f64,
}

impl TransferRatios {
    /// `taps` against `raw`.
    fn of(taps: &TransferSide, raw: &TransferSide) -> TransferRatios {
        TransferRatios {
            sender_cpu_ratio: pairwise(&taps.sender_cpu_us, &raw.sender_cpu_us, ratio),
            receiver_cpu_ratio: pairwise(&taps.receiver_cpu_us, &raw.receiver_cpu_us, ratio),
            total_cpu_ratio: pairwise(&taps.total_cpu_us, &raw.total_cpu_us, ratio),
        }
    }
}

/// taps against raw at one object size and flow count.
#[derive(Debug, Clone, Serialize)]
pub struct TransferPoint {
    /// Protocol.
    pub protocol: Proto,
    /// Bytes per flow.
    pub bytes: u64,
    /// Concurrent flows.
    pub flows: usize,
    /// taps (over SCTP: flow mapping off, one association per flow, like raw).
    pub taps: TransferSide,
    /// Raw tokio (TCP) or raw usrsctp (SCTP).
    pub raw: TransferSide,
    /// Sender CPU taps/raw.
    pub sender_cpu_ratio: f64,
    /// Receiver CPU taps/raw.
    pub receiver_cpu_ratio: f64,
    /// Sender + receiver CPU taps/raw (the steadiest figure: on loopback, which side's
    /// CPU the kernel charges the packet processing to varies from run to run).
    pub total_cpu_ratio: f64,
    /// SCTP only: taps with flow mapping on (the flows are streams of one association).
    pub taps_mapped: Option<TransferSide>,
    /// SCTP only: taps with flow mapping on against raw.
    pub mapped_vs_raw: Option<TransferRatios>,
}

/// Sizes and flow counts of experiment 2.
fn transfer_matrix(cfg: &Config) -> (Vec<u64>, Vec<usize>) {
    if cfg.quick {
        (vec![1_000, 1_000_000], vec![1, 2])
    } else {
        (
            vec![1_000, 10_000, 100_000, 1_000_000, 10_000_000],
            vec![1, 2, 4, 8],
        )
    }
}

/// The trials of experiment 2 over `proto`.
pub(super) fn transfer_trials(cfg: &Config, proto: Proto) -> usize {
    let (s, f) = transfer_matrix(cfg);
    s.len() * f.len() * transfer_reps(cfg) * Variant::all(proto).len()
}

/// Transfers are short and their CPU split between the sides is noisy: twice the
/// repetitions.
fn transfer_reps(cfg: &Config) -> usize {
    cfg.reps() * 2
}

/// One side's figures over `trials` whose server should have received `expected` bytes
/// in each.
pub(super) fn transfer_side(trials: &[Trial], expected: u64) -> TransferSide {
    let f = faults(trials);
    TransferSide {
        sender_cpu_us: summarize(trials, |t| t.client.cpu.total_us() as f64),
        receiver_cpu_us: summarize(trials, |t| t.server_cpu_us as f64),
        total_cpu_us: summarize(trials, |t| {
            (t.client.cpu.total_us() + t.server_cpu_us) as f64
        }),
        elapsed_us: summarize(trials, |t| t.client.elapsed_us as f64),
        failed: f.failed,
        first_error: f.first_error,
        server_timeouts: f.server_timeouts,
        short_transfers: trials.iter().filter(|t| t.server_bytes != expected).count(),
    }
}

/// Experiment 2 over `proto`: flows connected before the window; in it each sends its
/// bytes, closes and waits for the receiver (the server) to close after reading
/// everything.
pub(crate) fn run_transfer(
    cfg: &Config,
    proto: Proto,
    launcher: &Launcher,
    progress: &mut Progress,
) -> Result<Vec<TransferPoint>, String> {
    let spec = |imp| ServerSpec {
        imp,
        mode: ServeMode::Sink,
        dual: false,
        listen: Listen::only(proto),
        secure: None,
    };
    let mut servers = [
        Server::start(launcher, spec(Impl::Taps))?,
        Server::start(launcher, spec(Impl::Raw))?,
    ];
    let variants = Variant::all(proto);
    let (sizes, flow_counts) = transfer_matrix(cfg);
    let mut points = Vec::new();
    for &bytes in &sizes {
        for &flows in &flow_counts {
            let mut by_variant: Vec<Vec<Trial>> = vec![Vec::new(); variants.len()];
            for rep in 0..transfer_reps(cfg) {
                for (i, v) in variants.iter().enumerate() {
                    progress.step(&format!(
                        "transfer {proto} {} x {flows} {v:?} rep {}/{}",
                        human_bytes(bytes),
                        rep + 1,
                        transfer_reps(cfg)
                    ));
                    let server = &mut servers[usize::from(v.server_imp() == Impl::Raw)];
                    let client = ClientSpec::Transfer {
                        target: v.target(proto, server),
                        flows,
                        bytes,
                    };
                    let setup = Expect {
                        accepted: flows as u64,
                        closed: 0,
                    };
                    let t = run_trial(progress, launcher, server, &client, setup, |r| Expect {
                        accepted: 0,
                        closed: r.ok as u64,
                    })?;
                    by_variant[i].push(t);
                }
            }
            let expected = flows as u64 * bytes;
            let side = |trials: &[Trial]| transfer_side(trials, expected);
            let (taps, raw) = (side(&by_variant[0]), side(&by_variant[1]));
            let r = TransferRatios::of(&taps, &raw);
            let mapped = by_variant.get(2).map(|t| side(t));
            points.push(TransferPoint {
                protocol: proto,
                bytes,
                flows,
                sender_cpu_ratio: r.sender_cpu_ratio,
                receiver_cpu_ratio: r.receiver_cpu_ratio,
                total_cpu_ratio: r.total_cpu_ratio,
                mapped_vs_raw: mapped.as_ref().map(|m| TransferRatios::of(m, &raw)),
                taps_mapped: mapped,
                taps,
                raw,
            });
        }
    }
    Ok(points)
}
