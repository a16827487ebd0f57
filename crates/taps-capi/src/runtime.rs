//! Who runs taps: one process-wide current-thread tokio runtime, driven by one thread at
//! a time.
//!
//! - While an application thread runs `neat_start_event_loop(NEAT_RUN_DEFAULT)`, that
//!   thread drives it *inline*: the flows' tasks, their events and the C callbacks run
//!   on the application's thread, turn by turn (`event_loop.rs`), as in NEAT, with no
//!   hop between threads (each hop cost a wake-up of the other thread).
//! - At any other time — before and after that loop, and for programs that drive
//!   libuv themselves with `NEAT_RUN_ONCE`/`NEAT_RUN_NOWAIT` and the backend fd — a
//!   background thread ("taps-neat") drives it, and events reach the application's
//!   loop through `uv_async_send` (which makes the backend fd readable).
//!
//! The background thread hands the runtime over when an inline loop starts (it parks
//! until none runs) and takes it back when the last one ends, or when the process
//! exits (closes in progress need a driver then).

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};

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
        }));
        std::thread::Builder::new()
            .name("taps-neat".into())
            .spawn(move || background(s))
            .expect("the NEAT C API's runtime thread");
        s
    })
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

/// The process-wide runtime (made, with its background thread, on first use).
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

/// Runs `fut` to completion from outside the runtime: on an inline loop's thread by
/// driving the runtime, else by waiting while the background thread drives it. Must
/// not be called from inside a task.
pub(crate) fn block_on<F: Future>(fut: F) -> F::Output {
    let s = shared();
    if INLINE.with(Cell::get) && !IN_BLOCK_ON.with(Cell::get) {
        IN_BLOCK_ON.with(|b| b.set(true));
        let out = s.rt.block_on(fut);
        IN_BLOCK_ON.with(|b| b.set(false));
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
    let s = shared();
    s.exiting.store(true, Ordering::Release);
    let _n = s.inline_loops.lock().unwrap_or_else(|e| e.into_inner());
    s.resumed.notify_all();
    s.yield_now.notify_one();
}
