//! The `taps` command line: show candidates, connect, listen, trace a race.

mod cmd;
mod common;
mod logs;
mod path_args;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

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
    Candidates(Deferred<cmd::candidates::Args>),
    /// Race a connection (or N flows) to a remote endpoint; optionally send data.
    ///
    /// Any security option (--ca, --server-name, --alpn, --cert/--key,
    /// --insecure-skip-verify) requires security: only secure stacks (TLS, QUIC, DTLS)
    /// race, and --props that leave security anything but required are refused beside
    /// one. Without them, {"security":"require"} in --props asks for it.
    Connect(Deferred<cmd::connect::Args>),
    /// An HTTP request: HTTP/3 raced against HTTP/2 for https://; prints status,
    /// protocol, timing and the race (like curl -w).
    Get(Deferred<cmd::get::Args>),
    /// Listen on every allowed protocol and family; echo or discard.
    Listen(Deferred<cmd::listen::Args>),
    /// Run the host-wide policy manager: one CIB for every taps program of this user.
    Pm(Deferred<cmd::pm::Args>),
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

/// A subcommand's arguments, added to the parser only when that subcommand is the one
/// parsed (clap's `Command::defer`). Built eagerly, every subcommand's arguments cost each
/// start of `taps` ~0.15 M instructions, most of them for subcommands that were not run.
struct Deferred<T>(T);

/// Whether [`Deferred`] adds its arguments at once: for a completion script or a man page,
/// which walk the whole tree (clap mirrors the subcommands into `help`'s before deferred
/// parts are built).
static EAGER: AtomicBool = AtomicBool::new(false);

/// `augment` applied to `cmd`, keeping the about text the subcommand's variant gave it (the
/// arguments' own doc comment would replace it, being applied after).
fn keeping_about(cmd: clap::Command, augment: fn(clap::Command) -> clap::Command) -> clap::Command {
    let about = cmd.get_about().cloned();
    let long_about = cmd.get_long_about().cloned();
    let mut cmd = augment(cmd);
    if let Some(a) = about {
        cmd = cmd.about(a);
    }
    if let Some(a) = long_about {
        cmd = cmd.long_about(a);
    }
    cmd
}

impl<T: clap::Args> clap::Args for Deferred<T> {
    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }
    fn augment_args(cmd: clap::Command) -> clap::Command {
        if EAGER.load(Ordering::Relaxed) {
            return T::augment_args(cmd);
        }
        cmd.defer(|cmd| keeping_about(cmd, T::augment_args))
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        if EAGER.load(Ordering::Relaxed) {
            return T::augment_args_for_update(cmd);
        }
        cmd.defer(|cmd| keeping_about(cmd, T::augment_args_for_update))
    }
}

impl<T: clap::FromArgMatches> clap::FromArgMatches for Deferred<T> {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(matches).map(Deferred)
    }
    fn from_arg_matches_mut(matches: &mut clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(matches).map(Deferred)
    }
    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }
    fn update_from_arg_matches_mut(
        &mut self,
        matches: &mut clap::ArgMatches,
    ) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches_mut(matches)
    }
}

/// The whole command tree, every subcommand's arguments built (see [`EAGER`]).
fn full_command() -> clap::Command {
    EAGER.store(true, Ordering::Relaxed);
    Cli::command()
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
        Command::Completions { shell } => return cmd::docs::completions(shell, full_command()),
        Command::Man { dir } => return cmd::docs::man(full_command(), dir.as_deref()),
        _ => {}
    }
    if let Err(e) = logs::init(cli.verbose) {
        eprintln!("taps: error: {e}");
        return ExitCode::from(e.exit_code());
    }
    // A client (`connect`, `candidates`) runs on one thread: its flows wait on the
    // network, not the CPU, and a second worker only adds wake-ups and hand-offs between
    // threads (futex calls, cache misses) to every flow. A listener and the policy
    // manager use two workers.
    let mut builder = match cli.command {
        Command::Connect(_) | Command::Candidates(_) | Command::Get(_) => {
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
                Command::Candidates(Deferred(args)) => cmd::candidates::run(args).await,
                Command::Connect(Deferred(args)) => cmd::connect::run(args).await,
                Command::Get(Deferred(args)) => cmd::get::run(args).await,
                Command::Listen(Deferred(args)) => cmd::listen::run(args).await,
                Command::Pm(Deferred(args)) => cmd::pm::run(args).await,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What `taps ARGS` prints for a help or usage error, from `cmd`.
    fn rendered(cmd: clap::Command, args: &[&str]) -> String {
        let argv = std::iter::once("taps").chain(args.iter().copied());
        match cmd.try_get_matches_from(argv) {
            Ok(_) => String::from("(parsed)"),
            Err(e) => e.render().to_string(),
        }
    }

    #[test]
    fn deferred_subcommands_read_as_built_at_once() {
        let cases: &[&[&str]] = &[
            &["--help"],
            &["connect", "--help"],
            &["connect", "--flws", "2", "h", "1"],
            &["candidates", "--help"],
            &["listen", "--help"],
            &["pm", "--help"],
            &["help", "listen"],
        ];
        // Deferred first (EAGER only ever turns on, in this one test).
        let deferred: Vec<String> = cases.iter().map(|a| rendered(Cli::command(), a)).collect();
        let eager: Vec<String> = cases.iter().map(|a| rendered(full_command(), a)).collect();
        for ((args, d), e) in cases.iter().zip(&deferred).zip(&eager) {
            assert_eq!(d, e, "taps {}", args.join(" "));
        }
        full_command().debug_assert();
    }
}
