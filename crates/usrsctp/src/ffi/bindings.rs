//! Hand-written declarations for the subset of `/usr/include/usrsctp.h` (libusrsctp 0.9.5,
//! Linux layout) that this crate uses. Every struct is `#[repr(C)]` and mirrors the header;
//! the layout tests at the bottom pin the sizes and offsets checked against the header.
#![allow(non_camel_case_types, dead_code)]

use std::sync::OnceLock;

use libc::{c_char, c_int, c_void, size_t, sockaddr, socklen_t, ssize_t};

/// `typedef uint32_t sctp_assoc_t;`
pub(crate) type sctp_assoc_t = u32;

/// Opaque `struct socket` of usrsctp.
#[repr(C)]
pub(super) struct socket {
    _private: [u8; 0],
}

/// `#define AF_CONN 123`
pub(crate) const AF_CONN: c_int = 123;
/// `IPPROTO_SCTP` (132).
pub(crate) const IPPROTO_SCTP: c_int = 132;
/// `SOCK_STREAM` (one-to-one style).
pub(crate) const SOCK_STREAM: c_int = libc::SOCK_STREAM;
/// `MSG_NOTIFICATION` as defined by usrsctp.h (kept in sync with user_socketvar.h).
pub(crate) const MSG_NOTIFICATION: c_int = 0x2000;
/// Linux `MSG_EOR`, which usrsctp uses on Linux (the header only redefines it on Windows).
pub(crate) const MSG_EOR: c_int = libc::MSG_EOR;

pub(crate) const SCTP_FUTURE_ASSOC: sctp_assoc_t = 0;

/// `struct sockaddr_conn` (non-BSD variant: no length byte).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct sockaddr_conn {
    pub(crate) sconn_family: u16,
    /// Network byte order, like `sin_port`.
    pub(crate) sconn_port: u16,
    pub(crate) sconn_addr: *mut c_void,
}

/// `struct sctp_paddrparams`
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct sctp_paddrparams {
    pub(crate) spp_address: libc::sockaddr_storage,
    pub(crate) spp_assoc_id: sctp_assoc_t,
    pub(crate) spp_hbinterval: u32,
    pub(crate) spp_pathmtu: u32,
    pub(crate) spp_flags: u32,
    pub(crate) spp_ipv6_flowlabel: u32,
    pub(crate) spp_pathmaxrxt: u16,
    pub(crate) spp_dscp: u8,
}
/// `struct sctp_rtoinfo` (milliseconds; 0 leaves a value unchanged)
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct sctp_rtoinfo {
    pub(crate) srto_assoc_id: sctp_assoc_t,
    pub(crate) srto_initial: u32,
    pub(crate) srto_max: u32,
    pub(crate) srto_min: u32,
}
/// `#define SCTP_RTOINFO 0x00000001`
pub(crate) const SCTP_RTOINFO: c_int = 0x01;

/// `struct sctp_assocparams` (0 leaves a value unchanged)
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct sctp_assocparams {
    pub(crate) sasoc_assoc_id: sctp_assoc_t,
    pub(crate) sasoc_peer_rwnd: u32,
    pub(crate) sasoc_local_rwnd: u32,
    pub(crate) sasoc_cookie_life: u32,
    pub(crate) sasoc_asocmaxrxt: u16,
    pub(crate) sasoc_number_peer_destinations: u16,
}
/// `#define SCTP_ASSOCINFO 0x00000002`
pub(crate) const SCTP_ASSOCINFO: c_int = 0x02;

/// `#define SCTP_PEER_ADDR_PARAMS 0x0000000a`
pub(crate) const SCTP_PEER_ADDR_PARAMS: c_int = 0x0a;
/// `#define SPP_HB_DEMAND 0x00000004`
pub(crate) const SPP_HB_DEMAND: u32 = 0x04;
/// `#define SPP_HB_ENABLE 0x00000001`
pub(crate) const SPP_HB_ENABLE: u32 = 0x01;

/// `struct sctp_rcvinfo`
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct sctp_rcvinfo {
    pub(crate) rcv_sid: u16,
    pub(crate) rcv_ssn: u16,
    pub(crate) rcv_flags: u16,
    pub(crate) rcv_ppid: u32,
    pub(crate) rcv_tsn: u32,
    pub(crate) rcv_cumtsn: u32,
    pub(crate) rcv_context: u32,
    pub(crate) rcv_assoc_id: sctp_assoc_t,
}

/// `struct sctp_sndinfo`
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct sctp_sndinfo {
    pub(crate) snd_sid: u16,
    pub(crate) snd_flags: u16,
    pub(crate) snd_ppid: u32,
    pub(crate) snd_context: u32,
    pub(crate) snd_assoc_id: sctp_assoc_t,
}

/// `struct sctp_initmsg`
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct sctp_initmsg {
    pub(crate) sinit_num_ostreams: u16,
    pub(crate) sinit_max_instreams: u16,
    pub(crate) sinit_max_attempts: u16,
    pub(crate) sinit_max_init_timeo: u16,
}

/// `struct sctp_assoc_value`
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct sctp_assoc_value {
    pub(crate) assoc_id: sctp_assoc_t,
    pub(crate) assoc_value: u32,
}

/// `struct sctp_stream_value`
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct sctp_stream_value {
    pub(crate) assoc_id: sctp_assoc_t,
    pub(crate) stream_id: u16,
    pub(crate) stream_value: u16,
}

/// `struct sctp_event`
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct sctp_event {
    pub(crate) se_assoc_id: sctp_assoc_t,
    pub(crate) se_type: u16,
    pub(crate) se_on: u8,
}

/// `struct sctp_paddrinfo`
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct sctp_paddrinfo {
    pub(crate) spinfo_address: libc::sockaddr_storage,
    pub(crate) spinfo_assoc_id: sctp_assoc_t,
    pub(crate) spinfo_state: i32,
    pub(crate) spinfo_cwnd: u32,
    pub(crate) spinfo_srtt: u32,
    pub(crate) spinfo_rto: u32,
    pub(crate) spinfo_mtu: u32,
}

/// `struct sctp_status`
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct sctp_status {
    pub(crate) sstat_assoc_id: sctp_assoc_t,
    pub(crate) sstat_state: i32,
    pub(crate) sstat_rwnd: u32,
    pub(crate) sstat_unackdata: u16,
    pub(crate) sstat_penddata: u16,
    pub(crate) sstat_instrms: u16,
    pub(crate) sstat_outstrms: u16,
    pub(crate) sstat_fragmentation_point: u32,
    pub(crate) sstat_primary: sctp_paddrinfo,
}

/// `struct sctp_sockstat` of usrsctp's internal `netinet/sctp.h` (option
/// `SCTP_GET_SNDBUF_USE`, not in the public header): probed at run time.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct sctp_sockstat {
    pub(crate) ss_assoc_id: sctp_assoc_t,
    pub(crate) ss_total_sndbuf: u32,
    pub(crate) ss_total_recv_buf: u32,
}

// Socket option names (level IPPROTO_SCTP).
pub(crate) const SCTP_INITMSG: c_int = 0x0000_0003;
pub(crate) const SCTP_NODELAY: c_int = 0x0000_0004;
pub(crate) const SCTP_EXPLICIT_EOR: c_int = 0x0000_001b;
pub(crate) const SCTP_EVENT: c_int = 0x0000_001e;
pub(crate) const SCTP_RECVRCVINFO: c_int = 0x0000_001f;
pub(crate) const SCTP_ENABLE_STREAM_RESET: c_int = 0x0000_0900;
pub(crate) const SCTP_PLUGGABLE_SS: c_int = 0x0000_1203;
pub(crate) const SCTP_SS_VALUE: c_int = 0x0000_1204;
pub(crate) const SCTP_PLUGGABLE_CC: c_int = 0x0000_1202;
pub(crate) const SCTP_STATUS: c_int = 0x0000_0100;
/// Internal (netinet/sctp.h), see [`sctp_sockstat`].
pub(crate) const SCTP_GET_SNDBUF_USE: c_int = 0x0000_1101;

// Association states (`sstat_state` of SCTP_STATUS).
pub(crate) const SCTP_CLOSED: i32 = 0x0000;
pub(crate) const SCTP_COOKIE_WAIT: i32 = 0x0002;
pub(crate) const SCTP_COOKIE_ECHOED: i32 = 0x0004;

// Notification types.
pub(crate) const SCTP_ASSOC_CHANGE: u16 = 0x0001;
pub(crate) const SCTP_SHUTDOWN_EVENT: u16 = 0x0005;
pub(crate) const SCTP_STREAM_RESET_EVENT: u16 = 0x0009;
pub(crate) const SCTP_SENDER_DRY_EVENT: u16 = 0x000a;

// sac_state values.
pub(crate) const SCTP_COMM_UP: u16 = 0x0001;
pub(crate) const SCTP_COMM_LOST: u16 = 0x0002;
pub(crate) const SCTP_RESTART: u16 = 0x0003;
pub(crate) const SCTP_SHUTDOWN_COMP: u16 = 0x0004;
pub(crate) const SCTP_CANT_STR_ASSOC: u16 = 0x0005;

pub(crate) const SCTP_STREAM_RESET_INCOMING_SSN: u16 = 0x0001;

// snd_flags.
pub(crate) const SCTP_UNORDERED: u16 = 0x0400;
pub(crate) const SCTP_EOR: u16 = 0x2000;

pub(crate) const SCTP_SENDV_SNDINFO: u32 = 1;
pub(crate) const SCTP_RECVV_RCVINFO: u32 = 1;

// Stream schedulers.
pub(crate) const SCTP_SS_DEFAULT: u32 = 0;
pub(crate) const SCTP_SS_ROUND_ROBIN: u32 = 1;
pub(crate) const SCTP_SS_ROUND_ROBIN_PACKET: u32 = 2;
pub(crate) const SCTP_SS_PRIORITY: u32 = 3;
pub(crate) const SCTP_SS_FAIR_BANDWITH: u32 = 4;
pub(crate) const SCTP_SS_FIRST_COME: u32 = 5;

/// Congestion control modules (`SCTP_CC_*`, option `SCTP_PLUGGABLE_CC`).
pub(crate) const SCTP_CC_RFC2581: u32 = 0;
pub(crate) const SCTP_CC_HSTCP: u32 = 1;
pub(crate) const SCTP_CC_HTCP: u32 = 2;
pub(crate) const SCTP_CC_RTCC: u32 = 3;

/// Chunk type of INIT ACK.
pub(crate) const SCTP_INITIATION_ACK: u8 = 0x02;

/// `int (*conn_output)(void *addr, void *buffer, size_t length, uint8_t tos, uint8_t set_df)`
pub(super) type ConnOutput = unsafe extern "C" fn(
    addr: *mut c_void,
    buf: *mut c_void,
    len: size_t,
    tos: u8,
    set_df: u8,
) -> c_int;
/// `void (*debug_printf)(const char *format, ...)`
pub(super) type DebugPrintf = unsafe extern "C" fn(format: *const c_char, ...);
/// `void (*upcall)(struct socket *, void *, int)`
pub(super) type Upcall = unsafe extern "C" fn(so: *mut socket, arg: *mut c_void, flags: c_int);
/// `receive_cb` of `usrsctp_socket` (unused: always passed as NULL).
pub(super) type ReceiveCb = unsafe extern "C" fn(
    so: *mut socket,
    addr: [u8; 128],
    data: *mut c_void,
    datalen: size_t,
    rcv: sctp_rcvinfo,
    flags: c_int,
    ulp: *mut c_void,
) -> c_int;
/// `send_cb` of `usrsctp_socket` (unused: always passed as NULL).
pub(super) type SendCb =
    unsafe extern "C" fn(so: *mut socket, sb_free: u32, ulp: *mut c_void) -> c_int;

/// What an entry point returns when the library is not loaded: what a failed call returns
/// (-1, a null socket, 0), so a call can never reach a missing function. Unreachable in
/// practice (every call needs a [`super::Usrsctp`], which exists only once the library is
/// loaded); it keeps the wrappers total without a panic path.
pub(super) trait NotLoaded {
    /// The failure value.
    fn not_loaded() -> Self;
}
impl NotLoaded for () {
    fn not_loaded() {}
}
impl NotLoaded for c_int {
    fn not_loaded() -> c_int {
        -1
    }
}
impl NotLoaded for ssize_t {
    fn not_loaded() -> ssize_t {
        -1
    }
}
impl NotLoaded for u32 {
    fn not_loaded() -> u32 {
        0
    }
}
impl NotLoaded for *mut socket {
    fn not_loaded() -> *mut socket {
        std::ptr::null_mut()
    }
}

/// libusrsctp once loaded (by `library::load`, once per process), or why it could not be.
pub(super) static LOADED: OnceLock<Result<Loaded, String>> = OnceLock::new();

/// The loaded library.
pub(super) struct Loaded {
    /// Its entry points.
    pub(super) api: Api,
    /// Its `dlopen` handle (never closed), as an integer so that it can be shared.
    pub(super) handle: usize,
}

/// The entry points, if the library is loaded (one atomic load).
pub(super) fn api() -> Option<&'static Api> {
    Some(&LOADED.get()?.as_ref().ok()?.api)
}

/// The library's `dlopen` handle, if it is loaded.
pub(super) fn handle() -> Option<*mut c_void> {
    Some(LOADED.get()?.as_ref().ok()?.handle as *mut c_void)
}

/// Declares the library's entry points: a table of function pointers filled by
/// [`Api::lookup`] from the loaded library, and for each entry point an `unsafe fn` of the
/// same name and signature that calls through the table (one load of a pointer more than a
/// direct call).
macro_rules! usrsctp_api {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;)*) => {
        /// libusrsctp's entry points, looked up once when it is loaded.
        pub(super) struct Api {
            $($name: unsafe extern "C" fn($($ty),*) $(-> $ret)?,)*
        }

        impl Api {
            /// Looks every entry point up in `handle` (from `dlopen`); the error names the
            /// first one missing.
            ///
            /// # Safety
            /// `handle` is a live handle of a library that has these functions with these
            /// signatures (libusrsctp 0.9.5's `usrsctp.h`).
            pub(super) unsafe fn lookup(handle: *mut c_void) -> Result<Api, &'static str> {
                Ok(Api {
                    $($name: {
                        let name = concat!(stringify!($name), "\0");
                        // SAFETY: `handle` is live (the caller's contract); the name is a
                        // NUL-terminated string.
                        let f = unsafe { libc::dlsym(handle, name.as_ptr().cast()) };
                        if f.is_null() {
                            return Err(stringify!($name));
                        }
                        // SAFETY: the symbol is the function of that name, whose C signature
                        // is the one declared here (the caller's contract).
                        unsafe {
                            std::mem::transmute::<
                                *mut c_void,
                                unsafe extern "C" fn($($ty),*) $(-> $ret)?,
                            >(f)
                        }
                    },)*
                })
            }
        }

        $(
            /// Calls libusrsctp's function of the same name (see `usrsctp.h`); returns the
            /// failure value of [`NotLoaded`] if the library is not loaded.
            ///
            /// # Safety
            /// As for the C function.
            #[allow(clippy::too_many_arguments)] // the C function's
            pub(super) unsafe fn $name($($arg: $ty),*) $(-> $ret)? {
                match api() {
                    // SAFETY: the pointer is the library's function of this signature
                    // (`Api::lookup`); the caller upholds the C function's contract.
                    Some(api) => unsafe { (api.$name)($($arg),*) },
                    None => NotLoaded::not_loaded(),
                }
            }
        )*
    };
}

usrsctp_api! {
    fn usrsctp_init_nothreads(
        port: u16,
        conn_output: Option<ConnOutput>,
        debug_printf: Option<DebugPrintf>,
    );
    fn usrsctp_socket(
        domain: c_int,
        type_: c_int,
        protocol: c_int,
        receive_cb: Option<ReceiveCb>,
        send_cb: Option<SendCb>,
        sb_threshold: u32,
        ulp_info: *mut c_void,
    ) -> *mut socket;
    fn usrsctp_setsockopt(
        so: *mut socket,
        level: c_int,
        option_name: c_int,
        option_value: *const c_void,
        option_len: socklen_t,
    ) -> c_int;
    fn usrsctp_getsockopt(
        so: *mut socket,
        level: c_int,
        option_name: c_int,
        option_value: *mut c_void,
        option_len: *mut socklen_t,
    ) -> c_int;
    fn usrsctp_sendv(
        so: *mut socket,
        data: *const c_void,
        len: size_t,
        to: *mut sockaddr,
        addrcnt: c_int,
        info: *mut c_void,
        infolen: socklen_t,
        infotype: u32,
        flags: c_int,
    ) -> ssize_t;
    fn usrsctp_recvv(
        so: *mut socket,
        dbuf: *mut c_void,
        len: size_t,
        from: *mut sockaddr,
        fromlen: *mut socklen_t,
        info: *mut c_void,
        infolen: *mut socklen_t,
        infotype: *mut u32,
        msg_flags: *mut c_int,
    ) -> ssize_t;
    fn usrsctp_getpaddrs(so: *mut socket, id: sctp_assoc_t, raddrs: *mut *mut sockaddr) -> c_int;
    fn usrsctp_freepaddrs(addrs: *mut sockaddr);
    fn usrsctp_getladdrs(so: *mut socket, id: sctp_assoc_t, raddrs: *mut *mut sockaddr) -> c_int;
    fn usrsctp_freeladdrs(addrs: *mut sockaddr);
    fn usrsctp_bind(so: *mut socket, name: *mut sockaddr, namelen: socklen_t) -> c_int;
    fn usrsctp_bindx(so: *mut socket, addrs: *mut sockaddr, addrcnt: c_int, flags: c_int) -> c_int;
    fn usrsctp_listen(so: *mut socket, backlog: c_int) -> c_int;
    fn usrsctp_accept(so: *mut socket, aname: *mut sockaddr, anamelen: *mut socklen_t) -> *mut socket;
    fn usrsctp_connect(so: *mut socket, name: *mut sockaddr, namelen: socklen_t) -> c_int;
    fn usrsctp_close(so: *mut socket);
    fn usrsctp_shutdown(so: *mut socket, how: c_int) -> c_int;
    fn usrsctp_conninput(addr: *mut c_void, buffer: *const c_void, length: size_t, ecn_bits: u8);
    fn usrsctp_set_non_blocking(so: *mut socket, onoff: c_int) -> c_int;
    fn usrsctp_register_address(addr: *mut c_void);
    fn usrsctp_deregister_address(addr: *mut c_void);
    fn usrsctp_set_upcall(so: *mut socket, upcall: Option<Upcall>, arg: *mut c_void) -> c_int;
    fn usrsctp_handle_timers(elapsed_milliseconds: u32);

    fn usrsctp_sysctl_set_sctp_sendspace(value: u32) -> c_int;
    fn usrsctp_sysctl_get_sctp_sendspace() -> u32;
    fn usrsctp_sysctl_set_sctp_recvspace(value: u32) -> c_int;
    fn usrsctp_sysctl_get_sctp_recvspace() -> u32;
    fn usrsctp_sysctl_set_sctp_rto_min_default(value: u32) -> c_int;
    fn usrsctp_sysctl_set_sctp_rto_initial_default(value: u32) -> c_int;
    fn usrsctp_sysctl_set_sctp_default_cc_module(value: u32) -> c_int;
    fn usrsctp_sysctl_set_sctp_initial_cwnd(value: u32) -> c_int;
    fn usrsctp_sysctl_set_sctp_max_burst_default(value: u32) -> c_int;
    fn usrsctp_sysctl_set_sctp_fr_max_burst_default(value: u32) -> c_int;
    fn usrsctp_sysctl_set_sctp_use_cwnd_based_maxburst(value: u32) -> c_int;
    fn usrsctp_sysctl_set_sctp_delayed_sack_time_default(value: u32) -> c_int;
    fn usrsctp_sysctl_set_sctp_sack_freq_default(value: u32) -> c_int;
    fn usrsctp_sysctl_set_sctp_cmt_on_off(value: u32) -> c_int;
    fn usrsctp_sysctl_set_sctp_cmt_use_dac(value: u32) -> c_int;
    fn usrsctp_sysctl_set_sctp_buffer_splitting(value: u32) -> c_int;
    fn usrsctp_sysctl_get_sctp_cmt_on_off() -> u32;
    fn usrsctp_sysctl_set_sctp_peer_chunk_oh(value: u32) -> c_int;
    fn usrsctp_sysctl_set_sctp_do_drain(value: u32) -> c_int;
    fn usrsctp_enable_crc32c_offload();
    fn usrsctp_sysctl_set_sctp_udp_tunneling_port(value: u32) -> c_int;
}

#[cfg(test)]
mod layout {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn structs_match_header() {
        assert_eq!(size_of::<sockaddr_conn>(), 16);
        assert_eq!(offset_of!(sockaddr_conn, sconn_addr), 8);
        assert_eq!(offset_of!(sctp_paddrparams, spp_assoc_id), 128);
        assert_eq!(offset_of!(sctp_paddrparams, spp_flags), 140);
        assert_eq!(offset_of!(sctp_paddrparams, spp_dscp), 150);
        assert_eq!(size_of::<sctp_paddrparams>(), 152);
        assert_eq!(size_of::<sctp_rcvinfo>(), 28);
        assert_eq!(offset_of!(sctp_rcvinfo, rcv_ppid), 8);
        assert_eq!(offset_of!(sctp_rcvinfo, rcv_assoc_id), 24);
        assert_eq!(size_of::<sctp_sndinfo>(), 16);
        assert_eq!(size_of::<sctp_initmsg>(), 8);
        assert_eq!(size_of::<sctp_rtoinfo>(), 16);
        assert_eq!(offset_of!(sctp_assocparams, sasoc_asocmaxrxt), 16);
        assert_eq!(size_of::<sctp_assocparams>(), 20);
        assert_eq!(size_of::<sctp_assoc_value>(), 8);
        assert_eq!(size_of::<sctp_stream_value>(), 8);
        assert_eq!(size_of::<sctp_event>(), 8);
        assert_eq!(size_of::<sctp_paddrinfo>(), 152);
        assert_eq!(offset_of!(sctp_status, sstat_primary), 24);
        assert_eq!(size_of::<sctp_status>(), 176);
    }
}
