//! Exports that move data and end flows: read, write, shutdown, close, abort.

use std::ffi::{c_int, c_uint, c_void};

use crate::boundary::{self, export};
use crate::core::{close, State, ZeroRead};
use crate::task::Cmd;
use crate::types::*;
use crate::{task, NeatCtx, NeatFlow};

/// Reads what has arrived: up to `amt` bytes on streams, one message on message
/// transports (a longer one in parts); NEAT_ERROR_WOULD_BLOCK when nothing is there.
/// On SCTP the peer's end of stream reads as NEAT_OK with 0 bytes.
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
    export(|| {
        let (ctx, f) = boundary::flow(nc, flow)?;
        let out = boundary::bytes_mut(buffer, amt)?;
        let actual = boundary::out(actual)?;
        *actual = 0;
        if f.io.inbound.is_empty() {
            return match f.state {
                // The SCTP peer's end of stream, as NEAT reported it there.
                State::Open if f.io.zero_read == ZeroRead::Offered => Ok(()),
                State::Open | State::Opening | State::New => Err(NEAT_ERROR_WOULD_BLOCK),
                _ => Err(NEAT_ERROR_IO),
            };
        }
        let message = f.peer.info.is_some_and(|i| i.message);
        let mut n = 0usize;
        while n < out.len() {
            let Some(front) = f.io.inbound.front_mut() else {
                break;
            };
            let avail = &front[f.io.head..];
            let take = avail.len().min(out.len() - n);
            out[n..n + take].copy_from_slice(&avail[..take]);
            n += take;
            f.io.head += take;
            if f.io.head == front.len() {
                f.io.inbound.pop_front();
                f.io.head = 0;
            }
            if message {
                break;
            }
        }
        *actual = n as u32;
        f.io.bytes_received += n as u64;
        ctx.consumed(f, n);
        // What is left (or the end of stream behind it) is for the next dispatch.
        ctx.mark(f.id);
        let (stream, stack) = f.peer.info.map_or((0, 0), |i| (i.stream_id, i.stack));
        for t in boundary::tlvs(optional, opt_count) {
            match t.tag {
                NEAT_TAG_STREAM_ID => t.value.integer = c_int::from(stream),
                NEAT_TAG_TRANSPORT_STACK => t.value.integer = stack,
                _ => {}
            }
        }
        Ok(())
    })
}

/// Queues `amt` bytes (one message on message transports) and returns at once;
/// on_all_written follows when they reached the transport.
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
    export(|| {
        let (ctx, f) = boundary::flow(nc, flow)?;
        let data = boundary::bytes(buffer, amt)?;
        match f.state {
            State::Open => {}
            State::New | State::Opening | State::Listening => return Err(NEAT_ERROR_BAD_ARGUMENT),
            _ => return Err(NEAT_ERROR_IO),
        }
        if f.io.shut {
            return Err(NEAT_ERROR_IO);
        }
        for t in boundary::tlvs(optional, opt_count) {
            if t.tag == NEAT_TAG_STREAM_ID {
                let want = t.integer();
                let have = f.peer.info.map_or(0, |i| i32::from(i.stream_id));
                if want != have {
                    ctx.log(
                        NEAT_LOG_DEBUG,
                        format_args!(
                            "neat_write: stream {want} requested, the flow's stream {have} used"
                        ),
                    );
                }
            } else {
                ctx.log(
                    NEAT_LOG_DEBUG,
                    format_args!("neat_write: optional argument tag {} ignored", t.tag),
                );
            }
        }
        // One datagram is all a UDP message can be; SCTP takes any size (in pieces with
        // explicit end of record, as NEAT did).
        let datagram = f
            .peer
            .info
            .is_some_and(|i| matches!(i.stack, NEAT_STACK_UDP | NEAT_STACK_UDPLITE));
        if datagram && data.len() > task::MAX_DATAGRAM {
            return Err(NEAT_ERROR_MESSAGE_TOO_BIG);
        }
        f.io.drain_pending = true;
        if data.is_empty() {
            ctx.mark(f.id);
        } else {
            f.io.unsent += data.len() as u64;
            f.io.bytes_sent += data.len() as u64;
            ctx.command(f, Cmd::Write(data.to_vec()));
        }
        Ok(())
    })
}

/// Ends the sending side after what was written (FIN); the flow stays readable.
///
/// # Safety
/// Pointers are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn neat_shutdown(nc: *mut NeatCtx, flow: *mut NeatFlow) -> NeatError {
    export(|| {
        let (ctx, f) = boundary::flow(nc, flow)?;
        if f.state != State::Open {
            return Err(NEAT_ERROR_BAD_ARGUMENT);
        }
        if !f.io.shut {
            f.io.shut = true;
            ctx.command(f, Cmd::Shutdown);
        }
        Ok(())
    })
}

/// Closes the flow: on_close runs before this returns; the flow is freed later (its
/// pointer stays valid inside on_close). Closing a closed flow does nothing.
///
/// # Safety
/// Pointers are NULL or live (closed flows stay valid until the next loop iteration).
#[no_mangle]
pub unsafe extern "C" fn neat_close(nc: *mut NeatCtx, flow: *mut NeatFlow) -> NeatError {
    export(|| {
        let (_ctx, f) = boundary::flow_ptrs(nc, flow)?;
        // SAFETY: a live (possibly closed, not freed) flow; `close` runs on_close and
        // holds no reference across it.
        unsafe { close(f, false) };
        Ok(())
    })
}

/// Aborts the flow (TCP: RST; SCTP: ABORT) and closes it as neat_close does.
///
/// # Safety
/// As for neat_close.
#[no_mangle]
pub unsafe extern "C" fn neat_abort(nc: *mut NeatCtx, flow: *mut NeatFlow) -> NeatError {
    export(|| {
        let (_ctx, f) = boundary::flow_ptrs(nc, flow)?;
        // SAFETY: as in neat_close.
        unsafe { close(f, true) };
        Ok(())
    })
}
