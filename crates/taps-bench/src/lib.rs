//! Benchmarks of taps against a raw baseline measured in the same run.
//!
//! Five experiments (after the NEAT thesis, ch. 4–5, and the ANRW'16 Happy Eyeballs cost
//! paper), each run for taps and for the raw baseline, interleaved, several times:
//!
//! 1. [`Experiment::Connect`]: N = 1 … 256 concurrent flows, from context creation to the
//!    last flow connected: client and server CPU, RSS growth, per-flow connect delay.
//! 2. [`Experiment::Transfer`]: 1 kB … 10 MB per flow × 1 … 8 flows: sender and receiver CPU.
//! 3. [`Experiment::He`]: a TCP+SCTP race (`transport: ["SCTP", "TCP"]`) against a
//!    single-protocol connect, at CIB hit ratios 0 … 100 %, with SCTP dead (the race falls
//!    over to TCP) and with both alive (SCTP wins); the `::1`/`127.0.0.1` family race
//!    as an extra.
//! 4. [`Experiment::Http`]: an HTTP/1.0 keep-alive server on taps listening on TCP and
//!    SCTP under Poisson load, 100–1000 requests/s, 1 KiB and 35 KiB objects, clients
//!    racing or not: server CPU load.
//!    With it, [`Experiment::Http3`]: client CPU per request of taps' HTTP client
//!    (HTTP/3 only, raced, HTTP/2 only) against h3 + h3-quinn and hyper over
//!    tokio-rustls used directly, against caddy serving HTTP/3 and HTTP/2 on one port.
//! 6. [`Experiment::Secure`]: experiment 3 over TLS: QUIC raced against TLS/TCP vs a
//!    single secure protocol at CIB hit ratios 0 … 100 %, each connection fetching a
//!    1 KiB or 35 KiB object; and taps' TLS and QUIC against tokio-rustls and quinn used
//!    directly (same certificates, verification, ALPN and resumption). (5 is the
//!    criterion micro-benchmarks of the sans-IO core, `benches/core.rs`.)
//! 7. [`Experiment::ConnectCli`]: the `taps` command as a whole process
//!    (`taps connect … --flows N --send-bytes 1`, TCP) against a C epoll client doing the
//!    same work, N = 1, 256, 1024: user + system CPU and peak RSS from `wait4`.
//!
//! Experiments 1 and 2 run over TCP and/or SCTP ([`Config::protocols`]). The raw baseline
//! is plain tokio sockets for TCP and the `usrsctp` crate used directly for SCTP (one
//! association per flow). Over SCTP taps runs twice: with flow mapping off (one
//! association per flow, the fair per-flow comparison with raw) and with flow mapping on
//! (every flow a stream of one association: what SCTP buys an application using taps).
//!
//! Every client and server is a process of its own (a *worker*, see [`worker_main`]), so CPU
//! time and RSS are per side and per trial; the orchestrator ([`run`]) starts them via a
//! [`Launcher`] (`taps-bench worker …`). Results are a JSON file, a Markdown
//! report and SVG plots ([`report`]).

// Unsafe code is forbidden in every module but `rusage` (the one `getrusage` call).
#![deny(unsafe_code)]

pub mod experiments;
mod goals;
mod goals_http3;
mod goals_secure;
mod measure;
mod native;
mod process;
pub mod report;
mod rusage;
mod worker;

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

pub use experiments::{Config, Proto};
pub use goals::Goal;
pub use process::Launcher;
pub use worker::worker_main;

use experiments::{
    CliPoint, ConnectPoint, Crash, H3Results, HePoint, HttpPoint, LabResults, Progress,
    SecurePoint, SpeedPoint, TransferPoint,
};

/// Which experiment(s) to run; also the subcommands of `taps-bench`, whose help is these
/// comments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Subcommand)]
pub enum Experiment {
    /// 1: N concurrent flows (1 … 256): CPU, RSS growth, per-flow connect delay.
    Connect,
    /// 2: 1 kB … 10 MB per flow × 1 … 8 flows: sender and receiver CPU.
    Transfer,
    /// 3: TCP+SCTP Happy Eyeballs race vs a single-protocol connect at CIB hit ratios
    /// 0 … 100 %.
    He,
    /// 4: HTTP/1.0 keep-alive server on taps (TCP and SCTP) under Poisson load: server
    /// CPU load.
    Http,
    /// 4 (with `http`): client CPU per request of taps' HTTP client (HTTP/3 only, raced,
    /// HTTP/2 only) against h3 + h3-quinn and hyper over tokio-rustls used directly, one
    /// connection and a new connection per request, against caddy (h3 + h2 on one port;
    /// skipped without caddy).
    Http3,
    /// 3 over TLS: QUIC raced against TLS/TCP vs one secure protocol at CIB hit ratios
    /// 0 … 100 % (1 KiB and 35 KiB objects), and taps' TLS and QUIC vs tokio-rustls and
    /// quinn used directly. Also `he --tls`.
    Secure,
    /// 7: the `taps` command, whole process (`taps connect 127.0.0.1 P --flows N
    /// --send-bytes 1`, TCP), against a C epoll client doing the same work, N = 1, 256,
    /// 1024: CPU (user + sys) and peak RSS from wait4. Needs `cc` and `taps` (`--taps`;
    /// `Config::cli`).
    ConnectCli,
    /// 8: in network namespaces (root): SCTP against TCP over a 1500-byte path (CPU per
    /// byte), 10 MiB at 2 % loss over SCTP, TCP CUBIC and the kernel's default TCP, and
    /// first contact at 50 ms RTT against curl. Needs the `netlab` binary beside
    /// `taps-bench`.
    Lab,
    /// All experiments (1 and 2 over TCP and SCTP unless --protocol says otherwise; 7 when
    /// `Config::cli` names the `taps` command; the lab's as well, which need root).
    All,
}

impl Experiment {
    fn includes(self, e: Experiment) -> bool {
        self == Experiment::All || self == e
    }
}

/// When, where and how the results were taken.
#[derive(Debug, Clone, Serialize)]
pub struct Meta {
    /// The experiment(s) run.
    pub experiment: String,
    /// Reduced matrix.
    pub quick: bool,
    /// Protocols of experiments 1 and 2.
    pub protocols: Vec<Proto>,
    /// Whether the workers were an optimised build.
    pub release: bool,
    /// CPUs online.
    pub cpus: usize,
    /// `uname -r`.
    pub kernel: String,
    /// Start, seconds since the Unix epoch.
    pub started_unix: u64,
    /// Wall time of the whole run, seconds.
    pub duration_s: f64,
    /// Wall time of each phase (an experiment over a protocol).
    pub phases: Vec<Phase>,
}

/// One phase of a run and how long it took.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// `connect TCP`, `transfer SCTP`, `he`, `http`.
    pub name: String,
    /// Wall time, seconds.
    pub duration_s: f64,
}

/// Everything a run produced.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    /// Run description.
    pub meta: Meta,
    /// Experiment 1.
    pub connect: Vec<ConnectPoint>,
    /// Experiment 2.
    pub transfer: Vec<TransferPoint>,
    /// With experiment 2: SCTP against TCP through taps, one bulk flow.
    #[serde(default)]
    pub sctp_speed: Vec<SpeedPoint>,
    /// Experiment 3.
    pub he: Vec<HePoint>,
    /// Experiment 4.
    pub http: Vec<HttpPoint>,
    /// The HTTP/3 experiment (with experiment 4), when it was planned.
    #[serde(default)]
    pub http3: Option<H3Results>,
    /// The secure experiment.
    pub secure: Vec<SecurePoint>,
    /// The whole-process comparison of the `taps` command with a C epoll client.
    #[serde(default)]
    pub connect_cli: Vec<CliPoint>,
    /// The netlab scenarios of `taps-bench lab` (the 1500-byte path's transfer is in
    /// [`Results::sctp_speed`]).
    #[serde(default)]
    pub lab: Option<LabResults>,
    /// What could not be measured and why (a phase that failed, with its error).
    pub unavailable: Vec<String>,
    /// Worker processes that died or hung during a trial (a bug below the benchmark;
    /// each says whether the trial was retried).
    pub crashes: Vec<Crash>,
    /// The goals.
    pub goals: Vec<Goal>,
}

impl Meta {
    /// The description of a run of `experiment` with `cfg` on this machine, not yet
    /// timed (reads the kernel release: one small file).
    fn of(experiment: Experiment, cfg: &Config) -> Meta {
        Meta {
            experiment: match experiment {
                Experiment::ConnectCli => "connect-cli".into(),
                Experiment::Http3 => "http3".into(),
                e => format!("{e:?}").to_lowercase(),
            },
            quick: cfg.quick,
            protocols: cfg.protocols.clone(),
            release: !cfg!(debug_assertions),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            started_unix: 0,
            duration_s: 0.0,
            phases: Vec::new(),
        }
    }
}

/// What `experiment` with `cfg` runs.
fn selection(experiment: Experiment, cfg: &Config) -> experiments::Selection {
    experiments::Selection {
        connect: experiment.includes(Experiment::Connect),
        transfer: experiment.includes(Experiment::Transfer),
        he: experiment.includes(Experiment::He),
        http: experiment.includes(Experiment::Http),
        http3: experiment.includes(Experiment::Http) || experiment == Experiment::Http3,
        secure: experiment.includes(Experiment::Secure),
        connect_cli: experiment == Experiment::ConnectCli
            || (experiment == Experiment::All && cfg.cli.is_some()),
        lab: experiment.includes(Experiment::Lab),
    }
}

/// What the phases of a run collect.
#[derive(Default)]
struct Collected {
    connect: Vec<ConnectPoint>,
    transfer: Vec<TransferPoint>,
    sctp_speed: Vec<SpeedPoint>,
    he: Vec<HePoint>,
    http: Vec<HttpPoint>,
    http3: Option<H3Results>,
    secure: Vec<SecurePoint>,
    connect_cli: Vec<CliPoint>,
    lab: Option<LabResults>,
}

/// Runs `experiment` with `cfg`, starting workers with `launcher`. A phase (one
/// experiment over one protocol) that fails is recorded in [`Results::unavailable`] and
/// the run goes on with the next one.
pub fn run(experiment: Experiment, cfg: &Config, launcher: &Launcher) -> Result<Results, String> {
    let started = Instant::now();
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH);
    let started_unix = since_epoch.map_or(0, |d| d.as_secs());
    if cfg.protocols.is_empty() {
        return Err("no protocol to run".into());
    }
    let sel = selection(experiment, cfg);
    let total = experiments::planned_trials(cfg, sel);
    let mut progress = Progress::new(cfg.progress && total > 0, total);
    let mut unavailable = Vec::new();
    let mut phases = Vec::new();
    let mut phase = |name: String, f: &mut dyn FnMut(&mut Progress) -> Result<(), String>| {
        let t = Instant::now();
        if let Err(e) = f(&mut progress) {
            unavailable.push(format!("{name}: could not be measured: {e}"));
        }
        phases.push(Phase {
            name,
            duration_s: t.elapsed().as_secs_f64(),
        });
    };
    let mut c = Collected::default();
    for &proto in &cfg.protocols {
        if sel.connect {
            phase(format!("connect {proto}"), &mut |p| {
                c.connect
                    .extend(experiments::run_connect(cfg, proto, launcher, p)?);
                Ok(())
            });
        }
    }
    for &proto in &cfg.protocols {
        if sel.transfer {
            phase(format!("transfer {proto}"), &mut |p| {
                c.transfer
                    .extend(experiments::run_transfer(cfg, proto, launcher, p)?);
                Ok(())
            });
        }
    }
    if sel.transfer {
        phase("sctp-speed".into(), &mut |p| {
            c.sctp_speed = experiments::run_sctp_speed(cfg, launcher, p)?;
            Ok(())
        });
    }
    if sel.he {
        phase("he".into(), &mut |p| {
            experiments::run_he(cfg, launcher, p).map(|r| c.he = r)
        });
    }
    if sel.http {
        phase("http".into(), &mut |p| {
            experiments::run_http(cfg, launcher, p).map(|r| c.http = r)
        });
    }
    if sel.http3 {
        phase("http3".into(), &mut |p| {
            experiments::run_http3(cfg, launcher, p).map(|r| c.http3 = Some(r))
        });
    }
    if sel.secure {
        phase("secure".into(), &mut |p| {
            experiments::run_secure(cfg, launcher, p).map(|r| c.secure = r)
        });
    }
    if sel.connect_cli {
        phase("connect-cli".into(), &mut |p| {
            c.connect_cli = experiments::run_connect_cli(cfg, launcher, p)?;
            Ok(())
        });
    }
    if sel.lab {
        phase("lab, 1500-byte path".into(), &mut |p| {
            c.sctp_speed
                .push(experiments::run_path_speed(cfg, launcher, p)?);
            Ok(())
        });
        phase("lab, netlab scenarios".into(), &mut |p| {
            let (lab, errors) = experiments::run_scenarios(cfg, p);
            c.lab = Some(lab);
            if errors.is_empty() {
                Ok(())
            } else {
                Err(errors.join("; "))
            }
        });
    }
    progress.finish();
    let meta = Meta {
        started_unix,
        duration_s: started.elapsed().as_secs_f64(),
        phases,
        ..Meta::of(experiment, cfg)
    };
    let crashes = std::mem::take(&mut progress.crashes);
    Ok(assemble(meta, c, unavailable, crashes, cfg, sel))
}

/// The results of a run, with its goals evaluated.
fn assemble(
    meta: Meta,
    c: Collected,
    unavailable: Vec<String>,
    crashes: Vec<Crash>,
    cfg: &Config,
    sel: experiments::Selection,
) -> Results {
    let mut results = Results {
        meta,
        connect: c.connect,
        transfer: c.transfer,
        sctp_speed: c.sctp_speed,
        he: c.he,
        http: c.http,
        http3: c.http3,
        secure: c.secure,
        connect_cli: c.connect_cli,
        lab: c.lab,
        unavailable,
        crashes,
        goals: Vec::new(),
    };
    results.goals = goals::goals(&results, &goals::Expected::of(cfg, sel));
    if sel.secure {
        let mut g = Vec::new();
        goals_secure::secure_goals(&results, &mut g);
        results.goals.extend(g);
    }
    if sel.http3 {
        let mut g = Vec::new();
        goals_http3::http3_goals(results.http3.as_ref(), &mut g);
        results.goals.extend(g);
    }
    results
}

/// Writes `results.json`, `report.md` and the SVG plots into `dir` (created if needed);
/// returns the paths written.
pub fn write_outputs(results: &Results, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut written = Vec::new();
    let mut write = |name: &str, text: &str| -> Result<(), String> {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        written.push(path);
        Ok(())
    };
    let json = serde_json::to_string_pretty(results).map_err(|e| e.to_string())?;
    write("results.json", &json)?;
    let plots = report::plots(results)?;
    for (name, svg) in &plots {
        write(name, svg)?;
    }
    let names: Vec<&str> = plots.iter().map(|(n, _)| n.as_str()).collect();
    write("report.md", &report::markdown(results, &names))?;
    Ok(written)
}
