//! The host-wide policy manager (`taps pm`): one daemon per user owns the CIB (and serves
//! the PIB directory) for every taps program of that user, over a Unix socket only the
//! user can reach (0600 socket in a 0700 directory).
//!
//! - [`daemon`]: applies every program's race outcomes to one CIB, one at a time (no
//!   update is lost with concurrent writers), pushes each to the other programs, saves the
//!   CIB file atomically when it changed (at most once a second) and polls the PIB
//!   directory once a second, telling clients to reload it when it changed.
//! - `client` (inside every [`Context`](crate::Context) by default): at build, one
//!   non-blocking `connect`; when a daemon answers, its snapshot is read (at most
//!   [`SNAPSHOT_BUDGET`]) and a background task sends each race's outcomes and merges
//!   the others'. The race never waits on the daemon: outcomes go through a bounded
//!   channel, dropped (and counted) when it is full.
//! - `protocol`: one JSON line per message; [`store`]: the CIB file.

pub(crate) mod client;
pub mod daemon;
pub(crate) mod protocol;
pub mod store;

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use daemon::{Daemon, DaemonConfig, DaemonHandle, DaemonStats};
pub use store::{load_cib_file, save_cib_file, CibFileError};

/// The environment variable naming the socket (`off` or empty: use no daemon).
pub const SOCKET_ENV: &str = "TAPS_PM_SOCKET";

/// The longest a context build waits for the daemon's snapshot before it goes on alone.
pub const SNAPSHOT_BUDGET: Duration = Duration::from_millis(50);

/// Whether and where a [`Context`](crate::Context) reaches the policy manager.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PolicyManager {
    /// The socket `TAPS_PM_SOCKET` names (`off` or empty: none), else [`default_socket`];
    /// used when a daemon listens there. The default, except for a context with its own
    /// CIB file, which keeps its own CIB.
    #[default]
    Auto,
    /// This socket, when a daemon listens there.
    Socket(PathBuf),
    /// No daemon: the context's CIB is its own.
    Off,
}

impl PolicyManager {
    /// The socket to try, if any. Cost: an environment lookup (and `getuid`).
    pub fn socket(&self) -> Option<PathBuf> {
        match self {
            PolicyManager::Off => None,
            PolicyManager::Socket(p) => Some(p.clone()),
            PolicyManager::Auto => match std::env::var_os(SOCKET_ENV) {
                Some(v) if v.is_empty() || v == "off" => None,
                Some(v) => Some(PathBuf::from(v)),
                None => Some(default_socket()),
            },
        }
    }
}

/// Where `taps pm` listens by default: `$XDG_RUNTIME_DIR/taps/pm.sock`, else
/// `/tmp/taps-<uid>/pm.sock`.
pub fn default_socket() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("taps").join("pm.sock"),
        _ => PathBuf::from(format!("/tmp/taps-{}", current_uid())).join("pm.sock"),
    }
}

/// What a context's link to the policy manager has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PmStats {
    /// Whether the daemon is still connected.
    pub connected: bool,
    /// Races whose outcomes were queued for the daemon.
    pub sent: u64,
    /// Races whose outcomes were dropped because the queue was full.
    pub dropped: u64,
    /// Updates from other programs merged into this context's CIB.
    pub received: u64,
}

/// The real user id of this process.
#[allow(unsafe_code)]
pub(crate) fn current_uid() -> u32 {
    // SAFETY: getuid takes no arguments, touches no memory of ours and cannot fail.
    unsafe { libc::getuid() }
}

/// Makes sure `dir` exists, belongs to this user and only this user can enter it: it is
/// created 0700 when missing; an existing one owned by someone else, or open to others,
/// is refused (someone else could replace the socket).
pub(crate) fn private_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    let refuse = |why: String| {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("refusing socket directory {}: {why}", dir.display()),
        ))
    };
    if !meta.is_dir() {
        return refuse("not a directory".into());
    }
    if meta.uid() != current_uid() {
        return refuse(format!(
            "owned by uid {}, not by this user ({})",
            meta.uid(),
            current_uid()
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return refuse(format!(
            "mode {mode:o} lets others in (want 700: chmod 700 {})",
            dir.display()
        ));
    }
    Ok(())
}
