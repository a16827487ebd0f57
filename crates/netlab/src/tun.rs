//! TUN devices: point-to-point, raw IP packets (`IFF_TUN | IFF_NO_PI`).
//!
//! A device is created in the network namespace of the calling thread (see
//! [`Netns::run`](crate::netns::Netns::run)) and vanishes when its file descriptor is
//! closed (it is not made persistent).

// FFI through libc (each block says why it is sound); unsafe code is denied elsewhere.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

/// Opens `/dev/net/tun` and creates device `name` (at most 15 bytes) in the calling
/// thread's network namespace. The returned descriptor is non-blocking.
pub fn create(name: &str) -> io::Result<OwnedFd> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad TUN device name {name:?}"),
        ));
    }
    let file: File = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")?;
    // SAFETY: ifreq is a plain C struct (a byte array and a union of integers and raw
    // pointers), for which all zeros is a valid value (raw pointers become null).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    // The name fits (checked above), so the last byte of ifr_name stays 0 (NUL).
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one struct ifreq through the pointer, and `req` is
    // a live, exclusively borrowed ifreq; its name is NUL-terminated (see above) and
    // `file` is open for the call.
    if unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file.into())
}
