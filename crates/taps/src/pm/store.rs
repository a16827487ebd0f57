//! The CIB file: written atomically and owner-only, read back with a size cap, and
//! ignored (with the reason) when it is not a CIB taps wrote.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

use taps_core::policy::Cib;
use taps_core::policy::MAX_FILE_BYTES;

/// Why a CIB file was not loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CibFileError {
    /// It could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// It is larger than any CIB taps writes.
    #[error("{path} is {size} bytes, over the {max}-byte cap of a CIB file")]
    TooLarge {
        /// The file.
        path: String,
        /// Its size (at least; reading stopped past the cap).
        size: u64,
        /// The cap ([`MAX_FILE_BYTES`]).
        max: u64,
    },
    /// It is not a taps CIB: not UTF-8, not JSON, truncated, another program's JSON, or
    /// another format version.
    #[error("{path}: {reason}")]
    NotACib {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Loads the CIB file at `path` into `cib` (merging with what it holds) and returns how
/// many outcomes it took. A missing file is an empty CIB (`Ok(0)`). The file is read at
/// most [`MAX_FILE_BYTES`] + 1 bytes far. Cost: one read and one JSON parse of the file.
pub fn load_cib_file(cib: &mut Cib, path: &Path) -> Result<usize, CibFileError> {
    let shown = || path.display().to_string();
    let read_err = |source| CibFileError::Read {
        path: shown(),
        source,
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(read_err(e)),
    };
    let size = file.metadata().map_err(read_err)?.len();
    let too_large = |size| CibFileError::TooLarge {
        path: shown(),
        size,
        max: MAX_FILE_BYTES,
    };
    if size > MAX_FILE_BYTES {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    let text = String::from_utf8(bytes).map_err(|_| CibFileError::NotACib {
        path: shown(),
        reason: "not a taps CIB file (not UTF-8 text)".into(),
    })?;
    cib.load_json(&text, Instant::now(), SystemTime::now())
        .map_err(|reason| CibFileError::NotACib {
            path: shown(),
            reason,
        })
}

/// Loads the CIB file like [`load_cib_file`], logging a `tracing` warning instead of
/// failing: a bad CIB file never stops a program, it only costs the cache.
pub(crate) fn load_or_warn(cib: &mut Cib, path: &Path) {
    if let Err(e) = load_cib_file(cib, path) {
        tracing::warn!("ignoring the CIB file: {e}");
    }
}

/// Writes `cib` to `path` atomically: a temporary file in the same directory created
/// owner-only (0600), written, `fsync`ed and renamed over `path`, then the directory
/// `fsync`ed. A reader sees the old file or the new one, never a mix; concurrent writers
/// each replace the file whole. Cost: a serialisation, two `fsync`s and a rename.
pub fn save_cib_file(cib: &Cib, path: &Path) -> std::io::Result<()> {
    let text = cib.to_json(Instant::now(), SystemTime::now());
    write_atomic(path, text.as_bytes())
}

/// The atomic, owner-only write [`save_cib_file`] does, for any bytes.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} names no file", path.display())))?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    // The rename is durable once the directory is synced; failing that is not an error
    // of the write (some file systems do not sync directories).
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
