//! The client of experiment 2: flows connected before the window; in it each sends its
//! bytes, ends its sending side and waits for the receiver's end.

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use usrsctp::Association;

use super::flow::{open_flows, Dial, Flow};
use super::{note_failure, ready, send_result, Window};
use crate::worker::protocol::{ClientResult, Impl, Target, RAW_END_PPID};
use crate::worker::setup::{client_context, client_properties, preconnection};
use crate::worker::CHUNK;

/// A transfer flow that has not finished after this long fails (with how far it got)
/// instead of holding the trial forever; a healthy 10 MB flow takes well under 1 s.
const TRANSFER_DEADLINE: Duration = Duration::from_secs(20);

/// How far a transfer flow got (for the error when it misses [`TRANSFER_DEADLINE`]).
#[derive(Default)]
struct FlowProgress {
    /// Bytes handed to the connection.
    written: AtomicU64,
    /// 0: writing, 1: ending its sending side, 2: waiting for the receiver's end.
    phase: AtomicU64,
}

impl FlowProgress {
    fn describe(&self, bytes: u64) -> String {
        let phase = match self.phase.load(Ordering::Relaxed) {
            0 => "writing",
            1 => "ending its sending side",
            _ => "waiting for the receiver's end",
        };
        format!(
            "flow not done after {} s: {} of {bytes} bytes written, {phase}",
            TRANSFER_DEADLINE.as_secs(),
            self.written.load(Ordering::Relaxed)
        )
    }
}

/// Sends `bytes` in chunks, ends the sending side, then reads until the receiver ends.
async fn send_and_wait<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    bytes: u64,
    progress: &FlowProgress,
) -> std::io::Result<u64> {
    let chunk = vec![0x5au8; CHUNK];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        s.write_all(&chunk[..n]).await?;
        left -= n as u64;
        progress.written.fetch_add(n as u64, Ordering::Relaxed);
    }
    progress.phase.store(1, Ordering::Relaxed);
    s.shutdown().await?;
    progress.phase.store(2, Ordering::Relaxed);
    let mut sink = [0u8; 1024];
    while s.read(&mut sink).await? > 0 {}
    Ok(bytes)
}

/// The raw SCTP counterpart of [`send_and_wait`]: the bytes in messages of at most
/// 64 KiB on stream 0, an end-of-data message, then wait for the receiver's.
async fn raw_sctp_send_and_wait(
    a: Association,
    bytes: u64,
    progress: &FlowProgress,
) -> Result<u64, String> {
    let chunk = vec![0x5au8; CHUNK];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        a.send(0, &chunk[..n], true, 0)
            .await
            .map_err(|e| e.to_string())?;
        left -= n as u64;
        progress.written.fetch_add(n as u64, Ordering::Relaxed);
    }
    progress.phase.store(1, Ordering::Relaxed);
    a.send(0, &[0], true, RAW_END_PPID)
        .await
        .map_err(|e| e.to_string())?;
    progress.phase.store(2, Ordering::Relaxed);
    loop {
        match a.recv().await.map_err(|e| e.to_string())? {
            Some(m) if m.ppid == RAW_END_PPID => return Ok(bytes),
            Some(_) => continue,
            None => return Err("association ended before the receiver's end".into()),
        }
    }
}

/// Experiment 2's client: see [`crate::worker::ClientSpec::Transfer`].
pub(super) async fn transfer_client(t: Target, flows: usize, bytes: u64) -> Result<(), String> {
    let mut setup = ClientResult::default();
    let ctx = match t.imp {
        Impl::Taps => Some(client_context(t.udp_port, t.mapping, None)?),
        Impl::Raw => None,
    };
    let dial = match &ctx {
        Some(ctx) => Dial::Taps(preconnection(
            ctx,
            client_properties(t.proto)?,
            "127.0.0.1",
            t.port,
        )?),
        None => Dial::raw(t.proto, t.port, t.udp_port),
    };
    let opened = open_flows(&dial, flows, &mut setup).await;
    if let Some(e) = setup.first_error {
        return Err(format!("connecting the flows: {e}"));
    }
    ready().await?;
    let mut r = ClientResult::default();
    let w = Window::open();
    let mut set = tokio::task::JoinSet::new();
    for flow in opened {
        set.spawn(async move {
            let progress = FlowProgress::default();
            let sent = async {
                match flow {
                    Flow::Taps(c) => send_and_wait(c, bytes, &progress)
                        .await
                        .map_err(|e| e.to_string()),
                    Flow::RawTcp(s) => send_and_wait(s, bytes, &progress)
                        .await
                        .map_err(|e| e.to_string()),
                    Flow::RawSctp(a) => raw_sctp_send_and_wait(a, bytes, &progress).await,
                }
            };
            match tokio::time::timeout(TRANSFER_DEADLINE, sent).await {
                Ok(r) => r,
                Err(_) => Err(progress.describe(bytes)),
            }
        });
    }
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(Ok(n)) => {
                r.ok += 1;
                r.bytes += n;
            }
            Ok(Err(e)) => note_failure(&mut r, e),
            Err(e) => note_failure(&mut r, e),
        }
    }
    w.close(&mut r);
    send_result(&r).await
}
