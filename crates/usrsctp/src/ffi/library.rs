//! The process-wide usrsctp instance: one-time initialisation, the lock every call into the
//! library takes, the library-wide calls (timers, conn addresses, packet input) and the
//! output callback.

use std::cell::Cell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, OnceLock};

use libc::c_int;

use super::bindings as raw;

/// What usrsctp calls back into, as safe functions, installed once by [`Usrsctp::init`]. Both
/// run on whatever thread is inside usrsctp, under the usrsctp lock: they must be quick and
/// must not call usrsctp. A panic in them is caught (and ignored) at the C boundary.
#[derive(Clone, Copy)]
pub(crate) struct Hooks {
    /// One outbound SCTP packet for conn address `conn` (the bytes are valid for the call).
    pub(crate) output: fn(conn: usize, pkt: &[u8]),
    /// The socket whose upcall argument is `arg` may have become readable or writable.
    /// Upcalls raised by a call on that same socket from the same thread are not passed on.
    pub(crate) upcall: fn(arg: usize),
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// The hooks, once usrsctp is initialised.
pub(super) fn hooks() -> Option<&'static Hooks> {
    HOOKS.get()
}

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
pub(super) fn serial<R>(f: impl FnOnce() -> R) -> R {
    if API_HELD.with(|h| h.get()) {
        return f();
    }
    struct Held;
    impl Drop for Held {
        fn drop(&mut self) {
            API_HELD.with(|h| h.set(false));
        }
    }
    // Poisoning is ignored: no path panics while holding it, and it guards no data.
    let _guard = API.lock().unwrap_or_else(|e| e.into_inner());
    API_HELD.with(|h| h.set(true));
    let _held = Held; // dropped (flag cleared) before the guard unlocks
    f()
}

/// Proof that usrsctp is initialised: the library-wide calls are its methods, and a
/// [`Socket`](super::Socket) is created with one. Copying it is free.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Usrsctp {
    _private: (),
}

impl Usrsctp {
    /// Initialises usrsctp on the first call (later calls return at once and keep the first
    /// hooks): `usrsctp_init_nothreads` with no UDP port (usrsctp opens no socket and starts
    /// no thread; the caller drives [`Usrsctp::handle_timers`]), send and receive space
    /// 256 KiB.
    pub(crate) fn init(hooks: Hooks) -> Usrsctp {
        HOOKS.get_or_init(|| {
            // SAFETY: runs once per process (inside OnceLock::get_or_init), before any other
            // usrsctp call (every other one needs a `Usrsctp`, which only this returns). Port
            // 0: usrsctp opens no UDP socket; `_nothreads`: no raw sockets, no threads. The
            // callback has the C signature usrsctp expects and never unwinds.
            unsafe { raw::usrsctp_init_nothreads(0, Some(conn_output), None) };
            // SAFETY: plain setters of global tunables, valid after init.
            unsafe {
                raw::usrsctp_sysctl_set_sctp_sendspace(256 * 1024);
                raw::usrsctp_sysctl_set_sctp_recvspace(256 * 1024);
            }
            hooks
        });
        Usrsctp { _private: () }
    }

    /// Runs usrsctp's timers (retransmissions, heartbeats, delayed SACKs) for `ms` elapsed
    /// milliseconds, under the usrsctp lock.
    pub(crate) fn handle_timers(self, ms: u32) {
        // SAFETY: usrsctp is initialised (`self` exists); this is what usrsctp's own timer
        // thread calls. Under the usrsctp lock: a callout must not run while another thread
        // closes the socket or processes a packet of its association.
        serial(|| unsafe { raw::usrsctp_handle_timers(ms) });
    }

    /// Registers the AF_CONN address `conn` (an opaque integer, never dereferenced).
    pub(crate) fn register_address(self, conn: usize) {
        // SAFETY: usrsctp is initialised; the address is an opaque integer-valued pointer that
        // usrsctp only stores and compares.
        serial(|| unsafe { raw::usrsctp_register_address(conn as *mut c_void) });
    }

    /// Deregisters the AF_CONN address `conn` (usrsctp forgets it; its associations go).
    pub(crate) fn deregister_address(self, conn: usize) {
        // SAFETY: usrsctp is initialised; the address is an opaque integer, as registered.
        serial(|| unsafe { raw::usrsctp_deregister_address(conn as *mut c_void) });
    }

    /// Feeds one received SCTP packet to usrsctp as coming from conn address `conn`; runs
    /// the SCTP state machine on this thread (the hooks may be called from inside).
    pub(crate) fn conninput(self, conn: usize, pkt: &[u8]) {
        // SAFETY: usrsctp is initialised; `pkt` is a valid buffer of `pkt.len()` bytes for
        // the duration of the call (usrsctp copies it); the address is an opaque integer.
        serial(|| unsafe {
            raw::usrsctp_conninput(
                conn as *mut c_void,
                pkt.as_ptr() as *const c_void,
                pkt.len(),
                0,
            )
        });
    }
}

/// The usrsctp output callback: one SCTP packet for conn address `addr`, handed to
/// [`Hooks::output`].
///
/// # Safety
/// `buf` is null or points to `len` readable bytes valid for the call, as usrsctp passes them.
unsafe extern "C" fn conn_output(
    addr: *mut c_void,
    buf: *mut c_void,
    len: usize,
    _tos: u8,
    _set_df: u8,
) -> c_int {
    let Some(hooks) = hooks() else { return 0 };
    if buf.is_null() {
        return 0;
    }
    // SAFETY: usrsctp passes a buffer of `len` readable bytes valid for this call (the
    // function's contract); the slice does not outlive the call.
    let pkt = unsafe { std::slice::from_raw_parts(buf as *const u8, len) };
    let _ = catch_unwind(AssertUnwindSafe(|| (hooks.output)(addr as usize, pkt)));
    0
}
