//! Path ids and path events (`SCTP_PEER_ADDR_CHANGE`): the table the association driver
//! feeds and the multihoming module's `PathEvents` reads. No usrsctp calls.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, LazyLock, Mutex};

use tokio::sync::Notify;

use crate::ffi;
use crate::sys::{lock, Sock};

/// One path of an association, as usrsctp names it: its conn address (AF_CONN
/// associations) or the peer's IP address (IP mode). Copying is free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PathId(pub(crate) PathKey);

/// What a [`PathId`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PathKey {
    /// An AF_CONN conn address.
    Conn(usize),
    /// The peer's IP address on an IP-mode path.
    Ip(IpAddr),
}

impl PathId {
    /// The peer's IP address of an IP-mode path (`None` for an AF_CONN one).
    pub fn ip(&self) -> Option<IpAddr> {
        match self.0 {
            PathKey::Ip(ip) => Some(ip),
            PathKey::Conn(_) => None,
        }
    }

    /// The IP-mode path to the peer's address `ip` (whether the association has it is
    /// checked where it is used).
    pub fn from_ip(ip: IpAddr) -> PathId {
        PathId(PathKey::Ip(ip))
    }

    /// The path's address as usrsctp's socket options take it.
    pub(crate) fn storage(&self) -> libc::sockaddr_storage {
        match self.0 {
            PathKey::Conn(c) => ffi::conn_storage(c),
            PathKey::Ip(ip) => ffi::ip_storage(SocketAddr::new(ip, 0)).0,
        }
    }

    /// The path named by a socket option's address (`None` for an unknown family).
    pub(crate) fn from_storage(ss: &libc::sockaddr_storage) -> Option<PathId> {
        if let Some(c) = ffi::storage_conn(ss) {
            return Some(PathId(PathKey::Conn(c)));
        }
        ffi::ip_addr_of(ss).map(|a| PathId(PathKey::Ip(a.ip())))
    }
}

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
    /// The path (None if usrsctp named an address of another family).
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
    // spc_aaddr at 8 is a sockaddr_storage (128 bytes).
    let ss = ffi::storage_from_bytes(n.get(8..136)?);
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
        path: PathId::from_storage(&ss),
        kind,
        error,
    })
}
