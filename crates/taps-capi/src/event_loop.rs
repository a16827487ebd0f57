//! The inline loop: `neat_start_event_loop(NEAT_RUN_DEFAULT)` on the application's
//! thread drives taps' runtime and libuv in turns (see [`crate::runtime`]).
//!
//! One turn: inside the runtime, hand the flows' tasks the commands the last callbacks
//! gave, start the opens asked for, and let the tasks run until the context has
//! something for the application (an event, the application's own libuv handles due,
//! or flows still wanting a level-triggered callback); then, outside the runtime, run
//! libuv once without waiting (the application's timers and handles, only if it has
//! any) and the dispatch of the C callbacks. Callbacks run outside the runtime, so they
//! may call anything, `neat_accept` and `exit()` included.
//!
//! Cost per turn, in system calls: the runtime's own wait (`epoll_wait`), a wake-up of
//! it when a task posts the first event of a batch (one `eventfd` write), and, only for
//! programs with libuv handles of their own, a `poll` of libuv's backend fd and libuv's
//! own `epoll_wait`. No thread is woken: before, every batch of events cost a wake-up
//! of the application's thread and every batch of commands one of taps' thread.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::unix::AsyncFd;

use crate::core::{dispatch, mark_all, Ctx};
use crate::{runtime, uv};

/// An fd the runtime watches for readiness and does not own: libuv's backend fd (its
/// epoll fd), the SIGINT pipe.
struct UvFd(RawFd);

impl AsRawFd for UvFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Inline loops running in the process (NEAT's SIGINT handler asks).
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Whether `fd` is readable now (one `poll` with no wait).
fn readable_now(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut p, 1, 0) > 0 }
}

/// Runs the context's loop inline until `neat_stop_event_loop`.
///
/// # Safety
/// `ctx` is live; called on the application's thread, outside the runtime.
pub(crate) unsafe fn run_inline(ctx: *mut Ctx) {
    let _inline = runtime::Inline::start();
    RUNNING.fetch_add(1, Ordering::SeqCst);
    // SAFETY: ctx is live; short borrows, none across a callback (dispatch and uv_run
    // call into the application).
    unsafe {
        let lp = (*ctx).uv;
        {
            let c = &mut *ctx;
            c.inline = true;
            c.stop = false;
            c.set_idle(false);
            c.ref_handles(false);
            c.shared.set_inline(true);
        }
        // SAFETY (register): libuv's backend fd lives as long as the loop, which
        // outlives this call; the pipe lives for the process. Both are dropped (their
        // registrations removed) before this function returns.
        let (watch, sigint) = runtime::block_on(async {
            let uv = AsyncFd::register(UvFd(uv::uv_backend_fd(lp))).ok();
            let sigint = sigint_pipe().and_then(|(r, _)| AsyncFd::register(UvFd(r)).ok());
            (uv, sigint)
        });
        mark_all(ctx);
        dispatch(ctx, true);
        // `stop` is set by neat_stop_event_loop, from a callback (libuv's or ours).
        loop {
            turn(ctx, watch.as_ref(), sigint.as_ref());
            if (*ctx).stop {
                break;
            }
            dispatch(ctx, true);
            if (*ctx).stop {
                break;
            }
        }
        // A last turn hands over the commands the last callbacks gave (closes among
        // them) and lets the tasks take them, so closes that need nothing more from the
        // network end here rather than on the background thread.
        let outbox = &mut (*ctx).outbox;
        runtime::block_on(async move {
            for (flow, cmd) in outbox.drain(..) {
                flow.cmds.send(cmd);
            }
            tokio::task::yield_now().await;
        });
        drop((watch, sigint));
        let c = &mut *ctx;
        c.inline = false;
        c.shared.set_inline(false);
        c.ref_handles(true);
        c.wake();
    }
    RUNNING.fetch_sub(1, Ordering::SeqCst);
}

/// One turn: the runtime until the application has work, then libuv once.
///
/// # Safety
/// As [`run_inline`].
unsafe fn turn(ctx: *mut Ctx, watch: Option<&AsyncFd<UvFd>>, sigint: Option<&AsyncFd<UvFd>>) {
    // SAFETY: ctx is live; the borrows end before libuv runs callbacks.
    unsafe {
        let c = &mut *ctx;
        let lp = c.uv;
        let busy = c.busy();
        c.again = false;
        // The application's own handles (ours are unreferenced while inline).
        let uv_alive = uv::uv_loop_alive(lp) != 0;
        let uv_timeout = if uv_alive {
            uv::uv_backend_timeout(lp)
        } else {
            -1
        };
        let uv_due = uv_alive && (uv_timeout == 0 || readable_now(uv::uv_backend_fd(lp)));
        let shared = c.shared.clone();
        // Drained in place, so the queues keep their allocations: nothing the runtime
        // runs touches the context (tasks see only its shared part).
        let (outbox, opens) = (&mut c.outbox, &mut c.pending_opens);
        runtime::block_on(async move {
            for (flow, cmd) in outbox.drain(..) {
                flow.cmds.send(cmd);
            }
            for open in opens.drain(..) {
                tokio::spawn(open.run());
            }
            if busy || uv_due || shared.has_events() {
                // Let the tasks that are ready run once, then come back.
                tokio::task::yield_now().await;
                return;
            }
            let uv_ready = async {
                match watch {
                    Some(w) if uv_alive => match w.readable().await {
                        Ok(mut g) => g.clear_ready(),
                        Err(_) => std::future::pending().await,
                    },
                    _ => std::future::pending().await,
                }
            };
            let interrupted = async {
                match sigint {
                    Some(p) => match p.readable().await {
                        Ok(mut g) => g.clear_ready(),
                        Err(_) => std::future::pending().await,
                    },
                    None => std::future::pending().await,
                }
            };
            let uv_timer = async {
                match u64::try_from(uv_timeout) {
                    Ok(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                    Err(_) => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = shared.wake.notified() => {}
                () = uv_ready => {}
                () = uv_timer => {}
                () = interrupted => {}
            }
        });
        if let Some((r, _)) = sigint.and(sigint_pipe()) {
            let mut b = [0u8; 16];
            // SAFETY: a non-blocking read into a local buffer.
            if libc::read(r, b.as_mut_ptr().cast(), b.len()) > 0 {
                // SIGINT (see `on_sigint`): NEAT's handler exits, here between turns.
                libc::exit(0);
            }
        }
        if uv_alive {
            uv::uv_run(lp, uv::UV_RUN_NOWAIT);
        }
    }
}

/// The pipe NEAT's SIGINT handler writes to while an inline loop runs: (read, write).
fn sigint_pipe() -> Option<(RawFd, RawFd)> {
    static PIPE: std::sync::OnceLock<Option<(RawFd, RawFd)>> = std::sync::OnceLock::new();
    *PIPE.get_or_init(|| {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 fills two fds; they live for the process.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
        (rc == 0).then_some((fds[0], fds[1]))
    })
}

/// NEAT's SIGINT handler: leave at once (`exit(0)`). While an inline loop runs, the
/// handler may have interrupted the runtime's wait, and `exit()` there would run the
/// exit handlers inside the runtime, where nothing can drive the closes in progress;
/// so the handler wakes the loop through a pipe and the loop exits between turns.
pub(crate) extern "C" fn on_sigint(_sig: libc::c_int) {
    match sigint_pipe() {
        Some((_, w)) if RUNNING.load(Ordering::SeqCst) > 0 => {
            // SAFETY: write(2) of one byte is async-signal-safe; the pipe lives on.
            unsafe { libc::write(w, [1u8].as_ptr().cast(), 1) };
        }
        // SAFETY: exit is what NEAT's own handler did.
        _ => unsafe { libc::exit(0) },
    }
}
