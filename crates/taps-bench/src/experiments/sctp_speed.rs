//! SCTP against TCP through taps, bulk: one flow sends [`SPEED_BYTES`] to a taps listener
//! on loopback, over TCP and over SCTP (UDP-encapsulated, usrsctp) in alternating trials.
//! What a user choosing between the two protocols sees: throughput (wall time of the
//! transfer) and CPU per byte (sender + receiver), SCTP against TCP in the same run.

#![forbid(unsafe_code)]

use serde::Serialize;

use super::runner::{run_trial, Progress};
use super::summary::pairwise;
use super::transfer::transfer_side;
use super::variant::Variant;
use super::{Config, TransferSide};
use crate::measure::ratio;
use crate::process::{Expect, Launcher, Server, Trial};
use crate::worker::{ClientSpec, Impl, Listen, Proto, ServeMode, ServerSpec};

/// Bytes of the one flow (the quick matrix sends a tenth).
pub(crate) const SPEED_BYTES: u64 = 100_000_000;

/// SCTP against TCP, both through taps, one flow on one path.
#[derive(Debug, Clone, Serialize)]
pub struct SpeedPoint {
    /// The path ([`LOOPBACK`] or [`PATH_1500`](super::PATH_1500)).
    pub path: String,
    /// Bytes sent.
    pub bytes: u64,
    /// taps over TCP.
    pub tcp: TransferSide,
    /// taps over SCTP (flow mapping off: one association).
    pub sctp: TransferSide,
    /// SCTP's throughput as a fraction of TCP's: median of the per-repetition ratios of
    /// TCP's transfer time to SCTP's.
    pub throughput_ratio: f64,
    /// SCTP's CPU (sender + receiver) per byte against TCP's: median of the
    /// per-repetition ratios.
    pub cpu_ratio: f64,
}

fn speed_bytes(cfg: &Config) -> u64 {
    if cfg.quick {
        SPEED_BYTES / 10
    } else {
        SPEED_BYTES
    }
}

/// The trials of this experiment.
pub(super) fn sctp_speed_trials(cfg: &Config) -> usize {
    cfg.reps() * 2
}

/// The loopback path's name in [`SpeedPoint::path`].
pub const LOOPBACK: &str = "loopback";

/// Runs the comparison on loopback: a taps server per protocol, then per repetition one
/// TCP and one SCTP transfer, alternating.
pub(crate) fn run_sctp_speed(
    cfg: &Config,
    launcher: &Launcher,
    progress: &mut Progress,
) -> Result<Vec<SpeedPoint>, String> {
    Ok(vec![speed_on(cfg, launcher, progress, LOOPBACK)?])
}

/// The comparison over whatever path the workers `launcher` starts reach each other by
/// on 127.0.0.1 (their namespace's loopback), named `path`.
pub(crate) fn speed_on(
    cfg: &Config,
    launcher: &Launcher,
    progress: &mut Progress,
    path: &str,
) -> Result<SpeedPoint, String> {
    let protos = [Proto::Tcp, Proto::Sctp];
    let spec = |proto| ServerSpec {
        imp: Impl::Taps,
        mode: ServeMode::Sink,
        dual: false,
        listen: Listen::only(proto),
        secure: None,
    };
    let mut servers = [
        Server::start(launcher, spec(Proto::Tcp))?,
        Server::start(launcher, spec(Proto::Sctp))?,
    ];
    let bytes = speed_bytes(cfg);
    let mut trials: [Vec<Trial>; 2] = [Vec::new(), Vec::new()];
    for rep in 0..cfg.reps() {
        for (i, &proto) in protos.iter().enumerate() {
            progress.step(&format!(
                "sctp-speed {path} {proto} rep {}/{}",
                rep + 1,
                cfg.reps()
            ));
            let server = &mut servers[i];
            let client = ClientSpec::Transfer {
                target: Variant::Taps.target(proto, server),
                flows: 1,
                bytes,
            };
            let setup = Expect {
                accepted: 1,
                closed: 0,
            };
            let t = run_trial(progress, launcher, server, &client, setup, |r| Expect {
                accepted: 0,
                closed: r.ok as u64,
            })?;
            trials[i].push(t);
        }
    }
    let tcp = transfer_side(&trials[0], bytes);
    let sctp = transfer_side(&trials[1], bytes);
    Ok(SpeedPoint {
        path: path.into(),
        bytes,
        throughput_ratio: pairwise(&tcp.elapsed_us, &sctp.elapsed_us, ratio),
        cpu_ratio: pairwise(&sctp.total_cpu_us, &tcp.total_cpu_us, ratio),
        tcp,
        sctp,
    })
}
