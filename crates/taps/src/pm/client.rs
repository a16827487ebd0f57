//! A context's link to the policy manager: connected once at build, then a reader task
//! (merges other programs' outcomes, reloads the PIB when told) and a writer task (sends
//! this program's outcomes). Neither is ever awaited by a race.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use socket2::{Domain, SockAddr, Socket, Type};
use taps_core::policy::{AttemptRecord, Cib, Pib, PortableRecord};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};

use super::protocol::{self, FromDaemon, ToDaemon, MAX_LINE, VERSION};
use super::{current_uid, PmStats, SNAPSHOT_BUDGET};

/// Races' outcomes queued for the daemon at most; more are dropped (and counted).
const QUEUE: usize = 1024;
/// The writer coalesces queued messages into writes of about this many bytes.
const WRITE_BATCH: usize = 64 * 1024;
/// How long the writer lets outcomes gather before it sends them.
const BATCH_DELAY: Duration = Duration::from_millis(10);

/// The CIB a client merges into and the PIB it replaces (when it follows the daemon's).
pub(crate) type SharedCib = Arc<Mutex<Cib>>;
/// The context's PIB, replaced whole on a reload.
pub(crate) type SharedPib = Arc<Mutex<Arc<Pib>>>;

enum Msg {
    Learn(Arc<str>, Vec<AttemptRecord>),
    Flush(oneshot::Sender<()>),
}

#[derive(Default)]
struct Counters {
    connected: AtomicBool,
    sent: AtomicU64,
    dropped: AtomicU64,
    received: AtomicU64,
}

/// A connected policy manager (the tasks end when this is dropped or the daemon goes).
pub(crate) struct PmClient {
    tx: mpsc::Sender<Msg>,
    counters: Arc<Counters>,
}

impl PmClient {
    /// Connects to the daemon at `socket` if one listens there and runs as this user,
    /// merges its snapshot into `cib` (and loads its PIB directory into `pib`, when
    /// given) and starts the tasks. `None` when no daemon answers within
    /// [`SNAPSHOT_BUDGET`]. Cost without a daemon: a `socket`, a failed `connect`
    /// (ENOENT or ECONNREFUSED) and a `close`. Must run inside a tokio runtime.
    pub(crate) fn connect(socket: &Path, cib: &SharedCib, pib: Option<&SharedPib>) -> Option<Self> {
        let sock = Socket::new(Domain::UNIX, Type::STREAM.nonblocking(), None).ok()?;
        if let Err(e) = sock.connect(&SockAddr::unix(socket).ok()?) {
            tracing::trace!("no policy manager at {}: {e}", socket.display());
            return None;
        }
        let stream: std::os::unix::net::UnixStream = sock.into();
        let stream = same_user(stream, socket)?;
        let (hello, leftover, stream) = read_hello(stream)?;
        let FromDaemon::Hello {
            version,
            cib: snapshot,
            pib: pib_dir,
        } = protocol::decode(&hello).ok()?
        else {
            tracing::warn!("policy manager at {} did not say hello", socket.display());
            return None;
        };
        if version != VERSION {
            tracing::warn!(
                "policy manager at {} speaks version {version}, not {VERSION}",
                socket.display()
            );
            return None;
        }
        let merged = lock(cib).load_json(&snapshot, Instant::now(), SystemTime::now());
        if let Err(e) = merged {
            tracing::warn!("ignoring the policy manager's CIB snapshot: {e}");
        }
        if let (Some(pib), Some(dir)) = (pib, pib_dir) {
            reload_pib(pib, &dir);
        }
        stream.set_nonblocking(true).ok()?;
        let stream = tokio::net::UnixStream::from_std(stream).ok()?;
        let (read, write) = stream.into_split();
        let counters = Arc::new(Counters::default());
        counters.connected.store(true, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(QUEUE);
        let flushes = Arc::new(Mutex::new(HashMap::new()));
        let reader = tokio::spawn(read_loop(Reader {
            read,
            leftover,
            cib: Arc::downgrade(cib),
            pib: pib.map(Arc::downgrade),
            counters: counters.clone(),
            flushes: flushes.clone(),
        }));
        tokio::spawn(async move {
            write_loop(write, rx, flushes).await;
            reader.abort();
        });
        tracing::debug!("using the policy manager at {}", socket.display());
        Some(PmClient { tx, counters })
    }

    /// Whether the daemon is still connected. Cost: an atomic load.
    pub(crate) fn is_connected(&self) -> bool {
        self.counters.connected.load(Ordering::Relaxed)
    }

    /// Queues a race's outcomes for the daemon without waiting: dropped (and counted)
    /// when the queue is full. Cost: a channel send.
    pub(crate) fn send(&self, endpoint: &Arc<str>, records: Vec<AttemptRecord>) {
        match self.tx.try_send(Msg::Learn(endpoint.clone(), records)) {
            Ok(()) => self.counters.sent.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.counters.dropped.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// Waits at most `within` until the daemon has applied everything sent so far.
    pub(crate) async fn flush(&self, within: Duration) -> bool {
        if !self.is_connected() {
            return false;
        }
        let (done, applied) = oneshot::channel();
        let wait = async {
            self.tx.send(Msg::Flush(done)).await.ok()?;
            applied.await.ok()
        };
        matches!(tokio::time::timeout(within, wait).await, Ok(Some(())))
    }

    /// The link's counters.
    pub(crate) fn stats(&self) -> PmStats {
        let c = &self.counters;
        PmStats {
            connected: c.connected.load(Ordering::Relaxed),
            sent: c.sent.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            received: c.received.load(Ordering::Relaxed),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The stream, if the process at the other end runs as this user (SO_PEERCRED).
fn same_user(
    stream: std::os::unix::net::UnixStream,
    socket: &Path,
) -> Option<std::os::unix::net::UnixStream> {
    let stream = tokio::net::UnixStream::from_std(stream).ok()?;
    let uid = stream.peer_cred().ok()?.uid();
    if uid != current_uid() {
        tracing::warn!(
            "ignoring the policy manager at {}: it runs as uid {uid}, not as this user",
            socket.display()
        );
        return None;
    }
    let stream = stream.into_std().ok()?;
    stream.set_nonblocking(false).ok()?;
    Some(stream)
}

/// Reads the hello line within [`SNAPSHOT_BUDGET`]: the line, the bytes read past it,
/// and the stream.
fn read_hello(
    stream: std::os::unix::net::UnixStream,
) -> Option<(Vec<u8>, Vec<u8>, std::os::unix::net::UnixStream)> {
    let deadline = Instant::now() + SNAPSHOT_BUDGET;
    let mut reader = BufReader::with_capacity(64 * 1024, stream);
    let mut line = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || line.len() as u64 > MAX_LINE {
            tracing::debug!("policy manager: no snapshot within the budget, going on alone");
            return None;
        }
        reader.get_ref().set_read_timeout(Some(left)).ok()?;
        let avail = match reader.fill_buf() {
            Ok([]) => return None,
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        if let Some(i) = avail.iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&avail[..i]);
            reader.consume(i + 1);
            break;
        }
        let n = avail.len();
        line.extend_from_slice(avail);
        reader.consume(n);
    }
    let leftover = reader.buffer().to_vec();
    Some((line, leftover, reader.into_inner()))
}

/// Loads `dir` on top of the built-in PIB into `pib`; a directory that does not load
/// leaves the PIB as it was (with a warning).
fn reload_pib(pib: &SharedPib, dir: &Path) {
    match Pib::builtin().load_dir(dir) {
        Ok(p) => *lock(pib) = Arc::new(p),
        Err(e) => tracing::warn!(
            "keeping the PIB: the policy manager's {} does not load: {e}",
            dir.display()
        ),
    }
}

type Flushes = Arc<Mutex<HashMap<u64, oneshot::Sender<()>>>>;

struct Reader {
    read: OwnedReadHalf,
    leftover: Vec<u8>,
    cib: Weak<Mutex<Cib>>,
    pib: Option<Weak<Mutex<Arc<Pib>>>>,
    counters: Arc<Counters>,
    flushes: Flushes,
}

/// Applies the daemon's lines until it goes (or sends something unreadable).
async fn read_loop(r: Reader) {
    let stream = std::io::Cursor::new(r.leftover).chain(r.read);
    let mut lines = tokio::io::BufReader::new(stream);
    let mut buf = Vec::new();
    while let Ok(true) = protocol::read_line(&mut lines, &mut buf).await {
        let msg = match protocol::decode::<FromDaemon>(&buf) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("leaving the policy manager: {e}");
                break;
            }
        };
        match msg {
            FromDaemon::Update { endpoint, records } => {
                let Some(cib) = r.cib.upgrade() else { break };
                let now = Instant::now();
                let records = records.iter().filter_map(|p| p.to_record(now));
                lock(&cib).learn(&Arc::from(endpoint), records);
                r.counters.received.fetch_add(1, Ordering::Relaxed);
            }
            FromDaemon::Pib { dir } => {
                if let Some(pib) = r.pib.as_ref().and_then(Weak::upgrade) {
                    reload_pib(&pib, &dir);
                }
            }
            FromDaemon::Flushed { id } => {
                if let Some(done) = lock(&r.flushes).remove(&id) {
                    let _ = done.send(());
                }
            }
            FromDaemon::Hello { .. } => {}
        }
    }
    r.counters.connected.store(false, Ordering::Relaxed);
    lock(&r.flushes).clear();
    tracing::debug!("the policy manager went away; the CIB is this program's own again");
}

/// Sends queued messages, coalesced, until the context is dropped or a write fails.
async fn write_loop(mut write: OwnedWriteHalf, mut rx: mpsc::Receiver<Msg>, flushes: Flushes) {
    let mut next_id = 0u64;
    let mut out = Vec::with_capacity(WRITE_BATCH);
    while let Some(first) = rx.recv().await {
        out.clear();
        if matches!(first, Msg::Learn(..)) {
            // Let a burst of races gather: one write (and one wakeup of the daemon) per
            // batch instead of per race. A flush behind it waits this long at most.
            tokio::time::sleep(BATCH_DELAY).await;
        }
        let mut msg = Some(first);
        while let Some(m) = msg.take() {
            let line = match m {
                Msg::Learn(endpoint, records) => {
                    let now = Instant::now();
                    protocol::encode(&ToDaemon::Learn {
                        endpoint: endpoint.to_string(),
                        records: records
                            .iter()
                            .map(|r| PortableRecord::new(r, now))
                            .collect(),
                    })
                }
                Msg::Flush(done) => {
                    next_id += 1;
                    lock(&flushes).insert(next_id, done);
                    protocol::encode(&ToDaemon::Flush { id: next_id })
                }
            };
            out.extend_from_slice(&line);
            if out.len() < WRITE_BATCH {
                msg = rx.try_recv().ok();
            }
        }
        if write.write_all(&out).await.is_err() {
            break;
        }
    }
}
