//! The experiments: each runs taps and the raw baseline in the same run, interleaved
//! (every repetition runs every variant once, in the same order: ABAB...), and keeps
//! every sample so that ratios are medians of per-repetition ratios.

use std::time::Instant;

use serde::Serialize;

use crate::measure::{self, median, ratio};
use crate::process::{trial, Expect, Launcher, Server, Trial, WorkerError};
use crate::worker::{self, ClientKind, ClientSpec, Impl, Listen, ServeMode, ServerSpec};

pub use crate::worker::Proto;

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
}

impl Default for Config {
    fn default() -> Self {
        Config {
            quick: false,
            reps: None,
            flows: None,
            protocols: vec![Proto::Tcp],
            progress: true,
        }
    }
}

impl Config {
    fn reps(&self) -> usize {
        self.reps.unwrap_or(if self.quick { 2 } else { 7 }).max(1)
    }
}

/// A client/server implementation pair of experiments 1 and 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// taps. Over SCTP with flow mapping off: one association per flow, like raw.
    Taps,
    /// The raw baseline: tokio sockets (TCP), the usrsctp crate (SCTP).
    Raw,
    /// taps over SCTP with flow mapping on (the default): the flows are streams of one
    /// association.
    TapsMapped,
}

impl Variant {
    fn imp(self) -> Impl {
        match self {
            Variant::Raw => Impl::Raw,
            Variant::Taps | Variant::TapsMapped => Impl::Taps,
        }
    }

    /// The flow-mapping switch of the client's context.
    fn mapping(self, proto: Proto) -> bool {
        match (proto, self) {
            // Irrelevant for TCP (taps maps SCTP flows only): the default context.
            (Proto::Tcp, _) => true,
            (Proto::Sctp, v) => v == Variant::TapsMapped,
        }
    }

    /// The client's target: this variant over `proto` against `server`.
    fn target(self, proto: Proto, server: &Server) -> worker::Target {
        worker::Target {
            imp: self.imp(),
            proto,
            port: server.port,
            udp_port: server.udp_port,
            mapping: self.mapping(proto),
        }
    }

    /// The variants run for `proto`, in trial order.
    pub fn all(proto: Proto) -> &'static [Variant] {
        match proto {
            Proto::Tcp => &[Variant::Taps, Variant::Raw],
            Proto::Sctp => &[Variant::Taps, Variant::Raw, Variant::TapsMapped],
        }
    }
}

/// The spread of one metric over the repetitions.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Median.
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Every sample, in repetition order.
    pub samples: Vec<f64>,
}

impl Summary {
    /// Summarises `samples`.
    pub fn of(samples: Vec<f64>) -> Summary {
        Summary {
            median: median(&samples),
            min: if samples.is_empty() {
                0.0
            } else {
                samples.iter().copied().fold(f64::INFINITY, f64::min)
            },
            max: measure::max(&samples),
            samples,
        }
    }
}

fn pairwise(a: &Summary, b: &Summary, f: impl Fn(f64, f64) -> f64) -> f64 {
    let v: Vec<f64> = a
        .samples
        .iter()
        .zip(&b.samples)
        .map(|(x, y)| f(*x, *y))
        .collect();
    median(&v)
}

fn summarize(trials: &[Trial], f: impl Fn(&Trial) -> f64) -> Summary {
    Summary::of(trials.iter().map(f).collect())
}

fn failures(trials: &[Trial]) -> (usize, Option<String>, usize) {
    let failed = trials.iter().map(|t| t.client.failed).sum();
    let first = trials.iter().find_map(|t| t.client.first_error.clone());
    let timeouts = trials.iter().filter(|t| t.server_timed_out).count();
    (failed, first, timeouts)
}

/// A worker that died or hung during a trial: recorded in the results and the report (a
/// bug somewhere under the benchmark, never an expected outcome).
#[derive(Debug, Clone, Serialize)]
pub struct Crash {
    /// The trial (experiment, point, variant, repetition).
    pub trial: String,
    /// Exit status and the worker's last stderr lines.
    pub error: String,
    /// What happened to the trial: `retried` (the point's samples come from the retry),
    /// `kept` (the client died after reporting its result: the measurement stands) or
    /// `gave up` (the phase is reported as not measured).
    pub outcome: String,
}

/// How often a trial whose client died is run again before the phase gives up.
const CRASH_RETRIES: usize = 2;

/// Progress on stderr (`[done/total] label`, rewritten in place), and the log of worker
/// crashes seen so far.
pub struct Progress {
    enabled: bool,
    done: usize,
    total: usize,
    started: Instant,
    label: String,
    /// Workers that died.
    pub crashes: Vec<Crash>,
}

impl Progress {
    /// A progress line for `total` trials.
    pub fn new(enabled: bool, total: usize) -> Progress {
        Progress {
            enabled,
            done: 0,
            total,
            started: Instant::now(),
            label: String::new(),
            crashes: Vec::new(),
        }
    }

    fn step(&mut self, label: &str) {
        self.label = label.to_string();
        self.done += 1;
        if self.enabled {
            let width = 24;
            let filled = width * self.done.min(self.total) / self.total.max(1);
            eprint!(
                "\r[{}{}] {:>4}/{:<4} {:>5.0}s  {:<52}",
                "#".repeat(filled),
                " ".repeat(width - filled),
                self.done,
                self.total,
                self.started.elapsed().as_secs_f64(),
                label.chars().take(52).collect::<String>()
            );
        }
    }

    /// Ends the line.
    pub fn finish(&self) {
        if self.enabled {
            eprintln!();
        }
    }

    fn crash(&mut self, error: String, outcome: &str) {
        if self.enabled {
            eprintln!("\nworker crash in {}: {error} ({outcome})", self.label);
        }
        self.crashes.push(Crash {
            trial: self.label.clone(),
            error,
            outcome: outcome.to_string(),
        });
    }
}

/// One trial (see [`trial`]) with the current progress label; a client that dies or
/// hangs is recorded as a [`Crash`] and the trial run again (at most [`CRASH_RETRIES`]
/// times). Any other error names the trial.
fn measured(
    progress: &mut Progress,
    launcher: &Launcher,
    server: &mut Server,
    spec: &ClientSpec,
    setup: Expect,
    expect: impl Fn(&crate::worker::ClientResult) -> Expect,
) -> Result<Trial, String> {
    let mut tries = 0;
    loop {
        match trial(launcher, server, spec, setup, &expect) {
            Ok(t) => {
                if let Some(e) = &t.teardown_error {
                    progress.crash(e.clone(), "kept");
                }
                return Ok(t);
            }
            Err(WorkerError::Died(e)) if tries < CRASH_RETRIES => {
                tries += 1;
                progress.crash(e, "retried");
                server.resync()?;
            }
            Err(WorkerError::Died(e)) => {
                progress.crash(e.clone(), "gave up");
                return Err(format!("{}: {e}", progress.label));
            }
            Err(WorkerError::Other(e)) => return Err(format!("{}: {e}", progress.label)),
        }
    }
}

// ---------------------------------------------------------------------------------------
// 1. Connection establishment

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
}

/// What failed on one side of a point: failed flows and the first error.
pub trait Failures {
    /// Failed flows (all repetitions) and the first error.
    fn failures(&self) -> (usize, Option<String>);
}

impl Failures for ConnectSide {
    fn failures(&self) -> (usize, Option<String>) {
        (self.failed, self.first_error.clone())
    }
}

impl Failures for TransferSide {
    fn failures(&self) -> (usize, Option<String>) {
        (self.failed, self.first_error.clone())
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
}

fn connect_side(trials: &[Trial]) -> ConnectSide {
    let (failed, first_error, _) = failures(trials);
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
        failed,
        first_error,
    }
}

/// The flow counts of experiment 1.
pub fn connect_flows(cfg: &Config) -> Vec<usize> {
    cfg.flows.clone().unwrap_or_else(|| {
        if cfg.quick {
            vec![1, 16, 64]
        } else {
            (0..=8).map(|i| 1 << i).collect()
        }
    })
}

fn connect_trials(cfg: &Config, proto: Proto) -> usize {
    connect_flows(cfg).len() * cfg.reps() * Variant::all(proto).len()
}

/// Experiment 1 over `proto`: N flows at once, from context creation to the last
/// connected. A fresh server per trial (so its RSS growth is visible), client and server
/// of the same implementation (the mapped taps client talks to a taps server).
pub fn run_connect(
    cfg: &Config,
    proto: Proto,
    launcher: &Launcher,
    progress: &mut Progress,
) -> Result<Vec<ConnectPoint>, String> {
    let variants = Variant::all(proto);
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
                    imp: v.imp(),
                    mode: ServeMode::Sink,
                    dual: false,
                    listen: Listen::only(proto),
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
                let t = measured(progress, launcher, &mut server, &client, none, |r| Expect {
                    accepted: r.ok as u64,
                    closed: 0,
                })?;
                by_variant[i].push(t);
            }
        }
        let taps = connect_side(&by_variant[0]);
        let raw = connect_side(&by_variant[1]);
        let r = ConnectRatios::of(&taps, &raw, n);
        let mapped = by_variant.get(2).map(|t| connect_side(t));
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
            taps,
            raw,
        });
    }
    Ok(points)
}

// ---------------------------------------------------------------------------------------
// 2. Data transfer

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
pub fn transfer_matrix(cfg: &Config) -> (Vec<u64>, Vec<usize>) {
    if cfg.quick {
        (vec![1_000, 1_000_000], vec![1, 2])
    } else {
        (
            vec![1_000, 10_000, 100_000, 1_000_000, 10_000_000],
            vec![1, 2, 4, 8],
        )
    }
}

fn transfer_trials(cfg: &Config, proto: Proto) -> usize {
    let (s, f) = transfer_matrix(cfg);
    s.len() * f.len() * transfer_reps(cfg) * Variant::all(proto).len()
}

/// Transfers are short and their CPU split between the sides is noisy: twice the
/// repetitions.
fn transfer_reps(cfg: &Config) -> usize {
    cfg.reps() * 2
}

/// Experiment 2 over `proto`: flows connected before the window; in it each sends its
/// bytes, closes and waits for the receiver (the server) to close after reading
/// everything.
pub fn run_transfer(
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
                    let server = &mut servers[usize::from(v.imp() == Impl::Raw)];
                    let client = ClientSpec::Transfer {
                        target: v.target(proto, server),
                        flows,
                        bytes,
                    };
                    let setup = Expect {
                        accepted: flows as u64,
                        closed: 0,
                    };
                    let t = measured(progress, launcher, server, &client, setup, |r| Expect {
                        accepted: 0,
                        closed: r.ok as u64,
                    })?;
                    by_variant[i].push(t);
                }
            }
            let side = |trials: &[Trial]| {
                let (failed, first_error, _) = failures(trials);
                TransferSide {
                    sender_cpu_us: summarize(trials, |t| t.client.cpu.total_us() as f64),
                    receiver_cpu_us: summarize(trials, |t| t.server_cpu_us as f64),
                    total_cpu_us: summarize(trials, |t| {
                        (t.client.cpu.total_us() + t.server_cpu_us) as f64
                    }),
                    elapsed_us: summarize(trials, |t| t.client.elapsed_us as f64),
                    failed,
                    first_error,
                }
            };
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

/// `1 kB`, `10 MB`, ... (decimal, as the issue names the sizes).
pub fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1_000_000 && b % 1_000_000 == 0 => format!("{} MB", b / 1_000_000),
        b if b >= 1_000 && b % 1_000 == 0 => format!("{} kB", b / 1_000),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b / 1024),
        b => format!("{b} B"),
    }
}

// ---------------------------------------------------------------------------------------
// 3. Happy Eyeballs cost

/// A variant of the Happy Eyeballs experiment (and the client variants of experiment 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeVariant {
    /// Raw tokio TCP to 127.0.0.1.
    Raw,
    /// Raw usrsctp association to 127.0.0.1 (no taps).
    RawSctp,
    /// taps requiring TCP, to 127.0.0.1: one candidate, no DNS, no race.
    TapsSingle,
    /// taps requiring SCTP, to 127.0.0.1: one candidate, no race.
    TapsSctp,
    /// taps with `transport: ["SCTP", "TCP"]` to 127.0.0.1; nothing listens on the SCTP
    /// encapsulation port (ICMP port unreachable: refused), so SCTP fails and TCP wins.
    RaceSctpDead,
    /// taps with `transport: ["SCTP", "TCP"]` to 127.0.0.1; the server listens on both,
    /// SCTP wins.
    RaceBothAlive,
    /// taps requiring TCP, to `localhost`: ::1 and 127.0.0.1 raced; nothing listens on
    /// ::1 (refused).
    RaceV6Dead,
    /// Only the taps resolver's lookup of `localhost`, no connection (what DNS adds to
    /// the family race).
    ResolveOnly,
    /// taps requiring TCP and IPv4, to `localhost`: the same lookup as the family race,
    /// one candidate, no race (the family race's single-protocol baseline).
    TapsSingleName,
}

impl HeVariant {
    /// A short label.
    pub fn label(self) -> &'static str {
        match self {
            HeVariant::Raw => "raw TCP",
            HeVariant::RawSctp => "raw SCTP (usrsctp)",
            HeVariant::TapsSingle => "taps TCP only",
            HeVariant::TapsSctp => "taps SCTP only",
            HeVariant::RaceSctpDead => "taps race SCTP/TCP, SCTP dead",
            HeVariant::RaceBothAlive => "taps race SCTP/TCP, both alive",
            HeVariant::RaceV6Dead => "taps family race (TCP), ::1 dead",
            HeVariant::ResolveOnly => "taps resolve localhost only",
            HeVariant::TapsSingleName => "taps TCP only, localhost IPv4 only",
        }
    }

    /// How the client connects.
    pub fn client(self) -> ClientKind {
        match self {
            HeVariant::Raw => ClientKind::Raw,
            HeVariant::RawSctp => ClientKind::RawSctp,
            HeVariant::TapsSingle => ClientKind::TapsSingle,
            HeVariant::TapsSctp => ClientKind::TapsSctp,
            HeVariant::RaceSctpDead | HeVariant::RaceBothAlive => ClientKind::TapsRace,
            HeVariant::RaceV6Dead => ClientKind::TapsFamilyRace,
            HeVariant::ResolveOnly => ClientKind::TapsResolveOnly,
            HeVariant::TapsSingleName => ClientKind::TapsSingleName,
        }
    }

    /// Whether it races (and so has a cache hit ratio).
    pub fn races(self) -> bool {
        matches!(
            self,
            HeVariant::RaceSctpDead | HeVariant::RaceBothAlive | HeVariant::RaceV6Dead
        )
    }

    /// Whether it makes connections (every variant but [`HeVariant::ResolveOnly`]).
    pub fn connects(self) -> bool {
        self != HeVariant::ResolveOnly
    }

    /// The single-protocol taps connect it is compared with: the one to the protocol
    /// the connections end up on (TCP when SCTP is dead, SCTP when both are alive); for
    /// the family race, TCP to the same name with IPv4 required (same DNS work, no race).
    pub fn single(self) -> HeVariant {
        match self {
            HeVariant::RawSctp | HeVariant::TapsSctp | HeVariant::RaceBothAlive => {
                HeVariant::TapsSctp
            }
            HeVariant::RaceV6Dead | HeVariant::TapsSingleName => HeVariant::TapsSingleName,
            _ => HeVariant::TapsSingle,
        }
    }

    /// The raw connect it is compared with (same protocol as [`HeVariant::single`]).
    pub fn raw(self) -> HeVariant {
        match self.single() {
            HeVariant::TapsSctp => HeVariant::RawSctp,
            _ => HeVariant::Raw,
        }
    }

    /// Which server it talks to.
    fn server(self) -> HeServer {
        match self {
            HeVariant::Raw => HeServer::RawTcp,
            HeVariant::RawSctp => HeServer::RawSctp,
            HeVariant::TapsSctp | HeVariant::RaceBothAlive => HeServer::TapsBoth,
            _ => HeServer::TapsTcp,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HeServer {
    RawTcp,
    RawSctp,
    TapsTcp,
    TapsBoth,
}

impl HeServer {
    const ALL: [HeServer; 4] = [
        HeServer::RawTcp,
        HeServer::RawSctp,
        HeServer::TapsTcp,
        HeServer::TapsBoth,
    ];

    fn spec(self, mode: ServeMode) -> ServerSpec {
        let (imp, listen) = match self {
            HeServer::RawTcp => (Impl::Raw, Listen::Tcp),
            HeServer::RawSctp => (Impl::Raw, Listen::Sctp),
            HeServer::TapsTcp => (Impl::Taps, Listen::Tcp),
            HeServer::TapsBoth => (Impl::Taps, Listen::TcpAndSctp),
        };
        ServerSpec {
            imp,
            mode,
            dual: false,
            listen,
        }
    }
}

/// The UDP port a variant's client sends SCTP to: the server's, or a dead one.
fn client_udp_port(v: HeVariant, server: &Server, dead: u16) -> u16 {
    match v {
        HeVariant::RaceSctpDead => dead,
        _ => server.udp_port,
    }
}

/// One variant at one cache hit ratio.
#[derive(Debug, Clone, Serialize)]
pub struct HePoint {
    /// The variant.
    pub variant: HeVariant,
    /// Races that found the CIB seeded, percent (races only).
    pub hit_percent: Option<u32>,
    /// Connections per trial.
    pub connections: usize,
    /// Client CPU per connection, µs.
    pub client_cpu_per_conn_us: Summary,
    /// Server CPU per connection, µs.
    pub server_cpu_per_conn_us: Summary,
    /// Attempts started per connection.
    pub attempts_per_conn: Summary,
    /// Share of connections that ended up on SCTP (0 … 1).
    pub sctp_share: Summary,
    /// Median connect delay, µs.
    pub delay_median_us: Summary,
    /// The single-protocol taps variant the `*_vs_single` ratios refer to.
    pub single: HeVariant,
    /// Client CPU / the single-protocol taps connect (same repetition), median.
    pub client_vs_single: f64,
    /// Client CPU / the raw connect of the same protocol (same repetition), median.
    pub client_vs_raw: f64,
    /// Server CPU / the single-protocol taps connect's (same repetition), median.
    pub server_vs_single: f64,
    /// Connections that failed.
    pub failed: usize,
    /// The first failure.
    pub first_error: Option<String>,
}

fn he_matrix(cfg: &Config) -> (Vec<(HeVariant, Option<u32>)>, usize) {
    let mut v = vec![
        (HeVariant::Raw, None),
        (HeVariant::TapsSingle, None),
        (HeVariant::RawSctp, None),
        (HeVariant::TapsSctp, None),
    ];
    let hits: &[u32] = if cfg.quick {
        &[0, 80, 100]
    } else {
        &[0, 20, 40, 60, 80, 100]
    };
    for &h in hits {
        v.push((HeVariant::RaceSctpDead, Some(h)));
    }
    if cfg.quick {
        v.push((HeVariant::RaceBothAlive, Some(80)));
    } else {
        for &h in hits {
            v.push((HeVariant::RaceBothAlive, Some(h)));
        }
        // The family race of the dual-stack study, as an extra: TCP over ::1 and
        // 127.0.0.1 via `localhost`, and what its DNS lookup alone costs.
        v.push((HeVariant::ResolveOnly, None));
        v.push((HeVariant::TapsSingleName, None));
        for &h in hits {
            v.push((HeVariant::RaceV6Dead, Some(h)));
        }
    }
    (v, if cfg.quick { 100 } else { 500 })
}

fn he_trials(cfg: &Config) -> usize {
    he_matrix(cfg).0.len() * cfg.reps()
}

/// Starts the servers `variants` need.
fn start_servers(
    launcher: &Launcher,
    mode: ServeMode,
    needed: impl Iterator<Item = HeServer> + Clone,
) -> Result<Vec<(HeServer, Server)>, String> {
    let mut servers = Vec::new();
    for s in HeServer::ALL {
        if needed.clone().any(|n| n == s) {
            servers.push((s, Server::start(launcher, s.spec(mode))?));
        }
    }
    Ok(servers)
}

fn server_for(servers: &mut [(HeServer, Server)], s: HeServer) -> Result<&mut Server, String> {
    servers
        .iter_mut()
        .find(|(k, _)| *k == s)
        .map(|(_, srv)| srv)
        .ok_or_else(|| format!("no {s:?} server"))
}

/// Experiment 3: `count` sequential connections per trial (connect, close) for each
/// variant; hit ratio h means h% of the races use a context whose CIB was seeded by a
/// preliminary connection, the others a context whose CIB forgets at once.
pub fn run_he(
    cfg: &Config,
    launcher: &Launcher,
    progress: &mut Progress,
) -> Result<Vec<HePoint>, String> {
    let (variants, count) = he_matrix(cfg);
    let dead = worker::dead_udp_port()?;
    let mut servers = start_servers(
        launcher,
        ServeMode::Sink,
        variants.iter().map(|(v, _)| v.server()),
    )?;
    let mut trials: Vec<Vec<Trial>> = vec![Vec::new(); variants.len()];
    for rep in 0..cfg.reps() {
        for (i, (variant, hit)) in variants.iter().enumerate() {
            progress.step(&format!(
                "HE {}{} rep {}/{}",
                variant.label(),
                hit.map(|h| format!(" {h}% hits")).unwrap_or_default(),
                rep + 1,
                cfg.reps()
            ));
            let server = server_for(&mut servers, variant.server())?;
            let spec = ClientSpec::Handshakes {
                client: variant.client(),
                port: server.port,
                udp_port: client_udp_port(*variant, server, dead),
                count,
                hit_percent: hit.unwrap_or(0),
            };
            // The race's seeding connection must be over before the window.
            let seeded = u64::from(variant.races());
            let setup = Expect {
                accepted: seeded,
                closed: seeded,
            };
            let connects = variant.connects();
            let t = measured(progress, launcher, server, &spec, setup, |r| Expect {
                accepted: if connects { r.ok as u64 } else { 0 },
                closed: if connects { r.ok as u64 } else { 0 },
            })?;
            trials[i].push(t);
        }
    }
    let per_conn = |v: u64, t: &Trial| v as f64 / t.client.ok.max(1) as f64;
    let mut points: Vec<HePoint> = variants
        .iter()
        .zip(&trials)
        .map(|((variant, hit), ts)| {
            let (failed, first_error, _) = failures(ts);
            HePoint {
                variant: *variant,
                hit_percent: *hit,
                connections: count,
                client_cpu_per_conn_us: summarize(ts, |t| per_conn(t.client.cpu.total_us(), t)),
                server_cpu_per_conn_us: summarize(ts, |t| per_conn(t.server_cpu_us, t)),
                attempts_per_conn: summarize(ts, |t| per_conn(t.client.attempts as u64, t)),
                sctp_share: summarize(ts, |t| per_conn(t.client.sctp as u64, t)),
                delay_median_us: summarize(ts, |t| median(&t.client.delays_us)),
                single: variant.single(),
                client_vs_single: 0.0,
                client_vs_raw: 0.0,
                server_vs_single: 0.0,
                failed,
                first_error,
            }
        })
        .collect();
    let find = |points: &[HePoint], v| points.iter().find(|p| p.variant == v).cloned();
    let snapshot = points.clone();
    for p in &mut points {
        if let Some(single) = find(&snapshot, p.variant.single()) {
            p.client_vs_single = pairwise(
                &p.client_cpu_per_conn_us,
                &single.client_cpu_per_conn_us,
                ratio,
            );
            p.server_vs_single = pairwise(
                &p.server_cpu_per_conn_us,
                &single.server_cpu_per_conn_us,
                ratio,
            );
        }
        if let Some(raw) = find(&snapshot, p.variant.raw()) {
            p.client_vs_raw = pairwise(
                &p.client_cpu_per_conn_us,
                &raw.client_cpu_per_conn_us,
                ratio,
            );
        }
    }
    Ok(points)
}

// ---------------------------------------------------------------------------------------
// 4. Server under load

/// One client variant at one rate and object size.
#[derive(Debug, Clone, Serialize)]
pub struct HttpPoint {
    /// The client variant (the server is raw TCP for raw clients, taps on TCP and SCTP
    /// otherwise).
    pub variant: HeVariant,
    /// Races that found the CIB seeded, percent (races only).
    pub hit_percent: Option<u32>,
    /// Object size, bytes.
    pub object: usize,
    /// Offered request rate, requests/s.
    pub rate: f64,
    /// Server CPU load: server CPU time / wall time, percent of one core.
    pub server_load_pct: Summary,
    /// Load generator CPU load, percent of one core.
    pub client_load_pct: Summary,
    /// Requests answered per second.
    pub achieved_rate: Summary,
    /// Median connect delay, µs.
    pub delay_median_us: Summary,
    /// Share of connections that ended up on SCTP (0 … 1).
    pub sctp_share: Summary,
    /// Server load / raw server load (same repetition), median.
    pub server_vs_raw: f64,
    /// Server load / taps server with TCP-only clients (same repetition), median.
    pub server_vs_single: f64,
    /// Connections that failed.
    pub failed: usize,
    /// The first failure.
    pub first_error: Option<String>,
}

struct HttpMatrix {
    rates: Vec<f64>,
    objects: Vec<usize>,
    variants: Vec<(HeVariant, Option<u32>)>,
    duration_ms: u64,
    reps: usize,
}

fn http_matrix(cfg: &Config) -> HttpMatrix {
    if cfg.quick {
        HttpMatrix {
            rates: vec![200.0],
            objects: vec![1024],
            variants: vec![
                (HeVariant::Raw, None),
                (HeVariant::TapsSingle, None),
                (HeVariant::TapsSctp, None),
                (HeVariant::RaceSctpDead, Some(0)),
                (HeVariant::RaceBothAlive, Some(0)),
            ],
            duration_ms: 1000,
            reps: 1,
        }
    } else {
        HttpMatrix {
            rates: vec![100.0, 400.0, 700.0, 1000.0],
            objects: vec![1024, 35 * 1024],
            variants: vec![
                (HeVariant::Raw, None),
                (HeVariant::TapsSingle, None),
                (HeVariant::TapsSctp, None),
                (HeVariant::RaceSctpDead, Some(0)),
                (HeVariant::RaceSctpDead, Some(80)),
                (HeVariant::RaceSctpDead, Some(100)),
                (HeVariant::RaceBothAlive, Some(0)),
                (HeVariant::RaceBothAlive, Some(100)),
            ],
            duration_ms: 2000,
            reps: cfg.reps().min(3),
        }
    }
}

fn http_trials(cfg: &Config) -> usize {
    let m = http_matrix(cfg);
    m.rates.len() * m.objects.len() * m.variants.len() * m.reps
}

/// Experiment 4: HTTP/1.0 keep-alive server (taps listening on TCP and SCTP, or raw TCP
/// for the raw client) under Poisson load; server CPU load per rate, object size and
/// client variant. "SCTP dead" clients send SCTP to a UDP port nobody listens on.
pub fn run_http(
    cfg: &Config,
    launcher: &Launcher,
    progress: &mut Progress,
) -> Result<Vec<HttpPoint>, String> {
    let m = http_matrix(cfg);
    let dead = worker::dead_udp_port()?;
    let server_of = |v: HeVariant| {
        if v == HeVariant::Raw {
            HeServer::RawTcp
        } else {
            HeServer::TapsBoth
        }
    };
    let mut servers = start_servers(
        launcher,
        ServeMode::Http,
        m.variants.iter().map(|(v, _)| server_of(*v)),
    )?;
    let mut points = Vec::new();
    let mut seed = 1u64;
    for &object in &m.objects {
        for &rate in &m.rates {
            let mut trials: Vec<Vec<Trial>> = vec![Vec::new(); m.variants.len()];
            for rep in 0..m.reps {
                seed += 1;
                for (i, (variant, hit)) in m.variants.iter().enumerate() {
                    progress.step(&format!(
                        "HTTP {} {rate}/s {}{} rep {}/{}",
                        human_bytes(object as u64),
                        variant.label(),
                        hit.map(|h| format!(" {h}%")).unwrap_or_default(),
                        rep + 1,
                        m.reps
                    ));
                    let server = server_for(&mut servers, server_of(*variant))?;
                    let spec = ClientSpec::Http {
                        client: variant.client(),
                        port: server.port,
                        udp_port: client_udp_port(*variant, server, dead),
                        rate,
                        duration_ms: m.duration_ms,
                        object,
                        calls_per_conn: 1,
                        hit_percent: hit.unwrap_or(0),
                        seed,
                    };
                    let seeded = u64::from(variant.races());
                    let setup = Expect {
                        accepted: seeded,
                        closed: seeded,
                    };
                    let t = measured(progress, launcher, server, &spec, setup, |r| Expect {
                        accepted: r.ok as u64,
                        closed: r.ok as u64,
                    })?;
                    trials[i].push(t);
                }
            }
            let load = |cpu: u64, t: &Trial| 100.0 * cpu as f64 / t.client.elapsed_us.max(1) as f64;
            let mut group: Vec<HttpPoint> = m
                .variants
                .iter()
                .zip(&trials)
                .map(|((variant, hit), ts)| {
                    let (failed, first_error, _) = failures(ts);
                    HttpPoint {
                        variant: *variant,
                        hit_percent: *hit,
                        object,
                        rate,
                        server_load_pct: summarize(ts, |t| load(t.server_cpu_us, t)),
                        client_load_pct: summarize(ts, |t| load(t.client.cpu.total_us(), t)),
                        achieved_rate: summarize(ts, |t| {
                            t.client.requests as f64 * 1e6 / t.client.elapsed_us.max(1) as f64
                        }),
                        delay_median_us: summarize(ts, |t| median(&t.client.delays_us)),
                        sctp_share: summarize(ts, |t| {
                            t.client.sctp as f64 / t.client.ok.max(1) as f64
                        }),
                        server_vs_raw: 0.0,
                        server_vs_single: 0.0,
                        failed,
                        first_error,
                    }
                })
                .collect();
            let load_of = |v: HeVariant| {
                group
                    .iter()
                    .find(|p| p.variant == v)
                    .map(|p| p.server_load_pct.clone())
                    .unwrap_or_default()
            };
            let (raw_load, single_load) = (load_of(HeVariant::Raw), load_of(HeVariant::TapsSingle));
            for p in &mut group {
                p.server_vs_raw = pairwise(&p.server_load_pct, &raw_load, ratio);
                p.server_vs_single = pairwise(&p.server_load_pct, &single_load, ratio);
            }
            points.extend(group);
        }
    }
    Ok(points)
}

/// Which experiments to plan trials for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Selection {
    /// Experiment 1.
    pub connect: bool,
    /// Experiment 2.
    pub transfer: bool,
    /// Experiment 3.
    pub he: bool,
    /// Experiment 4.
    pub http: bool,
}

/// How many trials the experiments will run (for the progress line).
pub fn planned_trials(cfg: &Config, sel: Selection) -> usize {
    let mut n = 0;
    for &proto in &cfg.protocols {
        if sel.connect {
            n += connect_trials(cfg, proto);
        }
        if sel.transfer {
            n += transfer_trials(cfg, proto);
        }
    }
    if sel.he {
        n += he_trials(cfg);
    }
    if sel.http {
        n += http_trials(cfg);
    }
    n
}
