//! Where the application's pointers become references: once per call, checked, with the
//! argument for their soundness in one place, so the exports' bodies are safe code.
//!
//! The C API's contract (NEAT's): a context pointer is NULL or one `neat_init_ctx`
//! returned that `neat_free_ctx` has not freed; a flow pointer is NULL or one
//! `neat_new_flow` returned (or an accepted flow's, from its callbacks) that the library
//! has not freed (a closed flow stays allocated until the loop's next turn); a buffer
//! holds the length given with it; a string is NUL-terminated. A context and a flow are
//! separate allocations, so a `&mut Ctx` and a `&mut Flow` never overlap.
//!
//! The references live for one export's body, during which no call into the
//! application happens: the exports that run callbacks (`neat_close`, `neat_abort`,
//! `neat_free_ctx`, `neat_start_event_loop`) take [`ctx_ptr`] / [`flow_ptrs`] and hand
//! raw pointers to `core`, which never holds a reference across a callback.

use std::borrow::Cow;
use std::ffi::{c_char, c_uint, c_void, CStr};

use crate::core::{Ctx, Flow};
use crate::types::*;
use crate::{guard, NeatCtx, NeatFlow};

/// Runs an export whose result is a NEAT error code: `Err(code)` and panics (as
/// `NEAT_ERROR_INTERNAL`) become the code, `Ok` becomes `NEAT_OK`.
pub(crate) fn export(body: impl FnOnce() -> Result<(), NeatError>) -> NeatError {
    guard(NEAT_ERROR_INTERNAL, || match body() {
        Ok(()) => NEAT_OK,
        Err(code) => code,
    })
}

/// The context behind `nc`, as a raw pointer (for calls that run callbacks).
pub(crate) fn ctx_ptr(nc: *mut NeatCtx) -> Result<*mut Ctx, NeatError> {
    if nc.is_null() {
        return Err(NEAT_ERROR_BAD_ARGUMENT);
    }
    Ok(nc.cast())
}

/// The context and flow behind `nc` and `flow`, as raw pointers (for calls that run
/// callbacks).
pub(crate) fn flow_ptrs(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
) -> Result<(*mut Ctx, *mut Flow), NeatError> {
    if flow.is_null() {
        return Err(NEAT_ERROR_BAD_ARGUMENT);
    }
    Ok((ctx_ptr(nc)?, flow.cast()))
}

/// The context behind `nc`, for one export's body.
pub(crate) fn context<'a>(nc: *mut NeatCtx) -> Result<&'a mut Ctx, NeatError> {
    let c = ctx_ptr(nc)?;
    // SAFETY: a live context by the C API's contract (module docs); no other reference
    // to it exists during an export's body, and none outlives it.
    Ok(unsafe { &mut *c })
}

/// The context and flow behind `nc` and `flow`, for one export's body.
pub(crate) fn flow<'a>(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
) -> Result<(&'a mut Ctx, &'a mut Flow), NeatError> {
    let (c, f) = flow_ptrs(nc, flow)?;
    // SAFETY: live, separate allocations by the C API's contract (module docs); no
    // other reference to either exists during an export's body.
    Ok(unsafe { (&mut *c, &mut *f) })
}

/// The flow behind `flow` alone (exports NEAT gave no context argument).
pub(crate) fn flow_only<'a>(flow: *mut NeatFlow) -> Result<&'a mut Flow, NeatError> {
    if flow.is_null() {
        return Err(NEAT_ERROR_BAD_ARGUMENT);
    }
    // SAFETY: as in `flow`.
    Ok(unsafe { &mut *flow.cast::<Flow>() })
}

/// A copy of the operations at `ops`, or `None` when `ops` is `flow`'s own (what its
/// callbacks get: programs edit it in place and pass it back).
pub(crate) fn operations_unless_own(
    ops: *mut c_void,
    flow: *mut Flow,
) -> Result<Option<NeatFlowOperations>, NeatError> {
    let ops: *const NeatFlowOperations = ops.cast();
    if ops.is_null() {
        return Err(NEAT_ERROR_BAD_ARGUMENT);
    }
    // No reference to the flow is made here: only its field's address.
    // SAFETY: `flow` is a live flow (module docs).
    let own: *const NeatFlowOperations = unsafe { std::ptr::addr_of!((*flow).ops) };
    if ops == own {
        return Ok(None);
    }
    // SAFETY: a whole `struct neat_flow_operations` of the program's (the C API's
    // contract), distinct from the flow; read once, by value.
    Ok(Some(unsafe { ops.read() }))
}

/// A C string (invalid UTF-8 replaced). Borrowed, not copied, when it is valid UTF-8,
/// which is checked first with the standard library's fast validation (the lossy
/// conversion's own scan costs several times as much per byte).
pub(crate) fn text<'a>(p: *const c_char) -> Result<Cow<'a, str>, NeatError> {
    if p.is_null() {
        return Err(NEAT_ERROR_BAD_ARGUMENT);
    }
    // SAFETY: a NUL-terminated string by the C API's contract, alive for the call.
    let c = unsafe { CStr::from_ptr(p) };
    Ok(match c.to_str() {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => c.to_string_lossy(),
    })
}

/// `len` bytes at `p` (NULL only with 0).
pub(crate) fn bytes<'a>(p: *const u8, len: u32) -> Result<&'a [u8], NeatError> {
    match (p.is_null(), len) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(NEAT_ERROR_BAD_ARGUMENT),
        // SAFETY: the caller's buffer holds `len` bytes (the C API's contract).
        (false, n) => Ok(unsafe { std::slice::from_raw_parts(p, n as usize) }),
    }
}

/// Room for `len` bytes at `p`.
pub(crate) fn bytes_mut<'a>(p: *mut u8, len: u32) -> Result<&'a mut [u8], NeatError> {
    match (p.is_null(), len) {
        (true, _) => Err(NEAT_ERROR_BAD_ARGUMENT),
        (false, 0) => Ok(&mut []),
        // SAFETY: the caller's buffer has room for `len` bytes (the C API's contract)
        // and nothing else refers to it during the call.
        (false, n) => Ok(unsafe { std::slice::from_raw_parts_mut(p, n as usize) }),
    }
}

/// An out-parameter.
pub(crate) fn out<'a, T>(p: *mut T) -> Result<&'a mut T, NeatError> {
    if p.is_null() {
        return Err(NEAT_ERROR_BAD_ARGUMENT);
    }
    // SAFETY: a writable, initialised `T` by the C API's contract (NEAT's out-parameters
    // are plain integers, pointers and the operations struct).
    Ok(unsafe { &mut *p })
}

/// The optional-argument array (`NEAT_OPTARGS`): empty when NULL or 0.
pub(crate) fn tlvs<'a>(p: *mut c_void, count: c_uint) -> &'a mut [NeatTlv] {
    if p.is_null() || count == 0 {
        return &mut [];
    }
    // SAFETY: an array of `count` TLVs by the C API's contract. Only `tag` is read before
    // a value is written (msbench leaves `type` uninitialised).
    unsafe { std::slice::from_raw_parts_mut(p.cast::<NeatTlv>(), count as usize) }
}
