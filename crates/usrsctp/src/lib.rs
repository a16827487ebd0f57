//! Safe, tokio-driven SCTP over UDP (RFC 6951 encapsulation) on top of Debian's
//! libusrsctp, in **AF_CONN mode**: usrsctp never opens a socket; we own the UDP sockets.
//!
//! # Encapsulation
//! Every SCTP packet travels alone in one UDP datagram with no extra header, exactly the
//! RFC 6951 format, to the peer's UDP encapsulation port (9899 by convention,
//! [`DEFAULT_UDP_PORT`]; any port works). usrsctp hands packets to our output callback with
//! an opaque *conn address*; we register one conn address per peer (an integer id, never a
//! real pointer) and route it to a UDP socket + remote address. A client uses a fresh UDP
//! socket per association, `connect()`ed to the peer (so ICMP port unreachable surfaces as
//! `ECONNREFUSED` → [`Error::Refused`]). A server uses one UDP socket per local address,
//! shared (refcounted) by every listener and accepted association on it, and demultiplexes
//! by remote UDP address: each remote gets its own conn address, so usrsctp keeps peers
//! apart and several SCTP ports can listen behind one UDP port. A server socket bound to the
//! unspecified address (`0.0.0.0`, or dual-stack `[::]`) enables IP_PKTINFO /
//! IPV6_RECVPKTINFO, reads with `recvmsg` to learn which local address each remote sent to
//! (IPv4-mapped for IPv4 traffic on `[::]`), and answers that remote from that address with
//! `sendmsg` + IP_PKTINFO / IPV6_PKTINFO; otherwise the kernel would pick the source by
//! routing and, on a host with several addresses, the client's connected UDP socket would
//! drop the replies. A socket bound to a specific address uses plain `recv_from`/`send_to`.
//!
//! # Threading model
//! * usrsctp is initialised once per process with `usrsctp_init_nothreads(0, ..)` (not
//!   `usrsctp_init`, which as root opens raw IPPROTO_SCTP sockets plus three threads; on a
//!   host with kernel SCTP those raw sockets would see kernel SCTP traffic and answer it with
//!   ABORTs). One thread of ours, `usrsctp-timer`, calls `usrsctp_handle_timers` every 10 ms
//!   (retransmissions, heartbeats, delayed SACKs) and parks after 10 s without sockets.
//! * Inbound: one tokio task per UDP socket reads datagrams and calls `usrsctp_conninput`,
//!   which runs the SCTP state machine synchronously on that task's thread. The output
//!   callback (called from that thread or the timer thread) takes the routing-table mutex,
//!   clones the socket `Arc` and does a non-blocking `send`/`send_to` (a full socket buffer
//!   drops the packet, like a lossy link).
//! * usrsctp sockets are non-blocking with an *upcall*; the upcall only looks up the socket's
//!   `Notify` pair (read lock on a global table) and wakes waiters: no usrsctp call, no
//!   allocation. Per association one tokio *driver* task reads (`usrsctp_recvv`), reassembles
//!   messages, handles notifications and routes messages to stream inboxes; it stops reading
//!   while more than [`SctpOptions::recv_budget`] bytes wait unread, so the SCTP receive window
//!   closes. Senders call `usrsctp_sendv` directly and await the write upcall when the send
//!   buffer is full.
//! * Locks: routing table and upcall table (global, held for a lookup), per-association
//!   router/accounting mutexes, and an `RwLock` around each usrsctp socket pointer (read for
//!   every call, write for close, so no call can race `usrsctp_close`). usrsctp may call our
//!   callbacks while holding its own locks; our callbacks never call usrsctp, and we never
//!   call usrsctp while holding the routing or upcall table locks.
//! * One process-wide lock serialises every call into usrsctp: API calls, `conninput` and the
//!   timer tick (see `ffi::library::serial`). libusrsctp 0.9.5 is not safe against entry from several
//!   threads at once (it is built for one calling thread plus its own timer thread): an
//!   `usrsctp_close` racing a `conninput` that processes an ABORT of the same socket frees the
//!   endpoint under the input path's feet (heap corruption under connection churn), and
//!   callouts are stopped without waiting for a running handler. So at most one of our
//!   threads is inside usrsctp at a time (its internal iterator thread still runs on its own);
//!   SCTP processing uses one CPU at a time, UDP I/O and everything else stay parallel.
//!
//! Cost per association: one usrsctp socket, one driver task, and for clients one UDP socket
//! plus one reader task. Every packet costs one `conninput` (CRC32c check) and, per
//! outbound packet, one routing-table lookup and one `send` syscall. On a server socket bound
//! to the unspecified address that is one `recvmsg`/`sendmsg` instead of `recv_from`/`send_to`,
//! with a small control-message buffer on the stack (no allocation).
//!
//! # Limits
//! * Usable only inside a tokio runtime (tasks are spawned); the runtime must outlive the
//!   associations, and a shared server UDP socket's reader task lives on the runtime of the
//!   first listener that opened it (use one runtime per process for listeners).
//! * SCTP ports are process-wide (one usrsctp instance): one listener per SCTP port per
//!   process, whatever the UDP address, and a client's fixed [`SctpOptions::local_port`]
//!   must not be a port some listener of this process uses (`usrsctp_bind` → EADDRINUSE).
//!   Several listeners on *different* SCTP ports share one UDP port.
//! * Packets of an association are fed to usrsctp in arrival order by one task; a server
//!   socket is read by one task for all its remotes (no parallelism across peers there).
//! * One-to-one sockets only; no multihoming (one UDP path per association); DSCP (`tos`)
//!   and the DF hint from usrsctp are ignored.
//! * `queued_bytes(stream)` is our own upper-bound accounting (usrsctp has no per-stream
//!   queue query), see [`Association::queued_bytes`].
//! * An INIT to an unreachable peer (no ICMP) retries per usrsctp defaults (8 attempts,
//!   minutes): bound connects with a timeout (or lower [`SctpOptions::init_attempts`]). An
//!   ICMP port unreachable (nothing on that UDP port) fails the attempt at once with
//!   [`Error::Refused`], because the client's UDP socket is connected (ECONNREFUSED). After
//!   establishment ICMP errors are ignored (SCTP's own retransmission limits apply).
//! * usrsctp is never de-initialised (`usrsctp_finish` is not called).

// Only `ffi` (libusrsctp) and `pktinfo` (recvmsg/sendmsg) may allow it.
#![deny(unsafe_code)]

mod assoc;
mod error;
mod ffi;
mod pktinfo;
mod sys;
mod udp;

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub use assoc::{Association, Connecting, Message, Progress, StreamHandle};
pub use error::{Error, Result};

use assoc::{AssocInner, AssocShared, Link};
use ffi::Plain;
use sys::{global, would_block, Sock};
use udp::{ClientLink, SharedUdp};

/// The conventional SCTP-over-UDP encapsulation port (RFC 6951).
pub const DEFAULT_UDP_PORT: u16 = 9899;

/// RFC 8260 stream schedulers offered by usrsctp (`SCTP_PLUGGABLE_SS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheduler {
    /// First come, first served: messages leave in the order they were queued, across streams.
    FirstCome,
    /// Round robin over streams with data, one message per turn.
    RoundRobin,
    /// Round robin over streams, one packet per turn.
    RoundRobinPacket,
    /// Strict priority by [`Association::set_stream_value`] (lower value first); round robin
    /// among equal priorities.
    Priority,
    /// Fair bandwidth: equal bytes per stream, weighted by the stream value.
    FairBandwidth,
}

impl Scheduler {
    fn raw(self) -> u32 {
        match self {
            Scheduler::FirstCome => ffi::SCTP_SS_FIRST_COME,
            Scheduler::RoundRobin => ffi::SCTP_SS_ROUND_ROBIN,
            Scheduler::RoundRobinPacket => ffi::SCTP_SS_ROUND_ROBIN_PACKET,
            Scheduler::Priority => ffi::SCTP_SS_PRIORITY,
            Scheduler::FairBandwidth => ffi::SCTP_SS_FAIR_BANDWITH,
        }
    }
}

/// Per-association settings, applied with a few setsockopts at socket creation.
#[derive(Debug, Clone)]
pub struct SctpOptions {
    /// Inbound and outbound streams requested in INIT (SCTP_INITMSG). Default 1024.
    pub streams: u16,
    /// Local SCTP port of a client (0: usrsctp picks an ephemeral one). Default 0.
    pub local_port: u16,
    /// usrsctp send buffer (SO_SNDBUF) in bytes; `None`: the stack default (256 KiB).
    pub send_buffer: Option<u32>,
    /// usrsctp receive buffer (SO_RCVBUF) in bytes; `None`: the stack default (256 KiB).
    pub recv_buffer: Option<u32>,
    /// Bytes of received messages we buffer for the application before we stop reading from
    /// usrsctp (which then closes the receive window). Default 256 KiB.
    pub recv_budget: usize,
    /// Stream scheduler set before the association starts; `None`: usrsctp's default.
    pub scheduler: Option<Scheduler>,
    /// Disable Nagle-like bundling delay (SCTP_NODELAY). Default true.
    pub nodelay: bool,
    /// Start in stream-accepting mode (see [`Association::accept_stream`]). Default false.
    pub accept_streams: bool,
    /// Maximum INIT retransmissions (0: usrsctp's default, 8).
    pub init_attempts: u16,
    /// Maximum INIT retransmission timeout in ms (0: usrsctp's default, 60 s).
    pub init_max_timeout_ms: u16,
}

impl Default for SctpOptions {
    fn default() -> Self {
        SctpOptions {
            streams: 1024,
            local_port: 0,
            send_buffer: None,
            recv_buffer: None,
            recv_budget: 256 * 1024,
            scheduler: None,
            nodelay: true,
            accept_streams: false,
            init_attempts: 0,
            init_max_timeout_ms: 0,
        }
    }
}

/// Counts of what the stack holds, for leak checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StackStats {
    /// Open usrsctp sockets (associations, pending connects, listeners).
    pub sctp_sockets: usize,
    /// Registered AF_CONN addresses (one per client association, one per server-side remote).
    pub conn_addrs: usize,
    /// UDP sockets we own whose reader task is alive.
    pub udp_sockets: usize,
}

/// Handle to the process-wide usrsctp instance. Copying it is free.
#[derive(Clone, Copy, Debug)]
pub struct SctpStack {
    _private: (),
}

fn configure(sock: &Sock, opts: &SctpOptions, listening_or_new: bool) -> Result<()> {
    if listening_or_new {
        let init = ffi::sctp_initmsg {
            sinit_num_ostreams: opts.streams.max(1),
            sinit_max_instreams: opts.streams.max(1),
            sinit_max_attempts: opts.init_attempts,
            sinit_max_init_timeo: opts.init_max_timeout_ms,
        };
        sock.setopt(ffi::IPPROTO_SCTP, ffi::SCTP_INITMSG, &init, "SCTP_INITMSG")?;
    }
    if let Some(b) = opts.send_buffer {
        sock.setopt(
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            &(b as libc::c_int),
            "SO_SNDBUF",
        )?;
    }
    if let Some(b) = opts.recv_buffer {
        sock.setopt(
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &(b as libc::c_int),
            "SO_RCVBUF",
        )?;
    }
    sock.sctp_opt_int(ffi::SCTP_RECVRCVINFO, 1, "SCTP_RECVRCVINFO")?;
    sock.sctp_opt_int(ffi::SCTP_EXPLICIT_EOR, 1, "SCTP_EXPLICIT_EOR")?;
    sock.sctp_opt_int(ffi::SCTP_NODELAY, i32::from(opts.nodelay), "SCTP_NODELAY")?;
    for ty in [
        ffi::SCTP_ASSOC_CHANGE,
        ffi::SCTP_SHUTDOWN_EVENT,
        ffi::SCTP_SENDER_DRY_EVENT,
        ffi::SCTP_STREAM_RESET_EVENT,
    ] {
        let ev = ffi::sctp_event {
            se_assoc_id: ffi::SCTP_FUTURE_ASSOC,
            se_type: ty,
            se_on: 1,
        };
        sock.setopt(ffi::IPPROTO_SCTP, ffi::SCTP_EVENT, &ev, "SCTP_EVENT")?;
    }
    if let Some(s) = opts.scheduler {
        let v = ffi::sctp_assoc_value {
            assoc_id: ffi::SCTP_FUTURE_ASSOC,
            assoc_value: s.raw(),
        };
        sock.setopt(
            ffi::IPPROTO_SCTP,
            ffi::SCTP_PLUGGABLE_SS,
            &v,
            "SCTP_PLUGGABLE_SS",
        )?;
    }
    Ok(())
}

fn require_runtime() -> Result<()> {
    tokio::runtime::Handle::try_current()
        .map(|_| ())
        .map_err(|_| Error::NoRuntime)
}

impl SctpStack {
    /// Returns the process-wide stack, initialising usrsctp on first use (once per process;
    /// the timer thread starts with the first socket).
    pub fn global() -> SctpStack {
        let _ = global();
        SctpStack { _private: () }
    }

    /// Starts an association to the SCTP endpoint on `sctp_port` behind the UDP
    /// encapsulation address `remote`. Binds a fresh UDP socket (ephemeral port, connected
    /// to `remote`), registers a conn address, creates a usrsctp socket and sends INIT.
    /// Returns at once; await the [`Connecting`] for the association. Needs a tokio runtime.
    pub fn connect(
        &self,
        remote: SocketAddr,
        sctp_port: u16,
        opts: &SctpOptions,
    ) -> Result<Connecting> {
        require_runtime()?;
        let (mut link, udp_recv) = ClientLink::open(remote)?;
        let sock = Sock::new_stream()?;
        configure(&sock, opts, true)?;
        sock.bind(link.addr.id, opts.local_port)?;
        let shared = AssocShared::new(sock.clone(), remote, opts, Progress::Connecting);
        link.start(udp_recv, shared.clone());
        let local = link.local;
        let inner = AssocInner::start(shared, Link::Client(link), local, remote);
        match sock.connect(inner.conn_id(), sctp_port) {
            Ok(()) => {}
            Err(Error::Sys { source, .. }) if would_block(&source) => {}
            Err(e) => return Err(e),
        }
        Ok(Connecting::new(inner))
    }

    /// Listens for associations to `sctp_port` arriving on the UDP address `udp_local`
    /// (e.g. `[::]:9899`). The UDP socket is shared with other listeners on the same
    /// `udp_local` in this process. Needs a tokio runtime.
    pub fn listen(
        &self,
        udp_local: SocketAddr,
        sctp_port: u16,
        opts: &SctpOptions,
    ) -> Result<SctpListener> {
        require_runtime()?;
        let udp = SharedUdp::get(udp_local)?;
        let sock = Sock::new_stream()?;
        configure(&sock, opts, true)?;
        sock.bind(0, sctp_port)?;
        sock.listen(128)?;
        Ok(SctpListener {
            sock,
            udp,
            opts: opts.clone(),
            sctp_port,
        })
    }

    /// Sum of [`StackStats`]: usrsctp sockets + registered conn addresses + live UDP
    /// sockets. Three atomic loads.
    pub fn live_sockets(&self) -> usize {
        let s = self.stats();
        s.sctp_sockets + s.conn_addrs + s.udp_sockets
    }

    /// What the stack currently holds. Three atomic loads.
    pub fn stats(&self) -> StackStats {
        let g = global();
        StackStats {
            sctp_sockets: g.live_socks.load(Ordering::SeqCst),
            conn_addrs: g.live_addrs.load(Ordering::SeqCst),
            udp_sockets: g.live_udp.load(Ordering::SeqCst),
        }
    }
}

/// A listening SCTP endpoint behind a (shared) UDP socket. Dropping it closes the listening
/// socket (associations not yet accepted are aborted); accepted associations live on.
pub struct SctpListener {
    sock: Arc<Sock>,
    udp: Arc<SharedUdp>,
    opts: SctpOptions,
    sctp_port: u16,
}

impl std::fmt::Debug for SctpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SctpListener")
            .field("udp", &self.udp.local)
            .field("sctp_port", &self.sctp_port)
            .finish()
    }
}

impl SctpListener {
    /// The local UDP address. No I/O.
    pub fn local_addr(&self) -> SocketAddr {
        self.udp.local
    }

    /// The SCTP port listened on. No I/O.
    pub fn sctp_port(&self) -> u16 {
        self.sctp_port
    }

    /// Waits for the next established association; returns it with the peer's UDP address.
    /// Cancel-safe.
    pub async fn accept(&self) -> Result<(Association, SocketAddr)> {
        loop {
            let mut readable = pin!(self.sock.wakers.readable.notified());
            readable.as_mut().enable();
            let (acc, id) = match self.sock.accept() {
                Ok(v) => v,
                Err(Error::Sys { source, .. }) if would_block(&source) => {
                    readable.await;
                    continue;
                }
                Err(Error::Sys { source, .. })
                    if source.raw_os_error() == Some(libc::ECONNABORTED) =>
                {
                    continue
                }
                Err(e) => return Err(e),
            };
            let sock = Sock::adopt(acc)?;
            let Some(remote) = self.udp.claim(id) else {
                continue; // remote forgotten meanwhile: `sock` drops and aborts
            };
            let link = Link::Server {
                udp: self.udp.clone(),
                remote,
            };
            // From here the claim is released by AssocInner's Drop, even on error paths.
            let _ = configure(&sock, &self.opts, false);
            let mut st = ffi::sctp_status::zeroed();
            let (inbound, outbound) =
                match sock.getopt(ffi::IPPROTO_SCTP, ffi::SCTP_STATUS, &mut st, "SCTP_STATUS") {
                    Ok(()) => (st.sstat_instrms, st.sstat_outstrms),
                    Err(_) => (0, 0),
                };
            let shared = AssocShared::new(
                sock,
                remote,
                &self.opts,
                Progress::Established { inbound, outbound },
            );
            let inner = AssocInner::start(shared, link, self.udp.local, remote);
            return Ok((Association { inner }, remote));
        }
    }
}
