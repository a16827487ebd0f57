//! The experiments: each runs taps and the raw baseline in the same run, interleaved
//! (every repetition runs every variant once, in the same order: ABAB...), and keeps
//! every sample so that ratios are medians of per-repetition ratios.

#![forbid(unsafe_code)]

mod connect;
mod connect_cli;
mod he;
mod he_variant;
mod http;
mod http3;
mod lab;
mod multipath;
mod runner;
mod sctp_speed;
mod secure;
mod summary;
mod transfer;
mod variant;

pub use crate::worker::Proto;
pub use connect::{ConnectPoint, ConnectRatios, ConnectSide};
pub use connect_cli::{CliPoint, CliSide, TokioSide, TAPS_PROPS, TOKIO_CLIENT};
pub use he::HePoint;
pub use he_variant::HeVariant;
pub use http::HttpPoint;
pub use http3::{H3Point, H3Results, H3Variant, HEAD_START_ENV};
pub use lab::{FirstContact, LabResults, LossTimes, PATH_1500};
pub use multipath::{
    read_multipath, run_multipath, LinkSpec, MultipathPoint, MultipathResults, Pinning, Timing,
    FILTER_ENV as MULTIPATH_FILTER_ENV, REPLOT_ENV as MULTIPATH_REPLOT_ENV,
};
pub use runner::Crash;
pub use sctp_speed::{SpeedPoint, LOOPBACK};
pub use secure::{SecurePoint, SecureVariant};
pub use summary::{Faults, Summary};
pub use transfer::{TransferPoint, TransferRatios, TransferSide};

pub(crate) use connect::{connect_flows, run_connect};
pub(crate) use connect_cli::{cli_flows, run_connect_cli};
pub(crate) use he::race_variants_at;
pub(crate) use he::run_he;
pub(crate) use http::run_http;
pub(crate) use http3::run_http3;
pub(crate) use lab::{run_path_speed, run_scenarios};
pub(crate) use multipath::{PATH_A, SEND_SPLIT_ONLY};
pub(crate) use runner::Progress;
pub(crate) use sctp_speed::run_sctp_speed;
pub(crate) use secure::run_secure;
pub(crate) use summary::{pairwise, Failures};
pub(crate) use transfer::run_transfer;

/// What to run and how much of it.
#[derive(Debug, Clone)]
pub struct Config {
    /// The reduced matrix (CI): fewer points, repetitions and connections.
    pub quick: bool,
    /// Repetitions per point (default 7, quick 2; transfers use twice as many, HTTP at
    /// most 3).
    pub reps: Option<usize>,
    /// Flow counts of the connection-establishment experiment (default 1, 2, 4 … 256).
    pub flows: Option<Vec<usize>>,
    /// Protocols of experiments 1 and 2 (3 and 4 race TCP against SCTP whatever this
    /// says). Default TCP.
    pub protocols: Vec<Proto>,
    /// Print a progress line on stderr.
    pub progress: bool,
    /// The `taps` command the whole-process comparison (`connect-cli`) measures; without
    /// it that comparison cannot run (`taps-bench` passes the `taps` beside it).
    pub cli: Option<std::path::PathBuf>,
    /// The plain tokio client ([`TOKIO_CLIENT`]) the whole-process comparison runs beside
    /// `taps` and C; without it that comparison runs taps and C only.
    pub tokio_client: Option<std::path::PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            quick: false,
            reps: None,
            flows: None,
            protocols: vec![Proto::Tcp],
            progress: true,
            cli: None,
            tokio_client: None,
        }
    }
}

impl Config {
    pub(crate) fn reps(&self) -> usize {
        self.reps.unwrap_or(if self.quick { 2 } else { 7 }).max(1)
    }
}

/// `1 kB`, `10 MB`, ... (decimal, as the issue names the sizes).
pub(crate) fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1_000_000 && b % 1_000_000 == 0 => format!("{} MB", b / 1_000_000),
        b if b >= 1_000 && b % 1_000 == 0 => format!("{} kB", b / 1_000),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b / 1024),
        b => format!("{b} B"),
    }
}

/// Which experiments to plan trials for.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Selection {
    /// Experiment 1.
    pub(crate) connect: bool,
    /// Experiment 2.
    pub(crate) transfer: bool,
    /// Experiment 3.
    pub(crate) he: bool,
    /// Experiment 4.
    pub(crate) http: bool,
    /// The HTTP/3 experiment (client CPU per request against caddy).
    pub(crate) http3: bool,
    /// The secure experiment (the TLS variant of 3).
    pub(crate) secure: bool,
    /// The whole-process comparison of the `taps` command with a C epoll client.
    pub(crate) connect_cli: bool,
    /// The experiments in network namespaces (`taps-bench lab`).
    pub(crate) lab: bool,
}

/// How many trials the experiments will run (for the progress line).
pub(crate) fn planned_trials(cfg: &Config, sel: Selection) -> usize {
    let mut n = 0;
    for &proto in &cfg.protocols {
        if sel.connect {
            n += connect::connect_trials(cfg, proto);
        }
        if sel.transfer {
            n += transfer::transfer_trials(cfg, proto);
        }
    }
    if sel.transfer {
        n += sctp_speed::sctp_speed_trials(cfg);
    }
    if sel.he {
        n += he::he_trials(cfg);
    }
    if sel.http {
        n += http::http_trials(cfg);
    }
    if sel.http3 {
        n += http3::http3_trials(cfg);
    }
    if sel.secure {
        n += secure::secure_trials(cfg);
    }
    if sel.connect_cli {
        n += connect_cli::connect_cli_trials(cfg);
    }
    if sel.lab {
        n += lab::lab_trials(cfg);
    }
    n
}
