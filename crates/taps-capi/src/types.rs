//! The C types of `neat.h`, laid out as C lays them out (checked by the tests below and
//! by `tests/c/layout.c`).

use std::ffi::{c_char, c_int, c_void};

/// `neat_error_code`.
pub(crate) type NeatError = u64;

pub(crate) const NEAT_OK: NeatError = 0;
pub(crate) const NEAT_ERROR_WOULD_BLOCK: NeatError = 1;
pub(crate) const NEAT_ERROR_BAD_ARGUMENT: NeatError = 2;
pub(crate) const NEAT_ERROR_IO: NeatError = 3;
pub(crate) const NEAT_ERROR_DNS: NeatError = 4;
pub(crate) const NEAT_ERROR_INTERNAL: NeatError = 5;
pub(crate) const NEAT_ERROR_UNABLE: NeatError = 7;
pub(crate) const NEAT_ERROR_MESSAGE_TOO_BIG: NeatError = 8;
pub(crate) const NEAT_ERROR_OUT_OF_MEMORY: NeatError = 10;

pub(crate) const NEAT_LOG_ERROR: u8 = 1;
pub(crate) const NEAT_LOG_WARNING: u8 = 2;
pub(crate) const NEAT_LOG_INFO: u8 = 3;
pub(crate) const NEAT_LOG_DEBUG: u8 = 4;

pub(crate) const NEAT_CERT_NONE: c_int = 0;
pub(crate) const NEAT_CERT_PEM: c_int = 1;
pub(crate) const NEAT_KEY_PEM: c_int = 2;
pub(crate) const NEAT_CERT_KEY_PEM: c_int = 3;

pub(crate) const NEAT_TAG_STREAM_ID: c_int = 0;
pub(crate) const NEAT_TAG_TRANSPORT_STACK: c_int = 16;

pub(crate) const NEAT_STACK_UDP: c_int = 1;
pub(crate) const NEAT_STACK_UDPLITE: c_int = 2;
pub(crate) const NEAT_STACK_TCP: c_int = 3;
pub(crate) const NEAT_STACK_MPTCP: c_int = 4;
pub(crate) const NEAT_STACK_SCTP: c_int = 5;

/// `neat_flow_operations_fx`.
pub(crate) type OpsFx = Option<unsafe extern "C" fn(*mut NeatFlowOperations) -> NeatError>;

/// `struct neat_flow_operations`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct NeatFlowOperations {
    pub(crate) preconnection_id: u32,
    pub(crate) rendezvous_id: u32,
    pub(crate) connection_id: u32,
    pub(crate) parent_id: u32,
    pub(crate) clone_id: u32,
    pub(crate) user_data: *mut c_void,
    pub(crate) status: NeatError,
    pub(crate) stream_id: u16,
    pub(crate) transport_protocol: c_int,
    pub(crate) on_connected: OpsFx,
    pub(crate) on_error: OpsFx,
    pub(crate) on_readable: OpsFx,
    pub(crate) on_writable: OpsFx,
    pub(crate) on_all_written: OpsFx,
    pub(crate) on_network_status_changed: OpsFx,
    pub(crate) on_aborted: OpsFx,
    pub(crate) on_timeout: OpsFx,
    pub(crate) on_close: OpsFx,
    pub(crate) on_parameters: OpsFx,
    pub(crate) on_send_failure:
        Option<unsafe extern "C" fn(*mut NeatFlowOperations, c_int, *const u8)>,
    pub(crate) on_slowdown: Option<unsafe extern "C" fn(*mut NeatFlowOperations, c_int, u32)>,
    pub(crate) on_rate_hint: Option<unsafe extern "C" fn(*mut NeatFlowOperations, u32)>,
    pub(crate) label: *mut c_char,
    pub(crate) ctx: *mut c_void,
    pub(crate) flow: *mut c_void,
}

impl NeatFlowOperations {
    /// All zero, as C programs `memset` it.
    pub(crate) const ZERO: NeatFlowOperations = NeatFlowOperations {
        preconnection_id: 0,
        rendezvous_id: 0,
        connection_id: 0,
        parent_id: 0,
        clone_id: 0,
        user_data: std::ptr::null_mut(),
        status: 0,
        stream_id: 0,
        transport_protocol: 0,
        on_connected: None,
        on_error: None,
        on_readable: None,
        on_writable: None,
        on_all_written: None,
        on_network_status_changed: None,
        on_aborted: None,
        on_timeout: None,
        on_close: None,
        on_parameters: None,
        on_send_failure: None,
        on_slowdown: None,
        on_rate_hint: None,
        label: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
        flow: std::ptr::null_mut(),
    };
}

/// The value of a `struct neat_tlv`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) union TlvValue {
    pub(crate) integer: c_int,
    pub(crate) string: *mut c_char,
    pub(crate) real: f32,
}

/// `struct neat_tlv`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct NeatTlv {
    pub(crate) tag: c_int,
    pub(crate) kind: c_int,
    pub(crate) value: TlvValue,
}

impl NeatTlv {
    /// The integer the program put in this argument (a tag whose value is an integer:
    /// `NEAT_TAG_STREAM_ID`, `NEAT_TAG_STREAM_COUNT`, ...).
    pub(crate) fn integer(&self) -> c_int {
        // SAFETY: every member of the union is plain bytes, and the integer is the
        // first 4 of its 8; for the tags this is asked for, NEAT's programs set it.
        unsafe { self.value.integer }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn flow_operations_layout_is_neats() {
        assert_eq!(size_of::<NeatFlowOperations>(), 176);
        assert_eq!(offset_of!(NeatFlowOperations, clone_id), 16);
        assert_eq!(offset_of!(NeatFlowOperations, user_data), 24);
        assert_eq!(offset_of!(NeatFlowOperations, status), 32);
        assert_eq!(offset_of!(NeatFlowOperations, stream_id), 40);
        assert_eq!(offset_of!(NeatFlowOperations, transport_protocol), 44);
        assert_eq!(offset_of!(NeatFlowOperations, on_connected), 48);
        assert_eq!(offset_of!(NeatFlowOperations, on_error), 56);
        assert_eq!(offset_of!(NeatFlowOperations, on_readable), 64);
        assert_eq!(offset_of!(NeatFlowOperations, on_writable), 72);
        assert_eq!(offset_of!(NeatFlowOperations, on_all_written), 80);
        assert_eq!(offset_of!(NeatFlowOperations, on_close), 112);
        assert_eq!(offset_of!(NeatFlowOperations, on_parameters), 120);
        assert_eq!(offset_of!(NeatFlowOperations, on_send_failure), 128);
        assert_eq!(offset_of!(NeatFlowOperations, on_rate_hint), 144);
        assert_eq!(offset_of!(NeatFlowOperations, label), 152);
        assert_eq!(offset_of!(NeatFlowOperations, ctx), 160);
        assert_eq!(offset_of!(NeatFlowOperations, flow), 168);
    }

    #[test]
    fn tlv_layout_is_neats() {
        assert_eq!(size_of::<NeatTlv>(), 16);
        assert_eq!(offset_of!(NeatTlv, tag), 0);
        assert_eq!(offset_of!(NeatTlv, kind), 4);
        assert_eq!(offset_of!(NeatTlv, value), 8);
    }
}
