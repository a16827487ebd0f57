//! Exports that move data and end flows: read, write, shutdown, close, abort.

use std::ffi::{c_int, c_uint, c_void};

use crate::core::{close, State, ZeroRead};
use crate::task::Cmd;
use crate::types::*;
use crate::{both, guard, task, NeatCtx, NeatFlow};

/// Reads what has arrived: up to `amt` bytes on streams, one message on message
/// transports; NEAT_ERROR_WOULD_BLOCK when nothing is there.
///
/// # Safety
/// Pointers are NULL or live; `buffer` has room for `amt` bytes.
#[no_mangle]
pub unsafe extern "C" fn neat_read(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    buffer: *mut u8,
    amt: u32,
    actual: *mut u32,
    optional: *mut c_void,
    opt_count: c_uint,
) -> NeatError {
    guard(NEAT_ERROR_INTERNAL, || {
        let (ctx, f) = tryc!(both(nc, flow));
        if buffer.is_null() || actual.is_null() {
            return NEAT_ERROR_BAD_ARGUMENT;
        }
        // SAFETY: checked pointers; the caller's buffer has amt bytes; short borrows.
        unsafe {
            *actual = 0;
            let fr = &mut *f;
            if fr.inbound.is_empty() {
                if fr.state == State::Open && fr.zero_read == ZeroRead::Offered {
                    // The SCTP peer's end of stream, as NEAT reported it there.
                    return NEAT_OK;
                }
                return match fr.state {
                    State::Open | State::Opening | State::New => NEAT_ERROR_WOULD_BLOCK,
                    _ => NEAT_ERROR_IO,
                };
            }
            let out = std::slice::from_raw_parts_mut(buffer, amt as usize);
            let message = fr.info.is_some_and(|i| i.message);
            let mut n = 0usize;
            while n < out.len() {
                let Some(front) = fr.inbound.front_mut() else {
                    break;
                };
                let avail = &front[fr.head..];
                let take = avail.len().min(out.len() - n);
                out[n..n + take].copy_from_slice(&avail[..take]);
                n += take;
                fr.head += take;
                if fr.head == front.len() {
                    fr.inbound.pop_front();
                    fr.head = 0;
                }
                if message {
                    break;
                }
            }
            *actual = n as u32;
            fr.bytes_received += n as u64;
            crate::core::consumed(fr, n);
            // What is left (or the end of stream behind it) is for the next dispatch.
            crate::core::mark(ctx, fr.id);
            let (stream, stack) = fr.info.map_or((0, 0), |i| (i.stream_id, i.stack));
            for t in tlvs(optional.cast(), opt_count) {
                match t.tag {
                    NEAT_TAG_STREAM_ID => t.value.integer = c_int::from(stream),
                    NEAT_TAG_TRANSPORT_STACK => t.value.integer = stack,
                    _ => {}
                }
            }
        }
        NEAT_OK
    })
}

/// Queues `amt` bytes (one message on message transports) and returns at once;
/// on_all_written follows when they reached the kernel.
///
/// # Safety
/// Pointers are NULL or live; `buffer` holds `amt` bytes.
#[no_mangle]
pub unsafe extern "C" fn neat_write(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    buffer: *const u8,
    amt: u32,
    optional: *mut c_void,
    opt_count: c_uint,
) -> NeatError {
    guard(NEAT_ERROR_INTERNAL, || {
        let (ctx, f) = tryc!(both(nc, flow));
        if buffer.is_null() && amt > 0 {
            return NEAT_ERROR_BAD_ARGUMENT;
        }
        // SAFETY: checked pointers; short borrows.
        unsafe {
            let fr = &mut *f;
            match fr.state {
                State::Open => {}
                State::New | State::Opening | State::Listening => return NEAT_ERROR_BAD_ARGUMENT,
                _ => return NEAT_ERROR_IO,
            }
            if fr.shut {
                return NEAT_ERROR_IO;
            }
            for t in tlvs(optional.cast(), opt_count) {
                if t.tag == NEAT_TAG_STREAM_ID {
                    let want = t.value.integer;
                    let have = fr.info.map_or(0, |i| i32::from(i.stream_id));
                    if want != have {
                        (*ctx).log(NEAT_LOG_DEBUG, format_args!("neat_write: stream {want} requested, the flow's stream {have} used"));
                    }
                } else {
                    (*ctx).log(
                        NEAT_LOG_DEBUG,
                        format_args!("neat_write: optional argument tag {} ignored", t.tag),
                    );
                }
            }
            // One datagram is all a UDP message can be; SCTP takes any size (in pieces
            // with explicit end of record, as NEAT did).
            let datagram = fr
                .info
                .is_some_and(|i| matches!(i.stack, NEAT_STACK_UDP | NEAT_STACK_UDPLITE));
            if datagram && amt as usize > task::MAX_DATAGRAM {
                return NEAT_ERROR_MESSAGE_TOO_BIG;
            }
            fr.drain_pending = true;
            if amt > 0 {
                let data = std::slice::from_raw_parts(buffer, amt as usize).to_vec();
                fr.unsent += u64::from(amt);
                fr.bytes_sent += u64::from(amt);
                fr.send(Cmd::Write(data));
            } else {
                crate::core::mark(ctx, fr.id);
            }
        }
        NEAT_OK
    })
}

/// Ends the sending side after what was written (FIN); the flow stays readable.
///
/// # Safety
/// Pointers are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn neat_shutdown(nc: *mut NeatCtx, flow: *mut NeatFlow) -> NeatError {
    guard(NEAT_ERROR_INTERNAL, || {
        let (_ctx, f) = tryc!(both(nc, flow));
        // SAFETY: f is live.
        unsafe {
            let fr = &mut *f;
            if fr.state != State::Open {
                return NEAT_ERROR_BAD_ARGUMENT;
            }
            if !fr.shut {
                fr.shut = true;
                fr.send(Cmd::Shutdown);
            }
        }
        NEAT_OK
    })
}

/// Closes the flow: on_close runs before this returns; the flow is freed later (its
/// pointer stays valid inside on_close). Closing a closed flow does nothing.
///
/// # Safety
/// Pointers are NULL or live (closed flows stay valid until the next loop iteration).
#[no_mangle]
pub unsafe extern "C" fn neat_close(nc: *mut NeatCtx, flow: *mut NeatFlow) -> NeatError {
    guard(NEAT_ERROR_INTERNAL, || {
        let (_ctx, f) = tryc!(both(nc, flow));
        // SAFETY: f is live or closed-not-freed.
        unsafe { close(f, false) };
        NEAT_OK
    })
}

/// Aborts the flow (TCP: RST; SCTP: ABORT) and closes it as neat_close does.
///
/// # Safety
/// As for neat_close.
#[no_mangle]
pub unsafe extern "C" fn neat_abort(nc: *mut NeatCtx, flow: *mut NeatFlow) -> NeatError {
    guard(NEAT_ERROR_INTERNAL, || {
        let (_ctx, f) = tryc!(both(nc, flow));
        // SAFETY: f is live or closed-not-freed.
        unsafe { close(f, true) };
        NEAT_OK
    })
}
