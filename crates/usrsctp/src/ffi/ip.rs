//! IP mode at the library boundary: usrsctp sockets over real IPv4/IPv6 addresses, their
//! packets UDP-encapsulated (RFC 6951) through the two UDP sockets taps owns. The shim
//! (`c/multihome.c`, `taps_ip_*`) installs those sockets where usrsctp's IP output sends
//! from and feeds received datagrams to usrsctp; the rest is public API: bind to a list of
//! addresses (`usrsctp_bindx`, so INIT and INIT-ACK list them), connect, accept, the peer's
//! addresses and the per-path UDP encapsulation port (`SCTP_REMOTE_UDP_ENCAPS_PORT`).

use std::ffi::c_void;
use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use libc::{c_int, socklen_t};

use super::bindings as raw;
use super::library::serial;
use super::multihome::multihome_ready;
use super::socket::{Accepted, Plain, Socket};
use crate::error::{Error, Result};

/// `#define SCTP_REMOTE_UDP_ENCAPS_PORT 0x00000024`
const SCTP_REMOTE_UDP_ENCAPS_PORT: c_int = 0x24;
/// `#define SCTP_BINDX_ADD_ADDR 0x00008001`
const SCTP_BINDX_ADD_ADDR: c_int = 0x8001;
/// `#define SCTP_BINDX_REM_ADDR 0x00008002`
const SCTP_BINDX_REM_ADDR: c_int = 0x8002;

/// `struct sctp_udpencaps`
#[repr(C)]
#[derive(Clone, Copy)]
struct sctp_udpencaps {
    sue_address: libc::sockaddr_storage,
    sue_assoc_id: raw::sctp_assoc_t,
    sue_port: u16,
}

// SAFETY: integers and a `sockaddr_storage`.
unsafe impl Plain for sctp_udpencaps {}

#[cfg(usrsctp_multihome)]
extern "C" {
    /// c/multihome.c: installs the UDP sockets usrsctp's IP output sends from.
    fn taps_ip_set_sockets(fd4: c_int, fd6: c_int);
    /// c/multihome.c: one received UDP payload to usrsctp; 0, or -1 if dropped first.
    fn taps_ip_input(
        buf: *const c_void,
        len: usize,
        from: *const libc::sockaddr,
        to: *const libc::sockaddr,
    ) -> c_int;
    /// c/multihome.c: points libusrsctp's GOT entry for `sendmsg` at the shim's output
    /// hook, which asks `source` where each tunnelled packet leaves from (or whether it is
    /// sent at all) and reports it to `sent`; 0 or -1.
    fn taps_ip_hook_output(
        source: extern "C" fn(*const Packet, *mut u8) -> c_int,
        sent: extern "C" fn(*const Packet),
    ) -> c_int;
    /// c/multihome.c: queues `done(arg, 0)` on usrsctp's iterator thread behind the work
    /// already queued there; 0 or an errno (then `done` is never called).
    fn taps_ip_iterator_mark(
        so: *mut raw::socket,
        done: extern "C" fn(*mut c_void, u32),
        arg: *mut c_void,
    ) -> c_int;
    /// c/multihome.c: wakes usrsctp's iterator thread.
    fn taps_ip_iterator_kick();
}

/// `struct taps_ip_packet` of c/multihome.c: one tunnelled packet.
#[cfg(usrsctp_multihome)]
#[repr(C)]
struct Packet {
    family: c_int,
    chosen: [u8; 16],
    remote: [u8; 16],
    local_sctp_port: u16,
    remote_sctp_port: u16,
    asconf: c_int,
    len: usize,
}

#[cfg(usrsctp_multihome)]
impl Packet {
    /// The address in `b` (16 bytes, the first 4 for IPv4) of the packet's family.
    fn ip(&self, b: &[u8; 16]) -> Option<IpAddr> {
        match self.family {
            libc::AF_INET => Some(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))),
            libc::AF_INET6 => Some(IpAddr::V6(Ipv6Addr::from(*b))),
            _ => None,
        }
    }

    fn ports(&self) -> crate::ip_paths::Ports {
        (self.local_sctp_port, self.remote_sctp_port)
    }
}

/// The output hook's question: where the packet `p` leaves from. Writes the address into
/// `out` (16 bytes) and returns 1; returns 0 to leave it to routing, -1 to send nothing
/// (usrsctp is told the destination is unreachable). Runs inside usrsctp (under the
/// usrsctp lock, or on usrsctp's iterator thread): short locks, and a route lookup at
/// most once a second per destination.
#[cfg(usrsctp_multihome)]
extern "C" fn packet_source(p: *const Packet, out: *mut u8) -> c_int {
    use crate::ip_paths::Source;
    // SAFETY: the shim passes a live `struct taps_ip_packet`.
    let Some(p) = (unsafe { p.as_ref() }) else {
        return 0;
    };
    let (Some(chosen), Some(remote)) = (p.ip(&p.chosen), p.ip(&p.remote)) else {
        return 0;
    };
    let source = std::panic::catch_unwind(|| {
        crate::ip_paths::source_for(p.ports(), remote, chosen, p.asconf != 0)
    });
    let mut bytes = [0u8; 16];
    let len = match source {
        Ok(Source::From(IpAddr::V4(a))) => {
            bytes[..4].copy_from_slice(&a.octets());
            4
        }
        Ok(Source::From(IpAddr::V6(a))) => {
            bytes = a.octets();
            16
        }
        Ok(Source::Unreachable) => return -1,
        Ok(Source::Routing) | Err(_) => return 0,
    };
    // SAFETY: `out` is the shim's 16-byte buffer; 4 or 16 bytes are written.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out, len) };
    1
}

/// The output hook's report of one packet sent: counted for its path. Runs where
/// [`packet_source`] does; one short lock.
#[cfg(usrsctp_multihome)]
extern "C" fn packet_sent(p: *const Packet) {
    // SAFETY: the shim passes a live `struct taps_ip_packet`.
    let Some(p) = (unsafe { p.as_ref() }) else {
        return;
    };
    if let Some(remote) = p.ip(&p.remote) {
        let _ = std::panic::catch_unwind(|| crate::ip_paths::count_sent(p.ports(), remote, p.len));
    }
}

/// `a` as a C socket address: the storage and its true length.
pub(crate) fn ip_storage(a: SocketAddr) -> (libc::sockaddr_storage, socklen_t) {
    let mut ss = libc::sockaddr_storage::zeroed();
    let len = match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: a sockaddr_storage is larger than and aligned for a sockaddr_in.
            unsafe { *(&mut ss as *mut libc::sockaddr_storage as *mut libc::sockaddr_in) = sin };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: a sockaddr_storage is larger than and aligned for a sockaddr_in6.
            unsafe { *(&mut ss as *mut libc::sockaddr_storage as *mut libc::sockaddr_in6) = sin6 };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as socklen_t)
}

/// A socket address stored as bytes (a notification's `sockaddr_storage`; fewer bytes are
/// zero-filled, more are ignored).
pub(crate) fn storage_from_bytes(b: &[u8]) -> libc::sockaddr_storage {
    let mut ss = libc::sockaddr_storage::zeroed();
    let n = b.len().min(size_of::<libc::sockaddr_storage>());
    // SAFETY: `ss` is a plain sockaddr_storage (any bytes valid) of at least `n` bytes;
    // `b` has at least `n` bytes; they do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(
            b.as_ptr(),
            &mut ss as *mut libc::sockaddr_storage as *mut u8,
            n,
        )
    };
    ss
}

/// The IP socket address in `ss` (None for another family).
pub(crate) fn ip_addr_of(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    // SAFETY: `ss` is a live sockaddr_storage; it is read as the type its family names,
    // both smaller than it and plain data, by copy.
    unsafe { sockaddr_to_ip(ss as *const libc::sockaddr_storage as *const libc::sockaddr) }
}

/// The IP socket address at `sa` (None for another family).
///
/// # Safety
/// `sa` must point to a readable socket address of at least the size its family implies.
unsafe fn sockaddr_to_ip(sa: *const libc::sockaddr) -> Option<SocketAddr> {
    // SAFETY: the caller's contract; every family starts with `sa_family`.
    match i32::from(unsafe { std::ptr::read_unaligned(sa) }.sa_family) {
        libc::AF_INET => {
            // SAFETY: an AF_INET address is a sockaddr_in (caller's contract).
            let sin = unsafe { std::ptr::read_unaligned(sa as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: an AF_INET6 address is a sockaddr_in6 (caller's contract).
            let sin6 = unsafe { std::ptr::read_unaligned(sa as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Installs `fd4`/`fd6` (-1: none) as the UDP sockets usrsctp sends encapsulated IPv4/IPv6
/// packets from, and `port` as its tunnelling port (the UDP source port it writes), and
/// hooks usrsctp's output so that each packet leaves from an address its association lists
/// and is counted for its path (`crate::ip_paths`). Needs the shim
/// ([`Error::MultihomeUnavailable`] says why not). Three calls under the usrsctp lock.
pub(crate) fn set_tunnel(fd4: c_int, fd6: c_int, port: u16) -> Result<()> {
    multihome_ready()?;
    set_tunnel_checked(fd4, fd6, port)
}

#[cfg(usrsctp_multihome)]
fn set_tunnel_checked(fd4: c_int, fd6: c_int, port: u16) -> Result<()> {
    let rc = serial(|| {
        // SAFETY: the shim was compiled for the loaded library (`multihome_ready`); it stores
        // two integers in usrsctp's globals; the setter is a plain range-checked store.
        unsafe {
            taps_ip_set_sockets(fd4, fd6);
            raw::usrsctp_sysctl_set_sctp_udp_tunneling_port(u32::from(port))
        }
    });
    // SAFETY: the shim was compiled for the loaded library; the hook rewrites one pointer
    // of that library's GOT (its own binding of `sendmsg`) and keeps two functions that
    // live as long as the process. Without it usrsctp sends as before.
    if serial(|| unsafe { taps_ip_hook_output(packet_source, packet_sent) }) == 0 {
        crate::ip_paths::set_hooked();
    }
    if rc != 0 {
        return Err(Error::Sys {
            op: "usrsctp_sysctl_set_sctp_udp_tunneling_port",
            source: std::sync::Arc::new(std::io::Error::from_raw_os_error(libc::EINVAL)),
        });
    }
    Ok(())
}

#[cfg(not(usrsctp_multihome))]
fn set_tunnel_checked(_fd4: c_int, _fd6: c_int, _port: u16) -> Result<()> {
    Err(Error::MultihomeUnavailable(
        super::multihome::unavailable_reason(),
    ))
}

/// Gives usrsctp one SCTP packet that arrived in a UDP datagram from `from` (with its UDP
/// port) to our address `to`, if its CRC32c is right. Call only after [`set_tunnel`]
/// succeeded. One call under the usrsctp lock (replies go out inside it).
pub(crate) fn ip_input(pkt: &[u8], from: SocketAddr, to: SocketAddr) {
    if !super::library::crc32c_ok(pkt) {
        return;
    }
    if let Some(ports) = crate::ip_paths::received_ports(pkt) {
        crate::ip_paths::count_received(ports, from.ip(), pkt.len());
    }
    ip_input_checked(pkt, from, to);
}

#[cfg(usrsctp_multihome)]
fn ip_input_checked(pkt: &[u8], from: SocketAddr, to: SocketAddr) {
    let (f, _) = ip_storage(from);
    let (t, _) = ip_storage(to);
    serial(|| {
        // SAFETY: the shim is bound (`set_tunnel` ran `multihome_ready`); `pkt`, `f` and `t`
        // are live for the call (usrsctp copies the packet); under the usrsctp lock.
        unsafe {
            taps_ip_input(
                pkt.as_ptr() as *const c_void,
                pkt.len(),
                &f as *const libc::sockaddr_storage as *const libc::sockaddr,
                &t as *const libc::sockaddr_storage as *const libc::sockaddr,
            )
        };
    });
}

#[cfg(not(usrsctp_multihome))]
fn ip_input_checked(_pkt: &[u8], _from: SocketAddr, _to: SocketAddr) {}

impl Socket {
    /// Creates an IP-mode one-to-one socket (AF_INET6, which also takes IPv4 addresses, when
    /// `v6`; else AF_INET), non-blocking, whose upcall reports `arg`.
    pub(crate) fn stream_ip(lib: super::Usrsctp, arg: usize, v6: bool) -> Result<Socket> {
        Socket::stream_of(lib, arg, if v6 { libc::AF_INET6 } else { libc::AF_INET })
    }

    /// Binds to every address of `addrs` (one SCTP port, that of the addresses; 0:
    /// ephemeral) with `usrsctp_bindx`: with two or more, INIT and INIT-ACK list them all.
    /// Each address must be one of this host's when usrsctp started (EADDRNOTAVAIL).
    pub(crate) fn bind_ips(&self, addrs: &[SocketAddr]) -> Result<()> {
        self.bindx(addrs, SCTP_BINDX_ADD_ADDR)
    }

    /// Adds (`add`) or removes one address of a socket already bound (`usrsctp_bindx`, port
    /// 0: the socket's). On an established association usrsctp tells the peer with an
    /// ASCONF (ADD-IP or DELETE-IP), which its iterator thread queues and sends; a removed
    /// address leaves the endpoint there too. Returns once that thread has done so (see
    /// [`iterator_done`]). Adding needs one of this host's addresses when usrsctp started
    /// (EADDRNOTAVAIL); the last address cannot be removed (EINVAL).
    pub(crate) fn rebind_ip(&self, ip: IpAddr, add: bool) -> Result<()> {
        let flags = if add {
            SCTP_BINDX_ADD_ADDR
        } else {
            SCTP_BINDX_REM_ADDR
        };
        self.bindx_then(&[SocketAddr::new(ip, 0)], flags, iterator_done)
    }

    /// `usrsctp_bindx(addrs, flags)`.
    fn bindx(&self, addrs: &[SocketAddr], flags: c_int) -> Result<()> {
        self.bindx_then(addrs, flags, |_| {})
    }

    /// `usrsctp_bindx(addrs, flags)`, then `after` with the socket if it succeeded, under
    /// the same hold of the locks.
    fn bindx_then(
        &self,
        addrs: &[SocketAddr],
        flags: c_int,
        after: impl FnOnce(*mut raw::socket),
    ) -> Result<()> {
        let mut packed: Vec<u8> = Vec::with_capacity(addrs.len() * size_of::<libc::sockaddr_in6>());
        for a in addrs {
            let (ss, len) = ip_storage(*a);
            // SAFETY: `ss` is live and at least `len` bytes long.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    &ss as *const libc::sockaddr_storage as *const u8,
                    len as usize,
                )
            };
            packed.extend_from_slice(bytes);
        }
        let n = c_int::try_from(addrs.len()).map_err(|_| Error::sys("usrsctp_bindx"))?;
        self.call(|so| {
            // SAFETY: `packed` holds `n` sockaddr_in/sockaddr_in6 back to back, as bindx
            // reads them (no sa_len on Linux); usrsctp copies them; `so` is live.
            let rc = unsafe {
                raw::usrsctp_bindx(so, packed.as_mut_ptr() as *mut libc::sockaddr, n, flags)
            };
            super::socket::check(rc, "usrsctp_bindx")?;
            after(so);
            Ok(())
        })
    }

    /// `usrsctp_connect` to the SCTP endpoint at `to` (IP address and SCTP port): sends
    /// INIT. EINPROGRESS while the handshake runs (non-blocking).
    pub(crate) fn connect_ip(&self, to: SocketAddr) -> Result<()> {
        let (mut ss, len) = ip_storage(to);
        self.call(|so| {
            // SAFETY: `ss` holds a socket address of `len` bytes; `so` is live.
            let rc = unsafe {
                raw::usrsctp_connect(
                    so,
                    &mut ss as *mut libc::sockaddr_storage as *mut libc::sockaddr,
                    len,
                )
            };
            super::socket::check(rc, "usrsctp_connect")
        })
    }

    /// `usrsctp_accept` on an IP-mode listener: the next association's socket and the
    /// peer's address it came from (SCTP port). EWOULDBLOCK when none is waiting.
    pub(crate) fn accept_ip(&self) -> Result<(Accepted, Option<SocketAddr>)> {
        let (acc, ss) = self.accept_raw()?;
        Ok((acc, ip_addr_of(&ss)))
    }

    /// The peer's IP addresses (SCTP port), one per path ([`Socket::peer_addrs`]).
    pub(crate) fn peer_ips(&self) -> Result<Vec<SocketAddr>> {
        Ok(self.peer_addrs()?.iter().filter_map(ip_addr_of).collect())
    }

    /// The UDP port usrsctp sends the path to `peer` to (0: none set; the unspecified
    /// address: the association's default for paths added later).
    pub(crate) fn encaps_port(&self, peer: IpAddr) -> Result<u16> {
        let mut e = sctp_udpencaps::zeroed();
        e.sue_address = ip_storage(SocketAddr::new(peer, 0)).0;
        self.getopt(
            raw::IPPROTO_SCTP,
            SCTP_REMOTE_UDP_ENCAPS_PORT,
            &mut e,
            "SCTP_REMOTE_UDP_ENCAPS_PORT",
        )?;
        Ok(u16::from_be(e.sue_port))
    }

    /// Sets the UDP port of the path to `peer` (the unspecified address: the default of the
    /// association, or of the endpoint before it has one).
    pub(crate) fn set_encaps_port(&self, peer: IpAddr, port: u16) -> Result<()> {
        let mut e = sctp_udpencaps::zeroed();
        e.sue_address = ip_storage(SocketAddr::new(peer, 0)).0;
        e.sue_port = port.to_be();
        self.setopt(
            raw::IPPROTO_SCTP,
            SCTP_REMOTE_UDP_ENCAPS_PORT,
            &e,
            "SCTP_REMOTE_UDP_ENCAPS_PORT",
        )
    }
}

/// How long [`iterator_done`] waits before waking usrsctp's iterator thread again.
#[cfg(usrsctp_multihome)]
const ITERATOR_KICK: std::time::Duration = std::time::Duration::from_millis(1);

/// How long [`iterator_done`] waits at most (the thread exists; this bounds a wait on a
/// machine too busy to run it).
#[cfg(usrsctp_multihome)]
const ITERATOR_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether usrsctp's iterator thread has reached a mark ([`iterator_done`]).
#[cfg(usrsctp_multihome)]
#[derive(Default)]
struct Mark {
    reached: std::sync::Mutex<bool>,
    cv: std::sync::Condvar,
}

/// Called by usrsctp for a mark: on its iterator thread, or on the thread that closes the
/// socket first. `arg` is the `Arc<Mark>` that [`iterator_done`] gave away.
#[cfg(usrsctp_multihome)]
extern "C" fn mark_reached(arg: *mut c_void, _val: u32) {
    // SAFETY: `arg` came from `Arc::into_raw` in `iterator_done`, and usrsctp calls this
    // once per mark.
    let mark = unsafe { std::sync::Arc::from_raw(arg as *const Mark) };
    *mark.reached.lock().unwrap_or_else(|e| e.into_inner()) = true;
    mark.cv.notify_all();
}

/// Waits until usrsctp's iterator thread has done the work a `usrsctp_bindx` on the
/// established association of `so` queued there (see `taps_ip_iterator_mark` in
/// c/multihome.c): the ASCONF queued and sent, a removed address gone from the endpoint. It
/// queues a mark behind that work and waits for the thread to reach it, waking the thread
/// every [`ITERATOR_KICK`]: the thread misses a wake-up that comes before it first waits,
/// and would then leave the ASCONF unsent. Called under the socket's read lock and the
/// usrsctp lock, held throughout: no other thread of ours is inside usrsctp while that
/// thread changes the association, as for every other change (see `library::API`).
#[cfg(usrsctp_multihome)]
fn iterator_done(so: *mut raw::socket) {
    let mark = std::sync::Arc::new(Mark::default());
    let arg = std::sync::Arc::into_raw(mark.clone()) as *mut c_void;
    // SAFETY: `so` is live (the caller holds its read lock and the usrsctp lock); the shim
    // is bound (IP mode needs it); `arg` stays valid until `mark_reached` takes it back.
    if unsafe { taps_ip_iterator_mark(so, mark_reached, arg) } != 0 {
        // Not queued: `mark_reached` will not run.
        // SAFETY: `arg` came from `Arc::into_raw` above and was not handed on.
        drop(unsafe { std::sync::Arc::from_raw(arg as *const Mark) });
        return;
    }
    let until = std::time::Instant::now() + ITERATOR_WAIT;
    let mut reached = mark.reached.lock().unwrap_or_else(|e| e.into_inner());
    while !*reached && std::time::Instant::now() < until {
        let (r, wait) = mark
            .cv
            .wait_timeout(reached, ITERATOR_KICK)
            .unwrap_or_else(|e| e.into_inner());
        reached = r;
        if !*reached && wait.timed_out() {
            // SAFETY: the shim is bound; a broadcast on usrsctp's condition variable.
            unsafe { taps_ip_iterator_kick() };
        }
    }
}

#[cfg(not(usrsctp_multihome))]
fn iterator_done(_so: *mut raw::socket) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip() {
        for a in ["192.0.2.1:9899", "[2001:db8::1]:5000", "[fe80::1%3]:1"] {
            let a: SocketAddr = a.parse().unwrap();
            let (ss, len) = ip_storage(a);
            assert_eq!(ip_addr_of(&ss), Some(a));
            assert!(len as usize <= size_of::<libc::sockaddr_in6>());
        }
        assert_eq!(std::mem::size_of::<sctp_udpencaps>(), 136);
    }
}
