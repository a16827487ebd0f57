//! The socket layer: runs one connection attempt for the race, and opens listening
//! sockets.
//!
//! Sockets are created with socket2 (so that MPTCP and UDP-Lite sockets can be made),
//! configured from [`SocketOptions`], and handed to tokio. Every attempt owns its socket:
//! dropping the future returned by [`connect`] closes it, which is how the race cancels
//! a losing attempt.

mod listen;
mod options;
pub(crate) mod sctp;
mod stream;
mod sys;
#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) use listen::listen_tcp;
pub(crate) use listen::{bind_udp, listen_tcp_backlog};
pub(crate) use options::SocketOptions;
pub(crate) use stream::Stream;

use std::io;
use std::net::{IpAddr, SocketAddr, SocketAddrV6};
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, Socket, Type};
use taps_core::candidates::{Candidate, LocalBinding};
use taps_core::policy::History;
use taps_core::Security;
use taps_core::{AttemptCause, LayerError};

use crate::error::NotSupported;
use crate::security::{ClientSecurity, DtlsFlow, QuicStream, SecurityInfo};
use taps_core::properties::Protocol;
use tokio::net::{TcpStream, UdpSocket};

/// Why one connection attempt failed; the race reports it per attempt.
#[derive(Debug, thiserror::Error)]
pub enum AttemptError {
    /// The peer answered with a reset (`ECONNREFUSED`): nothing listens there.
    #[error("connection refused")]
    Refused,
    /// No route to the network or host (`ENETUNREACH`, `EHOSTUNREACH`).
    #[error("network or host unreachable")]
    Unreachable,
    /// The kernel gave up (`ETIMEDOUT`, e.g. SYN retries or `TCP_USER_TIMEOUT`).
    #[error("timed out")]
    TimedOut,
    /// This host or build cannot run the attempt (protocol missing from the kernel,
    /// security layer not handled here, unknown congestion control, ...).
    #[error("{0}")]
    Unsupported(NotSupported),
    /// Any other I/O error.
    #[error(transparent)]
    Io(io::Error),
    /// Already classified (e.g. a failed TLS handshake).
    #[error("{0}")]
    Cause(AttemptCause),
}

impl From<io::Error> for AttemptError {
    /// Classifies an OS error: refused, unreachable and timed out get their own variant.
    fn from(e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ECONNREFUSED) => AttemptError::Refused,
            Some(libc::ENETUNREACH | libc::EHOSTUNREACH) => AttemptError::Unreachable,
            Some(libc::ETIMEDOUT) => AttemptError::TimedOut,
            _ if e.kind() == io::ErrorKind::ConnectionRefused => AttemptError::Refused,
            _ if e.kind() == io::ErrorKind::TimedOut => AttemptError::TimedOut,
            _ => AttemptError::Io(e),
        }
    }
}

impl From<AttemptError> for AttemptCause {
    /// The typed cause the race, its report and the CIB carry (the I/O error itself is
    /// kept for causes without a variant of their own).
    fn from(e: AttemptError) -> Self {
        match e {
            AttemptError::Refused => AttemptCause::Refused,
            AttemptError::Unreachable => AttemptCause::Unreachable,
            AttemptError::TimedOut => AttemptCause::TimedOut { after: None },
            AttemptError::Unsupported(why) => AttemptCause::Unsupported(LayerError::new(why)),
            AttemptError::Io(e) if e.raw_os_error() == Some(libc::ECONNRESET) => {
                AttemptCause::Reset
            }
            AttemptError::Io(e) => AttemptCause::other(e),
            AttemptError::Cause(c) => c,
        }
    }
}

impl From<AttemptError> for io::Error {
    /// Back to an I/O error (for listeners): the classified variants become their errno.
    fn from(e: AttemptError) -> Self {
        match e {
            AttemptError::Refused => io::Error::from_raw_os_error(libc::ECONNREFUSED),
            AttemptError::Unreachable => io::Error::from_raw_os_error(libc::ENETUNREACH),
            AttemptError::TimedOut => io::Error::from_raw_os_error(libc::ETIMEDOUT),
            AttemptError::Unsupported(m) => io::Error::new(io::ErrorKind::Unsupported, m),
            AttemptError::Io(e) => e,
            AttemptError::Cause(c) => io::Error::other(c),
        }
    }
}

/// What kind of byte stream was established.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TcpFlavor {
    /// `None` for plain TCP; for MPTCP, `Some(true)` when MPTCP is in use and
    /// `Some(false)` when the peer made it fall back to plain TCP.
    pub mptcp_active: Option<bool>,
}

/// Which datagram protocol a datagram socket runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DatagramKind {
    /// UDP.
    Udp,
    /// UDP-Lite (RFC 3828), possibly with partial checksum coverage.
    UdpLite,
}

/// A socket that finished its attempt, ready for I/O.
#[derive(Debug)]
pub(crate) enum Established {
    /// A connected TCP or MPTCP stream.
    Tcp(TcpStream, TcpFlavor),
    /// TLS over TCP or MPTCP, its handshake done and the peer verified.
    Tls(
        Box<tokio_rustls::TlsStream<TcpStream>>,
        TcpFlavor,
        Box<SecurityInfo>,
    ),
    /// A QUIC connection's first stream, its handshake done and the peer verified.
    Quic(Box<QuicStream>, Box<SecurityInfo>),
    /// A DTLS session over UDP or UDP-Lite, its handshake done and the peer verified.
    Dtls(Box<DtlsFlow>, Box<SecurityInfo>),
    /// A UDP or UDP-Lite socket `connect`ed to the remote (no handshake happened).
    Udp(
        UdpSocket,
        // Which of the two: only the socket tests read it today.
        #[cfg_attr(not(test), allow(dead_code))] DatagramKind,
    ),
    /// An SCTP association (user-space SCTP over UDP); addresses are the UDP ones.
    Sctp(usrsctp::Association),
}

#[cfg(test)]
impl Established {
    /// The local address (one `getsockname`).
    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Established::Tcp(s, _) => s.local_addr(),
            Established::Tls(t, _, _) => t.get_ref().0.local_addr(),
            Established::Quic(q, _) => Ok(q.shared.local),
            Established::Dtls(d, _) => Ok(d.local),
            Established::Udp(s, _) => s.local_addr(),
            Established::Sctp(a) => Ok(a.local_addr()),
        }
    }

    /// The remote address (one `getpeername`).
    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Established::Tcp(s, _) => s.peer_addr(),
            Established::Tls(t, _, _) => t.get_ref().0.peer_addr(),
            Established::Quic(q, _) => Ok(q.remote()),
            Established::Dtls(d, _) => Ok(d.peer),
            Established::Udp(s, _) => s.peer_addr(),
            Established::Sctp(a) => Ok(a.remote_addr()),
        }
    }
}

/// Runs one attempt for `candidate`: creates the socket, applies `opts`, binds the
/// candidate's local address (port 0) if it has one, and connects.
///
/// TCP and MPTCP wait for the handshake (one round trip). UDP and UDP-Lite only bind and
/// `connect(2)` the socket, so they finish at once: such an attempt wins the race
/// immediately and says nothing about whether the remote is reachable.
///
/// Only plain stacks (no TLS/DTLS/QUIC) and TCP, MPTCP, UDP, UDP-Lite are run here;
/// others fail with [`AttemptError::Unsupported`]. No socket exists until the future is
/// first polled, and dropping the future closes the socket.
///
/// Must be polled inside a tokio runtime with I/O enabled.
#[cfg(test)]
pub(crate) async fn connect(
    candidate: &Candidate,
    opts: &SocketOptions,
) -> Result<Established, AttemptError> {
    connect_signalling(candidate.clone(), Arc::new(opts.clone()), None, |_| {}).await
}

/// A point an attempt passed before it finished, reported to the race as it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Milestone {
    /// The remote answered but the handshake needs more round trips (SCTP INIT-ACK).
    Reachable,
    /// The transport connected; the security handshake runs (TCP up, TLS not yet; for
    /// DTLS, the server's first answer).
    TransportUp,
}

/// [`connect`], reporting milestones as they pass, for stacks where the answer of the
/// remote and the end of the attempt differ: SCTP's INIT-ACK arrives one round trip
/// before its COOKIE-ACK ([`Milestone::Reachable`]); TLS runs its handshake after TCP
/// connected ([`Milestone::TransportUp`]). Plain TCP reports none. A secure stack needs
/// `security` (its configuration); without it the attempt fails as unsupported. Takes
/// what it uses, so the future stands alone (a race keeps it beside the others). Cost:
/// as [`connect`], plus the TLS handshake for TLS.
pub(crate) async fn connect_signalling(
    candidate: Candidate,
    opts: Arc<SocketOptions>,
    security: Option<Arc<ClientSecurity>>,
    mut progress: impl FnMut(Milestone) + Send,
) -> Result<Established, AttemptError> {
    let (candidate, opts, security) = (&candidate, &*opts, security.as_deref());
    let stack = candidate.stack;
    if let Some(why) = candidate.unavailable {
        return Err(AttemptError::Cause(AttemptCause::Unavailable(why)));
    }
    if stack.security != Security::None {
        // Boxed: the TLS, QUIC and DTLS handshakes' state is large, and a plain attempt
        // should not carry (and allocate) it.
        return Box::pin(connect_secure(candidate, opts, security, progress)).await;
    }
    let local = candidate.local.as_ref();
    match stack.protocol {
        Protocol::Tcp => connect_stream(candidate.remote, local, false, opts).await,
        Protocol::Mptcp => connect_stream(candidate.remote, local, true, opts).await,
        Protocol::Udp => connect_datagram(candidate.remote, local, DatagramKind::Udp, opts),
        Protocol::UdpLite => connect_datagram(candidate.remote, local, DatagramKind::UdpLite, opts),
        Protocol::Sctp => {
            sctp::connect(candidate, opts, move || progress(Milestone::Reachable)).await
        }
        Protocol::Quic => Err(AttemptError::Unsupported(NotSupported::Stack(stack))),
    }
}

/// Whether `candidate` has no success on record: where an attempt over UDP (QUIC, SCTP)
/// first asks whether anything listens on the port (a probe costs a few syscalls, so a
/// peer known to answer is not asked).
pub(crate) fn first_contact(candidate: &Candidate) -> bool {
    !matches!(candidate.history, History::Succeeded { .. })
}

/// A secure attempt: the transport, then the security handshake (the finish line).
async fn connect_secure(
    candidate: &Candidate,
    opts: &SocketOptions,
    security: Option<&ClientSecurity>,
    mut progress: impl FnMut(Milestone) + Send,
) -> Result<Established, AttemptError> {
    let stack = candidate.stack;
    let local = candidate.local.as_ref();
    match (stack.protocol, stack.security, security) {
        (Protocol::Tcp | Protocol::Mptcp, Security::Tls, Some(sec)) => {
            let mptcp = stack.protocol == Protocol::Mptcp;
            let Established::Tcp(tcp, flavor) =
                connect_stream(candidate.remote, local, mptcp, opts).await?
            else {
                unreachable!("connect_stream makes a TCP stream")
            };
            progress(Milestone::TransportUp);
            let (tls, info) = sec.handshake(tcp).await.map_err(AttemptError::Cause)?;
            Ok(Established::Tls(
                Box::new(tls.into()),
                flavor,
                Box::new(info),
            ))
        }
        (Protocol::Quic, Security::QuicTls, Some(sec)) => {
            // First contact: probe the port before the Initial, so a server without
            // QUIC refuses the attempt at once.
            let (stream, info) = sec
                .quic_connect(candidate.remote, first_contact(candidate))
                .await
                .map_err(AttemptError::Cause)?;
            Ok(Established::Quic(Box::new(stream), Box::new(info)))
        }
        (Protocol::Udp | Protocol::UdpLite, Security::Dtls, Some(sec)) => {
            let kind = match stack.protocol {
                Protocol::Udp => DatagramKind::Udp,
                _ => DatagramKind::UdpLite,
            };
            let Established::Udp(udp, _) = connect_datagram(candidate.remote, local, kind, opts)?
            else {
                unreachable!("connect_datagram makes a datagram socket")
            };
            // The server's first answer is DTLS's "transport up".
            let answered = || progress(Milestone::TransportUp);
            let (flow, info) = sec
                .dtls_connect(udp, answered)
                .await
                .map_err(AttemptError::Cause)?;
            Ok(Established::Dtls(Box::new(flow), Box::new(info)))
        }
        _ => Err(AttemptError::Unsupported(NotSupported::Stack(stack))),
    }
}

async fn connect_stream(
    remote: SocketAddr,
    local: Option<&LocalBinding>,
    mptcp: bool,
    opts: &SocketOptions,
) -> Result<Established, AttemptError> {
    let socket = stream_socket(Domain::for_address(remote), mptcp)?;
    opts.apply_stream(&socket, remote.is_ipv6(), mptcp)?;
    if let Some(l) = local {
        bind_local(&socket, l)?;
    }
    let stream = connect_tcp(socket, remote).await?;
    // A connected stream is not failed over a diagnostic: unknown answers count as
    // "not confirmed MPTCP".
    let mptcp_active = mptcp.then(|| sys::mptcp_info_available(&stream).unwrap_or(false));
    Ok(Established::Tcp(stream, TcpFlavor { mptcp_active }))
}

/// Connects `socket` to `remote` and waits until the runtime reports it writable, as
/// tokio's own connect does, whatever the address.
async fn connect_tcp(socket: Socket, remote: SocketAddr) -> io::Result<TcpStream> {
    match socket.connect(&remote.into()) {
        Ok(()) => return TcpStream::from_std(socket.into()),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    let stream = TcpStream::from_std(socket.into())?;
    stream.writable().await?;
    match stream.take_error()? {
        Some(e) => Err(e),
        None => Ok(stream),
    }
}

fn connect_datagram(
    remote: SocketAddr,
    local: Option<&LocalBinding>,
    kind: DatagramKind,
    opts: &SocketOptions,
) -> Result<Established, AttemptError> {
    let lite = kind == DatagramKind::UdpLite;
    let socket = datagram_socket(Domain::for_address(remote), lite)?;
    opts.apply_datagram(&socket, remote.is_ipv6(), lite)?;
    if let Some(l) = local {
        bind_local(&socket, l)?;
    }
    socket.connect(&remote.into())?;
    let udp = UdpSocket::from_std(socket.into())?;
    Ok(Established::Udp(udp, kind))
}

/// A non-blocking TCP or MPTCP socket; a kernel without MPTCP gives `Unsupported`.
pub(crate) fn stream_socket(domain: Domain, mptcp: bool) -> Result<Socket, AttemptError> {
    let protocol = if mptcp {
        socket2::Protocol::from(sys::IPPROTO_MPTCP)
    } else {
        socket2::Protocol::TCP
    };
    // Non-blocking from creation (SOCK_NONBLOCK): no fcntl calls.
    let socket = Socket::new(domain, Type::STREAM.nonblocking(), Some(protocol)).map_err(|e| {
        // Old kernels reject protocol numbers >= 256 with EINVAL.
        match e.raw_os_error() {
            Some(libc::EPROTONOSUPPORT | libc::ENOPROTOOPT | libc::EINVAL) if mptcp => {
                AttemptError::Unsupported(NotSupported::Protocol(Protocol::Mptcp))
            }
            _ => AttemptError::Io(e),
        }
    })?;
    Ok(socket)
}

/// A non-blocking UDP or UDP-Lite socket; a kernel without UDP-Lite gives `Unsupported`.
pub(crate) fn datagram_socket(domain: Domain, lite: bool) -> Result<Socket, AttemptError> {
    let protocol = if lite {
        socket2::Protocol::from(sys::IPPROTO_UDPLITE)
    } else {
        socket2::Protocol::UDP
    };
    let socket =
        Socket::new(domain, Type::DGRAM.nonblocking(), Some(protocol)).map_err(|e| {
            match e.raw_os_error() {
                Some(libc::EPROTONOSUPPORT | libc::ENOPROTOOPT) if lite => {
                    AttemptError::Unsupported(NotSupported::Protocol(Protocol::UdpLite))
                }
                _ => AttemptError::Io(e),
            }
        })?;
    Ok(socket)
}

/// Binds `socket` to the binding's address, port 0 (link-local IPv6 gets the
/// interface's scope).
fn bind_local(socket: &Socket, l: &LocalBinding) -> Result<(), AttemptError> {
    let addr = match l.addr {
        IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => {
            let scope = sys::interface_index(&l.interface);
            SocketAddr::V6(SocketAddrV6::new(v6, 0, 0, scope))
        }
        ip => SocketAddr::new(ip, 0),
    };
    socket.bind(&addr.into()).map_err(|e| {
        AttemptError::Io(io::Error::new(
            e.kind(),
            format!("binding to {} ({}): {e}", l.addr, l.interface),
        ))
    })?;
    options::bind_device(socket, &l.interface)
}

/// Whether `stream` runs MPTCP: `None` for a plain TCP socket (including a plain TCP
/// client accepted by an MPTCP listener: Linux hands out a TCP socket then),
/// `Some(true)` for an MPTCP socket using MPTCP, `Some(false)` for an MPTCP socket whose
/// peer made it fall back to TCP. Costs one or two `getsockopt` calls.
pub(crate) fn is_mptcp(stream: &TcpStream) -> Option<bool> {
    let proto = sys::get_int(stream, libc::SOL_SOCKET, libc::SO_PROTOCOL).ok()?;
    if proto != sys::IPPROTO_MPTCP {
        return None;
    }
    Some(sys::mptcp_info_available(stream).unwrap_or(false))
}

/// Kernel TCP statistics of a connection (a subset of `struct tcp_info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) struct TcpInfo {
    /// Smoothed round-trip time.
    pub rtt: Duration,
    /// Round-trip time variance.
    pub rttvar: Duration,
    /// Current retransmission timeout.
    pub rto: Duration,
    /// Segments retransmitted over the connection's life.
    pub retransmits: u32,
    /// Segments currently considered lost.
    pub lost: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// Congestion window, in segments.
    pub snd_cwnd: u32,
    /// Sender maximum segment size, in bytes.
    pub snd_mss: u32,
    /// Path MTU, in bytes.
    pub pmtu: u32,
    /// Bytes sent, retransmissions included (`tcpi_bytes_sent`; 0 before Linux 4.19).
    pub bytes_sent: u64,
    /// Bytes received (`tcpi_bytes_received`).
    pub bytes_received: u64,
}

/// Reads `TCP_INFO` (one `getsockopt`); `None` if the kernel refuses. For MPTCP the
/// kernel answers for the first subflow.
pub(crate) fn tcp_info(stream: &TcpStream) -> Option<TcpInfo> {
    Some(tcp_info_of(sys::tcp_info(stream).ok()?))
}

/// An MPTCP connection's subflows, (local, remote, figures), the first subflow first;
/// `None` where the kernel does not list them (before Linux 5.16, or after a fallback to
/// TCP). Two getsockopts.
pub(crate) fn mptcp_subflows(
    stream: &TcpStream,
) -> Option<Vec<(std::net::SocketAddr, std::net::SocketAddr, TcpInfo)>> {
    let subflows = sys::mptcp_subflows(stream).ok()?;
    Some(
        subflows
            .into_iter()
            .map(|(l, r, i)| (l, r, tcp_info_of(i)))
            .collect(),
    )
}

/// The figures taps reads from a `tcp_info`.
fn tcp_info_of(i: libc::tcp_info) -> TcpInfo {
    let us = |v: u32| Duration::from_micros(v.into());
    TcpInfo {
        rtt: us(i.tcpi_rtt),
        rttvar: us(i.tcpi_rttvar),
        rto: us(i.tcpi_rto),
        retransmits: i.tcpi_total_retrans,
        lost: i.tcpi_lost,
        unacked: i.tcpi_unacked,
        snd_cwnd: i.tcpi_snd_cwnd,
        snd_mss: i.tcpi_snd_mss,
        pmtu: i.tcpi_pmtu,
        bytes_sent: i.tcpi_bytes_sent,
        bytes_received: i.tcpi_bytes_received,
    }
}
