//! `--paths`: the path changes a flow saw while it ran (SCTP's path up and down, e.g. a
//! failover), watched from the moment it connected, with when each happened.

use std::io::Write;
use std::time::Duration;

use tokio::time::Instant;

use serde_json::{json, Value};
use taps::{Connection, PathChange};
use tokio::task::JoinHandle;

/// A watch of one connection's path changes, running as its own task.
pub(super) struct PathWatch {
    task: JoinHandle<Vec<(Duration, PathChange)>>,
}

impl PathWatch {
    /// Starts watching `conn` (times count from `since`). `None` when it cannot be
    /// watched or is not SCTP. One spawned task per SCTP flow, only with `--paths`,
    /// `--trace` or `--json`.
    pub(super) fn start(conn: &Connection, since: Instant) -> Option<PathWatch> {
        // Only SCTP's paths change; other connections get no task.
        conn.sctp_stream()?;
        let mut changes = conn.path_changes().ok()?;
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some(c) = changes.next().await {
                seen.push((since.elapsed(), c));
            }
            seen
        });
        Some(PathWatch { task })
    }

    /// The changes seen, once the connection has closed (the watch ends with it; waits
    /// at most a second more, then takes what it has by giving up the rest).
    pub(super) async fn finish(self) -> Vec<(Duration, PathChange)> {
        let abort = self.task.abort_handle();
        match tokio::time::timeout(Duration::from_secs(1), self.task).await {
            Ok(Ok(seen)) => seen,
            _ => {
                abort.abort();
                Vec::new()
            }
        }
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
