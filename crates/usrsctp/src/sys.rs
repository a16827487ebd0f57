//! Process-global state around the usrsctp instance: its initialisation, the timer thread, the
//! conn-address routing table used by the output hook, the upcall table, and [`Sock`], one
//! usrsctp socket with its wakers and accounting. Calls into usrsctp go through [`ffi`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock, Weak};
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::ffi;

/// Locks a mutex, ignoring poisoning (no code path panics while holding our locks, and a
/// poisoned routing table is still consistent).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where the output callback sends packets for one conn address.
pub(crate) struct Route {
    pub(crate) sock: Arc<UdpSocket>,
    /// `None`: the socket is connected, use `send`.
    pub(crate) remote: Option<SocketAddr>,
    /// Source address to send from (a shared socket bound to the unspecified address: the
    /// address the remote sent to, passed as IP_PKTINFO / IPV6_PKTINFO). `None`: the kernel
    /// picks (plain `send_to`).
    pub(crate) src: Option<IpAddr>,
    /// A client's connected socket: set when a send fails with `ECONNREFUSED`. A send
    /// takes a pending ICMP error from the socket as its own result, so the reader would
    /// never see a refusal that arrived just before usrsctp sent (e.g. the answer to a
    /// port probe arriving while the association is made); this keeps it.
    pub(crate) refused: Option<Arc<AtomicBool>>,
    /// Bytes of the SCTP packets sent to and received from this conn address (a path).
    pub(crate) bytes: Arc<ConnBytes>,
}

/// What one conn address (one path of an AF_CONN association) carried: whole SCTP
/// packets, both ways.
#[derive(Default)]
pub(crate) struct ConnBytes {
    sent: AtomicU64,
    received: AtomicU64,
}

/// Read/write readiness of one usrsctp socket, signalled by the upcall.
#[derive(Default)]
pub(crate) struct SockWakers {
    pub(crate) readable: Notify,
    pub(crate) writable: Notify,
}

impl SockWakers {
    pub(crate) fn wake_all(&self) {
        self.readable.notify_waiters();
        self.writable.notify_waiters();
    }
}

pub(crate) struct Global {
    /// The initialised library, or why it could not be loaded.
    lib: std::result::Result<ffi::Usrsctp, String>,
    routes: Mutex<HashMap<usize, Route>>,
    wakers: RwLock<HashMap<usize, Arc<SockWakers>>>,
    /// Every open usrsctp socket by waker id, for [`crate::end_all_associations`]. Weak:
    /// their owners keep them; closing one removes it.
    socks: Mutex<HashMap<usize, Weak<Sock>>>,
    next_id: AtomicUsize,
    pub(crate) live_socks: AtomicUsize,
    pub(crate) live_addrs: AtomicUsize,
    pub(crate) live_udp: AtomicUsize,
    /// usrsctp sockets made so far ([`SctpStack::sockets_made`](crate::SctpStack::sockets_made)).
    pub(crate) made_socks: AtomicUsize,
    /// UDP sends of SCTP packets (`sendmsg` calls, a GSO attempt the kernel refused
    /// included; a GSO send carries several packets).
    pub(crate) udp_sends: AtomicUsize,
    /// SCTP packets those sends carried.
    pub(crate) packets_sent: AtomicUsize,
    timer: OnceLock<thread::Thread>,
}

static GLOBAL: OnceLock<Global> = OnceLock::new();

/// Idle time after which the timer thread parks when no socket or address is alive.
const TIMER_IDLE_PARK: Duration = Duration::from_secs(10);
/// usrsctp's own timer thread ticks every 10 ms; we do the same.
const TICK: Duration = Duration::from_millis(10);

/// The process-wide usrsctp defaults (see `docs/sctp.md` for the measurements behind them).
fn tuning() -> ffi::Tuning {
    ffi::Tuning {
        send_space: 1024 * 1024,
        recv_space: 1024 * 1024,
        rto_min_ms: 1000,
        rto_initial_ms: 3000,
        congestion_control: ffi::SCTP_CC_RFC2581,
        initial_cwnd: 3,
        max_burst: 4,
        sack_delay_ms: 200,
    }
}

/// The process-wide state if something already made it (no library loading): what the
/// counters read.
pub(crate) fn started() -> Option<&'static Global> {
    GLOBAL.get()
}

pub(crate) fn global() -> &'static Global {
    GLOBAL.get_or_init(|| Global {
        lib: ffi::Usrsctp::init(
            ffi::Hooks {
                output: conn_output,
                upcall,
                flush,
            },
            tuning(),
        ),
        routes: Mutex::new(HashMap::new()),
        wakers: RwLock::new(HashMap::new()),
        socks: Mutex::new(HashMap::new()),
        next_id: AtomicUsize::new(1),
        live_socks: AtomicUsize::new(0),
        live_addrs: AtomicUsize::new(0),
        live_udp: AtomicUsize::new(0),
        made_socks: AtomicUsize::new(0),
        udp_sends: AtomicUsize::new(0),
        packets_sent: AtomicUsize::new(0),
        timer: OnceLock::new(),
    })
}

impl Global {
    /// The initialised library; [`Error::Unavailable`] when it could not be loaded.
    pub(crate) fn lib(&self) -> Result<ffi::Usrsctp> {
        self.lib.clone().map_err(Error::Unavailable)
    }

    pub(crate) fn next_id(&self) -> usize {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The usrsctp sockets open now (listeners, pending and established associations).
    pub(crate) fn open_socks(&self) -> Vec<Arc<Sock>> {
        lock(&self.socks)
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }

    fn live(&self) -> usize {
        self.live_socks.load(Ordering::SeqCst) + self.live_addrs.load(Ordering::SeqCst)
    }

    /// Starts the timer thread on first use, wakes it if it parked.
    fn kick_timer(&'static self) {
        let t = self.timer.get_or_init(|| {
            let spawned = thread::Builder::new()
                .name("usrsctp-timer".into())
                .spawn(move || self.timer_loop());
            match spawned {
                Ok(h) => h.thread().clone(),
                Err(e) => {
                    tracing::error!("cannot start the usrsctp timer thread: {e}");
                    thread::current()
                }
            }
        });
        t.unpark();
    }

    fn timer_loop(&'static self) {
        let mut last = Instant::now();
        let mut idle_since: Option<Instant> = None;
        loop {
            thread::sleep(TICK);
            let now = Instant::now();
            let ms = now
                .duration_since(last)
                .as_millis()
                .min(u128::from(u32::MAX)) as u32;
            if ms > 0 {
                last += Duration::from_millis(u64::from(ms));
                if let Ok(lib) = self.lib {
                    lib.handle_timers(ms);
                }
            }
            if self.live() == 0 {
                let since = *idle_since.get_or_insert(now);
                if now.duration_since(since) > TIMER_IDLE_PARK {
                    thread::park();
                    last = Instant::now();
                    idle_since = None;
                }
            } else {
                idle_since = None;
            }
        }
    }
}

/// Packets of one conn address waiting to leave in one UDP GSO send.
#[derive(Default)]
struct Batch {
    conn: usize,
    /// Size of every packet but the last.
    segment: usize,
    /// The packets back to back.
    buf: Vec<u8>,
    count: usize,
    /// The last packet was shorter than `segment`: nothing may follow it.
    closed: bool,
}

/// Most bytes (UDP payload) and packets in one GSO send (the kernel's limits: 64 KiB, 64
/// segments).
const GSO_MAX_BYTES: usize = 65_000;
const GSO_MAX_SEGMENTS: usize = 64;
/// Whether UDP GSO works on this host (cleared on the first send the kernel refuses).
static GSO: AtomicBool = AtomicBool::new(true);

/// [`GSO`]'s value.
pub(crate) fn gso_enabled() -> bool {
    GSO.load(Ordering::Relaxed)
}

std::thread_local! {
    /// The packets usrsctp produced during the current hold of its lock on this thread.
    static BATCH: RefCell<Batch> = RefCell::new(Batch::default());
}

/// The output hook: one SCTP packet → one UDP datagram (RFC 6951, no extra header). Runs on
/// whatever thread is inside usrsctp (timer thread, a task calling conninput/sendv), under
/// the usrsctp lock; never calls back into usrsctp. Packets of path-MTU size are collected
/// and leave together when the thread releases the usrsctp lock ([`flush`]; one hold may
/// span several calls, see `ffi::batch`): one `sendmsg` with UDP GSO for up to 64 packets
/// (and 65,000 bytes) of one association instead of a syscall each.
///
/// On a thread whose thread-locals are being destroyed (the thread that calls `exit()`
/// runs its thread-local destructors before the `atexit` handlers, and ours ends the
/// associations there) every packet goes out at once.
fn conn_output(id: usize, pkt: &[u8]) {
    let batched = BATCH.try_with(|b| {
        let mut b = b.borrow_mut();
        if b.count > 0
            && (b.conn != id
                || b.closed
                || pkt.len() > b.segment
                || b.buf.len() + pkt.len() > GSO_MAX_BYTES
                || b.count >= GSO_MAX_SEGMENTS)
        {
            send_batch(&mut b);
        }
        // A packet from a thread that will not flush (usrsctp's iterator thread), too large
        // to share a send, or on a host without GSO goes out at once.
        if pkt.len() > GSO_MAX_BYTES / 2 || !GSO.load(Ordering::Relaxed) || !ffi::inside_call() {
            send_packets(id, pkt, None);
            return;
        }
        if b.count == 0 {
            b.conn = id;
            b.segment = pkt.len();
        }
        b.closed = pkt.len() < b.segment;
        b.buf.extend_from_slice(pkt);
        b.count += 1;
    });
    if batched.is_err() {
        send_packets(id, pkt, None);
    }
}

/// The flush hook: sends what this thread's last hold of the usrsctp lock produced.
fn flush() {
    let _ = BATCH.try_with(|b| send_batch(&mut b.borrow_mut()));
}

fn send_batch(b: &mut Batch) {
    if b.count == 0 {
        return;
    }
    let segment = (b.count > 1).then_some(b.segment as u16);
    send_packets(b.conn, &b.buf, segment);
    b.buf.clear();
    b.count = 0;
    b.closed = false;
}

/// Sends `buf` (one packet, or packets of `segment` bytes back to back) to conn address
/// `id`'s route. A full socket buffer drops them, like a lossy link (SCTP retransmits).
///
/// A shared server socket queues its ICMP errors (IP_RECVERR, see [`crate::refusal`]), and
/// on an unconnected socket each queued error is also the socket's pending error, which
/// the next send takes as its own result: it fails with `ECONNREFUSED` and its datagrams
/// are not sent, whatever remote they were for. Such a send is made again (the error it
/// took is gone; the reader task still finds it in the queue), up to [`SEND_TRIES`] times
/// in all, should more refusals arrive in between.
fn send_packets(id: usize, buf: &[u8], segment: Option<u16>) {
    let Some(g) = GLOBAL.get() else { return };
    let route = {
        let routes = lock(&g.routes);
        routes
            .get(&id)
            .map(|r| (r.sock.clone(), r.remote, r.src, r.bytes.clone()))
    };
    let Some((sock, remote, src, bytes)) = route else {
        return;
    };
    g.udp_sends.fetch_add(1, Ordering::Relaxed);
    let packets = segment.map_or(1, |seg| buf.len().div_ceil(usize::from(seg).max(1)));
    g.packets_sent.fetch_add(packets, Ordering::Relaxed);
    let shared = remote.is_some();
    let send = |buf: &[u8], segment: Option<u16>| {
        let mut tries = 1;
        loop {
            let res = crate::pktinfo::send_datagrams(&sock, buf, segment, remote, src);
            match &res {
                Err(e)
                    if shared
                        && e.kind() == io::ErrorKind::ConnectionRefused
                        && tries < SEND_TRIES =>
                {
                    tries += 1
                }
                _ => return res,
            }
        }
    };
    let mut res = send(buf, segment);
    if let (Err(e), Some(seg)) = (&res, segment) {
        if matches!(
            e.raw_os_error(),
            Some(libc::EIO) | Some(libc::EINVAL) | Some(libc::ENOPROTOOPT)
        ) {
            // No GSO here (or not for this device): one datagram per packet from now on.
            tracing::debug!("usrsctp: UDP GSO refused ({e}), sending packets one by one");
            GSO.store(false, Ordering::Relaxed);
            res = Ok(0);
            g.udp_sends.fetch_add(packets, Ordering::Relaxed);
            for p in buf.chunks(usize::from(seg)) {
                if let Err(e) = send(p, None) {
                    res = Err(e);
                }
            }
        }
    }
    if res.is_ok() {
        bytes.sent.fetch_add(buf.len() as u64, Ordering::Relaxed);
    }
    if let Err(e) = res {
        if e.kind() == io::ErrorKind::ConnectionRefused {
            // Rare (a refusal taken by this send): the route is looked up again here
            // rather than its flag cloned for every packet.
            if let Some(flag) = lock(&g.routes).get(&id).and_then(|r| r.refused.as_ref()) {
                flag.store(true, Ordering::Release);
            }
        }
        if e.kind() != io::ErrorKind::WouldBlock {
            tracing::trace!("usrsctp output to conn {id}: {e}");
        }
    }
}

/// Most sends of one batch on a shared socket, see [`send_packets`].
const SEND_TRIES: u32 = 3;

/// The upcall hook: wakes the tasks waiting on the socket with waker id `id`. Never calls
/// into usrsctp.
fn upcall(id: usize) {
    let Some(g) = GLOBAL.get() else { return };
    let w = g
        .wakers
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&id)
        .cloned();
    if let Some(w) = w {
        w.wake_all();
    }
}

/// A registered AF_CONN address: an integer id (never dereferenced by usrsctp, only compared)
/// plus its route. Dropping it deregisters the address and forgets the route.
pub(crate) struct ConnAddr {
    pub(crate) id: usize,
}

impl ConnAddr {
    pub(crate) fn register(route: Route) -> Result<ConnAddr> {
        let g = global();
        let lib = g.lib()?;
        let id = g.next_id();
        lock(&g.routes).insert(id, route);
        g.live_addrs.fetch_add(1, Ordering::SeqCst);
        g.kick_timer();
        // Called without holding the routing or upcall table locks.
        lib.register_address(id);
        Ok(ConnAddr { id })
    }

    /// Changes the source address replies to this conn address are sent from.
    pub(crate) fn set_source(&self, src: Option<IpAddr>) {
        if let Some(r) = lock(&global().routes).get_mut(&self.id) {
            r.src = src;
        }
    }
}

impl Drop for ConnAddr {
    fn drop(&mut self) {
        let g = global();
        // Neither the routing nor the upcall table lock is held. (A registered address
        // means the library is loaded.)
        if let Ok(lib) = g.lib {
            lib.deregister_address(self.id);
        }
        lock(&g.routes).remove(&self.id);
        g.live_addrs.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The UDP addresses conn address `id` is sent over: (local, remote). `None` for an
/// unknown id or a socket whose addresses the kernel does not give. Two `getsockname`/
/// `getpeername` calls at most.
pub(crate) fn route_addrs(id: usize) -> Option<(SocketAddr, SocketAddr)> {
    let (sock, remote, src) = {
        let routes = lock(&started()?.routes);
        let r = routes.get(&id)?;
        (r.sock.clone(), r.remote, r.src)
    };
    let bound = sock.local_addr().ok()?;
    // A shared socket bound to the unspecified address sends from `src`.
    let local = SocketAddr::new(src.unwrap_or(bound.ip()), bound.port());
    let remote = match remote {
        Some(r) => r,
        None => sock.peer_addr().ok()?,
    };
    Some((local, remote))
}

/// Feeds one received SCTP packet (UDP payload) to usrsctp as coming from conn address `id`,
/// counting it for that path (one lookup of the route).
pub(crate) fn conninput(id: usize, pkt: &[u8]) {
    if let Some(r) = lock(&global().routes).get(&id) {
        r.bytes
            .received
            .fetch_add(pkt.len() as u64, Ordering::Relaxed);
    }
    if let Ok(lib) = global().lib {
        lib.conninput(id, pkt);
    }
}

/// The bytes conn address `id` carried so far, (sent, received); `None` if it is not
/// registered. One lock.
pub(crate) fn route_bytes(id: usize) -> Option<(u64, u64)> {
    let routes = lock(&started()?.routes);
    let b = &routes.get(&id)?.bytes;
    Some((
        b.sent.load(Ordering::Relaxed),
        b.received.load(Ordering::Relaxed),
    ))
}

/// One usrsctp socket ([`ffi::Socket`], whose calls it derefs to) with its wakers, counted in
/// the stack's statistics. Dropping it closes the socket with ABORT.
pub(crate) struct Sock {
    raw: ffi::Socket,
    waker_id: usize,
    pub(crate) wakers: Arc<SockWakers>,
}

impl Deref for Sock {
    type Target = ffi::Socket;

    fn deref(&self) -> &ffi::Socket {
        &self.raw
    }
}

impl Sock {
    /// Creates an AF_CONN one-to-one socket, non-blocking, with our upcall.
    pub(crate) fn new_stream() -> Result<Arc<Sock>> {
        let g = global();
        let lib = g.lib()?;
        Sock::register(g, |id| ffi::Socket::stream(lib, id))
    }

    /// Creates an IP-mode one-to-one socket (AF_INET6 when `v6`, else AF_INET),
    /// non-blocking, with our upcall.
    pub(crate) fn new_stream_ip(v6: bool) -> Result<Arc<Sock>> {
        let g = global();
        let lib = g.lib()?;
        Sock::register(g, |id| ffi::Socket::stream_ip(lib, id, v6))
    }

    /// Takes ownership of a socket from `accept`.
    pub(crate) fn adopt(acc: ffi::Accepted) -> Result<Arc<Sock>> {
        Sock::register(global(), |id| acc.adopt(id))
    }

    /// Registers wakers under a fresh id, then sets up the socket with that id as its upcall
    /// argument (so no upcall finds the table without its entry).
    fn register(
        g: &'static Global,
        make: impl FnOnce(usize) -> Result<ffi::Socket>,
    ) -> Result<Arc<Sock>> {
        let waker_id = g.next_id();
        let wakers = Arc::new(SockWakers::default());
        g.wakers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(waker_id, wakers.clone());
        match make(waker_id) {
            Ok(raw) => {
                g.live_socks.fetch_add(1, Ordering::SeqCst);
                g.made_socks.fetch_add(1, Ordering::Relaxed);
                g.kick_timer();
                let sock = Arc::new(Sock {
                    raw,
                    waker_id,
                    wakers,
                });
                lock(&g.socks).insert(waker_id, Arc::downgrade(&sock));
                Ok(sock)
            }
            Err(e) => {
                g.wakers
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&waker_id);
                Err(e)
            }
        }
    }

    /// Closes the socket. `abort`: SO_LINGER 0 first, so usrsctp sends ABORT at once instead
    /// of a graceful SHUTDOWN. Idempotent.
    pub(crate) fn close(&self, abort: bool) {
        if !self.raw.close(abort) {
            return;
        }
        let g = global();
        g.wakers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.waker_id);
        lock(&g.socks).remove(&self.waker_id);
        g.live_socks.fetch_sub(1, Ordering::SeqCst);
        self.wakers.wake_all();
    }
}

impl Drop for Sock {
    fn drop(&mut self) {
        self.close(true);
    }
}

/// Whether a failed call's errno means "would block" (or "in progress").
pub(crate) fn would_block(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EWOULDBLOCK) | Some(libc::EINPROGRESS)
    )
}
