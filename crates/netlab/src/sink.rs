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

/// The period of the pattern `taps connect --send-bytes` sends: the byte at stream offset
/// `i` is `i % 251` (a prime, so a segment or message delivered out of place, lost or
/// repeated, shifts the pattern and shows as mismatched bytes, whatever its size unless
/// a multiple of 251 bytes).
pub const PATTERN_PERIOD: usize = 251;

/// The byte `taps connect --send-bytes` sends at stream offset `offset`.
pub fn pattern_byte(offset: u64) -> u8 {
    (offset % PATTERN_PERIOD as u64) as u8
}

/// The largest piece a sender of the pattern writes: a whole number of periods under
/// 64 KiB, so every piece starts at phase 0 and one buffer serves them all.
pub const PATTERN_CHUNK: usize = PATTERN_PERIOD * (64 * 1024 / PATTERN_PERIOD);

/// `len` bytes of the pattern from stream offset 0: sent in pieces whose lengths are
/// multiples of [`PATTERN_PERIOD`], one buffer serves every offset.
pub fn pattern_chunk(len: usize) -> Vec<u8> {
    (0..len as u64).map(pattern_byte).collect()
}

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
    /// For SCTP: how many of the peer's addresses the association listed when it was
    /// accepted (its paths; more than one when the peer is multihomed). 0 otherwise.
    pub peer_paths: usize,
    /// For SCTP: how many it listed once the peer had finished sending (more than at the
    /// start when the peer added an address: ASCONF). 0 otherwise.
    pub peer_paths_at_end: usize,
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
            peer_paths: 0,
            peer_paths_at_end: 0,
        }
    }
}

/// How the bytes of one TCP (or MPTCP) connection to the sink arrived over time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The client's address (canonical).
    pub peer: SocketAddr,
    /// Bytes received.
    pub bytes: u64,
    /// The longest time between two reads that brought data (the worst stall the
    /// application saw), from the first byte to the last.
    pub max_gap: Duration,
    /// Bytes received before the longest gap began.
    pub max_gap_after: u64,
    /// From the first byte to the last.
    pub active: Duration,
}

/// A running sink. Stops when dropped.
#[derive(Debug)]
pub struct Sink {
    records: Arc<Mutex<Vec<SinkRecord>>>,
    progress: Arc<Mutex<Vec<Progress>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Sink {
    /// Serves `listeners` (already bound, e.g. on `[::]:80` in the server namespace),
    /// expecting the stream pattern ([`pattern_byte`]); one record list for all. Must be
    /// called within a tokio runtime.
    pub(crate) fn start(listeners: Vec<std::net::TcpListener>) -> std::io::Result<Sink> {
        let records = Arc::new(Mutex::new(Vec::new()));
        let progress = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::with_capacity(listeners.len());
        for listener in listeners {
            listener.set_nonblocking(true)?;
            let listener = tokio::net::TcpListener::from_std(listener)?;
            tasks.push(tokio::spawn(accept_loop(
                listener,
                (records.clone(), progress.clone()),
            )));
        }
        Ok(Sink {
            records,
            progress,
            tasks,
        })
    }

    /// Every finished connection so far, in the order they finished.
    pub fn records(&self) -> Vec<SinkRecord> {
        lock(&self.records).clone()
    }

    /// How each finished TCP connection's bytes arrived (the longest stall), in the
    /// order they finished.
    pub fn progress(&self) -> Vec<Progress> {
        lock(&self.progress).clone()
    }

    /// Where other servers of the lab (the SCTP server) add their records.
    pub(crate) fn recorder(&self) -> Arc<Mutex<Vec<SinkRecord>>> {
        self.records.clone()
    }

    /// Forgets the records so far.
    pub fn clear(&self) {
        lock(&self.records).clear();
        lock(&self.progress).clear();
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
async fn accept_loop(listener: tokio::net::TcpListener, lists: Lists) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                conns.spawn(serve(stream, peer, lists.clone()));
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
/// against the stream pattern ([`pattern_byte`] of its offset).
pub(crate) async fn read_and_check<R: AsyncRead + Unpin>(
    stream: &mut R,
    idle: Duration,
) -> Checked {
    read_traced(stream, idle, &mut Trace::default()).await
}

/// Bytes of `got`, which starts at stream offset `offset`, that differ from the pattern.
/// One comparison against a periodic reference (a `memcmp`), byte by byte only where
/// that differs.
fn mismatches(reference: &[u8], offset: u64, got: &[u8]) -> u64 {
    let phase = (offset % PATTERN_PERIOD as u64) as usize;
    let want = &reference[phase..phase + got.len()];
    if want == got {
        return 0;
    }
    want.iter().zip(got).filter(|(a, b)| a != b).count() as u64
}

/// When data arrived: the first and last read, the longest gap between two.
#[derive(Debug, Default)]
struct Trace {
    first: Option<Instant>,
    last: Option<Instant>,
    max_gap: Duration,
    max_gap_after: u64,
}

/// [`read_and_check`], noting in `t` when each read brought data.
async fn read_traced<R: AsyncRead + Unpin>(
    stream: &mut R,
    idle: Duration,
    t: &mut Trace,
) -> Checked {
    let mut buf = vec![0u8; 64 * 1024];
    let reference = pattern_chunk(buf.len() + PATTERN_PERIOD);
    let mut c = Checked::default();
    loop {
        match tokio::time::timeout(idle, stream.read(&mut buf)).await {
            Ok(Ok(0)) => {
                c.clean_close = true;
                break;
            }
            Ok(Ok(n)) => {
                let now = Instant::now();
                if let Some(last) = t.last {
                    if now - last > t.max_gap {
                        t.max_gap = now - last;
                        t.max_gap_after = c.bytes;
                    }
                }
                t.first.get_or_insert(now);
                t.last = Some(now);
                c.mismatched += mismatches(&reference, c.bytes, &buf[..n]);
                c.bytes += n as u64;
            }
            _ => break,
        }
    }
    c
}

/// The sink's record lists: what each connection brought, and how it arrived.
type Lists = (Arc<Mutex<Vec<SinkRecord>>>, Arc<Mutex<Vec<Progress>>>);

async fn serve(mut stream: tokio::net::TcpStream, peer: SocketAddr, (records, progress): Lists) {
    let start = Instant::now();
    let local = stream.local_addr().unwrap_or(peer);
    let mut t = Trace::default();
    let c = read_traced(&mut stream, IDLE_TIMEOUT, &mut t).await;
    let _ = stream.shutdown().await;
    let active = match (t.first, t.last) {
        (Some(a), Some(b)) => b - a,
        _ => Duration::ZERO,
    };
    lock(&progress).push(Progress {
        peer: SocketAddr::new(peer.ip().to_canonical(), peer.port()),
        bytes: c.bytes,
        max_gap: t.max_gap,
        max_gap_after: t.max_gap_after,
        active,
    });
    lock(&records).push(SinkRecord::new(Proto::Tcp, peer, local, c, start));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stream as `taps connect --send-bytes` sends it, read back in pieces: no
    /// mismatch; two pieces swapped, a piece lost or repeated: mismatches.
    #[test]
    fn reordered_lost_or_repeated_data_mismatches() {
        let reference = pattern_chunk(64 * 1024 + PATTERN_PERIOD);
        let sent = pattern_chunk(10_000);
        let check = |pieces: &[&[u8]]| {
            let mut off = 0u64;
            let mut bad = 0;
            for p in pieces {
                bad += mismatches(&reference, off, p);
                off += p.len() as u64;
            }
            bad
        };
        let (a, rest) = sent.split_at(1448);
        let (b, c) = rest.split_at(1448);
        assert_eq!(check(&[a, b, c]), 0);
        assert!(check(&[b, a, c]) > 1000, "swapped segments");
        assert!(check(&[a, c]) > 1000, "lost segment");
        assert!(check(&[a, a, b, c]) > 1000, "repeated segment");
    }
}
