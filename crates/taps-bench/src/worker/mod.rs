//! The worker processes: every measured client and server runs in a process of its own,
//! started by the orchestrator ([`crate::run`]), so that CPU time and RSS belong to one
//! side only and each client trial starts from a fresh heap.
//!
//! A worker is `<launcher> server <json ServerSpec>` or `<launcher> client <json
//! ClientSpec>`. The line protocol on stdin/stdout:
//!
//! - server: prints `PORT <p> <u>` once listening (`p`: the TCP port and SCTP port; `u`:
//!   the UDP port SCTP is encapsulated in, 0 when the server does not listen on SCTP);
//!   then answers each `stats <A> <C>` line (wait until at least A connections were
//!   accepted and C closed, at most [`protocol::STATS_WAIT`]) with `STATS <json ServerStats>`;
//!   exits on `quit` or end of input.
//! - client: does its untimed setup (e.g. connecting flows before a transfer), prints
//!   `READY`, waits for `go`, runs the measured window, prints `RESULT <json
//!   ClientResult>`, waits for `end` (or end of input), tears down and exits.
//!
//! The raw baselines: plain tokio sockets for TCP; for SCTP the `usrsctp` crate used
//! directly (one association per flow, stream 0, SCTP over UDP like taps), the same
//! user-space stack taps runs on, so a taps/raw ratio is what taps adds.

#![forbid(unsafe_code)]

mod client;
pub(crate) mod phases;
mod protocol;
mod secure;
mod server;
mod setup;

use std::io::Write;

pub use protocol::Proto;
pub(crate) use protocol::{
    ClientKind, ClientResult, ClientSpec, H3Client, H3Load, Impl, Listen, SecureClient,
    SecureListen, SecureServe, ServeMode, ServerSpec, ServerStats, Target,
};
pub(crate) use secure::{Pki, SERVER_NAME};
pub(crate) use setup::dead_udp_port;

/// Chunk size of writes and reads in transfers and sinks (taps also writes SCTP in
/// messages of at most 64 KiB).
const CHUNK: usize = 64 * 1024;

/// Entry point of a worker process: `args` are what follows the launcher's own
/// arguments (`server <json>` or `client <json>`). Returns the exit code.
pub fn worker_main(args: &[String]) -> i32 {
    let result = match args {
        [role, spec] if role == "server" => serde_json::from_str(spec)
            .map_err(|e| format!("bad server spec: {e}"))
            .and_then(server::server_main),
        [role, spec] if role == "client" => serde_json::from_str(spec)
            .map_err(|e| format!("bad client spec: {e}"))
            .and_then(client::client_main),
        _ => Err("usage: worker (server|client) <json spec>".to_string()),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("taps-bench worker: error: {e}");
            1
        }
    }
}

/// The runtime every worker uses: what `taps` (the CLI) uses, 2 worker threads.
fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// Writes `line` to stdout (to the orchestrator) at once.
fn say(line: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|_| out.flush())
        .map_err(|e| format!("stdout: {e}"))
}
