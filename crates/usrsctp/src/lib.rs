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
//! # Loading
//! Nothing links against libusrsctp: the first use of the stack in a process
//! ([`SctpStack::global`], which every connect and listen goes through; not
//! [`SctpStack::stats`]) loads Debian's `libusrsctp.so.2` with `dlopen` and looks its
//! functions up, so a
//! program that never uses SCTP does not load it at start-up (0.3 M instructions of the
//! dynamic linker, 0.5 MB of RSS) and runs where it is not installed. Where it cannot be
//! loaded every call that needs it returns [`Error::Unavailable`], naming the file and what
//! to install. `TAPS_USRSCTP_LIB` names another file to load (read once, at that first use).
//!
//! # Threading model
//! * usrsctp is initialised once per process with `usrsctp_init_nothreads(0, ..)` (not
//!   `usrsctp_init`, which as root opens raw IPPROTO_SCTP sockets plus three threads; on a
//!   host with kernel SCTP those raw sockets would see kernel SCTP traffic and answer it with
//!   ABORTs). One thread of ours, `usrsctp-timer`, calls `usrsctp_handle_timers` every 10 ms
//!   (retransmissions, heartbeats, delayed SACKs) and parks after 10 s without sockets.
//!   With the first usrsctp socket the process also gets what ends its associations at
//!   exit (see [Exit](#exit)): an `atexit` handler and, where SIGINT, SIGTERM or SIGHUP
//!   still have their default disposition, a handler and a thread (`usrsctp-signal`).
//! * Inbound: one tokio task per UDP socket reads datagrams and calls `usrsctp_conninput`,
//!   which runs the SCTP state machine synchronously on that task's thread. The output
//!   callback (called from that thread or the timer thread) collects the packets; when the
//!   thread leaves usrsctp they are sent (routing-table mutex, socket `Arc` cloned, one
//!   non-blocking `sendmsg`; a full socket buffer drops them, like a lossy link).
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
//!   timer tick (see `ffi::library::serial`). libusrsctp 0.9.5 is not safe against entry from
//!   several threads at once (it is built for one calling thread plus its own timer thread): an
//!   `usrsctp_close` racing a `conninput` that processes an ABORT of the same socket frees the
//!   endpoint under the input path's feet (heap corruption under connection churn), and
//!   callouts are stopped without waiting for a running handler. So at most one of our
//!   threads is inside usrsctp at a time; its internal iterator thread, which does what
//!   `usrsctp_bindx` queues on an association (ASCONF), runs while the thread that called
//!   bindx holds the lock and waits for it. SCTP processing uses one CPU at a time, UDP I/O
//!   and everything else stay parallel.
//!
//! Cost per association: one usrsctp socket, one driver task, and for clients one UDP socket
//! plus one reader task. Once per process, one idle UDP socket with GRO on is kept open:
//! the host's first GRO socket and the closing of its last one each flip a kernel static
//! key (code patched on every CPU, ~130 us), which associations coming and going one at a
//! time would otherwise pay twice each. Packets are as large as the path allows (the kernel route's MTU:
//! 64 KiB on loopback, see [`SctpOptions::path_mtu`]). Every packet costs one `conninput`
//! (our CRC32c check with the CPU's instruction; usrsctp's own is switched off). Outbound
//! packets produced during one hold of the usrsctp lock leave together when it ends: one
//! routing-table lookup and one `sendmsg` with UDP GSO for up to 64 packets (65,000
//! bytes). Our sockets take coalesced datagrams (UDP GRO), so a burst is one `recvmsg`,
//! and its datagrams go to usrsctp in one hold, so what they release (data after SACKs,
//! SACKs after data) leaves as one send (17.6 packets per `sendmsg` on a 1500-byte path;
//! 3.5 when each `conninput` flushed on its own). The socket buffers (and receive window)
//! are 1 MiB.
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
//! * One-to-one sockets only; extra paths only through [`SctpPath`] and
//!   [`Association::add_peer_path`] (docs/sctp.md, Multihoming); DSCP (`tos`)
//!   and the DF hint from usrsctp are ignored.
//! * `queued_bytes(stream)` is our own upper-bound accounting (usrsctp has no per-stream
//!   queue query), see [`Association::queued_bytes`].
//! * An INIT to an unreachable peer (no ICMP) retries per usrsctp defaults (8 attempts,
//!   minutes): bound connects with a timeout (or lower [`SctpOptions::init_attempts`]). An
//!   ICMP port unreachable (nothing on that UDP port) fails the attempt at once with
//!   [`Error::Refused`], because the client's UDP socket is connected (ECONNREFUSED): from
//!   [`SctpStack::connect`] itself when the answer is already there as the INIT leaves (the
//!   peer is this host: no task is spawned and the socket never joins the runtime's epoll
//!   set), else from the [`Connecting`] when it arrives.
//! * After establishment an ICMP or ICMPv6 port unreachable ends the association with
//!   [`Error::PeerGone`] if the packet it quotes carries the association's verification
//!   tag (RFC 6951 section 5.5, RFC 9260 appendix C); one quoting another association's
//!   tag is dropped. Our UDP sockets, client and shared ones, queue their ICMP errors
//!   with what they quote (IP_RECVERR / IPV6_RECVERR); for each port unreachable the
//!   ABORT the peer would have sent (T bit, the quoted tag) goes to usrsctp, which does the
//!   tag check. On loopback a killed peer is seen at its next heartbeat (within 1 s with
//!   a 200 ms [`SctpOptions::heartbeat_interval_ms`] and a 400 ms
//!   [`SctpOptions::rto_max_ms`]; at the default 30 s interval, after 30-32 s) or at the
//!   next data sent. Other ICMP errors are ignored, and a peer whose host stays
//!   silent (down, unreachable, filtered) is noticed only by heartbeats and
//!   retransmission limits ([`SctpOptions::max_retransmits`]). The errors of a shared
//!   socket are also its pending error, which its next send takes whatever remote it is
//!   for: such a send is made again, so other remotes lose nothing.
//! * usrsctp is never de-initialised (`usrsctp_finish` is not called).
//!
//! # Exit
//! A process that ends leaves no SCTP peer waiting, as the kernel does for TCP: at
//! `exit()` (also the return from `main`) and on SIGINT, SIGTERM or SIGHUP,
//! [`end_all_associations`] runs with [`EXIT_GRACE`] (1 s): hooks of higher layers
//! ([`before_exit`]) first, then a SHUTDOWN of every established association after the
//! data queued on it, a wait of at most the grace for those handshakes (reading our UDP
//! sockets on that thread, so it needs no runtime: the runtime may be stopped, or
//! blocked by the thread that called `exit()`), then an ABORT of whatever is left and
//! the listeners closed. A signal handler is installed only where the disposition is the
//! default when the first usrsctp socket is made; it writes the signal's number into a
//! pipe, and the `usrsctp-signal` thread, if our handler is still the installed one (an
//! application or tokio's `signal-hook-registry` handler installed later decides
//! instead), ends the associations, restores the default and raises the signal again, so
//! the process dies by it. `_exit()`, SIGKILL and crashes end nothing: the peer learns
//! of those by ICMP ([Limits](#limits)). An association whose last handle is dropped
//! while the process runs (also when a runtime shuts down and drops its tasks) is
//! aborted then. A process that never makes a usrsctp socket installs none of this.
//!
//! # Layout
//! Private modules, the public API re-exported here. `ffi` is the only door into libusrsctp
//! (its declarations, a safe `Socket` and the library-wide calls) and `pktinfo` does the
//! `recvmsg`/`sendmsg` with packet info (and the reads of a socket's error queue), and
//! `signals` the `atexit` handler, the signal handlers and their pipe (`sigaction`,
//! `pipe2`, `raise`, calls of libc with no safe wrapper in std): the only modules with
//! code the compiler cannot check, a rule the workspace's lint table enforces (it denies
//! such code everywhere else). `sys` keeps the process-wide state
//! (routing and upcall tables, timer thread), `udp` our UDP sockets and their reader tasks
//! (`udp/client`: a client's connected socket; `udp/shared`: a listener's socket shared by
//! remote address), `packet` the checks made on a packet before usrsctp sees it, `probe`
//! the port probe's shared sockets, `refusal` the ICMP port unreachables turned
//! into ABORTs, `exit` the end of every association at exit, `assoc` the associations,
//! `options`, `stack` and `listener` the entry points.

mod assoc;
mod cmt;
mod error;
mod exit;
mod ffi;
mod ip_mode;
mod ip_paths;
mod listener;
mod multihome;
mod options;
mod packet;
mod path_events;
mod pktinfo;
mod probe;
mod refusal;
mod signals;
mod stack;
mod sys;
mod udp;

pub use assoc::{Association, Connecting, Message, Progress, StreamHandle};
pub use cmt::CmtMode;
pub use error::{Error, Result};
pub use exit::{before_exit, end_all_associations, Ended, EXIT_GRACE};
pub use listener::SctpListener;
pub use multihome::{
    multihome_available, set_cmt_global, set_peer_chunk_overhead, set_renege, BufferSplitting,
    CmtGlobal, FixedPaths, PathEvents, PathInfo, PathParams, PathState, PathStats, PathThresholds,
    PeerPath, SctpPath,
};
pub use options::{Scheduler, SctpOptions};
pub use path_events::{PathEvent, PathEventKind, PathId};
pub use stack::{SctpStack, StackStats};

/// The conventional SCTP-over-UDP encapsulation port (RFC 6951). A constant.
pub const DEFAULT_UDP_PORT: u16 = 9899;
