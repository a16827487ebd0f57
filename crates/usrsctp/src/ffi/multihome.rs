//! Multihoming calls into usrsctp: the shim that adds an AF_CONN peer path (`c/multihome.c`,
//! compiled only with the cfg `usrsctp_multihome`, see build.rs) guarded by a run-time check
//! that the loaded library is the one the shim was compiled for, the peer-address socket
//! options (paths, primary, per-path parameters and thresholds), a send with a destination
//! path (`SCTP_ADDR_OVER`) and the process-wide CMT sysctls.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use libc::c_int;

use super::bindings as raw;
use super::library::{hooks, serial};
use super::socket::{Plain, Socket};
use crate::error::{Error, Result};

/// `#define SCTP_PRIMARY_ADDR 0x00000007`
pub(crate) const SCTP_PRIMARY_ADDR: c_int = 0x07;
/// `#define SCTP_GET_PEER_ADDR_INFO 0x00000101`
pub(crate) const SCTP_GET_PEER_ADDR_INFO: c_int = 0x0101;
/// `#define SCTP_PEER_ADDR_THLDS 0x00000023` (internal netinet/sctp.h).
pub(crate) const SCTP_PEER_ADDR_THLDS: c_int = 0x23;
/// `#define SCTP_NRSACK_SUPPORTED 0x00000030`
pub(crate) const SCTP_NRSACK_SUPPORTED: c_int = 0x30;
/// `#define SCTP_CMT_ON_OFF 0x00001200` (internal netinet/sctp.h).
pub(crate) const SCTP_CMT_ON_OFF: c_int = 0x1200;
/// `#define SPP_PMTUD_DISABLE 0x00000010`
pub(crate) const SPP_PMTUD_DISABLE: u32 = 0x10;
/// Notification type `SCTP_PEER_ADDR_CHANGE`.
pub(crate) const SCTP_PEER_ADDR_CHANGE: u16 = 0x0002;
/// `snd_flags`: send to the given address, not the primary.
pub(crate) const SCTP_ADDR_OVER: u16 = 0x0800;
/// `spinfo_state` values.
pub(crate) const SCTP_ACTIVE: i32 = 0x0001;
/// See [`SCTP_ACTIVE`].
pub(crate) const SCTP_INACTIVE: i32 = 0x0002;
/// See [`SCTP_ACTIVE`].
pub(crate) const SCTP_UNCONFIRMED: i32 = 0x0200;

/// `struct sctp_setprim`
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct sctp_setprim {
    pub(crate) ssp_addr: libc::sockaddr_storage,
    pub(crate) ssp_assoc_id: raw::sctp_assoc_t,
    pub(crate) ssp_padding: [u8; 4],
}

/// `struct sctp_paddrthlds` (internal netinet/sctp_uio.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct sctp_paddrthlds {
    pub(crate) spt_address: libc::sockaddr_storage,
    pub(crate) spt_assoc_id: raw::sctp_assoc_t,
    pub(crate) spt_pathmaxrxt: u16,
    pub(crate) spt_pathpfthld: u16,
    pub(crate) spt_pathcpthld: u16,
}

// SAFETY: integers and a `sockaddr_storage`.
unsafe impl Plain for sctp_setprim {}
// SAFETY: integers and a `sockaddr_storage`.
unsafe impl Plain for sctp_paddrthlds {}
// SAFETY: integers and a `sockaddr_storage`.
unsafe impl Plain for raw::sctp_paddrinfo {}

/// Sets the sysctl `sctp_peer_chunk_oh`: bytes charged against the peer's receive window
/// per chunk in flight (usrsctp's default 256). Process-wide; one call under the usrsctp
/// lock. Fails if usrsctp is not initialised yet.
pub(crate) fn set_peer_chunk_oh(value: u32) -> Result<()> {
    set_global_sysctl("usrsctp_sysctl_set_sctp_peer_chunk_oh", value, |v| {
        // SAFETY: a plain setter of a global tunable (range-checked by usrsctp), valid
        // after init; called under the usrsctp lock.
        unsafe { raw::usrsctp_sysctl_set_sctp_peer_chunk_oh(v) }
    })
}

/// Sets the sysctl `sctp_do_drain` (1: the receiver may renege on undelivered data, so
/// it NR-acks only what it delivered; 0: every chunk is non-renegable on arrival).
/// Process-wide; one call under the usrsctp lock. Fails if usrsctp is not initialised.
pub(crate) fn set_do_drain(value: u32) -> Result<()> {
    set_global_sysctl("usrsctp_sysctl_set_sctp_do_drain", value, |v| {
        // SAFETY: as for `set_peer_chunk_oh`.
        unsafe { raw::usrsctp_sysctl_set_sctp_do_drain(v) }
    })
}

/// Calls `set` (a usrsctp sysctl setter, named `op` in errors) with `value` under the
/// usrsctp lock, once usrsctp is initialised.
fn set_global_sysctl(op: &'static str, value: u32, set: impl FnOnce(u32) -> c_int) -> Result<()> {
    if hooks().is_none() {
        return Err(Error::MultihomeUnavailable(
            "usrsctp is not initialised yet (call SctpStack::global first)".into(),
        ));
    }
    if serial(|| set(value)) != 0 {
        return Err(Error::Sys {
            op,
            source: std::sync::Arc::new(std::io::Error::from_raw_os_error(libc::EINVAL)),
        });
    }
    Ok(())
}

/// Whether the process-wide sysctl `sctp_cmt_on_off` is on (false before usrsctp is
/// initialised). One call under the usrsctp lock.
pub(crate) fn cmt_sysctl_on() -> bool {
    if hooks().is_none() {
        return false;
    }
    // SAFETY: a plain getter of a global tunable, valid after init; under the usrsctp lock.
    serial(|| unsafe { raw::usrsctp_sysctl_get_sctp_cmt_on_off() }) != 0
}

#[cfg(usrsctp_multihome)]
extern "C" {
    /// c/multihome.c: looks up the library's internal functions the shim calls in `handle`;
    /// 0, or -1 when one is missing.
    fn taps_mh_bind(handle: *mut c_void) -> c_int;
    /// c/multihome.c: adds AF_CONN peer `conn` to the association of `so`; 0 or an errno.
    fn taps_mh_add_peer(so: *mut raw::socket, conn: *mut c_void) -> c_int;
    /// c/multihome.c: the loaded libusrsctp's GNU build id; its length or -1.
    fn taps_mh_loaded_build_id(out: *mut u8, cap: usize) -> c_int;
    /// c/multihome.c: bytes of stream `sid` not yet sent (stream queue + send queue), or
    /// -errno.
    fn taps_mh_stream_queued(so: *mut raw::socket, sid: libc::c_uint) -> libc::c_long;
}

/// The usrsctp version the crate was built against (dpkg's version of libusrsctp-dev).
pub(crate) const BUILT_VERSION: &str = env!("TAPS_MH_VERSION");

/// Why the shim was not compiled (empty when it was), from build.rs.
const UNAVAILABLE: &str = env!("TAPS_MH_UNAVAILABLE");

#[cfg_attr(usrsctp_multihome, allow(dead_code))]
/// The error text when the shim is not compiled in: `reason` from build.rs, or the standard
/// sentence naming `version` when build.rs gave none.
pub(crate) fn unavailable_message(reason: &str, version: &str) -> String {
    if reason.is_empty() {
        format!(
            "SCTP multihoming needs usrsctp's source headers for version {version}; \
             run scripts/deps.sh"
        )
    } else {
        reason.to_string()
    }
}

/// Whether the multihoming shim may be called: compiled in, usrsctp initialised, and the
/// loaded library has the build id the shim was compiled against (checked once per process,
/// then one atomic load). The error says what is missing.
pub(crate) fn multihome_ready() -> Result<()> {
    static READY: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    READY
        .get_or_init(check_library)
        .clone()
        .map_err(Error::MultihomeUnavailable)
}

/// Why the shim cannot be used, for builds without it.
#[cfg(not(usrsctp_multihome))]
pub(crate) fn unavailable_reason() -> String {
    unavailable_message(UNAVAILABLE, BUILT_VERSION)
}

#[cfg(not(usrsctp_multihome))]
fn check_library() -> std::result::Result<(), String> {
    Err(unavailable_message(UNAVAILABLE, BUILT_VERSION))
}

#[cfg(usrsctp_multihome)]
fn check_library() -> std::result::Result<(), String> {
    let _ = UNAVAILABLE;
    let Some(handle) = raw::handle() else {
        return Err("usrsctp is not loaded yet (call SctpStack::global first)".into());
    };
    // SAFETY: `handle` is the live handle of the loaded libusrsctp (never closed); the shim
    // only looks symbols up in it and keeps the pointers. Called once (`multihome_ready`).
    if unsafe { taps_mh_bind(handle) } != 0 {
        return Err(format!(
            "SCTP multihoming disabled: the loaded libusrsctp lacks the internal functions \
             the shim was compiled for (usrsctp {BUILT_VERSION}); run scripts/deps.sh and \
             rebuild"
        ));
    }
    let want = env!("TAPS_MH_BUILD_ID");
    let mut id = [0u8; 64];
    // SAFETY: `id` is a writable buffer of the given size; the function only reads the
    // loaded objects' program headers (no usrsctp state).
    let n = unsafe { taps_mh_loaded_build_id(id.as_mut_ptr(), id.len()) };
    let have: String = usize::try_from(n)
        .ok()
        .map(|n| id[..n].iter().map(|b| format!("{b:02x}")).collect())
        .unwrap_or_default();
    if have == want {
        Ok(())
    } else {
        Err(format!(
            "SCTP multihoming disabled: the loaded libusrsctp (build id {have:?}) is not the \
             one the shim was compiled for (usrsctp {BUILT_VERSION}, build id {want}); \
             run scripts/deps.sh and rebuild"
        ))
    }
}

/// Feeds `pkt` to usrsctp as coming from conn `conn` if `attached` is set, deciding under the
/// usrsctp lock (see [`Socket::add_peer_path`]); returns whether it was fed. A packet from a
/// path usrsctp does not know would be answered with an ABORT, so it is never fed. A packet
/// whose CRC32c is wrong is not fed either (usrsctp's own check is off, see
/// [`super::library::crc32c_ok`]).
pub(crate) fn conninput_attached(attached: &AtomicBool, conn: usize, pkt: &[u8]) -> bool {
    if !super::library::crc32c_ok(pkt) {
        return false;
    }
    serial(|| {
        if !attached.load(Ordering::SeqCst) {
            return false;
        }
        // SAFETY: usrsctp is initialised (a path exists only after `sys::global`); `pkt` is
        // valid for `pkt.len()` bytes during the call (usrsctp copies it); the address is an
        // opaque integer. Under the usrsctp lock (`serial`).
        unsafe {
            raw::usrsctp_conninput(
                conn as *mut c_void,
                pkt.as_ptr() as *const c_void,
                pkt.len(),
                0,
            )
        };
        true
    })
}

/// An AF_CONN socket address for conn id `conn` (port 0: any), as a `sockaddr_storage`.
pub(crate) fn conn_storage(conn: usize) -> libc::sockaddr_storage {
    let mut ss = libc::sockaddr_storage::zeroed();
    let sc = raw::sockaddr_conn {
        sconn_family: raw::AF_CONN as u16,
        sconn_port: 0,
        sconn_addr: conn as *mut c_void,
    };
    // SAFETY: a sockaddr_storage is larger than and aligned for a sockaddr_conn (plain data).
    unsafe { *(&mut ss as *mut libc::sockaddr_storage as *mut raw::sockaddr_conn) = sc };
    ss
}

/// The conn id in an AF_CONN `sockaddr_storage` (None for another family).
pub(crate) fn storage_conn(ss: &libc::sockaddr_storage) -> Option<usize> {
    // SAFETY: a sockaddr_storage is larger than and aligned for a sockaddr_conn; plain data
    // read by copy.
    let sc = unsafe { *(ss as *const libc::sockaddr_storage as *const raw::sockaddr_conn) };
    (i32::from(sc.sconn_family) == raw::AF_CONN).then_some(sc.sconn_addr as usize)
}

impl Socket {
    /// Adds the AF_CONN peer address `conn` as a new path of this socket's established
    /// association (the shim) and sets `attached` in the same usrsctp critical section, so
    /// [`conninput_attached`] feeds this path's packets exactly from the moment usrsctp knows
    /// the path. One call into usrsctp that also sends a HEARTBEAT on the path.
    pub(crate) fn add_peer_path(&self, conn: usize, attached: &AtomicBool) -> Result<()> {
        multihome_ready()?;
        self.add_peer_path_checked(conn, attached)
    }

    #[cfg(usrsctp_multihome)]
    fn add_peer_path_checked(&self, conn: usize, attached: &AtomicBool) -> Result<()> {
        self.call(|so| {
            // SAFETY: `so` is live (read lock and usrsctp lock held by `call`); the shim was
            // compiled for the loaded library (checked by `multihome_ready`); `conn` is an
            // opaque integer usrsctp only stores and compares.
            let rc = unsafe { taps_mh_add_peer(so, conn as *mut c_void) };
            if rc == 0 {
                attached.store(true, Ordering::SeqCst);
                Ok(())
            } else {
                Err(Error::Sys {
                    op: "add_peer_path",
                    source: std::sync::Arc::new(std::io::Error::from_raw_os_error(rc)),
                })
            }
        })
    }

    /// Bytes of `stream` waiting in usrsctp's send buffer, not yet sent (the shim reads the
    /// stream queue and the send queue under the association's lock). One call into usrsctp.
    pub(crate) fn stream_unsent(&self, stream: u16) -> Result<usize> {
        multihome_ready()?;
        self.stream_unsent_checked(stream)
    }

    #[cfg(usrsctp_multihome)]
    fn stream_unsent_checked(&self, stream: u16) -> Result<usize> {
        self.call(|so| {
            // SAFETY: `so` is live (read lock and usrsctp lock held by `call`); the shim was
            // compiled for the loaded library (checked by `multihome_ready`); it only reads.
            let n = unsafe { taps_mh_stream_queued(so, libc::c_uint::from(stream)) };
            usize::try_from(n).map_err(|_| Error::Sys {
                op: "stream_unsent",
                source: std::sync::Arc::new(std::io::Error::from_raw_os_error(
                    i32::try_from(-n).unwrap_or(libc::EINVAL),
                )),
            })
        })
    }

    #[cfg(not(usrsctp_multihome))]
    fn stream_unsent_checked(&self, _stream: u16) -> Result<usize> {
        Err(Error::MultihomeUnavailable(check_library().unwrap_err()))
    }

    #[cfg(not(usrsctp_multihome))]
    fn add_peer_path_checked(&self, _conn: usize, _attached: &AtomicBool) -> Result<()> {
        Err(Error::MultihomeUnavailable(check_library().unwrap_err()))
    }

    /// The conn ids of the association's peer paths ([`Socket::peer_addrs`]).
    pub(crate) fn peer_conns(&self) -> Result<Vec<usize>> {
        Ok(self.peer_addrs()?.iter().filter_map(storage_conn).collect())
    }

    /// One non-blocking `usrsctp_sendv` of `data` to the path `conn` (`SCTP_ADDR_OVER` is
    /// set in `info`'s flags): bytes taken, or an error (EWOULDBLOCK: no space; EINVAL:
    /// not a path of this association).
    pub(crate) fn sendv_to(
        &self,
        data: &[u8],
        info: &raw::sctp_sndinfo,
        to: &libc::sockaddr_storage,
    ) -> Result<usize> {
        let mut info = *info;
        info.snd_flags |= SCTP_ADDR_OVER;
        self.sendv(data, &info, Some(to))
    }
}

/// Process-wide CMT switches: the sysctls `sctp_cmt_on_off` (allows `SCTP_CMT_ON_OFF` per
/// socket and is inherited by new sockets), `sctp_cmt_use_dac`, `sctp_buffer_splitting`
/// and `sctp_use_cwnd_based_maxburst`. Fails if usrsctp is not initialised yet (the values would be overwritten by init).
pub(crate) fn set_cmt_sysctls(
    cmt_on_off: u32,
    use_dac: bool,
    buffer_splitting: u32,
    cwnd_based_max_burst: bool,
) -> Result<()> {
    if hooks().is_none() {
        return Err(Error::MultihomeUnavailable(
            "usrsctp is not initialised yet (call SctpStack::global first)".into(),
        ));
    }
    let rcs = serial(|| {
        // SAFETY: plain setters of global tunables (range-checked by usrsctp), valid after
        // init; under the usrsctp lock.
        unsafe {
            [
                raw::usrsctp_sysctl_set_sctp_cmt_on_off(cmt_on_off),
                raw::usrsctp_sysctl_set_sctp_cmt_use_dac(u32::from(use_dac)),
                raw::usrsctp_sysctl_set_sctp_buffer_splitting(buffer_splitting),
                raw::usrsctp_sysctl_set_sctp_use_cwnd_based_maxburst(u32::from(
                    cwnd_based_max_burst,
                )),
            ]
        }
    });
    if rcs.iter().any(|&rc| rc != 0) {
        return Err(Error::Sys {
            op: "usrsctp_sysctl_set_sctp_cmt_* and sctp_use_cwnd_based_maxburst",
            source: std::sync::Arc::new(std::io::Error::from_raw_os_error(libc::EINVAL)),
        });
    }
    Ok(())
}

#[cfg(test)]
mod layout {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn structs_match_header() {
        assert_eq!(offset_of!(sctp_setprim, ssp_assoc_id), 128);
        assert_eq!(size_of::<sctp_setprim>(), 136);
        assert_eq!(offset_of!(sctp_paddrthlds, spt_pathmaxrxt), 132);
        assert_eq!(size_of::<sctp_paddrthlds>(), 144);
    }

    #[test]
    fn unavailable_message_names_version_and_fix() {
        let m = unavailable_message("", "0.9.5.0-2");
        assert_eq!(
            m,
            "SCTP multihoming needs usrsctp's source headers for version 0.9.5.0-2; \
             run scripts/deps.sh"
        );
        assert_eq!(unavailable_message("x", "v"), "x");
    }
}
