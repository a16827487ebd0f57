//! SCTP multihoming over our UDP sockets: extra paths of an association, path state and
//! events, the primary path, per-path parameters, sends pinned to a path, CMT and NR-SACK.
//!
//! Model: one path = one AF_CONN conn address = one UDP socket (or remote) of ours. An
//! association starts with the path it was set up on; [`SctpPath::open`] makes another
//! (a UDP socket bound to a local address and connected to the peer's address for that
//! path) and [`Association::add_peer_path`] adds it to an established association on *each*
//! side (stock usrsctp cannot: it never lists AF_CONN addresses in INIT and has no ADD-IP for
//! them, so a small C shim compiled against usrsctp's own headers does it, see build.rs). The
//! new path is confirmed by a HEARTBEAT round trip before it carries data. Until a path is
//! added on this side its datagrams are dropped, never given to usrsctp (which would answer a
//! packet from an unknown path with an ABORT).
//!
//! Costs: a path is one UDP socket, one reader task and one conn address; each call below is
//! one or two socket options under the usrsctp lock unless it says otherwise.

use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

use crate::assoc::Association;
use crate::cmt::{set_cmt, CmtMode};
use crate::error::{Error, Result};
use crate::ffi;
use crate::path_events::{sock_key, EventLog, EVENTS};
use crate::path_events::{PathEvent, PathId};
use crate::sys::{global, lock, ConnAddr, Route};
use crate::udp::{with_recv_buf, UdpCount};

/// Reachability of a path (`spinfo_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathState {
    /// Reachable: may carry data.
    Active,
    /// Unreachable: `pathmaxrxt` consecutive timeouts; heartbeats continue.
    Inactive,
    /// Not yet confirmed by a HEARTBEAT-ACK: carries no data, cannot be primary.
    Unconfirmed,
    /// Another value usrsctp reported.
    Other(i32),
}

/// One path as usrsctp sees it (`SCTP_GET_PEER_ADDR_INFO`). Plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathInfo {
    /// The path.
    pub id: PathId,
    /// The UDP addresses it runs over, this side's and the peer's (`None` if the path's
    /// socket is gone).
    pub addrs: Option<(SocketAddr, SocketAddr)>,
    /// Reachability.
    pub state: PathState,
    /// Whether data without a destination goes here (`SCTP_PRIMARY_ADDR`).
    pub primary: bool,
    /// Congestion window in bytes.
    pub cwnd: u32,
    /// Smoothed round-trip time in ms.
    pub srtt_ms: u32,
    /// Retransmission timeout in ms.
    pub rto_ms: u32,
    /// Path MTU in bytes (a new AF_CONN path starts at 1280).
    pub mtu: u32,
    /// Bytes of SCTP packets sent on the path (every chunk, retransmissions included);
    /// `None` in IP mode where usrsctp's output could not be hooked.
    pub bytes_sent: Option<u64>,
    /// Bytes of SCTP packets received on the path.
    pub bytes_received: Option<u64>,
}

/// Per-path parameters (`SCTP_PEER_ADDR_PARAMS`); `None` leaves a value unchanged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathParams {
    /// Heartbeat interval in ms (enables heartbeats).
    pub heartbeat_interval_ms: Option<u32>,
    /// Consecutive timeouts after which the path is unreachable (`spp_pathmaxrxt`).
    pub max_retransmits: Option<u16>,
    /// Fixed path MTU in bytes (disables path MTU discovery on the path).
    pub mtu: Option<u32>,
}

/// Per-path failure thresholds (`SCTP_PEER_ADDR_THLDS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathThresholds {
    /// Consecutive timeouts after which the path is unreachable.
    pub max_retransmits: u16,
    /// Consecutive timeouts after which the path is "potentially failed" (RFC 7829): no new
    /// data goes there while another path is active. Must not exceed `max_retransmits`.
    pub pf_threshold: u16,
}

/// CMT buffer splitting (sysctl `sctp_buffer_splitting`): with CMT on, each path gets a
/// 1/n share of the send buffer and/or of the peer's receive window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BufferSplitting {
    /// No splitting (usrsctp's default).
    #[default]
    Off,
    /// Split the send buffer.
    Send,
    /// Split the peer's receive window.
    Receive,
    /// Both.
    Both,
}

/// The process-wide CMT sysctls; they apply to every association of the process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmtGlobal {
    /// `sctp_cmt_on_off`: allows CMT ([`crate::SctpOptions::cmt`]); new sockets inherit CMT base.
    pub cmt: bool,
    /// `sctp_cmt_use_dac`: delayed-ack for CMT (fewer spurious fast retransmits).
    pub dac: bool,
    /// `sctp_buffer_splitting`.
    pub buffer_splitting: BufferSplitting,
    /// Max.Burst limits the packets of each send and leaves the congestion window alone
    /// (`sctp_use_cwnd_based_maxburst` 0). Off (usrsctp's default), a path whose flight is
    /// more than Max.Burst packets under its window when data is sent has its window cut
    /// to the flight plus Max.Burst packets; a path that is often short of data for a
    /// moment (a stream pinned to it waiting behind the other path's, CMT's normal case)
    /// then keeps a window of a few packets for good: docs/sctp.md, "Multihoming".
    pub max_burst_per_send: bool,
}

/// Sets the process-wide CMT sysctls (initialising usrsctp if needed). Four calls; affects
/// every socket of the process, so set [`crate::SctpOptions::cmt`] explicitly (also
/// `Some(CmtMode::Off)`) on sockets that must not use CMT.
pub fn set_cmt_global(g: &CmtGlobal) -> Result<()> {
    let _ = global();
    let split = match g.buffer_splitting {
        BufferSplitting::Off => 0,
        BufferSplitting::Send => 1,
        BufferSplitting::Receive => 2,
        BufferSplitting::Both => 3,
    };
    ffi::set_cmt_sysctls(u32::from(g.cmt), g.dac, split, !g.max_burst_per_send)
}

/// Sets the process-wide sysctl `sctp_peer_chunk_oh` (initialising usrsctp if needed): the
/// bytes charged against the peer's receive window for every chunk in flight, 256 by
/// default (about 15 % of the window with 1.4 KB messages). One call; affects every
/// association of the process.
pub fn set_peer_chunk_overhead(bytes: u32) -> Result<()> {
    let _ = global();
    ffi::set_peer_chunk_oh(bytes)
}

/// Sets the process-wide sysctl `sctp_do_drain` (initialising usrsctp if needed): with
/// `renege` (usrsctp's default) a receiver may drop out-of-order data it has not yet
/// delivered when memory runs short, so an NR-SACK's non-renegable blocks cover only
/// data delivered to the socket; without, every chunk is non-renegable on arrival and
/// the sender may free it at once (as the simulator of the CMT scheduling paper does).
/// One call; affects every association of the process.
pub fn set_renege(renege: bool) -> Result<()> {
    let _ = global();
    ffi::set_do_drain(u32::from(renege))
}

/// Whether this build and process can add peer paths ([`Association::add_peer_path`]):
/// the shim is compiled in and the loaded libusrsctp is the build it was compiled for.
/// The error says why not and what to do. First call: one walk of the loaded objects; then
/// one atomic load.
pub fn multihome_available() -> Result<()> {
    let _ = global();
    ffi::multihome_ready()
}

/// Counters of an [`SctpPath`]'s reader. Plain integers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathStats {
    /// Datagrams handed to usrsctp.
    pub datagrams_in: u64,
    /// Their bytes.
    pub bytes_in: u64,
    /// Datagrams dropped because the path was not (or no longer) part of an association.
    pub dropped_unattached: u64,
}

#[derive(Default)]
struct PathShared {
    attached: AtomicBool,
    datagrams_in: AtomicU64,
    bytes_in: AtomicU64,
    dropped: AtomicU64,
}

/// An extra path endpoint: a UDP socket bound to a local address and connected to the
/// peer's address for this path (so the kernel drops datagrams from anyone else), a conn
/// address routed to it, and a reader task. Not part of any association until
/// [`Association::add_peer_path`]; until then what arrives is dropped and counted. Costs one
/// UDP socket, one task and one conn address; dropping it frees them.
pub struct SctpPath {
    shared: Arc<PathShared>,
    task: JoinHandle<()>,
    local: SocketAddr,
    remote: SocketAddr,
    // Dropped after the task is aborted (field order): deregisters the conn address.
    conn: ConnAddr,
}

impl std::fmt::Debug for SctpPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SctpPath")
            .field("id", &self.conn.id)
            .field("local", &self.local)
            .field("remote", &self.remote)
            .finish()
    }
}

impl SctpPath {
    /// Opens a path endpoint from `local` (port 0: ephemeral) to the peer's UDP address
    /// `remote` for this path. One socket, bind, connect, and a spawned reader task; needs a
    /// tokio runtime.
    pub fn open(local: SocketAddr, remote: SocketAddr) -> Result<SctpPath> {
        tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        let s = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))
            .map_err(|e| Error::udp("socket", e))?;
        let _ = s.set_recv_buffer_size(2 * 1024 * 1024);
        let _ = s.set_send_buffer_size(2 * 1024 * 1024);
        s.set_nonblocking(true)
            .map_err(|e| Error::udp("set_nonblocking", e))?;
        s.bind(&local.into()).map_err(|e| Error::udp("bind", e))?;
        s.connect(&remote.into())
            .map_err(|e| Error::udp("connect", e))?;
        let local = crate::udp::local_of(&s)?;
        // No GRO here (unlike udp.rs's sockets): the path reader takes one datagram a read.
        let (send, recv) = crate::udp::split(s)?;
        let conn = ConnAddr::register(Route {
            sock: send,
            remote: None,
            src: None,
            refused: None,
            bytes: Default::default(),
        })?;
        let shared = Arc::new(PathShared::default());
        let task = tokio::spawn(path_reader(recv, conn.id, shared.clone(), UdpCount::new()));
        Ok(SctpPath {
            shared,
            task,
            local,
            remote,
            conn,
        })
    }

    /// The path's id (usable once the path is added to an association). No I/O.
    pub fn id(&self) -> PathId {
        PathId(crate::path_events::PathKey::Conn(self.conn.id))
    }

    /// The local UDP address. No I/O.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The peer's UDP address for this path. No I/O.
    pub fn remote_addr(&self) -> SocketAddr {
        self.remote
    }

    /// The reader's counters. Three atomic loads.
    pub fn stats(&self) -> PathStats {
        PathStats {
            datagrams_in: self.shared.datagrams_in.load(Ordering::Relaxed),
            bytes_in: self.shared.bytes_in.load(Ordering::Relaxed),
            dropped_unattached: self.shared.dropped.load(Ordering::Relaxed),
        }
    }
}

impl Drop for SctpPath {
    fn drop(&mut self) {
        self.shared.attached.store(false, Ordering::SeqCst);
        self.task.abort();
    }
}

/// Reads the path's socket: datagrams go to usrsctp only while the path is attached.
async fn path_reader(sock: UdpSocket, conn: usize, shared: Arc<PathShared>, _count: UdpCount) {
    loop {
        if sock.readable().await.is_err() {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        let r = with_recv_buf(|buf| {
            for _ in 0..64 {
                let n = sock.try_recv(buf)?;
                if ffi::conninput_attached(&shared.attached, conn, &buf[..n]) {
                    shared.datagrams_in.fetch_add(1, Ordering::Relaxed);
                    shared.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
                } else {
                    shared.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok::<(), io::Error>(())
        });
        match r {
            Ok(()) => tokio::task::yield_now().await,
            // ICMP errors on the connected socket (peer's path socket gone): keep reading;
            // SCTP's own path failure detection decides.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => {
                tracing::debug!("usrsctp path UDP recv: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// An [`SctpPath`] added to an association. Holds an [`Association`] clone, so the
/// association lives at least as long. Dropping it stops feeding the path's datagrams and
/// frees its socket; usrsctp still lists the path and marks it unreachable after
/// `pathmaxrxt` unanswered heartbeats (paths are not removed).
#[derive(Debug)]
pub struct PeerPath {
    // Field order: the association handle goes before the path's socket and conn address.
    assoc: Association,
    path: SctpPath,
}

impl PeerPath {
    /// The path's id. No I/O.
    pub fn id(&self) -> PathId {
        self.path.id()
    }

    /// The underlying path endpoint (addresses, counters). No I/O.
    pub fn path(&self) -> &SctpPath {
        &self.path
    }

    /// The association. No I/O.
    pub fn association(&self) -> &Association {
        &self.assoc
    }
}

/// Receives the path events of one association (`SCTP_PEER_ADDR_CHANGE`), from the moment
/// [`Association::path_events`] was called. Holds the association weakly: it does not keep
/// it alive (when its last handle goes, the events end). Keeps at most 256 unread events
/// (older ones are dropped).
pub struct PathEvents {
    assoc: std::sync::Weak<crate::assoc::AssocInner>,
    /// The event table's key of the association's socket.
    key: usize,
    log: Arc<EventLog>,
}

impl std::fmt::Debug for PathEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PathEvents")
            .field("key", &self.key)
            .finish()
    }
}

impl PathEvents {
    /// The next event; waits for one. Ends (`None`) when the association ends. Cancel-safe.
    pub async fn next(&mut self) -> Option<PathEvent> {
        loop {
            let mut n = pin!(self.log.notify.notified());
            n.as_mut().enable();
            if let Some(ev) = lock(&self.log.events).pop_front() {
                return Some(ev);
            }
            if self.association().is_none_or(|a| a.is_closed()) {
                return None;
            }
            tokio::select! {
                _ = n => {}
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        }
    }

    /// The association, while any handle of it is alive.
    pub fn association(&self) -> Option<Association> {
        self.assoc.upgrade().map(|inner| Association { inner })
    }

    /// The events that arrived so far, without waiting.
    pub fn drain(&mut self) -> Vec<PathEvent> {
        lock(&self.log.events).drain(..).collect()
    }
}

impl Drop for PathEvents {
    fn drop(&mut self) {
        let mut t = lock(&EVENTS);
        if t.get(&self.key).is_some_and(|l| Arc::ptr_eq(l, &self.log)) {
            t.remove(&self.key);
        }
    }
}

mod assoc_api;
mod fixed;
mod local_addrs;

pub use fixed::FixedPaths;
