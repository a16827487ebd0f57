//! Running a routine when the process ends: at `exit()` (an `atexit` handler: `exit()`
//! itself, and the return from `main`), and on SIGINT, SIGTERM and SIGHUP where their
//! disposition is still the default one (the process would die without a word). No
//! knowledge of SCTP: [`install`] takes the routine.
//!
//! A signal handler may only do async-signal-safe things, so ours writes the signal's
//! number into a pipe and returns; a thread of ours (`usrsctp-signal`) reads it, runs the
//! routine if our handler is still the one installed, puts the default disposition back
//! and raises the signal again, so the process dies by it as it would have. Where the
//! application (or tokio's `signal-hook-registry`) has installed a handler since, and
//! calls ours through it, the thread does nothing: the application decides what the
//! signal means, and `exit()` still runs the routine. A signal whose handler is not the
//! default when [`install`] runs is never touched.
//!
//! In a child forked without `exec` (no thread reads the pipe there, and its copy of the
//! usrsctp state is not its own) the handler dies by the signal at once and the `atexit`
//! handler does nothing; `exec` resets the handlers.

#![allow(unsafe_code)]

use std::ffi::c_void;
use std::io;
use std::mem::zeroed;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::panic::catch_unwind;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

use libc::c_int;

/// The signals that end a process by default and that a user or service manager sends
/// to stop it.
const SIGNALS: [c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The routine [`install`] was given.
static ROUTINE: OnceLock<fn()> = OnceLock::new();
/// The pipe's write end (-1: none), written by the handler.
static PIPE: AtomicI32 = AtomicI32::new(-1);
/// The process that installed the handlers (a forked child has another id).
static PID: AtomicI32 = AtomicI32::new(0);

/// Runs `routine` at `exit()` and on SIGINT, SIGTERM and SIGHUP whose disposition is the
/// default now (see the module docs). Once per process (later calls do nothing). Costs an
/// `atexit` registration and, if at least one signal is ours to handle, a pipe, a thread
/// blocked reading it and one `sigaction` per signal.
pub(crate) fn install(routine: fn()) {
    if ROUTINE.set(routine).is_err() {
        return;
    }
    // SAFETY: getpid has no preconditions.
    PID.store(unsafe { libc::getpid() }, Ordering::SeqCst);
    // SAFETY: `at_exit` is a function of the signature atexit expects; it never unwinds.
    if unsafe { libc::atexit(at_exit) } != 0 {
        tracing::warn!("usrsctp: cannot register the atexit handler that ends associations");
    }
    install_handlers();
}

/// The `atexit` handler: runs the routine (in the process that installed it).
extern "C" fn at_exit() {
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } != PID.load(Ordering::SeqCst) {
        return;
    }
    if let Some(routine) = ROUTINE.get() {
        let _ = catch_unwind(*routine);
    }
}

/// The pipe, the thread and the handlers of the signals whose disposition is the default.
fn install_handlers() {
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        tracing::warn!(
            "usrsctp: no pipe for termination signals ({}): they end the process without \
             ending its associations",
            io::Error::last_os_error()
        );
        return;
    }
    // SAFETY: both descriptors were just made by pipe2 and are owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // A full pipe (signals arriving faster than the thread reads) must not block the
    // handler.
    // SAFETY: a valid descriptor; F_SETFL with a flag word.
    unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    PIPE.store(write.as_raw_fd(), Ordering::SeqCst);
    let ours: Vec<c_int> = SIGNALS
        .into_iter()
        .filter(|&sig| install_if_default(sig))
        .collect();
    if ours.is_empty() {
        PIPE.store(-1, Ordering::SeqCst);
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("usrsctp-signal".into())
        .spawn(move || watch(read));
    match spawned {
        // The write end stays open for the life of the process (the handler uses it).
        Ok(_) => std::mem::forget(write),
        Err(e) => {
            tracing::warn!("usrsctp: cannot start the signal thread: {e}");
            for sig in ours {
                restore_default_if_ours(sig);
            }
            PIPE.store(-1, Ordering::SeqCst);
        }
    }
}

/// Installs [`on_signal`] for `sig` if its disposition is the default; whether it did.
fn install_if_default(sig: c_int) -> bool {
    // SAFETY: all-zero is a valid `sigaction` (no handler, empty mask, no flags).
    let mut now: libc::sigaction = unsafe { zeroed() };
    // SAFETY: `sig` is a valid signal; a null new action only reads the current one.
    if unsafe { libc::sigaction(sig, std::ptr::null(), &mut now) } != 0
        || now.sa_sigaction != libc::SIG_DFL
    {
        return false;
    }
    // SAFETY: as above.
    let mut ours: libc::sigaction = unsafe { zeroed() };
    ours.sa_sigaction = on_signal as extern "C" fn(c_int) as libc::sighandler_t;
    // Interrupted system calls of the application restart while the routine runs.
    ours.sa_flags = libc::SA_RESTART;
    // SAFETY: as above.
    let mut before: libc::sigaction = unsafe { zeroed() };
    // SAFETY: `ours.sa_mask` is a sigset_t to empty; then `ours` is a complete action
    // whose handler is async-signal-safe, and `before` has room for the old one.
    unsafe {
        libc::sigemptyset(&mut ours.sa_mask);
        if libc::sigaction(sig, &ours, &mut before) != 0 {
            return false;
        }
    }
    if before.sa_sigaction != libc::SIG_DFL {
        // Someone installed a handler between the two calls: theirs goes back.
        // SAFETY: `before` is the action the kernel just gave back.
        unsafe { libc::sigaction(sig, &before, std::ptr::null_mut()) };
        return false;
    }
    true
}

/// The handler: only async-signal-safe calls (`getpid`, `write`, `signal`, `raise`),
/// `errno` kept.
extern "C" fn on_signal(sig: c_int) {
    // SAFETY: __errno_location returns this thread's errno; the calls are
    // async-signal-safe; the byte lives across the write.
    unsafe {
        let errno = libc::__errno_location();
        let saved = *errno;
        if libc::getpid() != PID.load(Ordering::Relaxed) {
            // A child forked without exec: nothing reads the pipe here. Die as the default
            // action would (the signal is blocked until this handler returns).
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        } else {
            let byte = sig as u8;
            libc::write(
                PIPE.load(Ordering::Relaxed),
                &byte as *const u8 as *const c_void,
                1,
            );
        }
        *errno = saved;
    }
}

/// The signal thread: one byte per signal caught.
fn watch(read: OwnedFd) {
    loop {
        let mut byte = 0u8;
        // SAFETY: `read` is the pipe's open read end; `byte` is one writable byte.
        let n = unsafe { libc::read(read.as_raw_fd(), &mut byte as *mut u8 as *mut c_void, 1) };
        if n == 1 {
            terminate(c_int::from(byte));
        } else if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        } else {
            return;
        }
    }
}

/// What the default action of `sig` would have done, after the routine: if our handler
/// is still installed, runs the routine, puts the default disposition back and raises
/// `sig` on this thread (unblocked here), which ends the process by it.
fn terminate(sig: c_int) {
    if !is_ours(sig) {
        return;
    }
    if let Some(routine) = ROUTINE.get() {
        let _ = catch_unwind(*routine);
    }
    if !restore_default_if_ours(sig) {
        return;
    }
    // SAFETY: all-zero is a valid sigset_t to fill; `sig` is a valid signal; raise sends
    // it to this thread, where it is not blocked.
    unsafe {
        let mut set: libc::sigset_t = zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
}

/// Whether [`on_signal`] is `sig`'s handler now.
fn is_ours(sig: c_int) -> bool {
    // SAFETY: all-zero is a valid `sigaction`.
    let mut now: libc::sigaction = unsafe { zeroed() };
    // SAFETY: a null new action only reads the current one.
    let rc = unsafe { libc::sigaction(sig, std::ptr::null(), &mut now) };
    rc == 0 && now.sa_sigaction == on_signal as extern "C" fn(c_int) as libc::sighandler_t
}

/// Puts the default disposition of `sig` back if our handler is installed (checked in
/// the same call: a handler installed since goes back in place); whether it did.
fn restore_default_if_ours(sig: c_int) -> bool {
    // SAFETY: all-zero is a valid `sigaction`; its handler 0 is SIG_DFL.
    let default: libc::sigaction = unsafe { zeroed() };
    // SAFETY: as above.
    let mut before: libc::sigaction = unsafe { zeroed() };
    // SAFETY: `default` is a complete action.
    if unsafe { libc::sigaction(sig, &default, &mut before) } != 0 {
        return false;
    }
    if before.sa_sigaction != on_signal as extern "C" fn(c_int) as libc::sighandler_t {
        // SAFETY: `before` is the action the kernel just gave back.
        unsafe { libc::sigaction(sig, &before, std::ptr::null_mut()) };
        return false;
    }
    true
}
