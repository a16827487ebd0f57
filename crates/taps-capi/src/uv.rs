//! The few libuv functions the C API needs, declared by hand against the system
//! `libuv.so.1` (linked dynamically by build.rs; never a bundled copy, so the
//! application's own `uv_*` calls and ours act on the same loop).

use std::ffi::{c_int, c_void};

/// `uv_loop_t`, opaque: allocated with [`uv_loop_size`].
#[repr(C)]
pub(crate) struct UvLoop {
    _opaque: [u8; 0],
}

/// Any `uv_handle_t` subtype, opaque: allocated with [`uv_handle_size`].
pub(crate) type UvHandle = c_void;

/// `uv_run_mode`.
pub(crate) const UV_RUN_DEFAULT: c_int = 0;
pub(crate) const UV_RUN_NOWAIT: c_int = 2;
/// `uv_handle_type` values (from `UV_HANDLE_TYPE_MAP`).
pub(crate) const UV_ASYNC: c_int = 1;
pub(crate) const UV_IDLE: c_int = 6;

pub(crate) type HandleCb = unsafe extern "C" fn(*mut UvHandle);
pub(crate) type WalkCb = unsafe extern "C" fn(*mut UvHandle, *mut c_void);

#[link(name = "uv")]
extern "C" {
    pub(crate) fn uv_loop_size() -> usize;
    pub(crate) fn uv_loop_init(l: *mut UvLoop) -> c_int;
    pub(crate) fn uv_loop_close(l: *mut UvLoop) -> c_int;
    pub(crate) fn uv_run(l: *mut UvLoop, mode: c_int) -> c_int;
    pub(crate) fn uv_loop_alive(l: *const UvLoop) -> c_int;
    pub(crate) fn uv_ref(h: *mut UvHandle);
    pub(crate) fn uv_unref(h: *mut UvHandle);
    pub(crate) fn uv_stop(l: *mut UvLoop);
    pub(crate) fn uv_backend_fd(l: *const UvLoop) -> c_int;
    pub(crate) fn uv_backend_timeout(l: *const UvLoop) -> c_int;
    pub(crate) fn uv_handle_size(kind: c_int) -> usize;
    pub(crate) fn uv_async_init(l: *mut UvLoop, h: *mut UvHandle, cb: HandleCb) -> c_int;
    pub(crate) fn uv_async_send(h: *mut UvHandle) -> c_int;
    pub(crate) fn uv_idle_init(l: *mut UvLoop, h: *mut UvHandle) -> c_int;
    pub(crate) fn uv_idle_start(h: *mut UvHandle, cb: HandleCb) -> c_int;
    pub(crate) fn uv_idle_stop(h: *mut UvHandle) -> c_int;
    pub(crate) fn uv_close(h: *mut UvHandle, cb: Option<HandleCb>);
    pub(crate) fn uv_is_closing(h: *const UvHandle) -> c_int;
    pub(crate) fn uv_walk(l: *mut UvLoop, cb: WalkCb, arg: *mut c_void);
    pub(crate) fn uv_handle_set_data(h: *mut UvHandle, data: *mut c_void);
    pub(crate) fn uv_handle_get_data(h: *const UvHandle) -> *mut c_void;
}
