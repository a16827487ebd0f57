//! The daemon `taps pm` runs: one CIB for every taps program of this user.
//!
//! Every client's `learn` line is applied under one lock, in arrival order (so no update
//! is lost however many programs write at once) and forwarded to every other client
//! under the same lock (so a new client's snapshot plus the updates after it are exactly
//! the CIB). The CIB file is saved atomically at most once per `save_every` when it
//! changed, and at shutdown. The PIB directory is polled every `pib_poll` (file names,
//! sizes, modification times); when it changed and still loads, clients are told to
//! reload it (each reads the files itself: same user, no PIB on the wire).

use std::future::Future;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener as StdListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use taps_core::policy::{Cib, CibConfig, Pib, PortableRecord};
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;

use super::protocol::{self, FromDaemon, ToDaemon, VERSION};
use super::{current_uid, private_dir, store};

/// Lines queued for one client at most; a client that falls further behind misses
/// updates (counted), never slows the others.
const CLIENT_QUEUE: usize = 4096;
/// Clients served at once at most (same user only; a bound on descriptors).
const MAX_CLIENTS: usize = 1024;

/// What the daemon serves and where.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// The socket (its directory is created 0700 if missing).
    pub socket: PathBuf,
    /// The CIB file: loaded at start, saved when the CIB changed.
    pub cib_file: Option<PathBuf>,
    /// The PIB directory clients load on top of the built-in PIB.
    pub pib_dir: Option<PathBuf>,
    /// The CIB's limits.
    pub cib: CibConfig,
    /// How often a changed CIB is saved at most.
    pub save_every: Duration,
    /// How often the PIB directory is checked for changes.
    pub pib_poll: Duration,
}

impl DaemonConfig {
    /// A configuration listening on `socket`, without files; saves and polls every second.
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        DaemonConfig {
            socket: socket.into(),
            cib_file: None,
            pib_dir: None,
            cib: CibConfig::default(),
            save_every: Duration::from_secs(1),
            pib_poll: Duration::from_secs(1),
        }
    }
}

/// What the daemon has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DaemonStats {
    /// Clients accepted.
    pub clients: u64,
    /// `learn` lines applied.
    pub updates: u64,
    /// Updates not forwarded to a client whose queue was full.
    pub lagged: u64,
    /// Times the CIB file was written.
    pub saves: u64,
    /// Times clients were told to reload the PIB.
    pub pib_reloads: u64,
}

/// A connected client: its id and the queue of lines its writer sends.
type Subscriber = (u64, mpsc::Sender<Arc<[u8]>>);

struct State {
    cib: Mutex<Cib>,
    subscribers: Mutex<Vec<Subscriber>>,
    pib: Mutex<Option<PathBuf>>,
    dirty: AtomicBool,
    next_id: AtomicU64,
    clients: AtomicU64,
    updates: AtomicU64,
    lagged: AtomicU64,
    saves: AtomicU64,
    pib_reloads: AtomicU64,
}

/// A bound policy manager, ready to [`run`](Daemon::run).
pub struct Daemon {
    listener: StdListener,
    config: DaemonConfig,
    state: Arc<State>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Daemon {
    /// Prepares the socket's directory (0700, this user's), binds the socket (0600),
    /// loads the CIB file (a bad one is ignored with a warning) and checks the PIB
    /// directory loads. Fails when another daemon already answers on the socket.
    pub fn bind(config: DaemonConfig) -> std::io::Result<Daemon> {
        if let Some(dir) = config.socket.parent().filter(|d| !d.as_os_str().is_empty()) {
            private_dir(dir)?;
        }
        if std::os::unix::net::UnixStream::connect(&config.socket).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!(
                    "a policy manager already listens on {}",
                    config.socket.display()
                ),
            ));
        }
        match std::fs::remove_file(&config.socket) {
            Ok(()) => tracing::info!("removed a stale socket {}", config.socket.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let listener = StdListener::bind(&config.socket)?;
        // The directory is 0700, so nobody else reaches the socket before this.
        std::fs::set_permissions(&config.socket, std::fs::Permissions::from_mode(0o600))?;
        let mut cib = Cib::new(config.cib);
        if let Some(file) = &config.cib_file {
            store::load_or_warn(&mut cib, file);
        }
        if let Some(dir) = &config.pib_dir {
            Pib::builtin()
                .load_dir(dir)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        }
        let state = Arc::new(State {
            cib: Mutex::new(cib),
            subscribers: Mutex::new(Vec::new()),
            pib: Mutex::new(config.pib_dir.clone()),
            dirty: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            clients: AtomicU64::new(0),
            updates: AtomicU64::new(0),
            lagged: AtomicU64::new(0),
            saves: AtomicU64::new(0),
            pib_reloads: AtomicU64::new(0),
        });
        Ok(Daemon {
            listener,
            config,
            state,
        })
    }

    /// The socket it listens on.
    pub fn socket(&self) -> &Path {
        &self.config.socket
    }

    /// A handle on its state, for inspection while it runs.
    pub fn handle(&self) -> DaemonHandle {
        DaemonHandle {
            state: self.state.clone(),
        }
    }

    /// Serves clients until `shutdown` completes, then saves the CIB and removes the
    /// socket. Must run inside a tokio runtime.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
        self.listener.set_nonblocking(true)?;
        let listener = UnixListener::from_std(self.listener)?;
        let state = self.state;
        let config = self.config;
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(save_loop(state.clone(), config.clone()));
        if let Some(dir) = config.pib_dir.clone() {
            tasks.spawn(pib_loop(state.clone(), dir, config.pib_poll));
        }
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                // Reap finished client tasks (a JoinSet keeps them until joined).
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                accepted = listener.accept() => {
                    let stream = match accepted {
                        Ok((stream, _)) => stream,
                        Err(e) => {
                            // Out of descriptors, most likely: wait instead of spinning.
                            tracing::warn!("policy manager: accept failed: {e}");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    };
                    if lock(&state.subscribers).len() >= MAX_CLIENTS {
                        tracing::warn!("policy manager: {MAX_CLIENTS} clients already, refusing one");
                        continue;
                    }
                    tasks.spawn(serve(state.clone(), stream));
                }
            }
        }
        tasks.abort_all();
        drop(listener);
        let _ = std::fs::remove_file(&config.socket);
        if let Some(file) = &config.cib_file {
            save(&state, file).await;
        }
        Ok(())
    }
}

/// Inspects a daemon's state (tests, logs). Cheap to clone.
#[derive(Clone)]
pub struct DaemonHandle {
    state: Arc<State>,
}

impl DaemonHandle {
    /// Runs `f` on the daemon's CIB (under its lock: keep it short).
    pub fn with_cib<R>(&self, f: impl FnOnce(&Cib) -> R) -> R {
        f(&lock(&self.state.cib))
    }

    /// Its counters.
    pub fn stats(&self) -> DaemonStats {
        let s = &self.state;
        DaemonStats {
            clients: s.clients.load(Ordering::Relaxed),
            updates: s.updates.load(Ordering::Relaxed),
            lagged: s.lagged.load(Ordering::Relaxed),
            saves: s.saves.load(Ordering::Relaxed),
            pib_reloads: s.pib_reloads.load(Ordering::Relaxed),
        }
    }
}

/// One client: the hello, then its lines in, others' updates out.
async fn serve(state: Arc<State>, stream: UnixStream) {
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == current_uid() => {}
        _ => return, // the 0700 directory should make this impossible
    }
    state.clients.fetch_add(1, Ordering::Relaxed);
    let id = state.next_id.fetch_add(1, Ordering::Relaxed);
    let (tx, mut rx) = mpsc::channel::<Arc<[u8]>>(CLIENT_QUEUE);
    let hello = {
        // Snapshot and subscribe under the CIB's lock: no update falls in between.
        let cib = lock(&state.cib);
        lock(&state.subscribers).push((id, tx.clone()));
        protocol::encode(&FromDaemon::Hello {
            version: VERSION,
            cib: cib.to_json_line(Instant::now(), SystemTime::now()),
            pib: lock(&state.pib).clone(),
        })
    };
    let (read, mut write) = stream.into_split();
    let writer = tokio::spawn(async move {
        write.write_all(&hello).await?;
        while let Some(line) = rx.recv().await {
            write.write_all(&line).await?;
        }
        std::io::Result::Ok(())
    });
    let mut lines = tokio::io::BufReader::new(read);
    let mut buf = Vec::new();
    while let Ok(true) = protocol::read_line(&mut lines, &mut buf).await {
        match protocol::decode::<ToDaemon>(&buf) {
            Ok(ToDaemon::Learn { endpoint, records }) => learn(&state, id, endpoint, records),
            Ok(ToDaemon::Flush { id: flush }) => {
                let line = protocol::encode(&FromDaemon::Flushed { id: flush });
                if tx.send(line.into()).await.is_err() {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!("policy manager: dropping a client: {e}");
                break;
            }
        }
    }
    lock(&state.subscribers).retain(|(i, _)| *i != id);
    drop(tx);
    // Let the writer drain what is queued (a gone client fails it at once).
    let _ = writer.await;
}

/// Applies one client's race to the CIB and forwards it to every other client, both
/// under the CIB's lock (the order every client sees is the order applied).
fn learn(state: &State, from: u64, endpoint: String, records: Vec<PortableRecord>) {
    let now = Instant::now();
    let key: Arc<str> = endpoint.as_str().into();
    let line: Arc<[u8]> = protocol::encode(&FromDaemon::Update {
        endpoint,
        records: records.clone(),
    })
    .into();
    let mut cib = lock(&state.cib);
    cib.learn(&key, records.iter().filter_map(|r| r.to_record(now)));
    state.updates.fetch_add(1, Ordering::Relaxed);
    state.dirty.store(true, Ordering::Relaxed);
    for (id, tx) in lock(&state.subscribers).iter() {
        if *id != from && tx.try_send(line.clone()).is_err() {
            state.lagged.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn save_loop(state: Arc<State>, config: DaemonConfig) {
    let Some(file) = config.cib_file else { return };
    let mut tick = tokio::time::interval(config.save_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if state.dirty.swap(false, Ordering::Relaxed) {
            save(&state, &file).await;
        }
    }
}

/// Writes the CIB file off the runtime's threads; a failure is logged, not fatal.
async fn save(state: &Arc<State>, file: &Path) {
    let text = lock(&state.cib).to_json(Instant::now(), SystemTime::now());
    let path = file.to_path_buf();
    let written =
        tokio::task::spawn_blocking(move || store::write_atomic(&path, text.as_bytes())).await;
    match written {
        Ok(Ok(())) => {
            state.saves.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Err(e)) => tracing::warn!("policy manager: cannot save {}: {e}", file.display()),
        Err(e) => tracing::warn!("policy manager: saving {} failed: {e}", file.display()),
    }
}

/// Names, sizes and modification times of the files `Pib::load_dir` reads.
fn fingerprint(dir: &Path) -> Vec<(PathBuf, u64, i64, i64)> {
    let mut seen = Vec::new();
    for sub in ["", "profiles", "policies"] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for entry in entries.flatten() {
            if let Ok(m) = entry.metadata() {
                seen.push((entry.path(), m.len(), m.mtime(), m.mtime_nsec()));
            }
        }
    }
    seen.sort();
    seen
}

async fn pib_loop(state: Arc<State>, dir: PathBuf, every: Duration) {
    let mut last = fingerprint(&dir);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = fingerprint(&dir);
        if now == last {
            continue;
        }
        last = now;
        if let Err(e) = Pib::builtin().load_dir(&dir) {
            tracing::warn!(
                "policy manager: the PIB in {} does not load, clients keep theirs: {e}",
                dir.display()
            );
            continue;
        }
        tracing::info!(
            "policy manager: the PIB in {} changed; clients reload it",
            dir.display()
        );
        state.pib_reloads.fetch_add(1, Ordering::Relaxed);
        let line: Arc<[u8]> = protocol::encode(&FromDaemon::Pib { dir: dir.clone() }).into();
        for (_, tx) in lock(&state.subscribers).iter() {
            if tx.try_send(line.clone()).is_err() {
                state.lagged.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
