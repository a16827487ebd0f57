//! Tuning exports and the calls taps does not offer (yet): each checks its arguments and
//! answers honestly (NEAT_ERROR_UNABLE, a neutral value, or a no-op NEAT kept too).

use std::ffi::{c_char, c_int, c_uint, c_void};

use crate::boundary::{self, export};
use crate::types::*;
use crate::{guard, task, NeatCtx, NeatFlow};

/// Checks the flow and says taps cannot do this (yet): NEAT_ERROR_UNABLE.
fn unable(nc: *mut NeatCtx, flow: *mut NeatFlow, what: &str) -> NeatError {
    export(|| {
        let (ctx, _f) = boundary::flow(nc, flow)?;
        ctx.log(
            NEAT_LOG_INFO,
            format_args!("{what}: not offered by taps yet"),
        );
        Err(NEAT_ERROR_UNABLE)
    })
}

/// Not offered by taps yet (a user timeout per flow): NEAT_ERROR_UNABLE.
///
/// # Safety
/// Pointers are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn neat_change_timeout(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    _seconds: c_uint,
) -> NeatError {
    unable(nc, flow, "neat_change_timeout")
}

/// Not offered by taps yet (UDP-Lite coverage per flow): NEAT_ERROR_UNABLE.
///
/// # Safety
/// Pointers are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn neat_set_checksum_coverage(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    _send: c_uint,
    _recv: c_uint,
) -> NeatError {
    unable(nc, flow, "neat_set_checksum_coverage")
}

/// Not offered by taps yet (DSCP per flow; use the `dscp_value` property): NEAT_ERROR_UNABLE.
///
/// # Safety
/// Pointers are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn neat_set_qos(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    _qos: u8,
) -> NeatError {
    unable(nc, flow, "neat_set_qos")
}

/// The flow's DSCP is not known to taps: 0.
///
/// # Safety
/// Pointers are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn neat_get_qos(_nc: *mut NeatCtx, _flow: *mut NeatFlow) -> c_int {
    0
}

/// Not offered by taps yet (ECN bits per flow): NEAT_ERROR_UNABLE.
///
/// # Safety
/// Pointers are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn neat_set_ecn(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    _ecn: u8,
) -> NeatError {
    unable(nc, flow, "neat_set_ecn")
}

/// Accepted and kept: on_writable already fires only while less than 256 KiB waits.
///
/// # Safety
/// Pointers are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn neat_set_low_watermark(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    _watermark: u32,
) -> NeatError {
    export(|| boundary::flow(nc, flow).map(drop))
}

/// taps owns the sockets: -1.
///
/// # Safety
/// Any pointer.
#[no_mangle]
pub unsafe extern "C" fn neat_get_socket_fd(_flow: *mut NeatFlow) -> c_int {
    -1
}

/// The flow's stack (neat_protocol_stack_type) as an int into `ptr`.
///
/// # Safety
/// Pointers are NULL or live; `ptr` has `*size` bytes.
#[no_mangle]
pub unsafe extern "C" fn neat_get_stack(
    flow: *mut NeatFlow,
    ptr: *mut c_void,
    size: *mut usize,
) -> NeatError {
    export(|| {
        let f = boundary::flow_only(flow)?;
        let size = boundary::out(size)?;
        if ptr.is_null() {
            return Err(NEAT_ERROR_BAD_ARGUMENT);
        }
        if *size < std::mem::size_of::<c_int>() {
            return Err(NEAT_ERROR_MESSAGE_TOO_BIG);
        }
        let info = f.peer.info.ok_or(NEAT_ERROR_UNABLE)?;
        *boundary::out(ptr.cast::<c_int>())? = info.stack;
        *size = std::mem::size_of::<c_int>();
        Ok(())
    })
}

/// Properties are not read back: NEAT_ERROR_UNABLE.
///
/// # Safety
/// Pointers are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn neat_get_property(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    _name: *const c_char,
    _ptr: *mut c_void,
    _size: *mut usize,
) -> NeatError {
    unable(nc, flow, "neat_get_property")
}

/// The per-read and per-write sizes this library uses (64 KiB each).
///
/// # Safety
/// `send` and `recv` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn neat_get_max_buffer_sizes(
    _flow: *mut NeatFlow,
    send: *mut c_int,
    recv: *mut c_int,
) {
    guard((), || {
        for out in [send, recv] {
            if let Ok(out) = boundary::out(out) {
                *out = task::IO_SIZE as c_int;
            }
        }
    })
}

/// NEAT's unused initiate timer: does nothing.
///
/// # Safety
/// Any pointers.
#[no_mangle]
pub unsafe extern "C" fn set_initiate_timer(
    _nc: *mut NeatCtx,
    _flow: *mut NeatFlow,
    _ops: *mut c_void,
    _timeout: f32,
) {
}

/// Sets `ops->userData`.
///
/// # Safety
/// `ops` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn set_ops_user_data(ops: *mut c_void, data: *mut u8) {
    guard((), || {
        if let Ok(ops) = boundary::out(ops.cast::<NeatFlowOperations>()) {
            ops.user_data = data.cast();
        }
    })
}

/// Returns `ops->userData`.
///
/// # Safety
/// `ops` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn get_ops_user_data(ops: *mut c_void) -> *mut u8 {
    guard(std::ptr::null_mut(), || {
        boundary::out(ops.cast::<NeatFlowOperations>())
            .map_or(std::ptr::null_mut(), |ops| ops.user_data.cast())
    })
}

/// WebRTC is not offered: NEAT_ERROR_UNABLE.
///
/// # Safety
/// Pointers are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn neat_send_remote_parameters(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    _params: *mut c_char,
) -> NeatError {
    unable(nc, flow, "neat_send_remote_parameters (WebRTC)")
}
