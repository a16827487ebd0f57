//! The policy manager's wire protocol: one compact JSON object per line (`\n`-ended) in
//! each direction over a Unix stream socket. A line is at most [`MAX_LINE`] bytes; a
//! longer one ends the connection.
//!
//! Client to daemon: `learn` (what one race found out) and `flush` (answer when every
//! earlier line is applied). Daemon to client: `hello` first (the CIB snapshot and the PIB
//! directory), then `update` (another program's race), `pib` (the PIB directory changed:
//! reload it) and `flushed`. Cost: encoding a race's `learn` line (about 150 bytes per
//! attempt) takes a few microseconds, in the client's background task, never in the race.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use taps_core::policy::PortableRecord;
use taps_core::policy::MAX_FILE_BYTES;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

/// The protocol version the `hello` line carries.
pub(crate) const VERSION: u32 = 1;

/// The longest line either side accepts: a snapshot of a full CIB fits.
pub(crate) const MAX_LINE: u64 = MAX_FILE_BYTES;

/// A line a client sends.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "m", rename_all = "snake_case")]
pub(crate) enum ToDaemon {
    /// What one race found out about `endpoint`.
    Learn {
        /// The remote endpoint as the application named it.
        endpoint: String,
        /// The attempts' outcomes.
        records: Vec<PortableRecord>,
    },
    /// Answer `flushed` with this id once every earlier line is applied.
    Flush {
        /// Echoed back.
        id: u64,
    },
}

/// A line the daemon sends.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "m", rename_all = "snake_case")]
pub(crate) enum FromDaemon {
    /// The first line: protocol version, the CIB as `Cib::to_json_line` writes it, and the
    /// PIB directory the daemon serves (if any).
    Hello {
        /// Protocol version.
        version: u32,
        /// The CIB snapshot.
        cib: String,
        /// The PIB directory clients load on top of the built-in PIB.
        pib: Option<PathBuf>,
    },
    /// Another program's race.
    Update {
        /// The remote endpoint.
        endpoint: String,
        /// The attempts' outcomes.
        records: Vec<PortableRecord>,
    },
    /// The PIB directory changed (and still loads): clients reload it.
    Pib {
        /// The directory.
        dir: PathBuf,
    },
    /// Every line before the `flush` with this id is applied.
    Flushed {
        /// The flush's id.
        id: u64,
    },
}

/// Encodes a message as one line (newline included).
pub(crate) fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    let mut line = serde_json::to_vec(msg).expect("protocol messages serialise");
    line.push(b'\n');
    line
}

/// Decodes one line (without its newline).
pub(crate) fn decode<'a, T: Deserialize<'a>>(line: &'a [u8]) -> Result<T, String> {
    serde_json::from_slice(line).map_err(|e| format!("bad policy manager message: {e}"))
}

/// Reads one line into `buf` (cleared first, newline stripped). `Ok(false)` at the end of
/// the stream; an error for a line over [`MAX_LINE`] or one cut off by the end.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
) -> std::io::Result<bool> {
    buf.clear();
    let n = (&mut *reader)
        .take(MAX_LINE + 1)
        .read_until(b'\n', buf)
        .await?;
    if n == 0 {
        return Ok(false);
    }
    if buf.last() != Some(&b'\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            if n as u64 > MAX_LINE {
                "policy manager line too long"
            } else {
                "policy manager line cut off"
            },
        ));
    }
    buf.pop();
    Ok(true)
}
