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

/// `MPTCP_TCPINFO` (linux/mptcp.h, 5.16): each subflow's `tcp_info`.
const MPTCP_TCPINFO: libc::c_int = 2;
/// `MPTCP_SUBFLOW_ADDRS` (linux/mptcp.h, 5.16): each subflow's local and remote address.
const MPTCP_SUBFLOW_ADDRS: libc::c_int = 3;
/// Subflows read at most (the kernel counts the rest in `num_subflows`).
const MAX_SUBFLOWS: usize = 8;
/// `sizeof(struct mptcp_subflow_addrs)`: two `sockaddr_storage`s.
const SUBFLOW_ADDRS_SIZE: usize = 256;

/// `struct mptcp_subflow_data` followed by room for [`MAX_SUBFLOWS`] elements of `N` bytes.
#[repr(C, align(8))]
struct SubflowData<const N: usize> {
    size_subflow_data: u32,
    num_subflows: u32,
    size_kernel: u32,
    size_user: u32,
    data: [[u8; N]; MAX_SUBFLOWS],
}

impl<const N: usize> SubflowData<N> {
    /// One subflow getsockopt: the elements the kernel filled, each `N` bytes.
    fn read(fd: RawFd, name: libc::c_int) -> io::Result<Vec<[u8; N]>> {
        let mut d = SubflowData::<N> {
            size_subflow_data: 16,
            num_subflows: 0,
            size_kernel: 0,
            size_user: N as u32,
            data: [[0; N]; MAX_SUBFLOWS],
        };
        getsockopt_raw(fd, SOL_MPTCP, name, &mut d)?;
        let n = (d.num_subflows as usize).min(MAX_SUBFLOWS);
        Ok(d.data[..n].to_vec())
    }
}

/// The socket address at the start of `b` (a `sockaddr_storage` as the kernel wrote it).
fn sockaddr_at(b: &[u8]) -> Option<std::net::SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
    let family = i32::from(u16::from_ne_bytes([*b.first()?, *b.get(1)?]));
    let port = u16::from_be_bytes([*b.get(2)?, *b.get(3)?]);
    match family {
        libc::AF_INET => {
            let a: [u8; 4] = b.get(4..8)?.try_into().ok()?;
            Some(SocketAddr::new(Ipv4Addr::from(a).into(), port))
        }
        libc::AF_INET6 => {
            let a: [u8; 16] = b.get(8..24)?.try_into().ok()?;
            let scope = u32::from_ne_bytes(b.get(24..28)?.try_into().ok()?);
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a),
                port,
                0,
                scope,
            )))
        }
        _ => None,
    }
}

/// An MPTCP connection's subflows: (local, remote, the subflow's `tcp_info`), the first
/// subflow first. Two getsockopts (`MPTCP_SUBFLOW_ADDRS`, `MPTCP_TCPINFO`). Fails where
/// the kernel lacks them (before 5.16) or the connection fell back to TCP.
pub(crate) fn mptcp_subflows(
    fd: &impl AsRawFd,
) -> io::Result<Vec<(std::net::SocketAddr, std::net::SocketAddr, libc::tcp_info)>> {
    const INFO: usize = size_of::<libc::tcp_info>();
    let addrs = SubflowData::<SUBFLOW_ADDRS_SIZE>::read(fd.as_raw_fd(), MPTCP_SUBFLOW_ADDRS)?;
    let infos = SubflowData::<INFO>::read(fd.as_raw_fd(), MPTCP_TCPINFO)?;
    Ok(addrs
        .iter()
        .zip(infos)
        .filter_map(|(a, i)| {
            let local = sockaddr_at(&a[..128])?;
            let remote = sockaddr_at(&a[128..])?;
            // SAFETY: `i` holds `size_of::<tcp_info>()` bytes the kernel wrote (or zeros:
            // a valid tcp_info, integers only); read unaligned by copy.
            let info = unsafe { std::ptr::read_unaligned(i.as_ptr().cast::<libc::tcp_info>()) };
            Some((local, remote, info))
        })
        .collect())
}
