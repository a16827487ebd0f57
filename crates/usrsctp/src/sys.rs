//! Process-global usrsctp state: one-time init, the timer thread, the conn-address routing
//! table used by the output callback, the upcall table, and the [`Sock`] wrapper that owns one
//! usrsctp socket.

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::io;
use std::mem::size_of;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use libc::{c_int, socklen_t};
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
    routes: Mutex<HashMap<usize, Route>>,
    wakers: RwLock<HashMap<usize, Arc<SockWakers>>>,
    next_id: AtomicUsize,
    pub(crate) live_socks: AtomicUsize,
    pub(crate) live_addrs: AtomicUsize,
    pub(crate) live_udp: AtomicUsize,
    timer: OnceLock<thread::Thread>,
    /// Whether `SCTP_GET_SNDBUF_USE` works (probed on first use): 0 unknown, 1 yes, 2 no.
    pub(crate) sndbuf_use: AtomicUsize,
}

static GLOBAL: OnceLock<Global> = OnceLock::new();

/// Serialises every call into libusrsctp (API calls, `conninput`, the timer tick): at most one
/// thread of ours is inside usrsctp at a time. libusrsctp 0.9.5 is not safe against concurrent
/// entry on several threads: `usrsctp_close` on one thread frees the endpoint (`inpcb`) while
/// `usrsctp_conninput` on another is still in `sctp_free_assoc` for an ABORT of that
/// endpoint's association and reads the freed endpoint afterwards (heap use after free, seen
/// as glibc "unaligned tcache chunk" aborts under connection churn), and its callouts are
/// stopped without waiting for a running handler (`SCTP_OS_TIMER_STOP_DRAIN` is a plain
/// stop in userspace). The library's own threading model has one thread making API calls
/// plus its timer thread; holding this lock around everything, the timer tick included, is
/// stricter than that. Callbacks (output, upcall) run under it and never call usrsctp.
static API: Mutex<()> = Mutex::new(());

thread_local! {
    /// Whether this thread holds [`API`] (a callback that ends up calling usrsctp again must
    /// not deadlock on it).
    static API_HELD: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (which calls into usrsctp) under the process-wide usrsctp lock, see [`API`].
/// Reentrant on the same thread.
pub(crate) fn serial<R>(f: impl FnOnce() -> R) -> R {
    if API_HELD.with(|h| h.get()) {
        return f();
    }
    struct Held;
    impl Drop for Held {
        fn drop(&mut self) {
            API_HELD.with(|h| h.set(false));
        }
    }
    let _guard = lock(&API);
    API_HELD.with(|h| h.set(true));
    let _held = Held; // dropped (flag cleared) before the guard unlocks
    f()
}

/// Idle time after which the timer thread parks when no socket or address is alive.
const TIMER_IDLE_PARK: Duration = Duration::from_secs(10);
/// usrsctp's own timer thread ticks every 10 ms; we do the same.
const TICK: Duration = Duration::from_millis(10);

pub(crate) fn global() -> &'static Global {
    GLOBAL.get_or_init(|| {
        // SAFETY: called exactly once per process (inside OnceLock::get_or_init). Port 0: usrsctp
        // opens no UDP socket; `_nothreads`: it opens no raw sockets and starts no threads. The
        // callback is a plain function that never unwinds.
        unsafe { ffi::usrsctp_init_nothreads(0, Some(conn_output), None) };
        // SAFETY: plain setters of global tunables, valid after init.
        unsafe {
            ffi::usrsctp_sysctl_set_sctp_sendspace(256 * 1024);
            ffi::usrsctp_sysctl_set_sctp_recvspace(256 * 1024);
        }
        Global {
            routes: Mutex::new(HashMap::new()),
            wakers: RwLock::new(HashMap::new()),
            next_id: AtomicUsize::new(1),
            live_socks: AtomicUsize::new(0),
            live_addrs: AtomicUsize::new(0),
            live_udp: AtomicUsize::new(0),
            timer: OnceLock::new(),
            sndbuf_use: AtomicUsize::new(0),
        }
    })
}

impl Global {
    pub(crate) fn next_id(&self) -> usize {
        self.next_id.fetch_add(1, Ordering::Relaxed)
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
                // SAFETY: usrsctp is initialised; handle_timers is what usrsctp's own timer
                // thread calls. Under the usrsctp lock: a callout must not run while another
                // thread closes the socket or processes a packet of its association.
                serial(|| unsafe { ffi::usrsctp_handle_timers(ms) });
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

/// The usrsctp output callback: one SCTP packet → one UDP datagram (RFC 6951, no extra header).
/// Runs on whatever thread is inside usrsctp (timer thread, a task calling conninput/sendv).
/// Takes the routing-table lock briefly; never calls back into usrsctp.
unsafe extern "C" fn conn_output(
    addr: *mut c_void,
    buf: *mut c_void,
    len: usize,
    _tos: u8,
    _set_df: u8,
) -> c_int {
    let id = addr as usize;
    let r = catch_unwind(AssertUnwindSafe(|| {
        let Some(g) = GLOBAL.get() else { return };
        let route = {
            let routes = lock(&g.routes);
            routes.get(&id).map(|r| (r.sock.clone(), r.remote, r.src))
        };
        let Some((sock, remote, src)) = route else {
            return;
        };
        if buf.is_null() {
            return;
        }
        // SAFETY: usrsctp passes a buffer of `len` readable bytes valid for this call.
        let pkt = unsafe { std::slice::from_raw_parts(buf as *const u8, len) };
        let res = match (remote, src) {
            (Some(to), Some(src)) => crate::pktinfo::send_from(&sock, pkt, to, src),
            (Some(to), None) => sock.send_to(pkt, to),
            (None, _) => sock.send(pkt),
        };
        if let Err(e) = res {
            // A full socket buffer is a lossy link; SCTP retransmits.
            if e.kind() != io::ErrorKind::WouldBlock {
                tracing::trace!("usrsctp output to conn {id}: {e}");
            }
        }
    }));
    let _ = r;
    0
}

thread_local! {
    /// Waker id of the socket this thread is currently calling usrsctp for (0: none).
    static IN_CALL: Cell<usize> = const { Cell::new(0) };
}

/// The usrsctp upcall: wakes the tasks waiting on this socket. Never calls into usrsctp.
/// Upcalls raised by our own call on the same socket and thread (usrsctp signals readability
/// from inside `usrsctp_recvv`, for instance) are dropped: the caller sees the outcome of its
/// call, and waking it would make it spin.
unsafe extern "C" fn upcall(_so: *mut ffi::socket, arg: *mut c_void, _flags: c_int) {
    let id = arg as usize;
    if IN_CALL.with(|c| c.get()) == id {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
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
    }));
}

/// A registered AF_CONN address: an integer id (never dereferenced by usrsctp, only compared)
/// plus its route. Dropping it deregisters the address and forgets the route.
pub(crate) struct ConnAddr {
    pub(crate) id: usize,
}

impl ConnAddr {
    pub(crate) fn register(route: Route) -> ConnAddr {
        let g = global();
        let id = g.next_id();
        lock(&g.routes).insert(id, route);
        g.live_addrs.fetch_add(1, Ordering::SeqCst);
        g.kick_timer();
        // SAFETY: the address is an opaque integer-valued pointer; usrsctp only stores and
        // compares it. Called without holding the routing or upcall table locks.
        serial(|| unsafe { ffi::usrsctp_register_address(id as *mut c_void) });
        ConnAddr { id }
    }

    pub(crate) fn ptr(&self) -> *mut c_void {
        self.id as *mut c_void
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
        // SAFETY: deregisters the opaque id registered in `register`; neither the routing nor
        // the upcall table lock is held.
        serial(|| unsafe { ffi::usrsctp_deregister_address(self.ptr()) });
        lock(&g.routes).remove(&self.id);
        g.live_addrs.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Feeds one received SCTP packet (UDP payload) to usrsctp as coming from conn address `id`.
pub(crate) fn conninput(id: usize, pkt: &[u8]) {
    // SAFETY: `pkt` is a valid buffer for the duration of the call; usrsctp copies it.
    serial(|| unsafe {
        ffi::usrsctp_conninput(
            id as *mut c_void,
            pkt.as_ptr() as *const c_void,
            pkt.len(),
            0,
        )
    });
}

struct SoPtr(*mut ffi::socket);
// SAFETY: usrsctp sockets may be used from any thread; the pointer is only used under the
// RwLock in `Sock` (and the usrsctp lock, see `serial`), and freed only under its write lock.
unsafe impl Send for SoPtr {}
// SAFETY: see above.
unsafe impl Sync for SoPtr {}

/// Owns one usrsctp socket. Every call goes through [`Sock::with`] under a read lock; `close`
/// takes the write lock, so no call can race with `usrsctp_close` (no use after free).
pub(crate) struct Sock {
    so: RwLock<SoPtr>,
    pub(crate) waker_id: usize,
    pub(crate) wakers: Arc<SockWakers>,
}

impl Sock {
    /// Creates an AF_CONN one-to-one socket, non-blocking, with our upcall.
    pub(crate) fn new_stream() -> Result<Arc<Sock>> {
        let g = global();
        let so = serial(|| {
            // SAFETY: plain constructor; NULL callbacks select the upcall/recv API.
            let so = unsafe {
                ffi::usrsctp_socket(
                    ffi::AF_CONN,
                    ffi::SOCK_STREAM,
                    ffi::IPPROTO_SCTP,
                    None,
                    None,
                    0,
                    std::ptr::null_mut(),
                )
            };
            if so.is_null() {
                Err(Error::sys("usrsctp_socket")) // errno read before the lock is released
            } else {
                Ok(so)
            }
        })?;
        Sock::adopt(g, so)
    }

    /// Takes ownership of `so` (from `usrsctp_socket` or `usrsctp_accept`).
    pub(crate) fn adopt(g: &'static Global, so: *mut ffi::socket) -> Result<Arc<Sock>> {
        g.live_socks.fetch_add(1, Ordering::SeqCst);
        g.kick_timer();
        let waker_id = g.next_id();
        let wakers = Arc::new(SockWakers::default());
        g.wakers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(waker_id, wakers.clone());
        let sock = Arc::new(Sock {
            so: RwLock::new(SoPtr(so)),
            waker_id,
            wakers,
        });
        sock.with(|so| {
            // SAFETY: `so` is live (read lock held); the upcall arg is an integer id.
            let rc = unsafe { ffi::usrsctp_set_upcall(so, Some(upcall), waker_id as *mut c_void) };
            if rc != 0 {
                return Err(Error::sys("usrsctp_set_upcall"));
            }
            // SAFETY: `so` is live.
            if unsafe { ffi::usrsctp_set_non_blocking(so, 1) } != 0 {
                return Err(Error::sys("usrsctp_set_non_blocking"));
            }
            Ok(())
        })??;
        Ok(sock)
    }

    /// Runs `f` with the live socket pointer, or fails with [`Error::Closed`]. `f` runs under
    /// the process-wide usrsctp lock (see [`serial`]).
    pub(crate) fn with<R>(&self, f: impl FnOnce(*mut ffi::socket) -> R) -> Result<R> {
        let guard = self.so.read().unwrap_or_else(|e| e.into_inner());
        if guard.0.is_null() {
            return Err(Error::Closed);
        }
        let so = guard.0;
        let r = serial(|| {
            let prev = IN_CALL.with(|c| c.replace(self.waker_id));
            let r = f(so);
            IN_CALL.with(|c| c.set(prev));
            r
        });
        drop(guard);
        Ok(r)
    }

    pub(crate) fn setopt<T>(
        &self,
        level: c_int,
        name: c_int,
        val: &T,
        what: &'static str,
    ) -> Result<()> {
        self.with(|so| {
            // SAFETY: `val` points to a live `T` of the given size; `so` is live.
            let rc = unsafe {
                ffi::usrsctp_setsockopt(
                    so,
                    level,
                    name,
                    val as *const T as *const c_void,
                    size_of::<T>() as socklen_t,
                )
            };
            if rc != 0 {
                Err(Error::sys(what))
            } else {
                Ok(())
            }
        })?
    }

    pub(crate) fn getopt<T: Copy>(
        &self,
        level: c_int,
        name: c_int,
        val: &mut T,
        what: &'static str,
    ) -> Result<()> {
        self.with(|so| {
            let mut len = size_of::<T>() as socklen_t;
            // SAFETY: `val` is a live, writable `T` of `len` bytes; `so` is live.
            let rc = unsafe {
                ffi::usrsctp_getsockopt(so, level, name, val as *mut T as *mut c_void, &mut len)
            };
            if rc != 0 {
                Err(Error::sys(what))
            } else {
                Ok(())
            }
        })?
    }

    pub(crate) fn sctp_opt_int(&self, name: c_int, v: c_int, what: &'static str) -> Result<()> {
        self.setopt(ffi::IPPROTO_SCTP, name, &v, what)
    }

    /// Closes the socket. `abort`: SO_LINGER 0 first, so usrsctp sends ABORT at once instead
    /// of a graceful SHUTDOWN. Idempotent.
    pub(crate) fn close(&self, abort: bool) {
        let mut guard = self.so.write().unwrap_or_else(|e| e.into_inner());
        let so = guard.0;
        if so.is_null() {
            return;
        }
        guard.0 = std::ptr::null_mut();
        // Under the usrsctp lock: no packet of this socket's associations is being processed
        // and no callout of it runs while usrsctp frees the endpoint.
        serial(|| close_raw(so, abort));
        drop(guard);
        let g = global();
        g.wakers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.waker_id);
        g.live_socks.fetch_sub(1, Ordering::SeqCst);
        self.wakers.wake_all();
    }
}

/// SO_LINGER 0 if `abort`, then `usrsctp_close`. `so` must be live and never used again; call
/// under the usrsctp lock.
fn close_raw(so: *mut ffi::socket, abort: bool) {
    if abort {
        let l = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: `so` is live (the caller holds its `Sock`'s write lock and has not closed it).
        unsafe {
            ffi::usrsctp_setsockopt(
                so,
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                &l as *const libc::linger as *const c_void,
                size_of::<libc::linger>() as socklen_t,
            )
        };
    }
    // The upcall stays installed (usrsctp would call a NULL upcall while SB_UPCALL is
    // set); it becomes a no-op once the caller removes our id from the upcall table.
    // SAFETY: `so` is live; after this call it is never used again (the caller nulled
    // its pointer under the write lock).
    unsafe { ffi::usrsctp_close(so) };
}

impl Drop for Sock {
    fn drop(&mut self) {
        self.close(true);
    }
}

/// Builds an AF_CONN address.
pub(crate) fn sconn(addr: *mut c_void, port: u16) -> ffi::sockaddr_conn {
    ffi::sockaddr_conn {
        sconn_family: ffi::AF_CONN as u16,
        sconn_port: port.to_be(),
        sconn_addr: addr,
    }
}

/// Maps a failed call's errno to "would block" or an error.
pub(crate) fn would_block(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EWOULDBLOCK) | Some(libc::EINPROGRESS)
    )
}
