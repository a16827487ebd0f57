//! The `taps` command line: show candidates, connect, listen, trace a race.

mod cmd;
mod common;
mod logs;

use std::process::ExitCode;

use clap::{ArgAction, CommandFactory, Parser, Subcommand};

/// taps: ask for transport services, get the best connection.
#[derive(Parser)]
#[command(name = "taps", version, about)]
struct Cli {
    /// Log on stderr: -v info, -vv debug, -vvv trace for the taps crates (default:
    /// warnings; RUST_LOG adds directives and wins for the targets it names).
    #[arg(short, long, action = ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Rank the candidates for a remote endpoint and say why, without connecting.
    Candidates(cmd::candidates::Args),
    /// Race a connection (or N flows) to a remote endpoint; optionally send data.
    Connect(cmd::connect::Args),
    /// Listen on every allowed protocol and family; echo or discard.
    Listen(cmd::listen::Args),
    /// Benchmark taps against raw tokio sockets: connect, transfer, he, http, all.
    Bench(cmd::bench::Args),
    /// Run the host-wide policy manager: one CIB for every taps program of this user.
    Pm(cmd::pm::Args),
    /// Print a shell completion script: `taps completions bash > /etc/bash_completion.d/taps`.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `taps man > /usr/local/share/man/man1/taps.1`; with
    /// --dir, write taps.1 and one page per subcommand (taps-connect.1, ...) there.
    Man {
        /// Write every page into this directory instead of printing taps.1.
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
}

fn main() -> ExitCode {
    // Output piped into `head` and closed early ends the process quietly, like other Unix
    // tools, instead of a panic in println!. Sockets are unaffected: Rust's socket writes
    // pass MSG_NOSIGNAL and UDP never raises SIGPIPE.
    // SAFETY: setting a signal disposition before any thread starts.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Completions { shell } => return cmd::docs::completions(shell, Cli::command()),
        Command::Man { dir } => return cmd::docs::man(Cli::command(), dir.as_deref()),
        _ => {}
    }
    if let Err(e) = logs::init(cli.verbose) {
        eprintln!("taps: error: {e}");
        return ExitCode::from(e.exit_code());
    }
    // A client (`connect`, `candidates`) runs on one thread: its flows wait on the
    // network, not the CPU, and a second worker only adds wake-ups and hand-offs between
    // threads (futex calls, cache misses) to every flow. A listener and the bench's
    // servers use two workers.
    let mut builder = match cli.command {
        Command::Connect(_) | Command::Candidates(_) => {
            tokio::runtime::Builder::new_current_thread()
        }
        _ => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(2);
            b
        }
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("taps: error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The command runs as a task, not as block_on's own future: waking block_on's future
    // writes to the runtime's eventfd (a syscall), and a command that joins many flow
    // tasks would pay one per joined flow; task-to-task wake-ups cost no syscall.
    let result = runtime.block_on(async {
        tokio::spawn(async move {
            match cli.command {
                Command::Candidates(args) => cmd::candidates::run(args).await,
                Command::Connect(args) => cmd::connect::run(args).await,
                Command::Listen(args) => cmd::listen::run(args).await,
                Command::Bench(args) => cmd::bench::run(args).await,
                Command::Pm(args) => cmd::pm::run(args).await,
                Command::Completions { .. } | Command::Man { .. } => Ok(()),
            }
        })
        .await
    });
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("taps: error: {e}");
            ExitCode::from(e.exit_code())
        }
        Err(e) => {
            eprintln!("taps: error: the command failed: {e}");
            ExitCode::FAILURE
        }
    }
}
