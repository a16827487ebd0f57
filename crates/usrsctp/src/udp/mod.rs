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

mod client;
mod shared;

pub(crate) use client::{ClientEvents, ClientLink};
pub(crate) use shared::SharedUdp;

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
                Live::Shared(s) => s.conn_of(&got.from),
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
            Live::Shared(s) => s.conn_of(&to),
        });
    }
    reads
}
