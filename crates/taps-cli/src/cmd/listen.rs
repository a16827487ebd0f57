//! `taps listen`: accept on every allowed protocol and family, print each connection's
//! stack, echo or discard what arrives, count connections and bytes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use taps::taps_core::properties::Name;
use taps::{Connection, ListenerOptions, Preconnection, TransportProperties};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{CliError, ContextArgs, SecurityArgs};
use crate::path_args::PathArgs;

/// A datagram flow with no traffic for this long counts as finished.
const DATAGRAM_IDLE: Duration = Duration::from_secs(2);

/// Arguments of `taps listen`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Port to listen on (every allowed protocol uses it).
    port: u16,
    #[command(flatten)]
    ctx: ContextArgs,
    /// `--local` (listen on the first only; default: every address, IPv6 and IPv4),
    /// `--multihoming`, `--multipath-policy`.
    #[command(flatten)]
    paths: PathArgs,
    /// Send back what arrives.
    #[arg(long, conflicts_with = "discard")]
    echo: bool,
    /// Read and drop what arrives (the default).
    #[arg(long)]
    discard: bool,
    /// Exit after this many connections have finished, printing totals.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Print nothing per connection, only the totals.
    #[arg(long, short)]
    quiet: bool,
    /// Accepted connections alive at once; at the limit accepting pauses (default 16384).
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// Kernel and SCTP accept queue length (default 1024).
    #[arg(long, value_name = "N")]
    backlog: Option<u32>,
    /// Fail unless every allowed protocol can listen (default: warn and listen on the rest).
    #[arg(long)]
    every_stack: bool,
    #[command(flatten)]
    security: SecurityArgs,
}

#[derive(Default)]
struct Totals {
    connections: AtomicU64,
    associations: AtomicU64,
    finished: AtomicU64,
    bytes: AtomicU64,
}

/// Runs the command.
pub(crate) async fn run(args: Args) -> Result<(), CliError> {
    let ctx = args.ctx.context()?;
    // A certificate makes the listener secure (TLS), unless the properties say otherwise.
    let base = match args.security.cert {
        Some(_) => TransportProperties::for_listener().require(Name::Security),
        None => TransportProperties::for_listener(),
    };
    let props = args.ctx.properties(args.paths.apply(base)?)?;
    let local = args.paths.listen_addr(args.port);
    let pre = Preconnection::new(&ctx, props)
        .local(local)
        .security(args.security.params()?);
    let defaults = ListenerOptions::default();
    let limits = ListenerOptions {
        max_connections: args.max_connections.unwrap_or(defaults.max_connections),
        backlog: args.backlog.unwrap_or(defaults.backlog),
        every_stack: args.every_stack,
        ..defaults
    };
    let mut listener = pre.listen_with(&limits).await?;
    for (stack, addr) in listener.local_addrs() {
        println!("listening: {stack} on {addr}");
    }
    for missing in listener.missing() {
        eprintln!("taps: warning: not listening with {missing}");
    }
    let totals = Arc::new(Totals::default());
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let target = args.count;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Some(accepted) = accepted else { break };
                let conn = match accepted {
                    Ok(c) => c,
                    Err(e) => {
                        eprintln!("taps: accept failed: {e}");
                        continue;
                    }
                };
                let n = totals.connections.fetch_add(1, Ordering::Relaxed) + 1;
                if conn.sctp_stream() == Some(0) {
                    totals.associations.fetch_add(1, Ordering::Relaxed);
                }
                if !args.quiet {
                    let i = conn.info();
                    let mptcp = match i.mptcp_active {
                        Some(true) => " (MPTCP active)",
                        Some(false) => " (MPTCP fell back to TCP)",
                        None => "",
                    };
                    let stream = match conn.sctp_stream() {
                        Some(s) => format!(" (stream {s}; addresses are UDP)"),
                        None => String::new(),
                    };
                    println!(
                        "accepted #{n}: {} {} <- {}{mptcp}{stream}",
                        i.stack, i.local, i.remote
                    );
                }
                let totals = totals.clone();
                let done = done_tx.clone();
                let (echo, quiet) = (args.echo, args.quiet);
                tokio::spawn(async move {
                    let bytes = serve(conn, echo).await;
                    totals.bytes.fetch_add(bytes, Ordering::Relaxed);
                    totals.finished.fetch_add(1, Ordering::Relaxed);
                    if !quiet {
                        println!("closed #{n}: {bytes} bytes");
                    }
                    let _ = done.send(());
                });
            }
            Some(()) = done_rx.recv() => {
                if target.is_some_and(|t| totals.finished.load(Ordering::Relaxed) >= t) {
                    break;
                }
            }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    let associations = totals.associations.load(Ordering::Relaxed);
    println!(
        "total: {} connections{}, {} bytes received",
        totals.connections.load(Ordering::Relaxed),
        if associations > 0 {
            format!(" ({associations} SCTP associations)")
        } else {
            String::new()
        },
        totals.bytes.load(Ordering::Relaxed)
    );
    Ok(())
}

/// Reads until the peer closes (or a datagram flow goes idle), echoing if asked.
/// Returns the bytes received.
async fn serve(mut conn: Connection, echo: bool) -> u64 {
    let datagram = conn.info().stack.is_datagram();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let read = if datagram {
            match tokio::time::timeout(DATAGRAM_IDLE, conn.read(&mut buf)).await {
                Ok(r) => r,
                Err(_) => break,
            }
        } else {
            conn.read(&mut buf).await
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n as u64;
                if echo && conn.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = conn.close().await;
    total
}
