//! The whole-process comparison (issue 14 §1): the `taps` command against a C client on
//! epoll doing the same work (N TCP flows, 1 byte each, shut down, wait for the
//! server's close, close), each a process of its own, alternately, each run against a
//! sink server of its own; whole-process CPU (user + system) and peak RSS from `wait4`.

#![forbid(unsafe_code)]

use std::path::Path;

use serde::Serialize;

use super::runner::Progress;
use super::summary::{pairwise, Summary};
use super::Config;
use crate::measure::ratio;
use crate::native::{Tools, Usage};
use crate::process::{Launcher, Server};
use crate::worker::{Impl, Listen, ServeMode, ServerSpec};

/// The properties the `taps` command is given: TCP required, as the C client uses.
pub const TAPS_PROPS: &str = r#"{"transport":{"value":"TCP","precedence":2}}"#;

/// How long one client process may take before it is killed (a hang, not a figure).
const CLIENT_TIMEOUT_S: u32 = 60;

/// One client program at one flow count, over the repetitions.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CliSide {
    /// Whole-process CPU, user + system (every thread), µs.
    pub cpu_us: Summary,
    /// User CPU, µs.
    pub user_us: Summary,
    /// System CPU, µs.
    pub sys_us: Summary,
    /// Peak RSS (`ru_maxrss`), KiB.
    pub peak_rss_kib: Summary,
    /// Wall time from start to exit, µs.
    pub wall_us: Summary,
    /// Server CPU while the client ran, µs.
    pub server_cpu_us: Summary,
}

/// The `taps` command against the C epoll client (and the plain tokio client, where it
/// was built) at one flow count.
#[derive(Debug, Clone, Serialize)]
pub struct CliPoint {
    /// Flows per run.
    pub flows: usize,
    /// `taps connect 127.0.0.1 P --flows N --send-bytes 1 --props <TCP required>`.
    pub taps: CliSide,
    /// The C epoll client.
    pub c: CliSide,
    /// The plain tokio client (`taps-tokio-client`, beside `taps-bench`): what the
    /// runtime itself costs for the same work. `None` when that binary was not there.
    #[serde(default)]
    pub tokio: Option<TokioSide>,
    /// Why the plain tokio client has no figures although it was there (a run of it
    /// failed; the taps and C figures stand).
    #[serde(default)]
    pub tokio_problem: Option<String>,
    /// Whole-process CPU taps / C (median of per-repetition ratios).
    pub cpu_ratio: f64,
    /// Peak RSS taps − C, KiB (median of per-repetition differences).
    pub peak_rss_diff_kib: f64,
    /// Server CPU with taps / with C (median of per-repetition ratios): about 1 when
    /// both did the same work.
    pub server_cpu_ratio: f64,
}

/// The plain tokio client at one flow count, and how it compares.
#[derive(Debug, Clone, Serialize)]
pub struct TokioSide {
    /// Its own figures.
    pub side: CliSide,
    /// Whole-process CPU tokio / C (median of per-repetition ratios).
    pub cpu_vs_c: f64,
    /// Whole-process CPU taps / tokio (median of per-repetition ratios).
    pub taps_cpu_vs_tokio: f64,
    /// Peak RSS tokio − C, KiB (median of per-repetition differences).
    pub rss_over_c_kib: f64,
    /// Peak RSS taps − tokio, KiB (median of per-repetition differences).
    pub taps_rss_over_tokio_kib: f64,
}

/// The plain tokio baseline's binary (`crates/taps-bench/src/bin/taps-tokio-client.rs`),
/// which `taps-bench` looks for beside itself, where cargo builds it.
pub const TOKIO_CLIENT: &str = "taps-tokio-client";

/// The flow counts: `--flows` if given, else 1, 256, 1024 (quick: 1, 64).
pub(crate) fn cli_flows(cfg: &Config) -> Vec<usize> {
    cfg.flows.clone().unwrap_or_else(|| {
        if cfg.quick {
            vec![1, 64]
        } else {
            vec![1, 256, 1024]
        }
    })
}

/// Repetitions: `--reps` (at least 5 outside the quick matrix), else 21. More than the
/// other experiments' 7: a repetition is cheap (about 60 ms at 1,024 flows), and a
/// whole process's CPU on this kind of machine moves by 10 % from run to run.
fn cli_reps(cfg: &Config) -> usize {
    match (cfg.quick, cfg.reps) {
        (true, _) => cfg.reps(),
        (false, Some(reps)) => reps.max(5),
        (false, None) => 21,
    }
}

/// The trials of the comparison (three programs per repetition where the tokio
/// baseline is there).
pub(super) fn connect_cli_trials(cfg: &Config) -> usize {
    let programs = if cfg.tokio_client.is_some() { 3 } else { 2 };
    cli_flows(cfg).len() * cli_reps(cfg) * programs
}

/// One measured run and what the server saw during it.
struct Run {
    usage: Usage,
    server_cpu_us: u64,
}

/// Runs the comparison: for every flow count and repetition, the `taps` command
/// (`cfg.cli`), the C client, then the plain tokio client (where given), each against a
/// raw tokio sink server of its own. A run that fails, or after which the server did not
/// count exactly N flows accepted, N closed and N bytes received, fails the phase: the
/// programs did not do the same work.
pub(crate) fn run_connect_cli(
    cfg: &Config,
    launcher: &Launcher,
    progress: &mut Progress,
) -> Result<Vec<CliPoint>, String> {
    let taps = cfg
        .cli
        .clone()
        .ok_or("needs the `taps` command to measure (`taps-bench connect-cli --taps PATH`)")?;
    let tools = Tools::build()?;
    let tokio = cfg.tokio_client.clone();
    let spec = ServerSpec {
        imp: Impl::Raw,
        mode: ServeMode::Sink,
        dual: false,
        listen: Listen::Tcp,
        secure: None,
    };
    let reps = cli_reps(cfg);
    // Indices into `programs` (and `runs`, `sides`): taps, C, then the tokio baseline.
    const TAPS: usize = 0;
    const C: usize = 1;
    const TOKIO: usize = 2;
    let mut programs: Vec<(&str, &Path)> = vec![("taps", &taps), ("C", &tools.client)];
    if let Some(tokio) = &tokio {
        programs.push(("tokio", tokio));
    }
    let mut points = Vec::new();
    for n in cli_flows(cfg) {
        let mut runs: Vec<Vec<Run>> = programs.iter().map(|_| Vec::new()).collect();
        // Why the tokio baseline stopped being measured at this flow count, if it did:
        // a failure of that reference alone does not fail the phase (no goal uses it).
        let mut tokio_problem = None;
        for rep in 0..reps {
            // Each repetition starts with the next program, so no program always runs
            // first (or right after another one) and any position effect is shared.
            for k in 0..programs.len() {
                let i = (k + rep) % programs.len();
                if i == TOKIO && tokio_problem.is_some() {
                    continue;
                }
                let (name, program) = programs[i];
                let label = format!("connect-cli {n} flows {name} rep {}/{reps}", rep + 1);
                progress.step(&label);
                // A server of its own, on a port of its own, for every run: the flows of
                // earlier runs to one server port leave thousands of TIME_WAIT sockets
                // with the same addresses and port, and the kernel then searches longer
                // for a usable local port at every connect, in all programs alike (at
                // 1,024 flows after the 256-flow runs C's CPU went from ~21 to ~34 ms),
                // which measured the host's history more than the programs.
                let mut server = Server::start(launcher, spec.clone())?;
                let port = server.port.to_string();
                let args: Vec<String> = if i == 0 {
                    ["connect", "127.0.0.1", &port, "--flows", &n.to_string()]
                        .into_iter()
                        .map(String::from)
                        .chain(["--send-bytes", "1", "--props", TAPS_PROPS].map(String::from))
                        .collect()
                } else {
                    vec!["127.0.0.1".to_string(), port, n.to_string()]
                };
                match measured_run(&tools, &mut server, program, &args, n) {
                    Ok(run) => runs[i].push(run),
                    Err(e) if i == TOKIO => tokio_problem = Some(format!("{label}: {e}")),
                    Err(e) => return Err(format!("{label}: {e}")),
                }
            }
        }
        let sides: Vec<CliSide> = runs.iter().map(|r| side(r)).collect();
        let (t, c) = (sides[TAPS].clone(), sides[C].clone());
        let tokio = sides
            .get(TOKIO)
            .filter(|_| tokio_problem.is_none())
            .map(|k| TokioSide {
                cpu_vs_c: pairwise(&k.cpu_us, &c.cpu_us, ratio),
                taps_cpu_vs_tokio: pairwise(&t.cpu_us, &k.cpu_us, ratio),
                rss_over_c_kib: pairwise(&k.peak_rss_kib, &c.peak_rss_kib, |a, b| a - b),
                taps_rss_over_tokio_kib: pairwise(&t.peak_rss_kib, &k.peak_rss_kib, |a, b| a - b),
                side: k.clone(),
            });
        points.push(CliPoint {
            flows: n,
            cpu_ratio: pairwise(&t.cpu_us, &c.cpu_us, ratio),
            peak_rss_diff_kib: pairwise(&t.peak_rss_kib, &c.peak_rss_kib, |a, b| a - b),
            server_cpu_ratio: pairwise(&t.server_cpu_us, &c.server_cpu_us, ratio),
            taps: t,
            c,
            tokio,
            tokio_problem,
        });
    }
    Ok(points)
}

/// One program's runs at one flow count, summarised.
fn side(runs: &[Run]) -> CliSide {
    let s = |f: &dyn Fn(&Run) -> u64| Summary::of(runs.iter().map(|r| f(r) as f64).collect());
    CliSide {
        cpu_us: s(&|r| r.usage.user_us + r.usage.sys_us),
        user_us: s(&|r| r.usage.user_us),
        sys_us: s(&|r| r.usage.sys_us),
        peak_rss_kib: s(&|r| r.usage.peak_rss_kib),
        wall_us: s(&|r| r.usage.wall_us),
        server_cpu_us: s(&|r| r.server_cpu_us),
    }
}

/// One client process of `n` flows, measured, with the server's CPU over it; checks
/// that the server saw exactly the work of `n` flows of 1 byte.
fn measured_run(
    tools: &Tools,
    server: &mut Server,
    program: &Path,
    args: &[String],
    n: usize,
) -> Result<Run, String> {
    let before = server.stats(0, 0)?;
    let (usage, stderr) = tools.run(CLIENT_TIMEOUT_S, program, args)?;
    if usage.code != 0 {
        return Err(format!("exited with {}: {stderr}", usage.code));
    }
    let n = n as u64;
    let after = server.stats(before.accepted + n, before.closed + n)?;
    let seen = (
        after.accepted - before.accepted,
        after.closed - before.closed,
        after.bytes - before.bytes,
    );
    if after.timed_out || seen != (n, n, n) {
        return Err(format!(
            "did not do the work of {n} flows of 1 byte: the server accepted {}, closed {} \
             and received {} bytes{}",
            seen.0,
            seen.1,
            seen.2,
            if after.timed_out {
                " (it gave up waiting)"
            } else {
                ""
            }
        ));
    }
    Ok(Run {
        usage,
        server_cpu_us: after.cpu.since(&before.cpu).total_us(),
    })
}
