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
    /// Called when a thread releases the usrsctp lock (still holding it): the packets
    /// `output` was given during the hold (one call, or several in `batch`) may be sent
    /// together now.
    pub(crate) flush: fn(),
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// The file libusrsctp is loaded from: Debian's libusrsctp2 package, found by the dynamic
/// linker's search. `TAPS_USRSCTP_LIB` (read once, at the first use of SCTP) names another
/// file, a path or a name to search for.
const LIBRARY: &str = "libusrsctp.so.2";
/// The environment variable that overrides [`LIBRARY`].
const LIBRARY_ENV: &str = "TAPS_USRSCTP_LIB";

/// Loads libusrsctp on the first call (`dlopen`, every symbol bound at once, then a lookup
/// of each entry point): about 0.3 M instructions and 20 page faults that a program which
/// never uses SCTP does not pay at start-up. Later calls: one atomic load. The error says
/// what is missing and how to get it.
fn load() -> Result<(), String> {
    raw::LOADED
        .get_or_init(|| {
            let name = std::env::var(LIBRARY_ENV).unwrap_or_else(|_| LIBRARY.to_string());
            let c_name = std::ffi::CString::new(name.as_str())
                .map_err(|_| format!("{LIBRARY_ENV} holds a NUL byte"))?;
            // SAFETY: a NUL-terminated file name; libusrsctp has no constructors that need
            // anything of this process. The handle is never closed (the functions stay
            // valid for the life of the process).
            let handle =
                unsafe { libc::dlopen(c_name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            if handle.is_null() {
                return Err(format!(
                    "SCTP is unavailable: cannot load {name} ({}); install libusrsctp2 \
                     (apt install libusrsctp2, or run scripts/deps.sh)",
                    dl_error()
                ));
            }
            // SAFETY: `handle` is live; a library of this name is libusrsctp, whose
            // functions have the signatures of `usrsctp.h` declared in `bindings`.
            let api = unsafe { raw::Api::lookup(handle) }.map_err(|missing| {
                format!(
                    "SCTP is unavailable: {name} has no function {missing} (not libusrsctp 0.9)"
                )
            })?;
            Ok(raw::Loaded {
                api,
                handle: handle as usize,
            })
        })
        .as_ref()
        .map(|_| ())
        .map_err(Clone::clone)
}

/// The dynamic linker's last error message, or a placeholder.
fn dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string valid until the next dl* call
    // on this thread; it is copied at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        return "no error text".into();
    }
    // SAFETY: non-null, NUL-terminated (above).
    unsafe { std::ffi::CStr::from_ptr(e) }
        .to_string_lossy()
        .into_owned()
}

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

/// Whether this thread is inside a call into usrsctp made through [`serial`] (so the
/// [`Hooks::flush`] hook runs when it leaves). usrsctp's own iterator thread is not.
pub(crate) fn inside_call() -> bool {
    API_HELD.with(|h| h.get())
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
    let r = f();
    if let Some(h) = hooks() {
        (h.flush)();
    }
    r
}

/// Runs `f`, which may make several calls into usrsctp, under one hold of the usrsctp lock:
/// the packets those calls produce are flushed once, when it returns, instead of after each
/// call (the datagrams of one GRO read then answer with one GSO send). `f` must not wait
/// for a lock that a thread calling into usrsctp may hold (see [`API`]).
pub(crate) fn batch<R>(f: impl FnOnce() -> R) -> R {
    serial(f)
}

/// Proof that usrsctp is initialised: the library-wide calls are its methods, and a
/// [`Socket`](super::Socket) is created with one. Copying it is free.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Usrsctp {
    _private: (),
}

impl Usrsctp {
    /// Loads libusrsctp and initialises it on the first call (later calls return at once and
    /// keep the first hooks): `usrsctp_init_nothreads` with no UDP port (usrsctp opens no
    /// socket and starts no thread; the caller drives [`Usrsctp::handle_timers`]), the
    /// process-wide defaults of [`Tuning`], and the CRC32c checksum moved out of usrsctp
    /// (see [`crc32c_fill`]). Fails, saying why, when the library cannot be loaded.
    pub(crate) fn init(hooks: Hooks, tuning: Tuning) -> Result<Usrsctp, String> {
        load()?;
        HOOKS.get_or_init(|| {
            // SAFETY: runs once per process (inside OnceLock::get_or_init), before any other
            // usrsctp call (every other one needs a `Usrsctp`, which only this returns). Port
            // 0: usrsctp opens no UDP socket; `_nothreads`: no raw sockets, no threads. The
            // callback has the C signature usrsctp expects and never unwinds.
            unsafe { raw::usrsctp_init_nothreads(0, Some(conn_output), None) };
            // SAFETY: plain setters of global tunables, valid after init (each checks its
            // range and leaves the value unchanged when out of it). The CRC offload flag
            // makes usrsctp write a zero checksum and skip the check on input: `conn_output`
            // and `conninput` compute and check it instead, with the CPU's CRC32c
            // instruction (usrsctp's is a table walk, a tenth of the speed).
            unsafe {
                raw::usrsctp_sysctl_set_sctp_sendspace(tuning.send_space);
                raw::usrsctp_sysctl_set_sctp_recvspace(tuning.recv_space);
                raw::usrsctp_sysctl_set_sctp_rto_min_default(tuning.rto_min_ms);
                raw::usrsctp_sysctl_set_sctp_rto_initial_default(tuning.rto_initial_ms);
                raw::usrsctp_sysctl_set_sctp_default_cc_module(tuning.congestion_control);
                raw::usrsctp_sysctl_set_sctp_initial_cwnd(tuning.initial_cwnd);
                raw::usrsctp_sysctl_set_sctp_max_burst_default(tuning.max_burst);
                raw::usrsctp_sysctl_set_sctp_fr_max_burst_default(tuning.max_burst);
                raw::usrsctp_sysctl_set_sctp_delayed_sack_time_default(tuning.sack_delay_ms);
                raw::usrsctp_enable_crc32c_offload();
            }
            hooks
        });
        Ok(Usrsctp { _private: () })
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
    /// Packets whose CRC32c is wrong are dropped here (usrsctp does not check it again).
    pub(crate) fn conninput(self, conn: usize, pkt: &[u8]) {
        if !crc32c_ok(pkt) {
            return;
        }
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

/// Process-wide usrsctp defaults set once at initialisation (sysctls): they apply to every
/// association of the process. Plain integers; see [`crate::SctpOptions`] for the
/// per-association settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tuning {
    /// Default send buffer (bytes) of every socket.
    pub(crate) send_space: u32,
    /// Default receive buffer (bytes), hence the advertised receive window.
    pub(crate) recv_space: u32,
    /// Minimum retransmission timeout (ms).
    pub(crate) rto_min_ms: u32,
    /// Initial retransmission timeout (ms).
    pub(crate) rto_initial_ms: u32,
    /// Congestion control module (`SCTP_CC_*`).
    pub(crate) congestion_control: u32,
    /// Initial congestion window in MTUs.
    pub(crate) initial_cwnd: u32,
    /// Packets sent back to back at most (normal and fast-retransmit bursts).
    pub(crate) max_burst: u32,
    /// Delayed SACK timer (ms).
    pub(crate) sack_delay_ms: u32,
}

/// Offset of the checksum in the SCTP common header.
const CRC_AT: std::ops::Range<usize> = 8..12;

/// Writes the packet's CRC32c (RFC 9260 appendix A: over the packet with a zero checksum
/// field, stored little-endian), which usrsctp left zero (checksum offload). One pass with
/// the CPU's CRC32c instruction where there is one.
fn crc32c_fill(pkt: &mut [u8]) {
    if pkt.len() < 12 {
        return;
    }
    pkt[CRC_AT].fill(0);
    let crc = crc32c::crc32c(pkt);
    pkt[CRC_AT].copy_from_slice(&crc.to_le_bytes());
}

/// Whether the packet's CRC32c is right (what usrsctp would check without offload).
pub(crate) fn crc32c_ok(pkt: &[u8]) -> bool {
    if pkt.len() < 12 {
        return false;
    }
    let crc = crc32c::crc32c(&pkt[..CRC_AT.start]);
    let crc = crc32c::crc32c_append(crc, &[0; 4]);
    let crc = crc32c::crc32c_append(crc, &pkt[CRC_AT.end..]);
    crc.to_le_bytes() == pkt[CRC_AT]
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
    // SAFETY: usrsctp passes a buffer of `len` bytes valid for this call (the function's
    // contract), its own copy of the packet (malloc'ed for this call and freed after it), so
    // writing the checksum into it is fine; the slice does not outlive the call.
    let pkt = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) };
    crc32c_fill(pkt);
    let pkt: &[u8] = pkt;
    let _ = catch_unwind(AssertUnwindSafe(|| (hooks.output)(addr as usize, pkt)));
    0
}
