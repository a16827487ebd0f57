//! Per-datagram source and destination addresses on a UDP socket bound to the unspecified
//! address (`0.0.0.0`, `[::]`), the way quinn-udp does it: IP_PKTINFO / IPV6_RECVPKTINFO to
//! learn the local address each datagram was sent to (`recvmsg`), IP_PKTINFO / IPV6_PKTINFO
//! to send a reply from that address (`sendmsg`). A leaf module: plain functions on a file
//! descriptor, no knowledge of SCTP. Control messages live in a small buffer on the stack
//! (no allocation); each call is one syscall. Also the socket's error queue (IP_RECVERR:
//! the ICMP errors its datagrams drew, with what they quoted).

#![allow(unsafe_code)]

use std::ffi::c_void;
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd};

use socket2::SockAddr;

/// Asks the kernel for each datagram's destination address (IP_PKTINFO on an IPv4 socket,
/// IPV6_RECVPKTINFO on an IPv6 one, which also covers IPv4-mapped traffic on a dual-stack
/// socket). Returns whether that worked; if not, replies fall back to plain `send_to`.
pub(crate) fn enable_pktinfo(s: &impl AsFd, bound: SocketAddr) -> bool {
    let (level, name) = match bound {
        SocketAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_PKTINFO),
        SocketAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO),
    };
    let ok = set_int(s, level, name, 1);
    if !ok {
        tracing::debug!(
            "usrsctp shared UDP {bound}: enabling packet info failed ({}); replies use send_to",
            io::Error::last_os_error()
        );
    }
    ok
}

/// Control-message buffer on the stack, aligned for `cmsghdr`; room for one pktinfo of
/// either family (plus slack for anything else the kernel adds).
#[repr(C, align(8))]
struct CmsgBuf([u8; 128]);

/// A destination address we can answer from: not unspecified, not multicast.
fn usable_source(ip: &IpAddr) -> bool {
    !ip.is_unspecified() && !ip.is_multicast()
}

/// What one `recvmsg` read.
pub(crate) struct Received {
    /// Bytes read.
    pub(crate) len: usize,
    /// The sender.
    pub(crate) from: SocketAddr,
    /// The local address it was sent to (with packet info enabled).
    pub(crate) dst: Option<IpAddr>,
    /// With UDP GRO: the buffer holds datagrams of this size back to back (the last may be
    /// shorter). `None`: one datagram.
    pub(crate) segment: Option<usize>,
}

impl Received {
    /// One datagram of `len` bytes from `from` (read without control messages).
    pub(crate) fn one(len: usize, from: SocketAddr) -> Received {
        Received {
            len,
            from,
            dst: None,
            segment: None,
        }
    }

    /// The datagrams in `buf` (the buffer this was read into).
    pub(crate) fn datagrams<'a>(&self, buf: &'a [u8]) -> std::slice::Chunks<'a, u8> {
        let data = &buf[..self.len];
        data.chunks(self.segment.unwrap_or(self.len).max(1))
    }
}

/// `UDP_SEGMENT` (linux/udp.h): send a buffer as datagrams of this size (UDP GSO).
const UDP_SEGMENT: libc::c_int = 103;
/// `UDP_GRO` (linux/udp.h): receive coalesced datagrams with their size in a control message.
const UDP_GRO: libc::c_int = 104;

/// Asks the kernel to hand this socket coalesced datagrams (UDP GRO; read them with
/// [`recv_with_dst`], which reports the segment size). Returns whether that worked.
pub(crate) fn enable_gro(s: &impl AsFd) -> bool {
    set_int(s, libc::SOL_UDP, UDP_GRO, 1)
}

/// One `recvmsg` with `flags` into `buf`, its control messages into `cbuf`: the bytes
/// received, the header as the kernel left it (only its control fields still point
/// anywhere: into `cbuf`) and the sender or, with `MSG_ERRQUEUE`, the destination the
/// error is about.
fn recvmsg(
    s: &impl AsFd,
    buf: &mut [u8],
    cbuf: &mut CmsgBuf,
    flags: libc::c_int,
) -> io::Result<((usize, libc::msghdr), SockAddr)> {
    let fd = s.as_fd().as_raw_fd();
    // SAFETY: `try_init` hands us a zeroed socket-address storage and its length to fill;
    // `msg` points at live buffers of the stated sizes for the duration of `recvmsg`.
    unsafe {
        SockAddr::try_init(|name, namelen| {
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr() as *mut c_void,
                iov_len: buf.len(),
            };
            let mut msg: libc::msghdr = zeroed();
            msg.msg_name = name as *mut c_void;
            msg.msg_namelen = *namelen;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.0.as_mut_ptr() as *mut c_void;
            msg.msg_controllen = cbuf.0.len() as _;
            let n = libc::recvmsg(fd, &mut msg, flags);
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            *namelen = msg.msg_namelen;
            // The iovec and name storage move or die here; only the control fields are
            // used afterwards.
            msg.msg_name = std::ptr::null_mut();
            msg.msg_iov = std::ptr::null_mut();
            msg.msg_iovlen = 0;
            Ok((n as usize, msg))
        })
    }
}

/// Non-blocking `recvmsg` of one datagram (or, with UDP GRO, several of one size): its
/// length, sender, destination address (from IP_PKTINFO's `ipi_spec_dst` or IPV6_PKTINFO's
/// `ipi6_addr`; an IPv4-mapped address on a dual-stack socket) and GRO segment size.
pub(crate) fn recv_with_dst(sock: &impl AsFd, buf: &mut [u8]) -> io::Result<Received> {
    let mut cbuf = CmsgBuf([0; 128]);
    let ((n, msg), from) = recvmsg(sock, buf, &mut cbuf, libc::MSG_DONTWAIT)?;
    let from = from
        .as_socket()
        .ok_or_else(|| io::Error::other("recvmsg: sender is not an inet address"))?;
    let mut dst = None;
    let mut segment = None;
    // SAFETY: walking the control messages the kernel wrote into `cbuf` (still alive;
    // msg_controllen was updated to their total length); CMSG_* stay within it, payloads
    // are read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let h = &*c;
            let data = libc::CMSG_DATA(c);
            if h.cmsg_level == libc::IPPROTO_IP && h.cmsg_type == libc::IP_PKTINFO {
                let info = std::ptr::read_unaligned(data as *const libc::in_pktinfo);
                dst = Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                    info.ipi_spec_dst.s_addr,
                ))));
            } else if h.cmsg_level == libc::IPPROTO_IPV6 && h.cmsg_type == libc::IPV6_PKTINFO {
                let info = std::ptr::read_unaligned(data as *const libc::in6_pktinfo);
                dst = Some(IpAddr::V6(Ipv6Addr::from(info.ipi6_addr.s6_addr)));
            } else if h.cmsg_level == libc::SOL_UDP && h.cmsg_type == UDP_GRO {
                let size = std::ptr::read_unaligned(data as *const u16);
                segment = (size > 0).then_some(usize::from(size));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(Received {
        len: n,
        from,
        dst: dst.filter(usable_source),
        segment,
    })
}

/// Non-blocking `sendmsg` of `buf`: one datagram, or with `segment` several of that size
/// (the last may be shorter; UDP GSO: the kernel splits them, one syscall for all); to `to`
/// (`None`: the connected peer) from local address `src` (IP_PKTINFO's `ipi_spec_dst` or
/// IPV6_PKTINFO's `ipi6_addr`, interface 0: routing picks it; `None`: the kernel picks).
/// `src` has the socket's family (an IPv4-mapped address on a dual-stack socket), as
/// learned by [`recv_with_dst`] on the same socket.
pub(crate) fn send_datagrams(
    sock: &impl AsFd,
    buf: &[u8],
    segment: Option<u16>,
    to: Option<SocketAddr>,
    src: Option<IpAddr>,
) -> io::Result<usize> {
    let name = to.map(SockAddr::from);
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut c_void,
        iov_len: buf.len(),
    };
    let mut cbuf = CmsgBuf([0; 128]);
    // SAFETY: all-zero is a valid msghdr (integers and null pointers).
    let mut msg: libc::msghdr = unsafe { zeroed() };
    if let Some(name) = &name {
        msg.msg_name = name.as_ptr() as *mut c_void;
        msg.msg_namelen = name.len();
    }
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    let pktinfo_len = match src {
        Some(IpAddr::V4(_)) => size_of::<libc::in_pktinfo>(),
        Some(IpAddr::V6(_)) => size_of::<libc::in6_pktinfo>(),
        None => 0,
    };
    // SAFETY: CMSG_SPACE is pure arithmetic on its argument.
    let space = |len: usize| unsafe { libc::CMSG_SPACE(len as u32) } as usize;
    let total = src.map_or(0, |_| space(pktinfo_len)) + segment.map_or(0, |_| space(2));
    if total > 0 {
        msg.msg_control = cbuf.0.as_mut_ptr() as *mut c_void;
        msg.msg_controllen = total as _;
    }
    // SAFETY: `cbuf` is aligned and larger than `total` (at most 40 + 16 bytes), the space
    // of the control messages written here; CMSG_FIRSTHDR/NXTHDR stay within it and the
    // payloads are written unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        if let Some(src) = src {
            if c.is_null() {
                return Err(io::Error::other("sendmsg: no room for pktinfo"));
            }
            let (level, ty) = match src {
                IpAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_PKTINFO),
                IpAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO),
            };
            (*c).cmsg_level = level;
            (*c).cmsg_type = ty;
            (*c).cmsg_len = libc::CMSG_LEN(pktinfo_len as u32) as _;
            let data = libc::CMSG_DATA(c);
            match src {
                IpAddr::V4(a) => std::ptr::write_unaligned(
                    data as *mut libc::in_pktinfo,
                    libc::in_pktinfo {
                        ipi_ifindex: 0,
                        ipi_spec_dst: libc::in_addr {
                            s_addr: u32::from(a).to_be(),
                        },
                        ipi_addr: libc::in_addr { s_addr: 0 },
                    },
                ),
                IpAddr::V6(a) => std::ptr::write_unaligned(
                    data as *mut libc::in6_pktinfo,
                    libc::in6_pktinfo {
                        ipi6_addr: libc::in6_addr {
                            s6_addr: a.octets(),
                        },
                        ipi6_ifindex: 0,
                    },
                ),
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        if let Some(seg) = segment {
            if c.is_null() {
                return Err(io::Error::other("sendmsg: no room for UDP_SEGMENT"));
            }
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(2) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, seg);
        }
    }
    // SAFETY: `msg` points at live buffers of the stated sizes for the duration of the call.
    let n = unsafe { libc::sendmsg(sock.as_fd().as_raw_fd(), &msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// The kernel's path MTU (IP_MTU / IPV6_MTU: the route's MTU, lowered by what path MTU
/// discovery learned) towards the peer of a *connected* UDP socket of family `v6`. One
/// getsockopt; `None` if the kernel does not say.
pub(crate) fn connected_path_mtu(sock: &impl AsFd, v6: bool) -> Option<u32> {
    let (level, name) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU)
    };
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: valid fd; `v` is a writable c_int of `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_fd().as_raw_fd(),
            level,
            name,
            &mut v as *mut libc::c_int as *mut c_void,
            &mut len,
        )
    };
    (rc == 0 && v > 0).then_some(v as u32)
}

/// Asks the kernel to queue the ICMP errors that what `s` sends draws (IP_RECVERR, and
/// on an IPv6 socket also IPV6_RECVERR, so that IPv4-mapped destinations are covered),
/// each with the destination of the datagram that caused it and what the ICMP message
/// quoted of it, for [`take_queued_error`]. On an unconnected socket each such error also
/// becomes the socket's pending error, which the next send (to any destination) or
/// receive takes as its own result until the queue is read. One or two setsockopts;
/// whether the socket's own family's one worked.
pub(crate) fn enable_recverr(s: &impl AsFd, v6: bool) -> bool {
    let v4 = set_int(s, libc::IPPROTO_IP, libc::IP_RECVERR, 1);
    if v6 {
        set_int(s, libc::IPPROTO_IPV6, libc::IPV6_RECVERR, 1)
    } else {
        v4
    }
}

/// Makes `s` drop every datagram that arrives for it (a one-instruction socket filter
/// that accepts nothing): for a socket that only sends, whose receive queue, never read,
/// would otherwise fill with whatever answers it and leave no room for the queued ICMP
/// errors, which share its budget (errors do not pass the filter). One setsockopt;
/// whether it worked.
pub(crate) fn drop_incoming(s: &impl AsFd) -> bool {
    let mut drop_all = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: 0,
    }];
    let prog = libc::sock_fprog {
        len: drop_all.len() as u16,
        filter: drop_all.as_mut_ptr(),
    };
    // SAFETY: valid fd; `prog` points at `drop_all`, alive for the call (the kernel copies
    // the program).
    let rc = unsafe {
        libc::setsockopt(
            s.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            &prog as *const libc::sock_fprog as *const c_void,
            size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    rc == 0
}

/// One integer socket option; whether it was taken.
fn set_int(s: &impl AsFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> bool {
    // SAFETY: valid fd; `value` is a readable c_int of the stated size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_fd().as_raw_fd(),
            level,
            name,
            &value as *const libc::c_int as *const c_void,
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

/// Takes the queued errors of `s` (a socket with [`enable_recverr`]; `MSG_ERRQUEUE`, non-
/// blocking) until one says `to` refused a datagram (an ICMP or ICMPv6 port unreachable:
/// `ECONNREFUSED`) or none is left; the others are dropped. One `recvmsg` per error taken,
/// one more when none matched.
pub(crate) fn take_refusal(s: &impl AsFd, to: SocketAddr) -> io::Result<bool> {
    loop {
        match take_queued_error(s, &mut [])? {
            None => return Ok(false),
            Some(e) if e.refused && e.to.is_some_and(|a| same_endpoint(a, to)) => return Ok(true),
            Some(_) => {}
        }
    }
}

/// Drops every queued error of `s` (which also clears the socket's pending error, so the
/// next send does not fail with it). One `recvmsg` per error, one more.
pub(crate) fn drain_errors(s: &impl AsFd) -> io::Result<()> {
    while take_queued_error(s, &mut [])?.is_some() {}
    Ok(())
}

/// Same address and port (the flow label and scope of an IPv6 address aside).
fn same_endpoint(a: SocketAddr, b: SocketAddr) -> bool {
    a.ip() == b.ip() && a.port() == b.port()
}

/// One error taken from a socket's error queue ([`take_queued_error`]).
pub(crate) struct QueuedError {
    /// An ICMP or ICMPv6 port unreachable (`ECONNREFUSED` from an ICMP origin): nothing
    /// listens on the destination's port.
    pub(crate) refused: bool,
    /// The destination of the datagram that drew the error (address and port).
    pub(crate) to: Option<SocketAddr>,
    /// Bytes of that datagram's payload the ICMP message quoted (as much as it carried,
    /// cut to the buffer given), at the start of that buffer.
    pub(crate) len: usize,
}

/// Takes the oldest error queued on `s` (a socket with [`enable_recverr`]; `recvmsg` with
/// `MSG_ERRQUEUE`, non-blocking): `None` when the queue is empty. The kernel hands back
/// the payload of the datagram that drew the error, as far as the ICMP message quoted it
/// (an IPv4 ICMP error carries at most 576 bytes, headers included), copied into `buf`
/// (an empty `buf` takes none of it), and that datagram's destination. Taking the last
/// queued error also clears the socket's pending error. One `recvmsg`.
pub(crate) fn take_queued_error(s: &impl AsFd, buf: &mut [u8]) -> io::Result<Option<QueuedError>> {
    let mut cbuf = CmsgBuf([0; 128]);
    let received = recvmsg(s, buf, &mut cbuf, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT);
    let ((len, msg), offender) = match received {
        Ok(r) => r,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut refused = false;
    // SAFETY: walking the control messages the kernel wrote into `cbuf` (alive;
    // msg_controllen holds their total length); the payload is read unaligned and lies
    // within the buffer (128 bytes, the largest such message about 64).
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let h = &*c;
            let ours = (h.cmsg_level == libc::IPPROTO_IP && h.cmsg_type == libc::IP_RECVERR)
                || (h.cmsg_level == libc::IPPROTO_IPV6 && h.cmsg_type == libc::IPV6_RECVERR);
            if ours {
                let e =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::sock_extended_err);
                refused |= e.ee_errno == libc::ECONNREFUSED as u32
                    && (e.ee_origin == libc::SO_EE_ORIGIN_ICMP
                        || e.ee_origin == libc::SO_EE_ORIGIN_ICMP6);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(Some(QueuedError {
        refused,
        to: offender.as_socket(),
        len: len.min(buf.len()),
    }))
}

/// Blocks until `s` has something to read (or an error queued): one `poll`.
pub(crate) fn wait_readable(s: &impl AsFd) -> io::Result<()> {
    let mut p = libc::pollfd {
        fd: s.as_fd().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: `p` is one live pollfd for the call.
        let rc = unsafe { libc::poll(&mut p, 1, -1) };
        if rc >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
