//! Listening sockets.

use std::io;
use std::net::SocketAddr;

use socket2::Domain;
use tokio::net::{TcpListener, UdpSocket};

use super::{datagram_socket, stream_socket, AttemptError, SocketOptions};

/// Opens a TCP listener on `addr` with `SO_REUSEADDR`, and `IPV6_V6ONLY` for IPv6 so that
/// `[::]:p` and `0.0.0.0:p` can both be bound. With `mptcp`, the listener is an MPTCP
/// socket, which also accepts plain TCP clients (see [`super::is_mptcp`]); when the kernel
/// has no MPTCP, or its MPTCP rejects one of `opts`, a plain TCP listener is opened
/// instead. `opts` apply to the listener and are inherited by accepted sockets; `backlog`
/// is the kernel's accept queue. Costs one socket and a few syscalls; must be called
/// inside a tokio runtime with I/O enabled.
pub(crate) fn listen_tcp_backlog(
    addr: SocketAddr,
    mptcp: bool,
    opts: &SocketOptions,
    backlog: i32,
) -> io::Result<TcpListener> {
    if mptcp {
        match tcp_listener(addr, true, opts, backlog) {
            Err(AttemptError::Unsupported(why)) => {
                tracing::debug!("MPTCP listener on {addr} not possible ({why}); using TCP");
            }
            r => return r.map_err(io::Error::from),
        }
    }
    tcp_listener(addr, false, opts, backlog).map_err(io::Error::from)
}

/// [`listen_tcp_backlog`] with an accept queue of 1,024.
#[cfg(test)]
pub(crate) fn listen_tcp(
    addr: SocketAddr,
    mptcp: bool,
    opts: &SocketOptions,
) -> io::Result<TcpListener> {
    listen_tcp_backlog(addr, mptcp, opts, 1024)
}

fn tcp_listener(
    addr: SocketAddr,
    mptcp: bool,
    opts: &SocketOptions,
    backlog: i32,
) -> Result<TcpListener, AttemptError> {
    let socket = stream_socket(Domain::for_address(addr), mptcp)?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    opts.apply_stream(&socket, addr.is_ipv6(), mptcp)?;
    socket
        .bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("binding to {addr}: {e}")))?;
    socket.listen(backlog)?;
    Ok(TcpListener::from_std(socket.into())?)
}

/// Binds a UDP (or, with `lite`, UDP-Lite) socket on `addr` for receiving from any peer,
/// with `IPV6_V6ONLY` for IPv6, DSCP and (UDP-Lite) checksum coverage from `opts`. A
/// kernel without UDP-Lite gives an `Unsupported` error. Costs one socket and a few
/// syscalls; must be called inside a tokio runtime with I/O enabled.
pub(crate) fn bind_udp(
    addr: SocketAddr,
    lite: bool,
    opts: &SocketOptions,
) -> io::Result<UdpSocket> {
    let socket = datagram_socket(Domain::for_address(addr), lite)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    opts.apply_datagram(&socket, addr.is_ipv6(), lite)?;
    socket
        .bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("binding to {addr}: {e}")))?;
    UdpSocket::from_std(socket.into())
}
