//! `taps-tokio-client HOST PORT FLOWS`: the plain-tokio baseline of `taps-bench
//! connect-cli`, built beside `taps-bench` so the benchmark finds it.
//!
//! The work of `taps connect HOST PORT --flows FLOWS --send-bytes 1 --props <TCP
//! required>` written the way a tokio user would write it without taps: one task per
//! flow on the same runtime the command uses (current-thread, the work itself a spawned
//! task), `TcpStream::connect` to the address, TCP_NODELAY (taps' default), write 1 byte,
//! shut the sending side down, read until the server's close, drop. Prints one summary
//! line; exits 1 if a flow failed (the first error on stderr) or the run took over 30 s,
//! 2 on bad arguments.
//!
//! It links tokio and std only, so its whole-process CPU and peak RSS are what the
//! runtime itself costs for this work: the floor any tokio program, taps included, stands
//! on, measured in the same run as `taps` and the C epoll client.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

/// How long the whole run may take (one timer for all flows, as the C client has one
/// epoll timeout).
const RUN_LIMIT: Duration = Duration::from_secs(30);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = match args.as_slice() {
        [host, port, flows] => host
            .parse::<IpAddr>()
            .ok()
            .zip(port.parse::<u16>().ok())
            .zip(flows.parse::<usize>().ok().filter(|n| *n > 0)),
        _ => None,
    };
    let Some(((ip, port), flows)) = parsed else {
        eprintln!("usage: taps-tokio-client HOST PORT FLOWS (HOST an IP literal, FLOWS > 0)");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("taps-tokio-client: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let addr = SocketAddr::new(ip, port);
    let outcome = runtime.block_on(async move {
        tokio::spawn(tokio::time::timeout(RUN_LIMIT, run(addr, flows)))
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))
    });
    match outcome {
        Ok(Ok(Ok(()))) => {
            println!("{flows} flows connected, sent 1 byte each and closed");
            ExitCode::SUCCESS
        }
        Ok(Ok(Err(e))) | Err(e) => {
            eprintln!("taps-tokio-client: {e}");
            ExitCode::FAILURE
        }
        Ok(Err(_)) => {
            eprintln!("taps-tokio-client: flows still open after {RUN_LIMIT:?}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `flows` flows at once; the first error, if any.
async fn run(addr: SocketAddr, flows: usize) -> std::io::Result<()> {
    let mut set = JoinSet::new();
    for _ in 0..flows {
        set.spawn(flow(addr));
    }
    let mut first_error = None;
    while let Some(done) = set.join_next().await {
        let result = done
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|r| r);
        if let (Err(e), None) = (result, &first_error) {
            first_error = Some(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// One flow: connect, 1 byte, shut down, wait for the server's close.
async fn flow(addr: SocketAddr) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    stream.write_all(b"x").await?;
    stream.shutdown().await?;
    let mut buf = [0u8; 64];
    while stream.read(&mut buf).await? > 0 {}
    Ok(())
}
