//! `taps pm`: the host-wide policy manager. Owns the CIB for every taps program of this
//! user (they connect to its socket when it runs), saves it to a file, and tells them to
//! reload the PIB directory when it changes. Runs until SIGINT or SIGTERM.

use std::path::PathBuf;

use taps::pm::{default_socket, Daemon, DaemonConfig, PolicyManager};

use crate::common::CliError;

/// Arguments of `taps pm`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The Unix socket to listen on (default: $TAPS_PM_SOCKET, else
    /// $XDG_RUNTIME_DIR/taps/pm.sock, else /tmp/taps-UID/pm.sock). Its directory is
    /// created 0700 and must belong to you.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Keep the CIB in this file: loaded at start, saved (atomically, 0600) when it
    /// changed, at most once a second, and at exit.
    #[arg(long, value_name = "FILE")]
    cib: Option<PathBuf>,
    /// PIB directory (NEAT layout) the programs load on top of the built-in PIB; polled
    /// once a second, programs reload it when it changed.
    #[arg(long, value_name = "DIR")]
    pib: Option<PathBuf>,
}

/// Runs the command.
pub(crate) async fn run(args: Args) -> Result<(), CliError> {
    let socket = match args.socket {
        Some(s) => s,
        None => PolicyManager::Auto.socket().unwrap_or_else(default_socket),
    };
    let mut config = DaemonConfig::new(&socket);
    config.cib_file = args.cib;
    config.pib_dir = args.pib;
    let daemon = Daemon::bind(config)
        .map_err(|e| CliError::failure(format!("cannot listen on {}: {e}", socket.display())))?;
    eprintln!("taps pm: listening on {}", socket.display());
    let shutdown = async {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(mut int), Ok(mut term)) => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    daemon
        .run(shutdown)
        .await
        .map_err(|e| CliError::failure(format!("policy manager: {e}")))?;
    eprintln!("taps pm: stopped");
    Ok(())
}
