//! Raw socket options that neither socket2 nor libc wrap: MPTCP state, UDP-Lite
//! checksum coverage, `SO_PROTOCOL` and `TCP_INFO`, and interface indexes. The one
//! module of the socket layer with unsafe code (libc calls, each block says why it is
//! sound).
#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsRawFd, RawFd};

/// `IPPROTO_MPTCP` (Linux 5.6+).
pub(crate) const IPPROTO_MPTCP: libc::c_int = 262;
/// `SOL_MPTCP`: the option level of MPTCP socket options.
pub(crate) const SOL_MPTCP: libc::c_int = 284;
/// `MPTCP_INFO`: fails with `EOPNOTSUPP` once the connection fell back to plain TCP.
pub(crate) const MPTCP_INFO: libc::c_int = 1;
/// `IPPROTO_UDPLITE` (RFC 3828).
pub(crate) const IPPROTO_UDPLITE: libc::c_int = 136;
/// Checksum coverage of sent datagrams.
pub(crate) const UDPLITE_SEND_CSCOV: libc::c_int = 10;
/// Minimum checksum coverage of accepted datagrams.
pub(crate) const UDPLITE_RECV_CSCOV: libc::c_int = 11;

/// `setsockopt(fd, level, name, &value, sizeof(int))`.
pub(crate) fn set_int(
    fd: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value is a live c_int and its exact size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `getsockopt` of an `int` option.
/// The index of the network interface named `name` (0 if there is none), for the scope
/// of a link-local IPv6 address. One `if_nametoindex` call.
pub(crate) fn interface_index(name: &str) -> u32 {
    let Ok(name) = std::ffi::CString::new(name.as_bytes()) else {
        return 0;
    };
    // SAFETY: `name` is a valid NUL-terminated string for the call's duration.
    unsafe { libc::if_nametoindex(name.as_ptr()) }
}

pub(crate) fn get_int(fd: &impl AsRawFd, level: libc::c_int, name: libc::c_int) -> io::Result<i32> {
    let mut value: libc::c_int = 0;
    getsockopt_raw(fd.as_raw_fd(), level, name, &mut value).map(|_| value)
}

/// `getsockopt` into `out`, returning how many bytes the kernel wrote.
fn getsockopt_raw<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    out: &mut T,
) -> io::Result<usize> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `out` is valid for `len` bytes of writes and `len` is a live socklen_t;
    // the kernel writes at most `len` bytes. Callers only use plain-old-data `T`.
    let rc = unsafe { libc::getsockopt(fd, level, name, (out as *mut T).cast(), &mut len) };
    if rc == 0 {
        Ok(len as usize)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether an MPTCP socket still runs MPTCP: `Ok(true)` when `MPTCP_INFO` answers,
/// `Ok(false)` when it fails with `EOPNOTSUPP` (fell back to TCP) or `ENOPROTOOPT`.
pub(crate) fn mptcp_info_available(fd: &impl AsRawFd) -> io::Result<bool> {
    // struct mptcp_info is ~100 bytes; the kernel copies at most what fits.
    let mut buf = [0u8; 256];
    match getsockopt_raw(fd.as_raw_fd(), SOL_MPTCP, MPTCP_INFO, &mut buf) {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOPROTOOPT)) => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// `getsockopt(IPPROTO_TCP, TCP_INFO)`.
pub(crate) fn tcp_info(fd: &impl AsRawFd) -> io::Result<libc::tcp_info> {
    let mut info = MaybeUninit::<libc::tcp_info>::zeroed();
    // SAFETY: zeroed is a valid tcp_info (integers only); the kernel overwrites a prefix.
    let info = unsafe {
        getsockopt_raw(fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, &mut info)?;
        info.assume_init()
    };
    Ok(info)
}
