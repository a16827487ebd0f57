//! NEAT's C API on taps: `libneat.so.1` / `libneat.a` and `include/neat.h`, so programs
//! written for NEAT build and run unchanged on taps.
//!
//! Design (docs/capi.md): libuv is the event loop, on the application's thread; one
//! process-wide tokio thread runs taps. Each flow's task owns its `taps::Connection`,
//! queues events for the context and wakes the loop with `uv_async_send`; C callbacks run
//! only inside `uv_run` (or inside the NEAT call that causes them, as NEAT does for
//! on_close). A `uv_idle` handle re-runs the level-triggered on_readable/on_writable
//! once per loop iteration while a flow wants them.
//!
//! Every export catches panics (NEAT_ERROR_INTERNAL), checks its pointers
//! (NEAT_ERROR_BAD_ARGUMENT) and holds no lock or borrow while it calls back into C.

// A C API: raw pointers from C and calls into libuv are its substance, so this crate
// allows unsafe code (every block says why it is sound); the rest of the workspace
// denies it.
#![allow(unsafe_code)]

mod boundary;
mod core;
mod event_loop;
mod props;
mod runtime;
mod task;
mod types;
mod uv;

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs an export's body; a panic becomes `fail` instead of crossing into C.
fn guard<R>(fail: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            eprintln!("[taps-neat error] internal error (panic) caught at the C boundary");
            fail
        }
    }
}

/// The opaque `struct neat_ctx`.
#[repr(C)]
pub struct NeatCtx {
    _opaque: [u8; 0],
}

/// The opaque `struct neat_flow`.
#[repr(C)]
pub struct NeatFlow {
    _opaque: [u8; 0],
}

// The exports, by what they act on (public: they are the library's C interface).
pub mod context;
pub mod flows;
pub mod io;
pub mod paths;
pub mod stats;
pub mod stubs;
