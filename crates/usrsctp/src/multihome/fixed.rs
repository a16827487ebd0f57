//! [`FixedPaths`]: the "Fixed" stream-to-path mapping (each stream's messages over one path,
//! the CMT scheduling the seed paper measures against round robin), on top of
//! [`Association::send_on_path`].

use std::collections::HashMap;
use std::sync::Mutex;

use super::{lock, PathId, PathState};
use crate::assoc::Association;
use crate::error::Result;

/// A stream → path map applied at send: a mapped stream's messages go to its path
/// (`SCTP_ADDR_OVER`), other streams' to the primary (or wherever CMT puts them). Needs the
/// process-wide CMT switch like [`Association::send_on_path`]. Mapping costs a hash-map
/// insert; each send one lookup under a mutex plus what the send costs.
#[derive(Debug)]
pub struct FixedPaths {
    assoc: Association,
    map: Mutex<HashMap<u16, PathId>>,
}

impl FixedPaths {
    /// An empty map over `assoc` (holds a clone of it). No I/O.
    pub fn new(assoc: &Association) -> FixedPaths {
        FixedPaths {
            assoc: assoc.clone(),
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Sends `stream`'s messages over `path` from now on. No I/O.
    pub fn pin(&self, stream: u16, path: PathId) {
        lock(&self.map).insert(stream, path);
    }

    /// Maps streams `streams` to `paths` round robin (stream i → paths[i % n]). No I/O.
    pub fn pin_round_robin(&self, streams: impl IntoIterator<Item = u16>, paths: &[PathId]) {
        if paths.is_empty() {
            return;
        }
        let mut m = lock(&self.map);
        for (i, s) in streams.into_iter().enumerate() {
            m.insert(s, paths[i % paths.len()]);
        }
    }

    /// The path `stream` is mapped to, if any. One lookup.
    pub fn path_of(&self, stream: u16) -> Option<PathId> {
        lock(&self.map).get(&stream).copied()
    }

    /// Moves the streams mapped to paths that are no longer active to the active paths
    /// (round robin over them); returns how many streams moved. usrsctp already moved what
    /// was queued for a failed path; this keeps new messages off it. One `paths()` call
    /// (a getsockopt per path): call it on a path event, not per message.
    pub fn remap_failed(&self) -> Result<usize> {
        let paths = self.assoc.paths()?;
        let active: Vec<PathId> = paths
            .iter()
            .filter(|p| p.state == PathState::Active)
            .map(|p| p.id)
            .collect();
        if active.is_empty() {
            return Ok(0);
        }
        let mut m = lock(&self.map);
        let mut moved = 0;
        for path in m.values_mut() {
            if !active.contains(path) {
                *path = active[moved % active.len()];
                moved += 1;
            }
        }
        Ok(moved)
    }

    /// Sends one message on `stream`: over its mapped path, else like
    /// [`Association::send`].
    pub async fn send(&self, stream: u16, data: &[u8], ordered: bool, ppid: u32) -> Result<()> {
        match self.path_of(stream) {
            Some(p) => {
                self.assoc
                    .send_on_path(p, stream, data, ordered, ppid)
                    .await
            }
            None => self.assoc.send(stream, data, ordered, ppid).await,
        }
    }
}
