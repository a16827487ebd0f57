//! `taps bench <experiment>`: what taps costs over raw tokio sockets, measured in the
//! same run (see the `taps-bench` crate and docs/benchmarks.md).

use std::path::PathBuf;

use taps_bench::{Config, Experiment, Launcher, Proto};

use crate::common::CliError;

/// Arguments of `taps bench`.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: BenchCommand,
    /// Options of every experiment, declared once (global: given after the experiment's
    /// name, as in `taps bench connect --reps 7`). Declared per experiment, clap built
    /// them eight times at every start of `taps`, whatever the command.
    #[command(flatten)]
    opts: Options,
}

#[derive(clap::Subcommand)]
enum BenchCommand {
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
    /// 3 over TLS: QUIC raced against TLS/TCP vs one secure protocol at CIB hit ratios
    /// 0 … 100 % (1 KiB and 35 KiB objects), and taps' TLS and QUIC vs tokio-rustls and
    /// quinn used directly. Also `he --tls`.
    Secure,
    /// 7: this `taps` command, whole process (`taps connect 127.0.0.1 P --flows N
    /// --send-bytes 1`, TCP), against a C epoll client doing the same work, N = 1, 256,
    /// 1024: CPU (user + sys) and peak RSS from wait4. Needs `cc`.
    ConnectCli,
    /// The CMT-SCTP scheduling paper's three experiments on netlab (root), real usrsctp
    /// at both ends: round robin vs Fixed stream-to-path mapping over paths of different
    /// delay and rate, NR-SACK on and off. Needs the `netlab` binary beside `taps`.
    Multipath,
    /// 8: in network namespaces (root): SCTP against TCP over a 1500-byte path (CPU per
    /// byte), 10 MiB at 2 % loss over SCTP, TCP CUBIC and the kernel's default TCP, and
    /// first contact at 50 ms RTT against curl. Needs the `netlab` binary beside `taps`.
    Lab,
    /// All experiments (1 and 2 over TCP and SCTP unless --protocol says otherwise; the
    /// lab's as well, which need root).
    All,
    /// A worker process of the benchmarks (started by `taps bench` itself).
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
    /// `he` only: its TLS variant (the same as `taps bench secure`).
    #[arg(long, global = true)]
    tls: bool,
}

/// Runs the command.
pub(crate) async fn run(args: Args) -> Result<(), CliError> {
    let opts = args.opts;
    let experiment = match args.command {
        BenchCommand::Worker { role, spec } => {
            // A worker builds its own runtime: run it on a thread outside this one.
            let code = std::thread::spawn(move || taps_bench::worker_main(&[role, spec]))
                .join()
                .map_err(|_| CliError::failure("bench worker panicked"))?;
            return if code == 0 {
                Ok(())
            } else {
                Err(CliError::failure("bench worker failed"))
            };
        }
        BenchCommand::Connect => Experiment::Connect,
        BenchCommand::Transfer => Experiment::Transfer,
        BenchCommand::He if opts.tls => Experiment::Secure,
        BenchCommand::He => Experiment::He,
        BenchCommand::Secure => Experiment::Secure,
        BenchCommand::Http => Experiment::Http,
        BenchCommand::ConnectCli => Experiment::ConnectCli,
        BenchCommand::Lab => Experiment::Lab,
        BenchCommand::All => Experiment::All,
        BenchCommand::Multipath => return multipath(opts).await,
    };
    if opts.tls && experiment != Experiment::Secure {
        return Err(CliError::usage("--tls applies to `taps bench he` only"));
    }
    let protocols = protocols(experiment, opts.protocol.as_deref())?;
    if opts.flows.contains(&0) {
        return Err(CliError::usage("--flows must be at least 1"));
    }
    if opts.reps == Some(0) {
        return Err(CliError::usage("--reps must be at least 1"));
    }
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failure(format!("cannot find the taps executable: {e}")))?;
    let cfg = Config {
        quick: opts.quick,
        reps: opts.reps,
        flows: (!opts.flows.is_empty()).then_some(opts.flows),
        protocols,
        progress: !opts.no_progress,
        cli: Some(exe.clone()),
    };
    let launcher = Launcher::new(exe, &["bench", "worker"]);
    let out = opts.out;
    let results = tokio::task::spawn_blocking(move || {
        let results = taps_bench::run(experiment, &cfg, &launcher)?;
        let written = taps_bench::write_outputs(&results, &out)?;
        Ok::<_, String>((results, written))
    })
    .await
    .map_err(|e| CliError::failure(format!("bench task failed: {e}")))?
    .map_err(CliError::failure)?;
    let (results, written) = results;
    print_summary(&results, &written);
    if results.unavailable.is_empty() {
        Ok(())
    } else {
        for u in &results.unavailable {
            eprintln!("{u}");
        }
        Err(CliError::failure(format!(
            "{} phase(s) could not be measured (see above and the report)",
            results.unavailable.len()
        )))
    }
}

/// `taps bench multipath`: its own lab and report (multipath.md, report.md, SVGs, JSON).
async fn multipath(opts: Options) -> Result<(), CliError> {
    let out = opts.out;
    let (quick, progress) = (opts.quick, !opts.no_progress);
    let (r, written) = tokio::task::spawn_blocking(move || {
        let r = match std::env::var_os(taps_bench::experiments::MULTIPATH_REPLOT_ENV) {
            Some(json) => taps_bench::experiments::read_multipath(std::path::Path::new(&json))?,
            None => taps_bench::experiments::run_multipath(quick, progress)?,
        };
        let written = taps_bench::report::write_multipath(&r, &out)?;
        Ok::<_, String>((r, written))
    })
    .await
    .map_err(|e| CliError::failure(format!("bench task failed: {e}")))?
    .map_err(CliError::failure)?;
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
        return Err(CliError::failure(format!(
            "{failed} multipath point(s) failed (see the report)"
        )));
    }
    Ok(())
}

/// The protocols `--protocol` names (default: both for `all`, else TCP).
fn protocols(experiment: Experiment, arg: Option<&str>) -> Result<Vec<Proto>, CliError> {
    let default = if experiment == Experiment::All {
        "both"
    } else {
        "tcp"
    };
    match arg.unwrap_or(default).to_ascii_lowercase().as_str() {
        "tcp" => Ok(vec![Proto::Tcp]),
        "sctp" => Ok(vec![Proto::Sctp]),
        "both" => Ok(vec![Proto::Tcp, Proto::Sctp]),
        other => Err(CliError::usage(format!(
            "--protocol: unknown protocol {other:?} (tcp, sctp or both)"
        ))),
    }
}

/// The connect lines, the goals, where the report went and any worker crash.
fn print_summary(results: &taps_bench::Results, written: &[std::path::PathBuf]) {
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
