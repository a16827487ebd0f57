//! Exports for the context and its libuv loop: create, run, stop, free, logging.

use std::ffi::{c_char, c_int, c_void};

use crate::boundary::{self, export};
use crate::core::Ctx;
use crate::types::*;
use crate::{guard, uv, NeatCtx};

/// Creates a context with its own libuv loop; NULL on failure.
#[no_mangle]
pub extern "C" fn neat_init_ctx() -> *mut NeatCtx {
    guard(std::ptr::null_mut(), || {
        Ctx::new().map_or(std::ptr::null_mut(), |c| c.cast())
    })
}

/// Runs the loop, then (NEAT_RUN_DEFAULT) tries `uv_loop_close` as NEAT did. Installs
/// NEAT's SIGINT handler (exit 0). NEAT_RUN_DEFAULT runs inline: this thread drives
/// taps and libuv in turns until `neat_stop_event_loop` (see `event_loop.rs`);
/// NEAT_RUN_ONCE and NEAT_RUN_NOWAIT run `uv_run` in that mode while taps' own thread
/// drives the flows (programs that poll the backend fd themselves).
///
/// # Safety
/// `nc` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn neat_start_event_loop(nc: *mut NeatCtx, run_mode: c_int) -> NeatError {
    export(|| {
        let ctx = boundary::ctx_ptr(nc)?;
        if !(0..=2).contains(&run_mode) {
            return Err(NEAT_ERROR_BAD_ARGUMENT);
        }
        // SAFETY: installing NEAT's handler, a plain extern "C" function.
        unsafe {
            libc::signal(
                libc::SIGINT,
                crate::event_loop::on_sigint as extern "C" fn(c_int) as libc::sighandler_t,
            )
        };
        // SAFETY: a live context; the loop holds no reference across its callbacks.
        unsafe {
            if run_mode == uv::UV_RUN_DEFAULT {
                crate::event_loop::run_inline(ctx);
                uv::uv_loop_close((*ctx).uv);
            } else {
                crate::runtime::start_background();
                crate::core::mark_all(ctx);
                uv::uv_run((*ctx).uv, run_mode);
            }
        }
        Ok(())
    })
}

/// Makes the running loop return (`uv_stop`).
///
/// # Safety
/// `nc` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn neat_stop_event_loop(nc: *mut NeatCtx) {
    guard((), || {
        if let Ok(ctx) = boundary::context(nc) {
            ctx.stop();
        }
    })
}

/// The context's `uv_loop_t` (the system libuv's).
///
/// # Safety
/// `nc` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn neat_get_event_loop(nc: *mut NeatCtx) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        // The application may run this loop itself: flows need a driver meanwhile.
        crate::runtime::start_background();
        boundary::context(nc).map_or(std::ptr::null_mut(), |ctx| ctx.uv.cast())
    })
}

/// `uv_backend_fd` of the context's loop: readable when the loop has work.
///
/// # Safety
/// `nc` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn neat_get_backend_fd(nc: *mut NeatCtx) -> c_int {
    guard(-1, || {
        // The application polls this fd in a loop of its own: flows need a driver.
        crate::runtime::start_background();
        boundary::context(nc).map_or(-1, |ctx| ctx.backend_fd())
    })
}

/// `uv_backend_timeout` of the context's loop (ms; 0 when a flow wants a dispatch).
///
/// # Safety
/// `nc` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn neat_get_backend_timeout(nc: *mut NeatCtx) -> c_int {
    guard(-1, || {
        boundary::context(nc).map_or(-1, |ctx| ctx.backend_timeout())
    })
}

/// Closes every flow (each gets on_close), every handle on the loop, and frees it all.
/// Closes that need no peer (TCP) end before it returns; those that wait on one (SCTP,
/// TLS) go on in the background thread this starts for them.
///
/// # Safety
/// `nc` is NULL or a live context, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn neat_free_ctx(nc: *mut NeatCtx) {
    guard((), || {
        if let Ok(ctx) = boundary::ctx_ptr(nc) {
            // SAFETY: a live context the caller gives up; `free` runs on_close for its
            // flows and holds no reference across them.
            unsafe { Ctx::free(ctx) };
        }
    })
}

/// Sets how much the library logs (NEAT_LOG_OFF .. NEAT_LOG_DEBUG), on stderr.
///
/// # Safety
/// `nc` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn neat_log_level(nc: *mut NeatCtx, level: u8) {
    guard((), || {
        if let Ok(ctx) = boundary::context(nc) {
            ctx.shared
                .log_level
                .store(level.min(4), std::sync::atomic::Ordering::Relaxed);
        }
    })
}

/// Logging to a file is not offered: returns 0 (NEAT: 0 on failure) and logs stay on
/// stderr.
///
/// # Safety
/// `nc` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn neat_log_file(_nc: *mut NeatCtx, _file_name: *const c_char) -> u8 {
    0
}
