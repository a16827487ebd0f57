//! A connected byte stream: plain TCP/MPTCP, or TLS over it. One type for the connection
//! layer, which frames messages the same way on both.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsStream;

/// A connected stream, plain or secured. The TLS state is boxed: a plain stream does not
/// carry its size.
#[derive(Debug)]
pub(crate) enum Stream {
    /// TCP or MPTCP.
    Plain(TcpStream),
    /// TLS over TCP or MPTCP (client or server side).
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// The TCP socket underneath (for addresses, `TCP_INFO`, linger).
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => t.get_ref().0,
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
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    /// Ends the sending side: on TLS a close_notify alert, then the FIN.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }
}
