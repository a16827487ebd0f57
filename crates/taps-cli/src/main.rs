//! The `taps` command line: show candidates, connect, listen, trace a race.

mod cmd;
mod common;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// taps: ask for transport services, get the best connection.
#[derive(Parser)]
#[command(name = "taps", version, about)]
struct Cli {
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("taps: error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Candidates(args) => cmd::candidates::run(args).await,
            Command::Connect(args) => cmd::connect::run(args).await,
            Command::Listen(args) => cmd::listen::run(args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("taps: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
