//! The UDP side: our own sockets carrying SCTP packets (RFC 6951 format), the tokio tasks
//! reading them into usrsctp, and the demultiplexing of a shared server socket by remote
//! UDP address.
//!
//! A shared socket bound to the unspecified address (`0.0.0.0`, `[::]`) asks for the
//! destination address of every datagram (IP_PKTINFO / IPV6_RECVPKTINFO, read with `recvmsg`)
//! and answers each remote from the address it sent to (`sendmsg` with IP_PKTINFO /
//! IPV6_PKTINFO). Without that the kernel would pick the source by routing, and on a host with
//! several addresses a client's connected UDP socket would drop replies from the wrong one.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket as StdUdp};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::pktinfo::{
    connected_path_mtu, enable_gro, enable_pktinfo, enable_recverr, recv_with_dst, Received,
};
use crate::probe::{is_refusal, probe_refused, shared_probe_refused};
use crate::refusal::{abort_for, take_refusals};
use crate::sys::{conninput, global, lock, ConnAddr, Route};

/// The shared server sockets of this process by bound address. Weak: the listeners and
/// accepted associations own them; the last one's drop removes the entry.
static SHARED: LazyLock<Mutex<HashMap<SocketAddr, Weak<SharedUdp>>>> =
    LazyLock::new(Default::default);

/// Largest datagram we read.
pub(crate) const MAX_DATAGRAM: usize = 65536;
/// Datagrams a client reader hands to usrsctp per wake-up before it lets other tasks run.
const READ_BATCH: usize = 64;

std::thread_local! {
    /// The receive buffer of the client readers and association drivers running on this
    /// thread: one per worker thread instead of 64 KiB per association (what is read is
    /// handed on, copied, before the task awaits again).
    static RECV_BUF: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0u8; MAX_DATAGRAM].into_boxed_slice());
}

/// Runs `f` with this thread's 64 KiB receive buffer. `f` must not await (it cannot) nor
/// re-enter this function.
pub(crate) fn with_recv_buf<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    RECV_BUF.with(|b| f(&mut b.borrow_mut()[..]))
}
/// UDP socket buffers we ask for (the kernel caps them at rmem_max/wmem_max).
const UDP_BUFFER: usize = 2 * 1024 * 1024;
/// Unclaimed remotes (handshakes that never reached `accept`) are forgotten after this.
const REMOTE_IDLE: Duration = Duration::from_secs(60);
/// Unclaimed remotes that never sent a COOKIE ECHO (so no association of theirs can be
/// waiting for `accept`: INITs to a port nobody listens on, INIT floods, attempts that
/// lost a race before their handshake ended) are forgotten after this. A client still
/// retransmitting its INIT is simply registered again.
const HANDSHAKE_IDLE: Duration = Duration::from_secs(5);
/// At most this many unclaimed remotes per shared socket (a bound against INIT floods):
/// a new one beyond it replaces the one heard from longest ago, so a flood can delay
/// real clients but never lock them out.
const MAX_UNCLAIMED: usize = 4096;

/// Whether the SCTP packet's checksum (RFC 9260 appendix A, CRC32c over the packet with
/// the checksum field zero) is right. One pass with the CPU's CRC32c instruction; checked
/// here only for packets that would open state for a new remote (`conninput` checks every
/// packet).
pub(crate) fn checksum_ok(pkt: &[u8]) -> bool {
    crate::ffi::crc32c_ok(pkt)
}

/// Largest SCTP packet (common header included) we put in one UDP datagram: 65535 minus
/// the IPv4 and UDP headers.
const MAX_SCTP_PACKET: u32 = 65_507;
/// usrsctp's smallest path MTU (`SCTP_SMALLEST_PMTU`).
const MIN_SCTP_MTU: u32 = 512;
/// The SCTP path MTU we give usrsctp (for AF_CONN: the packet size without the 12-byte
/// common header, a multiple of 4) when the largest datagram is `packet` bytes.
fn sctp_mtu_for_packet(packet: u32) -> u32 {
    (packet.min(MAX_SCTP_PACKET).saturating_sub(12) & !3).max(MIN_SCTP_MTU)
}

/// The largest SCTP path MTU any UDP path allows (what a listener starts an association
/// with, before [`route_sctp_mtu`] lowers it to its path's).
pub(crate) const MAX_SCTP_MTU: u32 = (MAX_SCTP_PACKET - 12) & !3;

/// The SCTP path MTU over a UDP path whose IP MTU (IP_MTU: route MTU, lowered by path MTU
/// discovery) is `ip_mtu`: minus the IP, UDP and SCTP common headers.
pub(crate) fn sctp_mtu(ip_mtu: u32, v6: bool) -> u32 {
    let ip_header = if v6 { 40 } else { 20 };
    sctp_mtu_for_packet(ip_mtu.saturating_sub(ip_header + 8))
}

/// The SCTP path MTU towards `remote` by the kernel's routing (route MTU or what path MTU
/// discovery learned): a throw-away UDP socket connected to it, asked for IP_MTU. Four
/// syscalls, no packet sent; `None` if there is no route.
pub(crate) fn route_sctp_mtu(remote: SocketAddr) -> Option<u32> {
    let remote = match remote {
        SocketAddr::V6(a) => match a.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
            None => remote,
        },
        v4 => v4,
    };
    let s = Socket::new(
        Domain::for_address(remote),
        Type::DGRAM,
        Some(Protocol::UDP),
    )
    .ok()?;
    s.connect(&remote.into()).ok()?;
    connected_path_mtu(&s, remote.is_ipv6()).map(|m| sctp_mtu(m, remote.is_ipv6()))
}

/// Walks the chunks of an SCTP packet (12-byte common header, then type/flags/length chunks
/// padded to 4 bytes) and reports whether one has type `ty`. Never panics on bad input.
pub(crate) fn has_chunk(pkt: &[u8], ty: u8) -> bool {
    let mut off = 12usize;
    while off + 4 <= pkt.len() {
        let t = pkt[off];
        let len = u16::from_be_bytes([pkt[off + 2], pkt[off + 3]]) as usize;
        if t == ty {
            return true;
        }
        if len < 4 {
            return false;
        }
        off = match off.checked_add((len + 3) & !3) {
            Some(o) => o,
            None => return false,
        };
    }
    false
}

/// Whether our UDP sockets take coalesced datagrams (UDP GRO; cleared when the kernel
/// refuses it). Without GRO every socket reads one datagram per `recv`.
static GRO: AtomicBool = AtomicBool::new(true);

/// Counts a UDP socket we own while its reader task lives.
pub(crate) struct UdpCount;
impl UdpCount {
    pub(crate) fn new() -> UdpCount {
        global().live_udp.fetch_add(1, Ordering::SeqCst);
        UdpCount
    }
}
impl Drop for UdpCount {
    fn drop(&mut self) {
        global().live_udp.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A non-blocking UDP socket of `domain` (one `socket` call).
fn udp_socket(domain: Domain) -> Result<Socket> {
    Socket::new(domain, Type::DGRAM.nonblocking(), Some(Protocol::UDP))
        .map_err(|e| Error::udp("socket", e))
}

/// What a socket carrying associations' data gets: large buffers and, where the kernel
/// has it, UDP GRO (three `setsockopt`s).
fn tune_for_data(s: &Socket) {
    let _ = s.set_recv_buffer_size(UDP_BUFFER);
    let _ = s.set_send_buffer_size(UDP_BUFFER);
    if GRO.load(Ordering::Relaxed) {
        if enable_gro(s) {
            keep_gro_on();
        } else {
            GRO.store(false, Ordering::Relaxed);
        }
    }
}

/// A UDP socket bound to `bind`, tuned for data.
fn new_udp(bind: SocketAddr) -> Result<Socket> {
    let s = udp_socket(Domain::for_address(bind))?;
    tune_for_data(&s);
    s.bind(&bind.into()).map_err(|e| Error::udp("bind", e))?;
    Ok(s)
}

/// Keeps one UDP socket with GRO on for the rest of the process (one unbound socket,
/// made on the first GRO socket). Turning GRO on for the host's first such socket, and
/// closing its last one, flips a kernel static key: the kernel rewrites its code and
/// interrupts every CPU (~130 us of CPU each way here). Without this, a client whose
/// associations come and go one at a time (each with its own UDP socket, e.g. attempts
/// to a dead port) would pay that twice per association whenever no other GRO socket
/// was open on the host.
fn keep_gro_on() {
    static KEEPER: OnceLock<Option<Socket>> = OnceLock::new();
    KEEPER.get_or_init(|| {
        let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).ok()?;
        enable_gro(&s).then_some(s)
    });
}

/// The address a socket is bound to.
pub(crate) fn local_of(s: &Socket) -> Result<SocketAddr> {
    s.local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .ok_or_else(|| Error::udp("local_addr", io::Error::other("not an inet address")))
}

/// Splits a socket into a std handle (for the output callback, any thread) and a tokio one
/// (for the reader task); both refer to the same kernel socket.
pub(crate) fn split(s: Socket) -> Result<(Arc<StdUdp>, UdpSocket)> {
    let send: StdUdp = s.try_clone().map_err(|e| Error::udp("dup", e))?.into();
    let recv = UdpSocket::from_std(s.into()).map_err(|e| Error::udp("register with tokio", e))?;
    Ok((Arc::new(send), recv))
}

/// Client side: a fresh UDP socket connected to the peer, its conn address and reader task.
pub(crate) struct ClientLink {
    pub(crate) addr: ConnAddr,
    pub(crate) local: SocketAddr,
    /// The SCTP path MTU the kernel's route to the peer allows (see [`sctp_mtu`]).
    pub(crate) path_mtu: Option<u32>,
    pub(crate) task: Option<JoinHandle<()>>,
    /// The socket's sending handle (the same kernel socket as the reader's), to ask for
    /// an ICMP error before the reader runs ([`ClientLink::refused_already`]).
    send: Arc<StdUdp>,
    /// Set by a send that failed with `ECONNREFUSED` (see [`Route::refused`]).
    refused: Arc<AtomicBool>,
}

impl Drop for ClientLink {
    fn drop(&mut self) {
        lock(&READERS).remove(&self.addr.id);
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// What the client reader task reports.
pub(crate) trait ClientEvents: Send + Sync + 'static {
    /// An INIT ACK chunk arrived (called before the packet is given to usrsctp).
    fn init_ack(&self);
    /// The connected UDP socket reported ECONNREFUSED (ICMP port unreachable). Called
    /// before the ABORT that refusal stands for reaches usrsctp (an established
    /// association ends by that ABORT, see [`crate::refusal`]).
    fn refused(&self);
}

impl ClientLink {
    /// A fresh UDP socket connected to `remote` (bound by the connect) and its conn
    /// address. The socket comes back for [`ClientLink::start`] to register with tokio
    /// and to tune for data: not before, so that an attempt refused at once never enters
    /// the runtime's epoll set (whose changes and readiness would wake an idle worker for
    /// nothing) nor pays for buffers it never uses. Eight syscalls. With `probe`, a
    /// zero-length datagram goes to `remote` first, from the process's shared probe socket,
    /// and a refusal known by then ends the attempt with [`Error::Refused`] before any
    /// socket is made (three syscalls more; where the shared socket is missing, the new
    /// socket is probed after its connect instead;
    /// [`SctpOptions::probe_port`](crate::SctpOptions::probe_port)).
    pub(crate) fn open(remote: SocketAddr, probe: bool) -> Result<(ClientLink, Socket)> {
        let domain = if remote.is_ipv4() {
            Domain::IPV4
        } else {
            Domain::IPV6
        };
        // `None` from the shared probe (no probe socket, or its send failed): this
        // attempt's own socket is probed instead, once connected.
        let probe_own_socket = probe
            && match shared_probe_refused(remote) {
                Some(true) => return Err(Error::Refused(remote)),
                Some(false) => false,
                None => true,
            };
        let s = udp_socket(domain)?;
        s.connect(&remote.into())
            .map_err(|e| Error::udp("connect", e))?;
        if probe_own_socket && probe_refused(&s) {
            return Err(Error::Refused(remote));
        }
        let local = local_of(&s)?;
        let path_mtu =
            connected_path_mtu(&s, remote.is_ipv6()).map(|m| sctp_mtu(m, remote.is_ipv6()));
        let send: Arc<StdUdp> = Arc::new(s.try_clone().map_err(|e| Error::udp("dup", e))?.into());
        let refused = Arc::new(AtomicBool::new(false));
        let addr = ConnAddr::register(Route {
            sock: send.clone(),
            remote: None,
            src: None,
            refused: Some(refused.clone()),
        })?;
        Ok((
            ClientLink {
                addr,
                local,
                path_mtu,
                task: None,
                send,
                refused,
            },
            s,
        ))
    }

    /// Whether the peer's host already refused what was sent: a send failed with
    /// `ECONNREFUSED` (it took an ICMP port unreachable that came before it, e.g. the
    /// answer to the port probe; an atomic load), or, with `ask_socket`, the connected
    /// socket holds one (one `getsockopt(SO_ERROR)`). To the same host the kernel answers
    /// while the sending call runs, so right after the INIT the answer is known without
    /// waiting for the reader task; elsewhere the ICMP comes a round trip later and the
    /// reader reports it. Another pending error is dropped, as the reader drops it.
    pub(crate) fn refused_already(&self, ask_socket: bool) -> bool {
        self.refused.load(Ordering::Acquire)
            || (ask_socket && is_refusal(self.send.take_error().ok().flatten()))
    }

    /// Tunes `sock` (from [`ClientLink::open`]) for data, asks for its ICMP errors with
    /// what they quote (IP_RECVERR / IPV6_RECVERR), registers it with tokio and spawns its
    /// reader task.
    pub(crate) fn start(&mut self, sock: Socket, events: Arc<dyn ClientEvents>) -> Result<()> {
        tune_for_data(&sock);
        enable_recverr(&sock, self.local.is_ipv6());
        let sock =
            UdpSocket::from_std(sock.into()).map_err(|e| Error::udp("register with tokio", e))?;
        let id = self.addr.id;
        lock(&READERS).insert(
            id,
            Reader::Client {
                conn: id,
                sock: Arc::downgrade(&self.send),
            },
        );
        let count = UdpCount::new();
        self.task = Some(tokio::spawn(async move {
            let _count = count;
            let mut seen_init_ack = false;
            loop {
                let ready = match sock.ready(Interest::READABLE | Interest::ERROR).await {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::debug!("usrsctp client UDP readiness: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                if ready.is_error() {
                    // ICMP errors on the connected socket. A port unreachable (nothing
                    // listens on the peer's UDP port) fails an attempt still in its
                    // handshake and ends an established association by the ABORT it
                    // stands for (`refusal`). Reading the queue to its end clears the
                    // readiness and the pending error; without IP_RECVERR only the
                    // pending error tells.
                    let _ = sock.try_io(Interest::ERROR, || {
                        let taken = take_refusals(&sock, |_| {
                            events.refused();
                            Some(id)
                        });
                        if let Err(e) = taken {
                            tracing::debug!("usrsctp client UDP error queue: {e}");
                        }
                        if is_refusal(sock.take_error().ok().flatten()) {
                            events.refused();
                        }
                        Err::<(), _>(io::ErrorKind::WouldBlock.into())
                    });
                }
                if !ready.is_readable() && !ready.is_read_closed() {
                    continue;
                }
                // Drain what is queued into this thread's buffer, without awaiting while
                // it is borrowed; `Ok(true)`: the batch was full, let other tasks run.
                let drained = with_recv_buf(|buf| {
                    for _ in 0..READ_BATCH {
                        let got = sock.try_io(Interest::READABLE, || recv_with_dst(&sock, buf))?;
                        // The INIT-ACK is signalled before usrsctp sees the read (outside
                        // its lock: `init_ack` takes a watch channel's lock).
                        if !seen_init_ack
                            && got
                                .datagrams(buf)
                                .any(|pkt| has_chunk(pkt, crate::ffi::SCTP_INITIATION_ACK))
                        {
                            seen_init_ack = true;
                            events.init_ack();
                        }
                        // One read's datagrams in one hold of the usrsctp lock, so what
                        // they release (data after SACKs, SACKs after data) leaves as one
                        // GSO send.
                        crate::ffi::batch(|| {
                            for pkt in got.datagrams(buf) {
                                conninput(id, pkt);
                            }
                        });
                    }
                    Ok::<bool, io::Error>(true)
                });
                match drained {
                    Ok(_) => tokio::task::yield_now().await,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => events.refused(),
                    Err(e) => {
                        tracing::debug!("usrsctp client UDP recv: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }));
        Ok(())
    }
}

struct Remote {
    addr: ConnAddr,
    /// Local address this remote sends to (only learned on a socket bound to the unspecified
    /// address); replies go out from it.
    dst: Option<IpAddr>,
    claims: usize,
    last_seen: Instant,
    heard: Heard,
}

/// The handshake heard from a remote since its last accept: another association from its
/// UDP address (a NAT, a just-freed port reused) may be under way, so the end of its last
/// accepted one deregisters the remote only if nothing was heard.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Heard {
    Nothing,
    /// An INIT: a handshake may be under way.
    Init,
    /// A COOKIE ECHO: an association may be waiting for `accept`.
    CookieEcho,
}

impl Heard {
    /// What `pkt` says of a handshake. INIT stands alone in its packet and COOKIE ECHO
    /// comes first in its: the first chunk's type tells (one load, for every packet).
    fn in_packet(pkt: &[u8]) -> Heard {
        match pkt.get(12) {
            Some(&INIT) => Heard::Init,
            Some(&COOKIE_ECHO) => Heard::CookieEcho,
            _ => Heard::Nothing,
        }
    }
}

/// SCTP chunk types that open a handshake (RFC 9260 section 3.2).
const INIT: u8 = 0x01;
const COOKIE_ECHO: u8 = 0x0a;

#[derive(Default)]
pub(crate) struct RemoteTable {
    by_addr: HashMap<SocketAddr, Remote>,
    by_id: HashMap<usize, SocketAddr>,
    /// Remotes with no claim (handshakes not yet accepted), kept equal to the count of
    /// `by_addr` entries with `claims == 0`.
    unclaimed: usize,
}

impl RemoteTable {
    /// Removes `addr`'s entry (keeping the unclaimed count); the caller drops it outside
    /// the lock.
    fn remove(&mut self, addr: &SocketAddr) -> Option<Remote> {
        let r = self.by_addr.remove(addr)?;
        self.by_id.remove(&r.addr.id);
        if r.claims == 0 {
            self.unclaimed -= 1;
        }
        Some(r)
    }
}

/// One UDP socket on an encapsulation port, shared (refcounted) by every listener and
/// accepted association using that local address. Each remote UDP address gets its own conn
/// address so usrsctp keeps the peers apart.
pub(crate) struct SharedUdp {
    pub(crate) local: SocketAddr,
    table: Arc<Mutex<RemoteTable>>,
    /// The sending half (replies to injected datagrams go out on it).
    send: Arc<StdUdp>,
    task: JoinHandle<()>,
    /// Its key in [`READERS`].
    reader_key: usize,
}

impl Drop for SharedUdp {
    fn drop(&mut self) {
        lock(&READERS).remove(&self.reader_key);
        self.task.abort();
        let drained: Vec<Remote> = {
            let mut t = lock(&self.table);
            t.by_id.clear();
            t.by_addr.drain().map(|(_, r)| r).collect()
        };
        drop(drained); // deregisters, outside our lock
        let mut map = lock(&SHARED);
        if map.get(&self.local).is_some_and(|w| w.strong_count() == 0) {
            map.remove(&self.local);
        }
    }
}

impl SharedUdp {
    /// Returns the shared socket for `local`, binding it if nobody holds it yet.
    pub(crate) fn get(local: SocketAddr) -> Result<Arc<SharedUdp>> {
        let mut map = lock(&SHARED);
        if local.port() != 0 {
            if let Some(s) = map.get(&local).and_then(Weak::upgrade) {
                if !s.task.is_finished() {
                    return Ok(s);
                }
            }
        }
        let s = new_udp(local)?;
        let bound = s
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .ok_or_else(|| Error::udp("local_addr", io::Error::other("not an inet address")))?;
        let pktinfo = bound.ip().is_unspecified() && enable_pktinfo(&s, bound);
        // ICMP errors with what they quote: a remote whose port is refused loses its
        // associations (`refusal`).
        enable_recverr(&s, bound.is_ipv6());
        let (send, recv) = split(s)?;
        let table = Arc::new(Mutex::new(RemoteTable::default()));
        let task = tokio::spawn(shared_reader(
            recv,
            send.clone(),
            table.clone(),
            UdpCount::new(),
            pktinfo,
        ));
        let reader_key = global().next_id();
        let shared = Arc::new(SharedUdp {
            local: bound,
            table,
            send,
            task,
            reader_key,
        });
        lock(&READERS).insert(reader_key, Reader::Shared(Arc::downgrade(&shared)));
        // Keyed by the bound address only: a request for port 0 always gets a fresh socket.
        map.retain(|_, w| w.strong_count() > 0);
        map.insert(bound, Arc::downgrade(&shared));
        Ok(shared)
    }

    /// Stops the reader and returns once its task, and with it the socket, is gone, if
    /// `this` is the last holder; otherwise (accepted associations still use the socket)
    /// only drops this reference.
    pub(crate) async fn close(this: Arc<SharedUdp>) {
        if let Some(mut me) = Arc::into_inner(this) {
            me.task.abort();
            let _ = (&mut me.task).await;
            // `me` drops here: the remotes are deregistered and the sending half closed.
        }
    }

    /// Handles `pkt` as if it had arrived on this socket from `from`: the reader task's
    /// demultiplexing, then `conninput`, on the calling thread (fuzzing).
    pub(crate) fn inject(&self, from: SocketAddr, pkt: &[u8]) {
        if let Some(id) = lookup_or_create(&self.table, &self.send, from, None, pkt) {
            conninput(id, pkt);
        }
    }

    /// Handles an ICMP port unreachable for a datagram carrying `quoted` that this socket
    /// sent to `to`, as the reader task does with one from the error queue (the ABORT it
    /// stands for goes to usrsctp from `to`'s conn address, on the calling thread).
    pub(crate) fn inject_refusal(&self, to: SocketAddr, quoted: &[u8]) {
        let conn = lock(&self.table).by_addr.get(&to).map(|r| r.addr.id);
        if let (Some(conn), Some(abort)) = (conn, abort_for(quoted)) {
            conninput(conn, &abort);
        }
    }

    /// Marks the remote behind conn address `id` as used by an accepted association;
    /// returns its UDP address.
    pub(crate) fn claim(&self, id: usize) -> Option<SocketAddr> {
        let mut t = lock(&self.table);
        let addr = *t.by_id.get(&id)?;
        let mut was_unclaimed = false;
        if let Some(r) = t.by_addr.get_mut(&addr) {
            was_unclaimed = r.claims == 0;
            r.claims += 1;
            r.heard = Heard::Nothing;
        }
        if was_unclaimed {
            t.unclaimed -= 1;
        }
        Some(addr)
    }

    /// Releases a claim; the remote's conn address is deregistered when no association uses
    /// it: at once, unless a handshake came from the same UDP address since the last
    /// accept ([`Heard`]); then it is kept, and forgotten, as a handshake not yet accepted.
    pub(crate) fn unclaim(&self, remote: SocketAddr) {
        let removed = {
            let mut t = lock(&self.table);
            let (last, keep) = match t.by_addr.get_mut(&remote) {
                Some(r) if r.claims > 0 => {
                    r.claims -= 1;
                    let keep = r.heard != Heard::Nothing;
                    if r.claims == 0 && keep {
                        r.last_seen = Instant::now();
                    }
                    (r.claims == 0, keep)
                }
                _ => (false, false),
            };
            if last {
                // Unclaimed from now on (for the moment it takes to remove it, if not kept).
                t.unclaimed += 1;
            }
            if last && !keep {
                t.remove(&remote)
            } else {
                None
            }
        };
        drop(removed);
    }
}

async fn shared_reader(
    sock: UdpSocket,
    send: Arc<StdUdp>,
    table: Arc<Mutex<RemoteTable>>,
    _count: UdpCount,
    pktinfo: bool,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut tick = tokio::time::interval(HANDSHAKE_IDLE / 2);
    loop {
        tokio::select! {
            r = sock.ready(Interest::READABLE | Interest::ERROR) => match r {
                Ok(ready) => {
                    if ready.is_error() {
                        shared_refusals(&sock, &table);
                    }
                    if ready.is_readable() || ready.is_read_closed() {
                        if let Err(e) = read_some(&sock, &send, &table, pktinfo, &mut buf) {
                            tracing::debug!("usrsctp shared UDP recv: {e}");
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        // Let other tasks run between batches.
                        tokio::task::yield_now().await;
                    }
                }
                Err(e) => {
                    tracing::debug!("usrsctp shared UDP readiness: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = tick.tick() => expire(&table),
        }
    }
}

/// Reads up to [`READ_BATCH`] + 1 datagram reads (until nothing is queued) and hands them
/// to usrsctp: under a burst of new peers the socket would otherwise overflow between
/// trips through the scheduler. A refusal taken as the pending error is skipped (the
/// error queue has it for [`shared_refusals`]); another error ends the batch.
fn read_some(
    sock: &UdpSocket,
    send: &Arc<StdUdp>,
    table: &Mutex<RemoteTable>,
    pktinfo: bool,
    buf: &mut [u8],
) -> io::Result<()> {
    for _ in 0..=READ_BATCH {
        match try_recv(sock, pktinfo, buf) {
            Ok(got) => input(table, send, &got, buf),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Takes the shared socket's queued ICMP errors: a port unreachable from a known remote
/// ends the association the quoted packet belongs to ([`crate::refusal`]); errors for
/// unknown remotes are dropped. Reading the queue to its end clears the readiness and the
/// socket's pending error (so the next send does not take it).
fn shared_refusals(sock: &UdpSocket, table: &Mutex<RemoteTable>) {
    let _ = sock.try_io(Interest::ERROR, || {
        let taken = take_refusals(sock, |to| lock(table).by_addr.get(&to).map(|r| r.addr.id));
        if let Err(e) = taken {
            tracing::debug!("usrsctp shared UDP error queue: {e}");
        }
        Err::<(), _>(io::ErrorKind::WouldBlock.into())
    });
}

/// Hands the datagrams of one read (several with GRO) to usrsctp, each as from its remote's
/// conn address.
fn input(table: &Mutex<RemoteTable>, send: &Arc<StdUdp>, got: &Received, buf: &[u8]) {
    // The datagrams of one read (several with GRO) are looked up first, then handed to
    // usrsctp in one hold of its lock, so what they release (data after SACKs, SACKs after
    // data) leaves as one GSO send. The table is not locked inside that hold: a thread
    // registering a remote holds the table while calling usrsctp.
    const AT_ONCE: usize = 64;
    let mut pkts = got.datagrams(buf);
    loop {
        let mut found: [(usize, &[u8]); AT_ONCE] = [(0, &[]); AT_ONCE];
        let mut n = 0;
        for pkt in pkts.by_ref() {
            if let Some(id) = lookup_or_create(table, send, got.from, got.dst, pkt) {
                found[n] = (id, pkt);
                n += 1;
                if n == AT_ONCE {
                    break;
                }
            }
        }
        if n == 0 {
            return;
        }
        crate::ffi::batch(|| {
            for &(id, pkt) in &found[..n] {
                conninput(id, pkt);
            }
        });
        if n < AT_ONCE {
            return;
        }
    }
}

/// One read without waiting: with `pktinfo` or GRO, `recvmsg` also yielding the
/// destination address and segment size; otherwise plain `recv_from`. `WouldBlock` when
/// nothing is queued (which clears the socket's read readiness).
fn try_recv(sock: &UdpSocket, pktinfo: bool, buf: &mut [u8]) -> io::Result<Received> {
    if pktinfo || GRO.load(Ordering::Relaxed) {
        sock.try_io(Interest::READABLE, || recv_with_dst(sock, buf))
    } else {
        let (len, from) = sock.try_recv_from(buf)?;
        Ok(Received::one(len, from))
    }
}

/// A UDP socket [`read_pending`] reads.
enum Reader {
    /// A client's connected socket (the sending handle; the reader task reads the same
    /// kernel socket) and its conn address.
    Client { conn: usize, sock: Weak<StdUdp> },
    /// A shared server socket.
    Shared(Weak<SharedUdp>),
}

/// Every UDP socket carrying associations, by a key of its own (a client's conn address,
/// a shared socket's `reader_key`). Weak: their owners keep them; dropping one removes it.
static READERS: LazyLock<Mutex<HashMap<usize, Reader>>> = LazyLock::new(Default::default);

/// Reads what is queued on every UDP socket of ours (up to [`READ_BATCH`] reads each) and
/// hands it to usrsctp on this thread, without the runtime: while the process ends its
/// associations ([`crate::end_all_associations`]) the runtime whose tasks read them may
/// have stopped, or be blocked by the very thread that called `exit()`, and the SACKs and
/// SHUTDOWN ACKs must still reach usrsctp. Datagrams a reader task takes meanwhile reach
/// usrsctp as well (only their order between the two readers is open). A shared socket's
/// datagrams from remotes it does not know are dropped. Queued ICMP errors are taken as
/// the reader tasks take them ([`crate::refusal`]): a peer that is gone ends its
/// association instead of holding the wait. Returns the reads that gave data; one
/// `recvmsg` per read and two more per socket.
pub(crate) fn read_pending(buf: &mut [u8]) -> usize {
    enum Live {
        Client(usize, Arc<StdUdp>),
        Shared(Arc<SharedUdp>),
    }
    let live: Vec<Live> = lock(&READERS)
        .values()
        .filter_map(|r| match r {
            Reader::Client { conn, sock } => sock.upgrade().map(|s| Live::Client(*conn, s)),
            Reader::Shared(s) => s.upgrade().map(Live::Shared),
        })
        .collect();
    let mut reads = 0;
    for r in &live {
        let sock: &StdUdp = match r {
            Live::Client(_, s) => s,
            Live::Shared(s) => &s.send,
        };
        for _ in 0..READ_BATCH {
            let Ok(got) = recv_with_dst(sock, buf) else {
                break;
            };
            reads += 1;
            // The datagrams of one read share their sender. Looked up before the usrsctp
            // lock is taken (see `input`).
            let conn = match r {
                Live::Client(conn, _) => Some(*conn),
                Live::Shared(s) => lock(&s.table).by_addr.get(&got.from).map(|r| r.addr.id),
            };
            let Some(conn) = conn else { continue };
            crate::ffi::batch(|| {
                for pkt in got.datagrams(buf) {
                    conninput(conn, pkt);
                }
            });
        }
        let _ = take_refusals(sock, |to| match r {
            Live::Client(conn, _) => Some(*conn),
            Live::Shared(s) => lock(&s.table).by_addr.get(&to).map(|r| r.addr.id),
        });
    }
    reads
}

fn lookup_or_create(
    table: &Mutex<RemoteTable>,
    send: &Arc<StdUdp>,
    from: SocketAddr,
    dst: Option<IpAddr>,
    pkt: &[u8],
) -> Option<usize> {
    if pkt.len() < 12 {
        return None;
    }
    let mut t = lock(table);
    if let Some(r) = t.by_addr.get_mut(&from) {
        r.last_seen = Instant::now();
        r.heard = r.heard.max(Heard::in_packet(pkt));
        if dst.is_some() && dst != r.dst {
            // The remote now sends to another of our addresses (rare): answer from that one.
            r.dst = dst;
            r.addr.set_source(dst);
        }
        return Some(r.addr.id);
    }
    // Only an INIT or COOKIE ECHO with a right checksum may open state for a new remote;
    // stray and corrupt packets are dropped.
    if !(has_chunk(pkt, INIT) || has_chunk(pkt, COOKIE_ECHO)) || !checksum_ok(pkt) {
        return None;
    }
    let evicted = if t.unclaimed >= MAX_UNCLAIMED {
        let oldest = t
            .by_addr
            .iter()
            .filter(|(_, r)| r.claims == 0)
            .min_by_key(|(_, r)| r.last_seen)
            .map(|(a, _)| *a);
        oldest.and_then(|a| t.remove(&a))
    } else {
        None
    };
    // A listener's socket exists, so the library is loaded: this cannot fail.
    let addr = ConnAddr::register(Route {
        sock: send.clone(),
        remote: Some(from),
        src: dst,
        refused: None,
    })
    .ok()?;
    let id = addr.id;
    t.by_id.insert(id, from);
    t.by_addr.insert(
        from,
        Remote {
            addr,
            dst,
            claims: 0,
            last_seen: Instant::now(),
            // Checked above: the packet carries an INIT or a COOKIE ECHO.
            heard: Heard::in_packet(pkt).max(Heard::Init),
        },
    );
    t.unclaimed += 1;
    drop(t);
    drop(evicted); // deregisters, outside our lock
    Some(id)
}

fn expire(table: &Mutex<RemoteTable>) {
    let now = Instant::now();
    let gone: Vec<Remote> = {
        let mut t = lock(table);
        let stale: Vec<SocketAddr> = t
            .by_addr
            .iter()
            .filter(|(_, r)| {
                let idle = now.duration_since(r.last_seen);
                r.claims == 0
                    && (idle > REMOTE_IDLE
                        || (r.heard != Heard::CookieEcho && idle > HANDSHAKE_IDLE))
            })
            .map(|(a, _)| *a)
            .collect();
        stale.into_iter().filter_map(|a| t.remove(&a)).collect()
    };
    drop(gone);
}

#[cfg(test)]
mod tests {
    use super::has_chunk;

    #[test]
    fn checksum() {
        // An INIT whose checksum was computed by the RFC 9260 algorithm.
        let mut p = vec![0x13, 0x88, 0x1c, 0xe9, 0, 0, 0, 0, 0, 0, 0, 0];
        p.extend_from_slice(&[
            1, 0, 0, 20, 0, 0, 0, 1, 0, 1, 0, 0, 0, 10, 0, 10, 0, 0, 0, 1,
        ]);
        let mut crc = !0u32;
        for &b in &p {
            crc ^= b as u32;
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0x82F6_3B78
                } else {
                    crc >> 1
                };
            }
        }
        p[8..12].copy_from_slice(&(!crc).to_le_bytes());
        assert!(super::checksum_ok(&p));
        p[20] ^= 1;
        assert!(!super::checksum_ok(&p));
        assert!(!super::checksum_ok(&p[..11]));
    }

    #[test]
    fn chunk_walk() {
        let mut p = vec![0u8; 12];
        p.extend_from_slice(&[0x02, 0, 0, 5, 1, 0, 0, 0]);
        assert!(has_chunk(&p, 2));
        assert!(!has_chunk(&p, 1));
        let mut q = vec![0u8; 12];
        q.extend_from_slice(&[0x00, 0, 0, 6, 1, 2, 0, 0, 0x02, 0, 0, 4]);
        assert!(has_chunk(&q, 2));
        assert!(!has_chunk(&q[..14], 2));
        let mut bad = vec![0u8; 12];
        bad.extend_from_slice(&[0x00, 0, 0, 0]);
        assert!(!has_chunk(&bad, 2));
        assert!(!has_chunk(&[], 2));
    }
}
