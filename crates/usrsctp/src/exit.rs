//! Ending every association when the process ends, as the kernel does for TCP (a FIN
//! after the queued data, or a RST) where usrsctp, a library inside the process, would
//! leave its peers waiting for heartbeats to fail.
//!
//! [`end_all_associations`] runs the hooks of [`before_exit`], shuts every established
//! association down (SHUTDOWN once its queued data is acknowledged), waits until they are
//! closed or the grace runs out, reading our UDP sockets itself meanwhile, and aborts
//! what is left. At the first usrsctp socket of the process, [`arm`] has `signals` run it
//! with [`EXIT_GRACE`] at `exit()` (an `atexit` handler) and on SIGINT, SIGTERM and SIGHUP
//! where nobody else handles them.

use std::cell::Cell;
use std::panic::catch_unwind;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crate::ffi::{self, Plain};
use crate::sys::{lock, started, Sock};

/// How long the process waits at exit (`exit()`, the end of `main`, or SIGINT, SIGTERM or
/// SIGHUP with no handler of the application) for its associations to finish their
/// SHUTDOWN handshakes before it aborts the rest: 1 s. On loopback a SHUTDOWN after a
/// megabyte of queued data completes in milliseconds; a path with a round trip above a
/// few hundred milliseconds, or a peer that does not read, gets an ABORT instead.
pub const EXIT_GRACE: Duration = Duration::from_secs(1);

/// What [`end_all_associations`] did. Plain integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ended {
    /// Associations that were established (or shutting down) and ended within the
    /// grace: their SHUTDOWN handshake completed, or the peer ended them meanwhile, or
    /// usrsctp aborted them because their last message was only partly handed over (it
    /// cannot be completed after a SHUTDOWN).
    pub closed: usize,
    /// Associations aborted (ABORT sent): still open when the grace ran out, still in
    /// their handshake, or refusing the SHUTDOWN call.
    pub aborted: usize,
}

/// The hooks of [`before_exit`], in registration order.
static HOOKS: Mutex<Vec<fn()>> = Mutex::new(Vec::new());
/// Held by the thread running [`end_all_associations`]: a second caller waits for it.
static ENDING: Mutex<()> = Mutex::new(());
/// How often the wait looks at the associations' states when no datagram arrived.
const POLL: Duration = Duration::from_millis(1);

thread_local! {
    /// Whether this thread is inside [`end_all_associations`] (a hook that calls it
    /// again returns at once instead of waiting for itself).
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Registers `hook` to run at the start of every [`end_all_associations`] (so at exit
/// and on SIGINT, SIGTERM and SIGHUP, see the crate docs), before any association is shut
/// down: a higher layer's own orderly end (e.g. waiting for closes it has in progress).
/// Hooks run in registration order on the thread that ends the associations, which may
/// be a tokio worker inside `exit()` or our signal thread; they must return within a
/// bounded time and must not need the runtime. A hook that panics is skipped. Registering
/// installs nothing (a mutex and a push); a process that never makes a usrsctp socket
/// never runs them.
pub fn before_exit(hook: fn()) {
    lock(&HOOKS).push(hook);
}

/// Ends every association of the process: runs the [`before_exit`] hooks, starts a
/// graceful shutdown of every established association (`usrsctp_shutdown` with
/// `SHUT_WR`: SHUTDOWN once everything queued is acknowledged), aborts those still in
/// their handshake, waits until the shut-down ones are closed or `grace` has passed, then
/// aborts those still open and closes the listeners (whose associations not yet accepted
/// are aborted). Their owners see the end as the peer's end would look (`recv` gives
/// `Ok(None)` after a completed shutdown, [`Error::Aborted`](crate::Error::Aborted)
/// after an abort). An association in the middle of a message (a send that handed over
/// part of it) cannot send the rest after a SHUTDOWN: usrsctp aborts it.
///
/// Meant for the end of the process: the crate calls it with [`EXIT_GRACE`] from an
/// `atexit` handler and on termination signals. It needs no runtime: while it waits it
/// reads our UDP sockets itself (the runtime may be stopped or blocked by the calling
/// thread) and usrsctp's timers keep running on their own thread. Safe from any thread,
/// also while others call into usrsctp (every call takes the usrsctp lock); a second
/// call waits for one in progress, then finds nothing left to do. Associations made
/// after it returns are not affected. Cost: per usrsctp socket a few calls into usrsctp,
/// then until all are closed (or `grace`) a poll per millisecond of every UDP socket and
/// of each association's state (`SCTP_STATUS`); nothing when the stack was never used.
pub fn end_all_associations(grace: Duration) -> Ended {
    if INSIDE.with(Cell::get) {
        return Ended::default();
    }
    INSIDE.with(|i| i.set(true));
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            INSIDE.with(|i| i.set(false));
        }
    }
    let _leave = Leave;
    let _one_at_a_time = lock(&ENDING);
    let hooks = lock(&HOOKS).clone();
    for hook in hooks {
        if catch_unwind(hook).is_err() {
            tracing::warn!("usrsctp: a before_exit hook panicked");
        }
    }
    let Some(g) = started() else {
        return Ended::default();
    };
    let mut ended = Ended::default();
    // Sockets with no association to shut down (listeners, ended associations): closed
    // at the end.
    let mut rest: Vec<Arc<Sock>> = Vec::new();
    let mut closing: Vec<Arc<Sock>> = Vec::new();
    // Every state is read before the first SHUTDOWN: that SHUTDOWN may end another of
    // these associations (both ends in this process) before the loop gets to it.
    let socks: Vec<(Arc<Sock>, Option<i32>)> = g
        .open_socks()
        .into_iter()
        .map(|sock| {
            let state = state(&sock);
            (sock, state)
        })
        .collect();
    for (sock, state_then) in socks {
        match state_then {
            None => rest.push(sock),
            Some(s) if can_shut_down(s) => match sock.shutdown(libc::SHUT_WR) {
                Ok(()) => closing.push(sock),
                // It ended since (its peer shut it down, or aborted it).
                Err(_) if state(&sock).is_none() => ended.closed += 1,
                Err(_) => {
                    sock.close(true);
                    ended.aborted += 1;
                }
            },
            Some(_) => {
                sock.close(true);
                ended.aborted += 1;
            }
        }
    }
    let deadline = Instant::now() + grace;
    let mut buf = Vec::new();
    loop {
        closing.retain(|sock| {
            let open = state(sock).is_some();
            if !open {
                ended.closed += 1;
            }
            open
        });
        if closing.is_empty() || Instant::now() >= deadline {
            break;
        }
        if buf.is_empty() {
            buf = vec![0u8; crate::udp::MAX_DATAGRAM];
        }
        if crate::udp::read_pending(&mut buf) == 0 {
            thread::sleep(POLL);
        }
    }
    for sock in closing {
        sock.close(true);
        ended.aborted += 1;
    }
    for sock in rest {
        sock.close(true);
    }
    ended
}

/// The association state of `sock` (`SCTP_STATUS`, one call into usrsctp); `None` when
/// it has none (a listener, a socket whose association ended or that is closed).
fn state(sock: &Sock) -> Option<i32> {
    let mut st = ffi::sctp_status::zeroed();
    sock.getopt(ffi::IPPROTO_SCTP, ffi::SCTP_STATUS, &mut st, "SCTP_STATUS")
        .ok()
        .map(|()| st.sstat_state)
        .filter(|&s| s != ffi::SCTP_CLOSED)
}

/// Whether an association in `state` can end with a SHUTDOWN handshake (it is
/// established, or already shutting down); one still in its handshake cannot.
fn can_shut_down(state: i32) -> bool {
    !matches!(state, ffi::SCTP_COOKIE_WAIT | ffi::SCTP_COOKIE_ECHOED)
}

/// Makes the process end its associations at exit and on termination signals (see
/// `signals`), once per process; called by the first connect or listen, before its
/// usrsctp socket, so a process that never makes one installs nothing. Later calls: one
/// atomic load.
pub(crate) fn arm() {
    static ARMED: OnceLock<()> = OnceLock::new();
    ARMED.get_or_init(|| crate::signals::install(end_at_exit));
}

/// What the process runs at exit and on a termination signal.
fn end_at_exit() {
    let ended = end_all_associations(EXIT_GRACE);
    if ended != Ended::default() {
        tracing::debug!(
            "usrsctp at exit: {} associations closed, {} aborted",
            ended.closed,
            ended.aborted
        );
    }
}
