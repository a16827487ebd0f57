//! Who runs taps: one process-wide current-thread tokio runtime, driven by one thread at
//! a time.
//!
//! - While an application thread runs `neat_start_event_loop(NEAT_RUN_DEFAULT)`, that
//!   thread drives it *inline*: the flows' tasks, their events and the C callbacks run
//!   on the application's thread, turn by turn (`event_loop.rs`), as in NEAT, with no
//!   hop between threads (each hop cost a wake-up of the other thread).
//! - Programs that drive libuv themselves (`NEAT_RUN_ONCE`/`NEAT_RUN_NOWAIT`, the
//!   backend fd or the uv loop asked for) get a background thread ("taps-neat") that
//!   drives it, and events reach the application's loop through `uv_async_send` (which
//!   makes the backend fd readable). So does a process that frees a context or exits
//!   with closes in progress that wait on a peer (they need a driver then).
//! - Until then there is no such thread: as in NEAT, flows make progress while the
//!   application runs the loop, and a call that must wait for the runtime
//!   ([`block_on`]) drives it on the caller's thread. A program that only ever runs
//!   `NEAT_RUN_DEFAULT` never pays for the thread (its creation, its stack's first
//!   touch, a wake-up per hand-over).
//!
//! Once started, the background thread hands the runtime over when an inline loop
//! starts (it parks until none runs) and takes it back when the last one ends.

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, Once, OnceLock};

use tokio::runtime::Runtime;
use tokio::sync::Notify;

/// The runtime and its background driver.
struct Shared {
    rt: Runtime,
    /// Inline loops running now (application threads driving the runtime).
    inline_loops: Mutex<usize>,
    /// Signalled when `inline_loops` drops to 0 or the process exits.
    resumed: Condvar,
    /// Wakes the background driver's future when an inline loop wants the runtime.
    yield_now: Notify,
    /// The process is exiting: the background thread drives whatever else runs.
    exiting: AtomicBool,
    /// The background thread has been started.
    background: Once,
}

thread_local! {
    /// This thread runs an inline loop (it drives the runtime between callbacks).
    static INLINE: Cell<bool> = const { Cell::new(false) };
    /// This thread is inside [`block_on`] (the runtime cannot be entered again).
    static IN_BLOCK_ON: Cell<bool> = const { Cell::new(false) };
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<&'static Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the tokio runtime of the NEAT C API");
        let s: &'static Shared = Box::leak(Box::new(Shared {
            rt,
            inline_loops: Mutex::new(0),
            resumed: Condvar::new(),
            yield_now: Notify::new(),
            exiting: AtomicBool::new(false),
            background: Once::new(),
        }));
        s
    })
}

/// Starts the background driver, once per process: for programs that run libuv
/// themselves, and at exit. Costs a thread (2 MiB of reserved stack) for the process's
/// life.
pub(crate) fn start_background() {
    let s = shared();
    s.background.call_once(|| {
        std::thread::Builder::new()
            .name("taps-neat".into())
            .spawn(move || background(s))
            .expect("the NEAT C API's runtime thread");
    });
}

/// The background driver: drives the runtime while no inline loop does.
fn background(s: &'static Shared) {
    loop {
        {
            let mut n = s.inline_loops.lock().unwrap_or_else(|e| e.into_inner());
            while *n > 0 && !s.exiting.load(Ordering::Acquire) {
                n = s.resumed.wait(n).unwrap_or_else(|e| e.into_inner());
            }
        }
        s.rt.block_on(async {
            loop {
                let wake = s.yield_now.notified();
                let wanted = *s.inline_loops.lock().unwrap_or_else(|e| e.into_inner()) > 0;
                if wanted && !s.exiting.load(Ordering::Acquire) {
                    return;
                }
                wake.await;
            }
        });
    }
}

/// The process-wide runtime (made on first use).
pub(crate) fn runtime() -> &'static Runtime {
    &shared().rt
}

/// While alive, this thread drives the runtime inline (see the module docs).
pub(crate) struct Inline(());

impl Inline {
    /// Takes the runtime over for this thread's loop.
    pub(crate) fn start() -> Inline {
        let s = shared();
        *s.inline_loops.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        s.yield_now.notify_one();
        INLINE.with(|i| i.set(true));
        Inline(())
    }
}

impl Drop for Inline {
    fn drop(&mut self) {
        INLINE.with(|i| i.set(false));
        let s = shared();
        let mut n = s.inline_loops.lock().unwrap_or_else(|e| e.into_inner());
        *n -= 1;
        if *n == 0 {
            s.resumed.notify_all();
        }
    }
}

/// Runs `fut` to completion from outside the runtime: on an inline loop's thread, or
/// while there is no background thread, by driving the runtime on this thread (tokio
/// lets one thread at a time drive it; another one waiting meanwhile still polls `fut`);
/// else by waiting while the background thread drives it. Must not be called from
/// inside a task.
pub(crate) fn block_on<F: Future>(fut: F) -> F::Output {
    let s = shared();
    let inline = INLINE.with(Cell::get) && !IN_BLOCK_ON.with(Cell::get);
    if inline || !s.background.is_completed() {
        let was = IN_BLOCK_ON.with(|b| b.replace(true));
        let out = s.rt.block_on(fut);
        IN_BLOCK_ON.with(|b| b.set(was));
        out
    } else {
        s.rt.handle().block_on(fut)
    }
}

/// The process is exiting: the background thread drives the runtime from now on (an
/// inline loop that called `exit()` from a callback will never take another turn, and
/// the exiting thread cannot enter the runtime), so closes in progress and the stack's
/// exit work (SCTP's shutdowns) make progress.
pub(crate) fn hand_over_for_exit() {
    start_background();
    let s = shared();
    s.exiting.store(true, Ordering::Release);
    let _n = s.inline_loops.lock().unwrap_or_else(|e| e.into_inner());
    s.resumed.notify_all();
    s.yield_now.notify_one();
}
