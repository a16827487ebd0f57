//! `--paths`: a flow's paths as it ends, and the path changes it saw while it ran
//! (SCTP's path up and down, e.g. a failover), watched from the moment it connected, with
//! when each happened.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use serde_json::{json, Value};
use taps::{Connection, PathChange};
use tokio::task::JoinHandle;

/// A watch of one connection's path changes, running as its own task; what it has seen
/// so far is kept outside the task, so it outlives a watch that has not ended.
pub(super) struct PathWatch {
    task: JoinHandle<()>,
    seen: Arc<Mutex<Vec<(Duration, PathChange)>>>,
}

impl PathWatch {
    /// Starts watching `conn` (times count from `since`). `None` when it cannot be
    /// watched or is not SCTP. One spawned task per SCTP flow, only with `--paths`,
    /// `--trace` or `--json`.
    pub(super) fn start(conn: &Connection, since: Instant) -> Option<PathWatch> {
        // Only SCTP's paths change; other connections get no task.
        conn.sctp_stream()?;
        let mut changes = conn.path_changes().ok()?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let task = tokio::spawn(async move {
            while let Some(c) = changes.next().await {
                sink.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((since.elapsed(), c));
            }
        });
        Some(PathWatch { task, seen })
    }

    /// The changes seen so far (the watch goes on).
    pub(super) fn seen_so_far(&self) -> Vec<(Duration, PathChange)> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The changes seen, once the connection has closed: the watch ends with the
    /// association; if that takes more than a second more (the peer's end of the
    /// shutdown still on its way), the watch is given up and what it saw is returned.
    pub(super) async fn finish(self) -> Vec<(Duration, PathChange)> {
        let abort = self.task.abort_handle();
        if tokio::time::timeout(Duration::from_secs(1), self.task)
            .await
            .is_err()
        {
            abort.abort();
        }
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// `--fixed-paths`: pins `conn` to the path of its association numbered by its stream
/// (stream N to path N mod the number of paths, paths sorted by the peer's address), once
/// every path is confirmed (up to 2 s; then with those there are).
pub(super) async fn pin_fixed(conn: &Connection) -> Result<(), taps::Error> {
    let Some(stream) = conn.sctp_stream() else {
        return Ok(());
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut paths = loop {
        let paths = conn.paths()?;
        let confirmed = paths.iter().all(|p| p.state == taps::PathState::Active);
        if confirmed || Instant::now() >= deadline {
            break paths;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    paths.sort_by_key(|p| p.remote);
    match paths.get(usize::from(stream) % paths.len().max(1)) {
        Some(p) => conn.pin_to_path(Some(p.remote)),
        None => Ok(()),
    }
}

/// One change in `--json`: `{"at_ms", "remote", "change"}`.
pub(super) fn change_json((at, c): &(Duration, PathChange)) -> Value {
    json!({
        "at_ms": at.as_secs_f64() * 1e3,
        "remote": c.remote.to_string(),
        "change": c.kind.as_str(),
    })
}

/// One change as a line: `path change at T ms: REMOTE down`.
pub(super) fn write_change(
    out: &mut impl Write,
    (at, c): &(Duration, PathChange),
) -> std::io::Result<()> {
    writeln!(
        out,
        "path change at {:.1} ms: {} {}",
        at.as_secs_f64() * 1e3,
        c.remote,
        c.kind.as_str()
    )
}

/// One path in `--json`: addresses, state, primary, and the figures (times in ms).
pub(super) fn path_json(p: &taps::Path) -> Value {
    json!({
        "local": p.local.to_string(),
        "remote": p.remote.to_string(),
        "state": p.state.as_str(),
        "primary": p.primary,
        "srtt_ms": p.srtt.map(super::millis_f64),
        "rto_ms": p.rto.map(super::millis_f64),
        "cwnd": p.cwnd,
        "mtu": p.mtu,
        "bytes_sent": p.bytes_sent,
        "bytes_received": p.bytes_received,
    })
}

/// One path as a line: `path: LOCAL -> REMOTE STATE [primary] [srtt ..] [rto ..] ...`.
pub(super) fn write_path(
    out: &mut impl Write,
    flow: Option<usize>,
    p: &taps::Path,
) -> std::io::Result<()> {
    super::put_prefix(out, flow)?;
    write!(
        out,
        "path: {} -> {} {}",
        p.local,
        p.remote,
        p.state.as_str()
    )?;
    if p.primary {
        write!(out, " primary")?;
    }
    for (name, d) in [("srtt", p.srtt), ("rto", p.rto)] {
        if let Some(d) = d {
            write!(out, " {name} {:.1} ms", super::millis_f64(d))?;
        }
    }
    for (name, v) in [("cwnd", p.cwnd), ("mtu", p.mtu)] {
        if let Some(v) = v {
            write!(out, " {name} {v}")?;
        }
    }
    for (name, v) in [("sent", p.bytes_sent), ("received", p.bytes_received)] {
        if let Some(v) = v {
            write!(out, " {name} {v} B")?;
        }
    }
    writeln!(out)
}
