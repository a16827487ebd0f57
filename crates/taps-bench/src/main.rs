//! `taps-bench <experiment>`: what taps costs over raw tokio sockets, measured in the
//! same run (see the `taps_bench` library and docs/benchmarks.md). Its workers are this
//! program too (`taps-bench worker server|client <json spec>`, hidden).

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use taps_bench::experiments::TOKIO_CLIENT;
use taps_bench::{Config, Experiment, Launcher, Proto};

/// taps-bench: taps against raw tokio sockets, usrsctp, tokio-rustls, quinn and a C
/// client, in the same run.
#[derive(Parser)]
#[command(name = "taps-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: BenchCommand,
    /// Options of every experiment, declared once (global: given after the experiment's
    /// name, as in `taps-bench connect --reps 7`).
    #[command(flatten)]
    opts: Options,
}

#[derive(clap::Subcommand)]
enum BenchCommand {
    #[command(flatten)]
    Run(Experiment),
    /// The CMT-SCTP scheduling paper's three experiments on netlab (root), real usrsctp
    /// at both ends: round robin vs Fixed stream-to-path mapping over paths of different
    /// delay and rate, NR-SACK on and off. Needs the `netlab` binary beside `taps-bench`.
    Multipath,
    /// A worker process of the benchmarks (started by `taps-bench` itself).
    #[command(hide = true)]
    Worker {
        /// `server` or `client`.
        role: String,
        /// The worker's JSON spec.
        spec: String,
    },
}

#[derive(clap::Args)]
struct Options {
    /// The reduced matrix (for CI): fewer points, repetitions and connections.
    #[arg(long, global = true)]
    quick: bool,
    /// Repetitions per point (taps and raw interleaved; medians are reported).
    #[arg(long, global = true, value_name = "N")]
    reps: Option<usize>,
    /// Flow counts for `connect` (repeatable; default 1, 2, 4 … 256) and `connect-cli`
    /// (default 1, 256, 1024).
    #[arg(long, global = true, value_name = "N")]
    flows: Vec<usize>,
    /// Protocol of experiments 1 and 2: tcp, sctp or both [default: tcp; `all`: both].
    /// Experiments 3 and 4 always race TCP against SCTP.
    #[arg(long, global = true, value_name = "PROTO")]
    protocol: Option<String>,
    /// Directory for results.json, report.md and the SVG plots.
    #[arg(
        long,
        global = true,
        default_value = "target/taps-bench",
        value_name = "DIR"
    )]
    out: PathBuf,
    /// No progress line on stderr.
    #[arg(long, global = true)]
    no_progress: bool,
    /// `he` only: its TLS variant (the same as `taps-bench secure`).
    #[arg(long, global = true)]
    tls: bool,
    /// The `taps` command experiment 7 (`connect-cli`) measures and the lab's scenarios
    /// run [default: `taps` beside this program, where cargo builds both].
    #[arg(long, global = true, value_name = "PATH")]
    taps: Option<PathBuf>,
}

/// Why the command failed: bad input (exit code 2) or a failure (1).
enum Failure {
    Usage(String),
    Failed(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let BenchCommand::Worker { role, spec } = cli.command {
        return ExitCode::from(u8::try_from(taps_bench::worker_main(&[role, spec])).unwrap_or(1));
    }
    match run(cli.command, cli.opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => {
            eprintln!("taps-bench: error: {e}");
            ExitCode::from(2)
        }
        Err(Failure::Failed(e)) => {
            eprintln!("taps-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs an experiment (or all of them).
fn run(command: BenchCommand, opts: Options) -> Result<(), Failure> {
    let experiment = match command {
        BenchCommand::Worker { .. } => unreachable!("main runs workers"),
        BenchCommand::Multipath => return multipath(opts),
        BenchCommand::Run(Experiment::He) if opts.tls => Experiment::Secure,
        BenchCommand::Run(e) => e,
    };
    if opts.tls && experiment != Experiment::Secure {
        return Err(Failure::Usage(
            "--tls applies to `taps-bench he` only".into(),
        ));
    }
    let protocols = protocols(experiment, opts.protocol.as_deref())?;
    if opts.flows.contains(&0) {
        return Err(Failure::Usage("--flows must be at least 1".into()));
    }
    if opts.reps == Some(0) {
        return Err(Failure::Usage("--reps must be at least 1".into()));
    }
    let exe = std::env::current_exe()
        .map_err(|e| Failure::Failed(format!("cannot find the taps-bench executable: {e}")))?;
    let taps = taps_binary(&exe, opts.taps)?;
    if taps.is_none() && matches!(experiment, Experiment::ConnectCli | Experiment::All) {
        return Err(Failure::Failed(format!(
            "experiment 7 measures the `taps` command and found none beside {}: build it \
             (`cargo build --release -p taps-cli`) or name it with --taps PATH",
            exe.display()
        )));
    }
    if let Some(taps) = &taps {
        // The lab's netlab scenarios run the `taps` this run measures.
        std::env::set_var(netlab::taps::TAPS_ENV, taps);
    }
    let tokio_client = exe.with_file_name(TOKIO_CLIENT);
    let cfg = Config {
        quick: opts.quick,
        reps: opts.reps,
        flows: (!opts.flows.is_empty()).then_some(opts.flows),
        protocols,
        progress: !opts.no_progress,
        cli: taps,
        tokio_client: tokio_client.is_file().then_some(tokio_client),
    };
    let launcher = Launcher::new(exe, &["worker"]);
    let results = taps_bench::run(experiment, &cfg, &launcher).map_err(Failure::Failed)?;
    let written = taps_bench::write_outputs(&results, &opts.out).map_err(Failure::Failed)?;
    print_summary(&results, &written);
    if results.unavailable.is_empty() {
        Ok(())
    } else {
        for u in &results.unavailable {
            eprintln!("{u}");
        }
        Err(Failure::Failed(format!(
            "{} phase(s) could not be measured (see above and the report)",
            results.unavailable.len()
        )))
    }
}

/// The `taps` binary to measure: `--taps` (which must exist), else `taps` beside `exe`
/// if it is there.
fn taps_binary(exe: &Path, arg: Option<PathBuf>) -> Result<Option<PathBuf>, Failure> {
    match arg {
        Some(p) if p.is_file() => Ok(Some(p)),
        Some(p) => Err(Failure::Usage(format!(
            "--taps {}: no such file",
            p.display()
        ))),
        None => {
            let beside = exe.with_file_name("taps");
            Ok(beside.is_file().then_some(beside))
        }
    }
}

/// Where `taps-bench multipath` keeps its results after each round, in `--out`.
const MULTIPATH_CHECKPOINT: &str = "multipath.partial.json";

/// The results in `files` (comma-separated): a whole run, then later runs added to it.
fn replot_multipath(files: &str) -> Result<taps_bench::experiments::MultipathResults, String> {
    let mut files = files.split(',').map(Path::new);
    let first = files.next().ok_or("no file to replot")?;
    let mut r = taps_bench::experiments::read_multipath(first)?;
    for f in files {
        r.add_later(taps_bench::experiments::read_multipath(f)?)
            .map_err(|e| format!("{}: {e}", f.display()))?;
    }
    Ok(r)
}

/// `taps-bench multipath`: its own lab and report (multipath.md, report.md, SVGs, JSON).
fn multipath(opts: Options) -> Result<(), Failure> {
    let r = match std::env::var_os(taps_bench::experiments::MULTIPATH_REPLOT_ENV) {
        Some(files) => replot_multipath(&files.to_string_lossy()),
        None => {
            std::fs::create_dir_all(&opts.out)
                .map_err(|e| Failure::Failed(format!("{}: {e}", opts.out.display())))?;
            taps_bench::experiments::run_multipath(
                opts.quick,
                !opts.no_progress,
                Some(&opts.out.join(MULTIPATH_CHECKPOINT)),
            )
        }
    }
    .map_err(Failure::Failed)?;
    let written = taps_bench::report::write_multipath(&r, &opts.out).map_err(Failure::Failed)?;
    // The checkpoint is only for a run cut short; the full results are in multipath.json.
    let _ = std::fs::remove_file(opts.out.join(MULTIPATH_CHECKPOINT));
    let failed = r.points.iter().filter(|p| p.error.is_some()).count();
    println!(
        "multipath: {} points in {:.0} s, {failed} failed; wrote {}",
        r.points.len(),
        r.duration_s,
        written
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if failed > 0 {
        return Err(Failure::Failed(format!(
            "{failed} multipath point(s) failed (see the report)"
        )));
    }
    let crossed = r
        .points
        .iter()
        .filter(|p| p.pinning.is_some_and(|p| p.crossed > 0))
        .count();
    if crossed > 0 {
        return Err(Failure::Failed(format!(
            "{crossed} Fixed run(s) sent new data of a pinned stream over another path (see the report)"
        )));
    }
    Ok(())
}

/// The protocols `--protocol` names (default: both for `all`, else TCP).
fn protocols(experiment: Experiment, arg: Option<&str>) -> Result<Vec<Proto>, Failure> {
    let default = if experiment == Experiment::All {
        "both"
    } else {
        "tcp"
    };
    match arg.unwrap_or(default).to_ascii_lowercase().as_str() {
        "tcp" => Ok(vec![Proto::Tcp]),
        "sctp" => Ok(vec![Proto::Sctp]),
        "both" => Ok(vec![Proto::Tcp, Proto::Sctp]),
        other => Err(Failure::Usage(format!(
            "--protocol: unknown protocol {other:?} (tcp, sctp or both)"
        ))),
    }
}

/// The connect lines, the goals, where the report went and any worker crash.
fn print_summary(results: &taps_bench::Results, written: &[PathBuf]) {
    for p in &results.connect {
        println!("{}", taps_bench::report::connect_line(p));
    }
    for g in &results.goals {
        println!(
            "goal {}: {} (target {}): {}",
            g.name,
            g.measured,
            g.target,
            if g.met { "met" } else { "NOT met" }
        );
    }
    println!(
        "took {:.1} s; wrote {}",
        results.meta.duration_s,
        written
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    for c in &results.crashes {
        eprintln!("worker crash in {} ({}): {}", c.trial, c.outcome, c.error);
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::{BenchCommand, Cli, Experiment};

    #[test]
    fn the_command_line_parses_as_taps_bench_did() {
        Cli::command().debug_assert();
        let cli = Cli::parse_from(["taps-bench", "connect", "--flows", "1", "--flows", "256"]);
        assert!(matches!(
            cli.command,
            BenchCommand::Run(Experiment::Connect)
        ));
        assert_eq!(cli.opts.flows, [1, 256]);
        let cli = Cli::parse_from(["taps-bench", "connect-cli", "--taps", "/x/taps"]);
        assert!(matches!(
            cli.command,
            BenchCommand::Run(Experiment::ConnectCli)
        ));
        assert_eq!(
            cli.opts.taps.as_deref(),
            Some(std::path::Path::new("/x/taps"))
        );
        let cli = Cli::parse_from(["taps-bench", "worker", "client", "{}"]);
        assert!(matches!(cli.command, BenchCommand::Worker { .. }));
        assert!(Cli::try_parse_from(["taps-bench", "bench"]).is_err());
    }
}
