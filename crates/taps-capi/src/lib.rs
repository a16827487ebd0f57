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

mod core;
mod task;
mod types;
mod uv;

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::core::{close, Ctx, Flow, State};
use crate::task::Cmd;
use crate::types::*;

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

fn cx(ctx: *mut NeatCtx) -> Option<*mut Ctx> {
    (!ctx.is_null()).then_some(ctx.cast())
}

fn fl(flow: *mut NeatFlow) -> Option<*mut Flow> {
    (!flow.is_null()).then_some(flow.cast())
}

/// A context and one of its flows, or NEAT_ERROR_BAD_ARGUMENT.
fn both(ctx: *mut NeatCtx, flow: *mut NeatFlow) -> Result<(*mut Ctx, *mut Flow), NeatError> {
    match (cx(ctx), fl(flow)) {
        (Some(c), Some(f)) => Ok((c, f)),
        _ => Err(NEAT_ERROR_BAD_ARGUMENT),
    }
}

macro_rules! tryc {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(code) => return code,
        }
    };
}

// ---- Context and loop ------------------------------------------------------------

/// Creates a context with its own libuv loop; NULL on failure.
#[no_mangle]
pub extern "C" fn neat_init_ctx() -> *mut NeatCtx {
    guard(std::ptr::null_mut(), || {
        Ctx::new().map_or(std::ptr::null_mut(), |c| c.cast())
    })
}

extern "C" fn on_sigint(_sig: c_int) {
    // NEAT's handler: leave at once.
    // SAFETY: exit is what NEAT's own handler did.
    unsafe { libc::exit(0) };
}

/// Runs the loop (`uv_run` with the same mode), then tries `uv_loop_close` as NEAT did.
/// Installs NEAT's SIGINT handler (exit 0).
///
/// # Safety
/// `nc` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn neat_start_event_loop(nc: *mut NeatCtx, run_mode: c_int) -> NeatError {
    guard(NEAT_ERROR_INTERNAL, || {
        let Some(ctx) = cx(nc) else {
            return NEAT_ERROR_BAD_ARGUMENT;
        };
        if !(0..=2).contains(&run_mode) {
            return NEAT_ERROR_BAD_ARGUMENT;
        }
        // SAFETY: installing a handler; ctx is live; no borrow is held during uv_run.
        unsafe {
            libc::signal(
                libc::SIGINT,
                on_sigint as extern "C" fn(c_int) as libc::sighandler_t,
            );
            let lp = (*ctx).uv;
            crate::core::rearm(ctx);
            uv::uv_run(lp, run_mode);
            if run_mode == uv::UV_RUN_DEFAULT {
                uv::uv_loop_close(lp);
            }
        }
        NEAT_OK
    })
}

/// Makes the running loop return (`uv_stop`).
///
/// # Safety
/// `nc` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn neat_stop_event_loop(nc: *mut NeatCtx) {
    guard((), || {
        if let Some(ctx) = cx(nc) {
            // SAFETY: ctx is live.
            unsafe { uv::uv_stop((*ctx).uv) };
        }
    })
}

/// The context's `uv_loop_t` (the system libuv's).
///
/// # Safety
/// `nc` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn neat_get_event_loop(nc: *mut NeatCtx) -> *mut c_void {
    guard(std::ptr::null_mut(), || match cx(nc) {
        // SAFETY: ctx is live.
        Some(ctx) => unsafe { (*ctx).uv.cast() },
        None => std::ptr::null_mut(),
    })
}

/// `uv_backend_fd` of the context's loop: readable when the loop has work.
///
/// # Safety
/// `nc` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn neat_get_backend_fd(nc: *mut NeatCtx) -> c_int {
    guard(-1, || match cx(nc) {
        // SAFETY: ctx is live.
        Some(ctx) => unsafe { uv::uv_backend_fd((*ctx).uv) },
        None => -1,
    })
}

/// `uv_backend_timeout` of the context's loop (ms; 0 when a flow wants a dispatch).
///
/// # Safety
/// `nc` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn neat_get_backend_timeout(nc: *mut NeatCtx) -> c_int {
    guard(-1, || match cx(nc) {
        // SAFETY: ctx is live.
        Some(ctx) => unsafe { uv::uv_backend_timeout((*ctx).uv) },
        None => -1,
    })
}

/// Closes every flow (each gets on_close), every handle on the loop, and frees it all.
///
/// # Safety
/// `nc` is NULL or a live context, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn neat_free_ctx(nc: *mut NeatCtx) {
    guard((), || {
        if let Some(ctx) = cx(nc) {
            // SAFETY: ctx is live and the caller gives it up.
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
        if let Some(ctx) = cx(nc) {
            // SAFETY: ctx is live.
            let shared = unsafe { &(*ctx).shared };
            shared
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

// ---- Flows -------------------------------------------------------------------------

/// A new flow on the context (not yet opened or accepting).
///
/// # Safety
/// `nc` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn neat_new_flow(nc: *mut NeatCtx) -> *mut NeatFlow {
    guard(std::ptr::null_mut(), || match cx(nc) {
        // SAFETY: ctx is live.
        Some(ctx) => unsafe { crate::core::new_flow(ctx).cast() },
        None => std::ptr::null_mut(),
    })
}

/// Copies `ops` into the flow (unless it is the flow's own copy), keeping the flow's
/// transport_protocol; the next loop iteration sees the new callbacks.
///
/// # Safety
/// Pointers are NULL or live; `ops` points to a whole `struct neat_flow_operations`.
#[no_mangle]
pub unsafe extern "C" fn neat_set_operations(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    ops: *mut c_void,
) -> NeatError {
    let ops: *mut NeatFlowOperations = ops.cast();
    guard(NEAT_ERROR_INTERNAL, || {
        let (ctx, f) = tryc!(both(nc, flow));
        if ops.is_null() {
            return NEAT_ERROR_BAD_ARGUMENT;
        }
        // SAFETY: f is live; ops is readable; short borrows.
        unsafe {
            let own = std::ptr::addr_of_mut!((*f).ops);
            if own != ops {
                let keep = (*f).ops.transport_protocol;
                *own = *ops;
                (*own).transport_protocol = keep;
            }
            (*own).ctx = ctx.cast();
            (*own).flow = f.cast();
            if (*f).state != State::Closed {
                crate::core::rearm(ctx);
            }
        }
        NEAT_OK
    })
}

/// Properties in NEAT's JSON (value/precedence objects or the list form). Properties
/// taps does not know, or cannot take, are ignored with a log line, as NEAT did.
///
/// # Safety
/// Pointers are NULL or live; `properties` is a C string.
#[no_mangle]
pub unsafe extern "C" fn neat_set_property(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    properties: *const c_char,
) -> NeatError {
    guard(NEAT_ERROR_INTERNAL, || {
        let (ctx, f) = tryc!(both(nc, flow));
        if properties.is_null() {
            return NEAT_ERROR_BAD_ARGUMENT;
        }
        // SAFETY: a C string from the caller.
        let text = unsafe { CStr::from_ptr(properties) }.to_string_lossy();
        let json: serde_json::Value = match serde_json::from_str(&text) {
            Ok(serde_json::Value::Object(m)) => serde_json::Value::Object(m),
            _ => {
                // SAFETY: ctx is live.
                unsafe {
                    (*ctx).log(
                        NEAT_LOG_ERROR,
                        format_args!("properties are not a JSON object: {text}"),
                    )
                };
                return NEAT_ERROR_BAD_ARGUMENT;
            }
        };
        let serde_json::Value::Object(map) = json else {
            unreachable!()
        };
        for (k, v) in map {
            let one = serde_json::json!({ k.clone(): v.clone() }).to_string();
            match taps::TransportProperties::new().merge_neat_json(&one) {
                // SAFETY: f is live; short borrow.
                Ok(_) => unsafe {
                    (*f).props.retain(|(name, _)| name != &k);
                    (*f).props.push((k, v));
                },
                // SAFETY: ctx is live.
                Err(e) => unsafe {
                    (*ctx).log(NEAT_LOG_WARNING, format_args!("ignoring property {k}: {e}"))
                },
            }
        }
        NEAT_OK
    })
}

/// Builds the flow's properties over `base`.
///
/// # Safety
/// `f` is live.
unsafe fn properties(
    f: *mut Flow,
    base: taps::TransportProperties,
) -> Result<taps::Properties, String> {
    let mut p = base;
    // SAFETY: f is live; short borrow.
    for (k, v) in unsafe { &(*f).props } {
        let one = serde_json::json!({ k: v }).to_string();
        p = p.merge_neat_json(&one).map_err(|e| e.to_string())?;
    }
    p.compile().map_err(|e| e.to_string())
}

/// Ignores optional arguments this call cannot use, with a log line.
fn note_tlvs(ctx: &Ctx, call: &str, tlvs: &[NeatTlv]) {
    for t in tlvs {
        ctx.log(
            NEAT_LOG_DEBUG,
            format_args!("{call}: optional argument tag {} ignored", t.tag),
        );
    }
}

/// Starts connecting to `name`:`port` and returns at once; on_connected or on_error
/// follows from the loop.
///
/// # Safety
/// Pointers are NULL or live; `name` is a C string; `optional` holds `opt_count` TLVs.
#[no_mangle]
pub unsafe extern "C" fn neat_open(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    name: *const c_char,
    port: u16,
    optional: *mut c_void,
    opt_count: c_uint,
) -> NeatError {
    guard(NEAT_ERROR_INTERNAL, || {
        let (ctx, f) = tryc!(both(nc, flow));
        if name.is_null() || port == 0 {
            return NEAT_ERROR_BAD_ARGUMENT;
        }
        // SAFETY: checked pointers from the caller; ctx and f live; short borrows.
        unsafe {
            if (*f).state != State::New {
                return NEAT_ERROR_BAD_ARGUMENT;
            }
            let host = CStr::from_ptr(name).to_string_lossy().into_owned();
            let tlvs = tlvs(optional.cast(), opt_count);
            note_tlvs(&*ctx, "neat_open", tlvs);
            let props = match properties(f, taps::TransportProperties::new()) {
                Ok(p) => p,
                Err(e) => {
                    (*ctx).log(NEAT_LOG_ERROR, format_args!("neat_open: {e}"));
                    return NEAT_ERROR_BAD_ARGUMENT;
                }
            };
            let pre = taps::Preconnection::new(&(*ctx).taps, props)
                .remote(taps::RemoteEndpoint::new(host.clone(), port));
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let fr = &mut *f;
            fr.state = State::Opening;
            fr.host = host;
            fr.port = port;
            fr.tx = Some(tx);
            let shared = (*ctx).shared.clone();
            (*ctx).pending_opens.push(Box::pin(task::open(
                pre,
                fr.id,
                shared,
                fr.shared.clone(),
                rx,
            )));
            (*ctx).wake();
        }
        NEAT_OK
    })
}

/// The properties a listener without any uses: every stack taps can run.
/// (RFC 9622's defaults would rule out the datagram stacks, so they become no
/// preference here.)
const ALL_STACKS: &str = r#"{"transport":{"value":["SCTP","TCP","MPTCP","UDP","UDP-Lite"],"precedence":2},
 "reliability":{"value":true,"precedence":0}, "preserveOrder":{"value":true,"precedence":0},
 "congestionControl":{"value":true,"precedence":0},
 "fullChecksumSend":{"value":true,"precedence":0}, "fullChecksumRecv":{"value":true,"precedence":0}}"#;

/// Listens on `port` (all addresses, both families) and returns; each accepted
/// connection becomes a new flow with the listener's callbacks and userData. A failed
/// bind is reported through on_error.
///
/// # Safety
/// Pointers are NULL or live; `optional` holds `opt_count` TLVs.
#[no_mangle]
pub unsafe extern "C" fn neat_accept(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    port: u16,
    optional: *mut c_void,
    opt_count: c_uint,
) -> NeatError {
    guard(NEAT_ERROR_INTERNAL, || {
        let (ctx, f) = tryc!(both(nc, flow));
        // SAFETY: ctx and f live; short borrows; block_on runs on this (non-runtime) thread.
        unsafe {
            if (*f).state != State::New {
                return NEAT_ERROR_BAD_ARGUMENT;
            }
            note_tlvs(&*ctx, "neat_accept", tlvs(optional.cast(), opt_count));
            let mut base = taps::TransportProperties::for_listener();
            if (*f).props.is_empty() {
                base = base
                    .merge_neat_json(ALL_STACKS)
                    .map_err(|e| e.to_string())
                    .unwrap_or_else(|_| taps::TransportProperties::for_listener());
            }
            let props = match properties(f, base) {
                Ok(p) => p,
                Err(e) => {
                    (*ctx).log(NEAT_LOG_ERROR, format_args!("neat_accept: {e}"));
                    return NEAT_ERROR_BAD_ARGUMENT;
                }
            };
            let pre = taps::Preconnection::new(&(*ctx).taps, props)
                .local(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
            let fr = &mut *f;
            fr.port = port;
            let rt = task::runtime();
            match rt.block_on(pre.listen()) {
                Ok(l) => {
                    for (stack, addr) in l.local_addrs() {
                        (*ctx).log(NEAT_LOG_INFO, format_args!("listening: {stack} on {addr}"));
                    }
                    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                    fr.state = State::Listening;
                    fr.tx = Some(tx);
                    rt.spawn(task::accept(l, fr.id, (*ctx).shared.clone(), rx));
                }
                Err(e) => {
                    fr.state = State::Listening;
                    crate::core::post_error(
                        &*ctx,
                        fr.id,
                        NEAT_ERROR_IO,
                        format!("listen on port {port}: {e}"),
                    );
                }
            }
        }
        NEAT_OK
    })
}

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
            let (stream, stack) = fr.info.map_or((0, 0), |i| (i.stream_id, i.stack));
            for t in tlvs(optional.cast(), opt_count) {
                match t.tag {
                    NEAT_TAG_STREAM_ID => t.value.integer = c_int::from(stream),
                    NEAT_TAG_TRANSPORT_STACK => t.value.integer = stack,
                    _ => {}
                }
            }
            let _ = ctx;
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
            if fr.info.is_some_and(|i| i.message) && amt as usize > task::MAX_MESSAGE {
                return NEAT_ERROR_MESSAGE_TOO_BIG;
            }
            fr.drain_pending = true;
            if amt > 0 {
                let data = std::slice::from_raw_parts(buffer, amt as usize).to_vec();
                fr.unsent += u64::from(amt);
                fr.bytes_sent += u64::from(amt);
                fr.send(Cmd::Write(data));
            } else {
                crate::core::rearm(ctx);
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

// ---- Information and tuning -------------------------------------------------------------

fn stack_name(stack: i32) -> &'static str {
    match stack {
        NEAT_STACK_TCP => "TCP",
        NEAT_STACK_MPTCP => "MPTCP",
        NEAT_STACK_SCTP => "SCTP",
        NEAT_STACK_UDP => "UDP",
        NEAT_STACK_UDPLITE => "UDP-Lite",
        _ => "",
    }
}

/// NEAT's statistics JSON (a `malloc`ed string the caller frees): every flow, newest
/// first, with taps' counters and, on TCP, round-trip time from TCP_INFO.
///
/// # Safety
/// `nc` is NULL or live; `neat_stats` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn neat_get_stats(
    nc: *mut NeatCtx,
    neat_stats: *mut *mut c_char,
) -> NeatError {
    guard(NEAT_ERROR_INTERNAL, || {
        let Some(ctx) = cx(nc) else {
            return NEAT_ERROR_BAD_ARGUMENT;
        };
        if neat_stats.is_null() {
            return NEAT_ERROR_BAD_ARGUMENT;
        }
        use serde_json::{json, Map, Value};
        let mut root = Map::new();
        let (mut sent, mut recvd, mut n) = (0u64, 0u64, 0usize);
        // SAFETY: ctx is live; flows in its map are live; no callbacks run here.
        let flows: Vec<*mut Flow> = unsafe { (*ctx).flows.values().rev().copied().collect() };
        for f in flows {
            // SAFETY: as above.
            let fr = unsafe { &*f };
            if fr.state == State::Listening || fr.state == State::New {
                continue;
            }
            n += 1;
            let stats = if fr.state == State::Open {
                let (tx, rx) = std::sync::mpsc::channel();
                fr.send(Cmd::Stats(tx));
                rx.recv_timeout(std::time::Duration::from_secs(1)).ok()
            } else {
                None
            };
            let (bs, br) = stats
                .as_ref()
                .map_or((fr.bytes_sent, fr.bytes_received), |s| {
                    (s.bytes_sent, s.bytes_received)
                });
            sent += bs;
            recvd += br;
            let stack = fr.info.map_or(0, |i| i.stack);
            let props: Map<String, Value> = fr.props.iter().cloned().collect();
            let mut o = json!({
                "flow number": n,
                "remote_host": fr.host,
                "socket type": if fr.info.is_some_and(|i| i.message) { libc::SOCK_DGRAM } else { libc::SOCK_STREAM },
                "sock_protocol": match stack { NEAT_STACK_TCP | NEAT_STACK_MPTCP => libc::IPPROTO_TCP, NEAT_STACK_UDP => libc::IPPROTO_UDP, NEAT_STACK_UDPLITE => libc::IPPROTO_UDPLITE, NEAT_STACK_SCTP => libc::IPPROTO_SCTP, _ => 0 },
                "transport": stack_name(stack),
                "port": fr.port,
                "ecn": 0,
                "qos": 0,
                "write_size": task::MAX_MESSAGE,
                "read_size": task::MAX_MESSAGE,
                "bytes sent": bs,
                "bytes received": br,
                "priority": 0.5,
                "flow_properties": props,
            });
            if matches!(stack, NEAT_STACK_TCP | NEAT_STACK_MPTCP) {
                let us = |d: Option<std::time::Duration>| d.map(|d| d.as_micros() as u64);
                o["tcpstats"] = json!({
                    "retransmits": null, "pmtu": null, "rcv_ssthresh": null,
                    "rtt": us(stats.as_ref().and_then(|s| s.rtt)),
                    "rttvar": us(stats.as_ref().and_then(|s| s.rtt_var)),
                    "ssthresh": null, "snd_cwnd": null, "advmss": null,
                    "reordering": null, "total retrans": null,
                });
            }
            root.insert(format!("flow-{n}"), o);
        }
        root.insert("Number of flows".into(), json!(n));
        root.insert("Total bytes sent".into(), json!(sent));
        root.insert("Total bytes received".into(), json!(recvd));
        let mut out = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
        let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
        if serde::Serialize::serialize(&Value::Object(root), &mut ser).is_err() {
            return NEAT_ERROR_INTERNAL;
        }
        // SAFETY: a fresh malloc'ed, NUL-terminated copy the caller frees.
        unsafe {
            let p = libc::malloc(out.len() + 1) as *mut u8;
            if p.is_null() {
                return NEAT_ERROR_OUT_OF_MEMORY;
            }
            std::ptr::copy_nonoverlapping(out.as_ptr(), p, out.len());
            *p.add(out.len()) = 0;
            *neat_stats = p.cast();
        }
        NEAT_OK
    })
}

/// Writes `flow`'s local (`local` != 0) or remote address into a `malloc`ed array and
/// returns how many (1), or -1. Free with neat_freelpaddrs.
///
/// # Safety
/// Pointers are NULL or live; `addrs` is writable.
#[no_mangle]
pub unsafe extern "C" fn neat_getlpaddrs(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    addrs: *mut *mut libc::sockaddr,
    local: c_int,
) -> c_int {
    guard(-1, || {
        let Ok((_ctx, f)) = both(nc, flow) else {
            return -1;
        };
        if addrs.is_null() {
            return -1;
        }
        // SAFETY: f is live; the array is a fresh allocation of the right size.
        unsafe {
            let Some(info) = (*f).info else { return -1 };
            let a = if local != 0 { info.local } else { info.remote };
            let (len, p) = match a {
                SocketAddr::V4(v4) => {
                    let p = libc::calloc(1, std::mem::size_of::<libc::sockaddr_in>())
                        as *mut libc::sockaddr_in;
                    if p.is_null() {
                        return -1;
                    }
                    (*p).sin_family = libc::AF_INET as libc::sa_family_t;
                    (*p).sin_port = v4.port().to_be();
                    (*p).sin_addr.s_addr = u32::from(*v4.ip()).to_be();
                    (1, p.cast::<libc::sockaddr>())
                }
                SocketAddr::V6(v6) => {
                    let p = libc::calloc(1, std::mem::size_of::<libc::sockaddr_in6>())
                        as *mut libc::sockaddr_in6;
                    if p.is_null() {
                        return -1;
                    }
                    (*p).sin6_family = libc::AF_INET6 as libc::sa_family_t;
                    (*p).sin6_port = v6.port().to_be();
                    (*p).sin6_addr.s6_addr = v6.ip().octets();
                    (*p).sin6_scope_id = v6.scope_id();
                    (1, p.cast::<libc::sockaddr>())
                }
            };
            *addrs = p;
            len
        }
    })
}

/// Frees what neat_getlpaddrs returned.
///
/// # Safety
/// `addrs` is NULL or came from neat_getlpaddrs.
#[no_mangle]
pub unsafe extern "C" fn neat_freelpaddrs(addrs: *mut libc::sockaddr) {
    // SAFETY: a pointer from calloc (or NULL).
    unsafe { libc::free(addrs.cast()) };
}

/// Checks the flow and says taps cannot do this (yet): NEAT_ERROR_UNABLE.
fn unable(nc: *mut NeatCtx, flow: *mut NeatFlow, what: &str) -> NeatError {
    guard(NEAT_ERROR_INTERNAL, || {
        let (ctx, _f) = tryc!(both(nc, flow));
        // SAFETY: ctx is live.
        unsafe {
            (*ctx).log(
                NEAT_LOG_INFO,
                format_args!("{what}: not offered by taps yet"),
            )
        };
        NEAT_ERROR_UNABLE
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

/// Not offered by taps yet (SCTP primary path): NEAT_ERROR_UNABLE.
///
/// # Safety
/// Pointers are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn neat_set_primary_dest(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    _name: *const c_char,
) -> NeatError {
    unable(nc, flow, "neat_set_primary_dest")
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

/// TLS is not in taps yet: NEAT_ERROR_UNABLE.
///
/// # Safety
/// Pointers are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn neat_secure_identity(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    _filename: *const c_char,
    _pem_type: c_int,
) -> NeatError {
    unable(nc, flow, "neat_secure_identity (TLS)")
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
    guard(NEAT_ERROR_INTERNAL, || {
        tryc!(both(nc, flow));
        NEAT_OK
    })
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
    guard(NEAT_ERROR_INTERNAL, || {
        let Some(f) = fl(flow) else {
            return NEAT_ERROR_BAD_ARGUMENT;
        };
        if ptr.is_null() || size.is_null() {
            return NEAT_ERROR_BAD_ARGUMENT;
        }
        // SAFETY: checked pointers; f is live.
        unsafe {
            if *size < std::mem::size_of::<c_int>() {
                return NEAT_ERROR_MESSAGE_TOO_BIG;
            }
            let Some(info) = (*f).info else {
                return NEAT_ERROR_UNABLE;
            };
            *ptr.cast::<c_int>() = info.stack;
            *size = std::mem::size_of::<c_int>();
        }
        NEAT_OK
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
    // SAFETY: checked pointers from the caller.
    unsafe {
        if !send.is_null() {
            *send = task::MAX_MESSAGE as c_int;
        }
        if !recv.is_null() {
            *recv = task::MAX_MESSAGE as c_int;
        }
    }
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
    let ops: *mut NeatFlowOperations = ops.cast();
    if !ops.is_null() {
        // SAFETY: checked pointer.
        unsafe { (*ops).user_data = data.cast() };
    }
}

/// Returns `ops->userData`.
///
/// # Safety
/// `ops` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn get_ops_user_data(ops: *mut c_void) -> *mut u8 {
    let ops: *mut NeatFlowOperations = ops.cast();
    if ops.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: checked pointer.
    unsafe { (*ops).user_data.cast() }
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

#[cfg(test)]
mod tests {
    #[test]
    fn listener_without_properties_plans_every_stack() {
        let rt = crate::task::runtime();
        let _g = rt.enter();
        let ctx = taps::Context::new().unwrap();
        let props = taps::TransportProperties::for_listener()
            .merge_neat_json(super::ALL_STACKS)
            .unwrap()
            .compile()
            .unwrap();
        let pre = taps::Preconnection::new(&ctx, props);
        let plan = pre.plan().unwrap();
        let runnable: Vec<String> = plan
            .stacks()
            .iter()
            .filter(|s| s.unavailable.is_none())
            .map(|s| s.stack.to_string())
            .collect();
        for want in ["SCTP", "TCP", "UDP"] {
            assert!(
                runnable.iter().any(|s| s == want),
                "{want} not in {runnable:?}"
            );
        }
    }
}
