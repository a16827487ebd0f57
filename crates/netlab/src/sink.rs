//! The lab's TCP server: accepts, reads until the peer closes, checks every byte against
//! an expected pattern, then closes. What each connection brought is recorded. The SCTP
//! server ([`crate::sctp_server`]) checks its connections with the same
//! `read_and_check` and adds its records here too.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

use crate::packet::Proto;

/// The byte `taps connect --send-bytes` sends (every byte of its stream).
pub const TAPS_FILL_BYTE: u8 = 0x5a;

/// A connection closes if nothing arrives for this long.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// What one connection brought.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkRecord {
    /// The transport it came over: [`Proto::Tcp`] or [`Proto::Sctp`] (inside UDP).
    pub protocol: Proto,
    /// The client's address (for SCTP: its UDP encapsulation address).
    pub peer: SocketAddr,
    /// The server address it connected to (IPv4 shown as IPv4, not mapped; for SCTP:
    /// the UDP encapsulation address).
    pub local: SocketAddr,
    /// Bytes received before the peer closed.
    pub bytes: u64,
    /// Bytes that differed from the expected pattern.
    pub mismatched: u64,
    /// Whether the peer closed cleanly (EOF) rather than by error or idle timeout.
    pub clean_close: bool,
    /// From accept to close.
    pub duration: Duration,
}

impl SinkRecord {
    /// The record of a connection over `protocol` between `peer` and `local` (both shown
    /// canonical: IPv4 as IPv4, not mapped), read as `c` from `start` until now.
    pub(crate) fn new(
        protocol: Proto,
        peer: SocketAddr,
        local: SocketAddr,
        c: Checked,
        start: Instant,
    ) -> SinkRecord {
        let canonical = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
        SinkRecord {
            protocol,
            peer: canonical(peer),
            local: canonical(local),
            bytes: c.bytes,
            mismatched: c.mismatched,
            clean_close: c.clean_close,
            duration: start.elapsed(),
        }
    }
}

/// A running sink. Stops when dropped.
#[derive(Debug)]
pub struct Sink {
    records: Arc<Mutex<Vec<SinkRecord>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Sink {
    /// Serves `listeners` (already bound, e.g. on `[::]:80` in the server namespace),
    /// expecting every byte to be `pattern`; one record list for all. Must be called
    /// within a tokio runtime.
    pub(crate) fn start(
        listeners: Vec<std::net::TcpListener>,
        pattern: u8,
    ) -> std::io::Result<Sink> {
        let records = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::with_capacity(listeners.len());
        for listener in listeners {
            listener.set_nonblocking(true)?;
            let listener = tokio::net::TcpListener::from_std(listener)?;
            tasks.push(tokio::spawn(accept_loop(
                listener,
                pattern,
                records.clone(),
            )));
        }
        Ok(Sink { records, tasks })
    }

    /// Every finished connection so far, in the order they finished.
    pub fn records(&self) -> Vec<SinkRecord> {
        lock(&self.records).clone()
    }

    /// Where other servers of the lab (the SCTP server) add their records.
    pub(crate) fn recorder(&self) -> Arc<Mutex<Vec<SinkRecord>>> {
        self.records.clone()
    }

    /// Forgets the records so far.
    pub fn clear(&self) {
        lock(&self.records).clear();
    }

    /// Waits up to `limit` until at least `n` connections have finished.
    pub fn wait_for(&self, n: usize, limit: Duration) -> Vec<SinkRecord> {
        let start = Instant::now();
        loop {
            let r = self.records();
            if r.len() >= n || start.elapsed() >= limit {
                return r;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Accepts on `listener` until aborted, serving each connection in a task of its own.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    pattern: u8,
    records: Arc<Mutex<Vec<SinkRecord>>>,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                conns.spawn(serve(stream, peer, pattern, records.clone()));
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What reading one connection to its end brought.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Checked {
    /// Bytes received.
    pub bytes: u64,
    /// Bytes that differed from the expected pattern.
    pub mismatched: u64,
    /// Whether it ended with end of stream (not an error or `idle` without data).
    pub clean_close: bool,
}

/// Reads `stream` to its end (or an error, or `idle` without data), checking every byte
/// against `pattern`.
pub(crate) async fn read_and_check<R: AsyncRead + Unpin>(
    stream: &mut R,
    pattern: u8,
    idle: Duration,
) -> Checked {
    let mut buf = vec![0u8; 64 * 1024];
    let mut c = Checked::default();
    loop {
        match tokio::time::timeout(idle, stream.read(&mut buf)).await {
            Ok(Ok(0)) => {
                c.clean_close = true;
                break;
            }
            Ok(Ok(n)) => {
                c.bytes += n as u64;
                c.mismatched += buf[..n].iter().filter(|b| **b != pattern).count() as u64;
            }
            _ => break,
        }
    }
    c
}

async fn serve(
    mut stream: tokio::net::TcpStream,
    peer: SocketAddr,
    pattern: u8,
    records: Arc<Mutex<Vec<SinkRecord>>>,
) {
    let start = Instant::now();
    let local = stream.local_addr().unwrap_or(peer);
    let c = read_and_check(&mut stream, pattern, IDLE_TIMEOUT).await;
    let _ = stream.shutdown().await;
    lock(&records).push(SinkRecord::new(Proto::Tcp, peer, local, c, start));
}
