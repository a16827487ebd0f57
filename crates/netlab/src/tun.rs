//! TUN devices: point-to-point, raw IP packets (`IFF_TUN | IFF_NO_PI`).
//!
//! A device is created in the network namespace of the calling thread (see
//! [`Netns::run`](crate::netns::Netns::run)) and vanishes when its file descriptor is
//! closed (it is not made persistent).

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
    // SAFETY: ifreq is plain data; the name fits (checked above) and stays NUL-terminated.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes the ifreq we own.
    if unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file.into())
}
