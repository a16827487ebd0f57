//! A connected byte stream: plain TCP/MPTCP, TLS over it, or a QUIC stream. One type for
//! the connection layer, which frames messages the same way on all three.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsStream;

use crate::security::QuicStream;

/// A connected stream, plain or secured. The TLS state is boxed: a plain stream does not
/// carry its size.
#[derive(Debug)]
pub(crate) enum Stream {
    /// TCP or MPTCP.
    Plain(TcpStream),
    /// TLS over TCP or MPTCP (client or server side).
    Tls(Box<TlsStream<TcpStream>>),
    /// The first bidirectional stream of a QUIC connection.
    Quic(Box<QuicStream>),
}

impl Stream {
    /// The TCP socket underneath (for `TCP_INFO` and linger); `None` on QUIC.
    pub(crate) fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Stream::Plain(s) => Some(s),
            Stream::Tls(t) => Some(t.get_ref().0),
            Stream::Quic(_) => None,
        }
    }

    /// The local address; the remote one is `known` if given, else asked for (one
    /// `getpeername` on TCP).
    pub(crate) fn addrs(&self, known: Option<SocketAddr>) -> io::Result<(SocketAddr, SocketAddr)> {
        match (self.tcp(), self) {
            (Some(t), _) => Ok((t.local_addr()?, known.map_or_else(|| t.peer_addr(), Ok)?)),
            (None, Stream::Quic(q)) => Ok((q.shared.local, q.remote())),
            (None, _) => Err(io::Error::other("a stream without a socket")),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
            Stream::Quic(q) => Pin::new(q.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, data),
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, data),
            Stream::Quic(q) => Pin::new(q.as_mut()).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
            Stream::Quic(q) => Pin::new(q.as_mut()).poll_flush(cx),
        }
    }

    /// Ends the sending side: on TLS a close_notify alert, then the FIN; on QUIC the
    /// stream's FIN.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
            Stream::Quic(q) => Pin::new(q.as_mut()).poll_shutdown(cx),
        }
    }
}
