//! IP mode: associations over this host's real IPv4/IPv6 addresses, UDP-encapsulated as
//! RFC 6951 defines it, so that the peers learn each other's addresses through the protocol
//! itself: INIT and INIT-ACK list every address an endpoint is bound to (when it is bound
//! to two or more, or to all), and each path's UDP port is learned from the packets.
//! Nothing is set up out of band, and the peer may be any usrsctp program using UDP
//! encapsulation.
//!
//! Model: the process has one tunnelling UDP port (usrsctp has one), with one UDP socket
//! per address family bound to it (`0.0.0.0:port`, `[::]:port`), created by the first
//! IP-mode connect or listen and kept for the life of the process. usrsctp sends from them
//! directly, through an output hook that picks each packet's source address among those
//! its association lists and counts the packets per path ([`crate::ip_paths`]); a reader
//! thread per socket hands received datagrams to usrsctp under the crate's lock. A path is
//! a peer IP address. AF_CONN associations (the default) are unaffected; one association
//! is one kind or the other, and the two kinds share the SCTP port space.
//!
//! Needs the multihoming shim (build.rs): without it every call here fails with
//! [`Error::MultihomeUnavailable`], which says why.
//!
//! Costs: two UDP sockets and two threads per process, once; per packet one `poll`, one
//! `recvmsg` and one call into usrsctp; usrsctp sends each packet with its own `sendmsg`
//! (no GSO batching; the hook adds two short locks) and computes its CRC32c in software.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};

use socket2::{Domain, Protocol, Socket, Type};

use crate::assoc::{AssocInner, AssocShared, Association, Connecting, Link, Progress};
use crate::error::{Error, Result};
use crate::ffi;
use crate::options::SctpOptions;
use crate::sys::{lock, would_block, Sock};

/// The process's tunnelling sockets, once made.
static TUNNEL: Mutex<Option<Tunnel>> = Mutex::new(None);

/// The tunnelling UDP sockets (kept for the life of the process, as usrsctp holds their
/// descriptors).
struct Tunnel {
    port: u16,
    _v4: Arc<Socket>,
    _v6: Option<Arc<Socket>>,
}

/// The tunnelling port, creating the sockets on `port` (0: an ephemeral one) if there are
/// none yet. A different non-zero `port` than the existing one fails: usrsctp has one
/// tunnelling port per process.
pub(crate) fn tunnel_port(port: u16) -> Result<u16> {
    let mut t = lock(&TUNNEL);
    if let Some(t) = t.as_ref() {
        if port != 0 && port != t.port {
            return Err(Error::Udp {
                op: "IP-mode SCTP tunnel",
                source: Arc::new(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!(
                        "this process already tunnels SCTP over UDP port {}; usrsctp has one \
                         tunnelling port per process, so {port} cannot be used too",
                        t.port
                    ),
                )),
            });
        }
        return Ok(t.port);
    }
    let _ = crate::sys::global().lib()?;
    ffi::multihome_ready()?;
    let v4 = bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port))?;
    let port = v4
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .map_or(port, |a| a.port());
    // IPv6 is optional: a host without it tunnels IPv4 only.
    let v6 = bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port)).ok();
    ffi::set_tunnel(
        v4.as_raw_fd(),
        v6.as_ref().map_or(-1, |s| s.as_raw_fd()),
        port,
    )?;
    // Kept from here on: usrsctp holds their descriptors.
    let tunnel = t.insert(Tunnel {
        port,
        _v4: v4.clone(),
        _v6: v6.clone(),
    });
    for s in std::iter::once(v4).chain(v6) {
        std::thread::Builder::new()
            .name("usrsctp-ip-rx".into())
            .spawn(move || read_loop(&s, port))
            .map_err(|e| Error::Udp {
                op: "spawn IP-mode reader",
                source: Arc::new(e),
            })?;
    }
    Ok(tunnel.port)
}

/// The process's tunnelling port, if IP mode is in use. One lock.
pub(crate) fn current_port() -> Option<u16> {
    lock(&TUNNEL).as_ref().map(|t| t.port)
}

/// One tunnelling socket: UDP on `addr` (IPv6 ones IPv6-only), with packet info so each
/// datagram's destination address is known.
fn bind(addr: SocketAddr) -> Result<Arc<Socket>> {
    let udp_err = |op: &'static str| {
        move |e: std::io::Error| Error::Udp {
            op,
            source: Arc::new(e),
        }
    };
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
        .map_err(udp_err("socket"))?;
    if addr.is_ipv6() {
        s.set_only_v6(true).map_err(udp_err("IPV6_V6ONLY"))?;
    }
    s.bind(&addr.into()).map_err(udp_err("bind"))?;
    crate::pktinfo::enable_pktinfo(&s, addr);
    // ICMP errors with what they quote: a peer whose port is refused (its process is
    // gone) loses its associations (`refusal`).
    crate::pktinfo::enable_recverr(&s, addr.is_ipv6());
    Ok(Arc::new(s))
}

/// Reads datagrams from `s` for the life of the process and hands each to usrsctp as sent
/// to our `port` at its destination address.
fn read_loop(s: &Socket, port: u16) {
    let mut buf = vec![0u8; 65536];
    loop {
        if crate::pktinfo::wait_readable(s).is_err() {
            return;
        }
        let r = match crate::pktinfo::recv_with_dst(s, &mut buf) {
            Ok(r) => r,
            // Nothing to read but woken: an ICMP error is queued (poll reports it), or
            // the error itself (ECONNREFUSED: a peer's port refused). Either way the queue
            // is drained, so poll does not wake again for it.
            Err(_) => {
                refusals(s, port);
                continue;
            }
        };
        let local = r.dst.unwrap_or(match r.from {
            SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        });
        ffi::ip_input(&buf[..r.len], r.from, SocketAddr::new(local, port));
    }
}

/// Takes the ICMP errors queued on `s`: each port unreachable ends the association with
/// the refused peer it belongs to (its quoted verification tag decides), as the peer's
/// ABORT would, from the local address routing picks towards it.
fn refusals(s: &Socket, port: u16) {
    let _ = crate::refusal::take_refusals_with(s, |to, abort| {
        if let Some(local) = crate::ip_paths::route_source(to) {
            ffi::ip_input(abort, to, SocketAddr::new(local, port));
        }
    });
}

/// The unspecified address of `v6`'s family.
fn unspecified(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    }
}

/// A new IP-mode socket bound to `locals` (every address of this host if empty) on
/// `sctp_port`, with `opts` applied. IPv6 when any address involved is.
fn socket(locals: &[IpAddr], v6: bool, sctp_port: u16, opts: &SctpOptions) -> Result<Arc<Sock>> {
    let sock = Sock::new_stream_ip(v6)?;
    opts.apply(&sock, true, None)?;
    let addrs: Vec<SocketAddr> = if locals.is_empty() {
        vec![SocketAddr::new(unspecified(v6), sctp_port)]
    } else {
        locals
            .iter()
            .map(|ip| SocketAddr::new(*ip, sctp_port))
            .collect()
    };
    sock.bind_ips(&addrs).map_err(|e| bind_error(e, locals))?;
    Ok(sock)
}

/// Names the addresses when usrsctp refuses them (it knows only the addresses this host had
/// when it started).
fn bind_error(e: Error, locals: &[IpAddr]) -> Error {
    match &e {
        Error::Sys { source, .. } if source.raw_os_error() == Some(libc::EADDRNOTAVAIL) => {
            Error::Udp {
                op: "usrsctp_bindx",
                source: Arc::new(std::io::Error::new(
                    std::io::ErrorKind::AddrNotAvailable,
                    format!(
                        "cannot bind SCTP to {locals:?}: usrsctp knows only the addresses \
                         this host had when SCTP was first used"
                    ),
                )),
            }
        }
        _ => e,
    }
}

/// Starts an IP-mode association from `locals` (every address of this host if empty) to the
/// SCTP endpoint on `sctp_port` at `remote` (its IP address and UDP encapsulation port).
pub(crate) fn connect(
    locals: &[IpAddr],
    remote: SocketAddr,
    sctp_port: u16,
    opts: &SctpOptions,
) -> Result<Connecting> {
    let port = tunnel_port(0)?;
    crate::exit::arm();
    let v6 = remote.is_ipv6() || locals.iter().any(IpAddr::is_ipv6);
    let sock = socket(locals, v6, opts.local_port, opts)?;
    // Every path of the association, those the INIT-ACK lists included, starts with the
    // remote's UDP port: usrsctp peers have one tunnelling port per process.
    sock.set_encaps_port(unspecified(v6), remote.port())?;
    let shared = AssocShared::new(sock.clone(), remote, opts, Progress::Connecting);
    match sock.connect_ip(SocketAddr::new(remote.ip(), sctp_port)) {
        Ok(()) => {}
        Err(Error::Sys { source, .. }) if would_block(&source) => {}
        Err(e) => return Err(e),
    }
    // From here the association exists and forgets this when it is dropped.
    let (our_sctp_port, listed) = bound(&sock);
    let ports = (our_sctp_port, sctp_port);
    crate::ip_paths::register(ports, listed);
    let local = SocketAddr::new(locals.first().copied().unwrap_or(unspecified(v6)), port);
    let inner = AssocInner::start(shared, Link::Ip { ports }, local, remote);
    Ok(Connecting::new(inner))
}

/// The listening socket of an IP-mode listener on `locals` (all of this host's addresses if
/// empty), tunnelling port `udp_port` (0: the process's, or an ephemeral one) and
/// `sctp_port`. Returns the socket and the tunnelling port.
pub(crate) fn listen(
    locals: &[IpAddr],
    udp_port: u16,
    sctp_port: u16,
    opts: &SctpOptions,
) -> Result<(Arc<Sock>, u16)> {
    let port = tunnel_port(udp_port)?;
    crate::exit::arm();
    let v6 = locals.is_empty() || locals.iter().any(IpAddr::is_ipv6);
    let sock = socket(locals, v6, sctp_port, opts)?;
    sock.listen(opts.backlog.min(i32::MAX as u32) as i32)?;
    Ok((sock, port))
}

/// Gives every path of a new association that has no UDP port yet the port of the path it
/// was set up on, as the association's default too (for paths added later by ASCONF), and
/// probes those paths at once. usrsctp gives the addresses an INIT lists the endpoint's
/// default port, which a listener does not know, instead of the sender's; without this they
/// would go out unencapsulated, i.e. nowhere. Returns the peer's UDP address on the first
/// path. A few socket options per path.
pub(crate) fn fix_ports(sock: &Sock, first: IpAddr) -> Result<SocketAddr> {
    let port = sock.encaps_port(first)?;
    let v6 = first.is_ipv6();
    if port != 0 {
        let _ = sock.set_encaps_port(unspecified(v6), port);
        for peer in sock.peer_ips()? {
            if sock.encaps_port(peer.ip()).ok() == Some(0) {
                let _ = sock.set_encaps_port(peer.ip(), port);
                let _ = heartbeat(sock, peer.ip());
            }
        }
    }
    Ok(SocketAddr::new(first, port))
}

/// The SCTP port `sock` is bound to (0 if usrsctp lists no IP address for it) and the
/// local addresses usrsctp lists for it (see [`listed_now`]): one `usrsctp_getladdrs`.
fn bound(sock: &Sock) -> (u16, Vec<IpAddr>) {
    let addrs: Vec<SocketAddr> = sock
        .local_addrs()
        .map(|a| a.iter().filter_map(ffi::ip_addr_of).collect())
        .unwrap_or_default();
    let port = addrs.first().map_or(0, |a| a.port());
    (port, addrs.into_iter().map(|a| a.ip()).collect())
}

/// The local addresses usrsctp lists for `sock`'s association (`usrsctp_getladdrs`: an
/// address added by ASCONF only once the peer acknowledged it), or that it is bound to.
pub(crate) fn listed_now(sock: &Sock) -> Vec<IpAddr> {
    bound(sock).1
}

/// Lists `sock`'s addresses for the association with `ports` again, now and, with
/// `awaited`, every 20 ms until usrsctp lists that address (the peer has acknowledged its
/// ASCONF), for at most [`RELIST_FOR`], on a thread of its own.
pub(crate) fn relist(sock: &Arc<Sock>, ports: crate::ip_paths::Ports, awaited: Option<IpAddr>) {
    let listed = listed_now(sock);
    let pending = awaited.filter(|a| !listed.contains(a));
    crate::ip_paths::register(ports, listed);
    let Some(awaited) = pending else {
        return;
    };
    let Some(since) = crate::ip_paths::generation(ports) else {
        return;
    };
    let sock = sock.clone();
    let _ = std::thread::Builder::new()
        .name("usrsctp-relist".into())
        .spawn(move || {
            let until = std::time::Instant::now() + RELIST_FOR;
            while std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(20));
                let listed = listed_now(&sock);
                let done = listed.contains(&awaited);
                // Stops when the association is gone or its list was set again since
                // (a later add or removal, whose own list then holds).
                if listed.is_empty() || !crate::ip_paths::update_since(ports, since, listed) {
                    return;
                }
                if done {
                    return;
                }
            }
        });
}

/// How long [`relist`] waits for an added address to be acknowledged.
const RELIST_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// Asks usrsctp for a HEARTBEAT on the path to `peer` now.
fn heartbeat(sock: &Sock, peer: IpAddr) -> Result<()> {
    let mut p = <ffi::sctp_paddrparams as ffi::Plain>::zeroed();
    p.spp_address = ffi::ip_storage(SocketAddr::new(peer, 0)).0;
    p.spp_flags = ffi::SPP_HB_DEMAND;
    sock.setopt(
        ffi::IPPROTO_SCTP,
        ffi::SCTP_PEER_ADDR_PARAMS,
        &p,
        "SCTP_PEER_ADDR_PARAMS",
    )
}

/// Sets up an association accepted on an IP-mode listener: the port fix ([`fix_ports`]),
/// the options, and its driver. `peer` is the address accept reported.
pub(crate) fn accepted(
    sock: Arc<Sock>,
    peer: Option<SocketAddr>,
    local: SocketAddr,
    opts: &SctpOptions,
) -> Result<(Association, SocketAddr)> {
    let first = match peer {
        Some(p) => p.ip(),
        None => sock
            .peer_ips()?
            .first()
            .map(|a| a.ip())
            .ok_or(Error::Closed)?,
    };
    let remote = fix_ports(&sock, first)?;
    let _ = opts.apply(&sock, false, None);
    let progress = crate::assoc::established(&sock);
    let peer_port = match peer {
        Some(p) => p.port(),
        None => sock.peer_ips()?.first().map_or(0, |a| a.port()),
    };
    let (our_sctp_port, listed) = bound(&sock);
    let ports = (our_sctp_port, peer_port);
    crate::ip_paths::register(ports, listed);
    let shared = AssocShared::new(sock, remote, opts, progress);
    let inner = AssocInner::start(shared, Link::Ip { ports }, local, remote);
    Ok((Association { inner }, remote))
}
