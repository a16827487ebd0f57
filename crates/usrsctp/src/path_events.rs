//! Path ids and path events (`SCTP_PEER_ADDR_CHANGE`): the table the association driver
//! feeds and the multihoming module's `PathEvents` reads. No usrsctp calls.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, LazyLock, Mutex};

use tokio::sync::Notify;

use crate::ffi;
use crate::sys::{lock, Sock};

/// One path of an association, as usrsctp names it (its conn address). Copying is free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PathId(pub(crate) usize);

/// What happened to a path (`SCTP_PEER_ADDR_CHANGE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathEventKind {
    /// Reachable again.
    Available,
    /// Unreachable (`pathmaxrxt` timeouts).
    Unreachable,
    /// Removed from the association.
    Removed,
    /// Added to the association.
    Added,
    /// Became the primary path.
    MadePrimary,
    /// Confirmed by a HEARTBEAT-ACK.
    Confirmed,
    /// Potentially failed (RFC 7829).
    PotentiallyFailed,
    /// Another value usrsctp reported.
    Other(u32),
}

/// One path event. Plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathEvent {
    /// The path (None if usrsctp named a non-AF_CONN address).
    pub path: Option<PathId>,
    /// What happened.
    pub kind: PathEventKind,
    /// usrsctp's error code for the change (0 if none).
    pub error: u32,
}

/// Path events of associations whose events someone watches, keyed by usrsctp socket.
pub(crate) static EVENTS: LazyLock<Mutex<HashMap<usize, Arc<EventLog>>>> =
    LazyLock::new(Default::default);

/// Events kept per association until read; older ones are dropped beyond this.
const EVENT_LOG_MAX: usize = 256;

#[derive(Default)]
pub(crate) struct EventLog {
    pub(crate) events: Mutex<VecDeque<PathEvent>>,
    pub(crate) notify: Notify,
}

pub(crate) fn sock_key(sock: &Arc<Sock>) -> usize {
    Arc::as_ptr(sock) as usize
}

/// The driver's hook for an `SCTP_PEER_ADDR_CHANGE` notification `n` of `sock`: parsed and
/// queued if someone watches (one table lookup), else ignored. Never calls usrsctp.
pub(crate) fn on_peer_addr_change(sock: &Arc<Sock>, n: &[u8]) {
    let Some(log) = lock(&EVENTS).get(&sock_key(sock)).cloned() else {
        return;
    };
    let Some(ev) = parse_peer_addr_change(n) else {
        return;
    };
    let mut q = lock(&log.events);
    if q.len() >= EVENT_LOG_MAX {
        q.pop_front();
    }
    q.push_back(ev);
    drop(q);
    log.notify.notify_waiters();
}

/// Parses `struct sctp_paddr_change` (type, flags, length, address at 8, state at 136, error
/// at 140). None if too short.
fn parse_peer_addr_change(n: &[u8]) -> Option<PathEvent> {
    let u32_at = |o: usize| Some(u32::from_ne_bytes(n.get(o..o + 4)?.try_into().ok()?));
    // spc_aaddr at 8 holds a sockaddr_conn: family (u16) at +0, the conn pointer at +8.
    let family = u16::from_ne_bytes(n.get(8..10)?.try_into().ok()?);
    let conn = usize::from_ne_bytes(
        n.get(16..16 + std::mem::size_of::<usize>())?
            .try_into()
            .ok()?,
    );
    let state = u32_at(136)?;
    let error = u32_at(140)?;
    let kind = match state {
        1 => PathEventKind::Available,
        2 => PathEventKind::Unreachable,
        3 => PathEventKind::Removed,
        4 => PathEventKind::Added,
        5 => PathEventKind::MadePrimary,
        6 => PathEventKind::Confirmed,
        7 => PathEventKind::PotentiallyFailed,
        other => PathEventKind::Other(other),
    };
    Some(PathEvent {
        path: (i32::from(family) == ffi::AF_CONN).then_some(PathId(conn)),
        kind,
        error,
    })
}
