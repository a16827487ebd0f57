//! The lab's TCP server: accepts, reads until the peer closes, checks every byte against
//! an expected pattern, then closes. What each connection brought is recorded.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

/// The byte `taps connect --send-bytes` sends (every byte of its stream).
pub const TAPS_FILL_BYTE: u8 = 0x5a;

/// A connection closes if nothing arrives for this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// What one connection brought.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkRecord {
    /// The client's address.
    pub peer: SocketAddr,
    /// The server address it connected to (IPv4 shown as IPv4, not mapped).
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

/// A running sink. Stops when dropped.
#[derive(Debug)]
pub struct Sink {
    records: Arc<Mutex<Vec<SinkRecord>>>,
    task: JoinHandle<()>,
}

impl Sink {
    /// Serves `listener` (already bound, e.g. on `[::]:80` in the server namespace),
    /// expecting every byte to be `pattern`. Must be called within a tokio runtime.
    pub fn start(listener: std::net::TcpListener, pattern: u8) -> std::io::Result<Sink> {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let records = Arc::new(Mutex::new(Vec::new()));
        let rec = records.clone();
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((stream, peer)) = accepted else { continue };
                        let rec = rec.clone();
                        conns.spawn(serve(stream, peer, pattern, rec));
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        Ok(Sink { records, task })
    }

    /// Every finished connection so far, in the order they finished.
    pub fn records(&self) -> Vec<SinkRecord> {
        lock(&self.records).clone()
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
        self.task.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn serve(
    mut stream: tokio::net::TcpStream,
    peer: SocketAddr,
    pattern: u8,
    records: Arc<Mutex<Vec<SinkRecord>>>,
) {
    let start = Instant::now();
    let local = stream
        .local_addr()
        .map(|a| SocketAddr::new(a.ip().to_canonical(), a.port()))
        .unwrap_or(peer);
    let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
    let mut buf = vec![0u8; 64 * 1024];
    let (mut bytes, mut mismatched, mut clean_close) = (0u64, 0u64, false);
    loop {
        match tokio::time::timeout(IDLE_TIMEOUT, stream.read(&mut buf)).await {
            Ok(Ok(0)) => {
                clean_close = true;
                break;
            }
            Ok(Ok(n)) => {
                bytes += n as u64;
                mismatched += buf[..n].iter().filter(|b| **b != pattern).count() as u64;
            }
            _ => break,
        }
    }
    let _ = stream.shutdown().await;
    lock(&records).push(SinkRecord {
        peer,
        local,
        bytes,
        mismatched,
        clean_close,
        duration: start.elapsed(),
    });
}
