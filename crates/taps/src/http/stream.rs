//! [`HttpStream`]: a taps [`Connection`] as the IO type hyper speaks HTTP over, and
//! [`ConnectionDetails`]: what the race decided, carried on every response.

use std::io;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection as HyperConnection};
use hyper_util::rt::TokioIo;

use crate::{Connection, ConnectionInfo};

/// What taps established for an HTTP connection: the stack, the addresses, the winning
/// candidate, the race report and the TLS details ([`ConnectionInfo`], behind an `Arc`).
///
/// hyper-util's client puts it into the extensions of every response received on the
/// connection: `response.extensions().get::<ConnectionDetails>()`. Cost: one reference
/// count increment per response.
#[derive(Debug, Clone)]
pub struct ConnectionDetails(Arc<ConnectionInfo>);

impl ConnectionDetails {
    /// The details of `conn` (its information copied once, behind an `Arc`).
    pub(crate) fn of(conn: &Connection) -> ConnectionDetails {
        ConnectionDetails(Arc::new(conn.info().clone()))
    }

    /// The connection's information.
    pub fn info(&self) -> &ConnectionInfo {
        &self.0
    }
}

impl Deref for ConnectionDetails {
    type Target = ConnectionInfo;

    fn deref(&self) -> &ConnectionInfo {
        &self.0
    }
}

/// A connection established by [`Connector`](super::Connector): a taps [`Connection`] (a
/// plain TCP/MPTCP byte stream, or TLS over one) speaking hyper's `Read`/`Write`. Reads
/// and writes go straight to the socket (or the TLS session): no copy, no buffer of its
/// own.
#[derive(Debug)]
pub struct HttpStream {
    io: TokioIo<Connection>,
    details: ConnectionDetails,
    h2: bool,
}

impl HttpStream {
    /// Wraps an established connection; reads whether TLS agreed on `h2` (ALPN).
    pub(crate) fn new(conn: Connection) -> HttpStream {
        let details = ConnectionDetails(Arc::new(conn.info().clone()));
        let h2 = details
            .security
            .as_ref()
            .and_then(|s| s.alpn.as_deref())
            .is_some_and(|p| p == b"h2");
        HttpStream {
            io: TokioIo::new(conn),
            details,
            h2,
        }
    }

    /// What taps established: stack, addresses, winning candidate, race, TLS details.
    pub fn details(&self) -> &ConnectionDetails {
        &self.details
    }

    /// Whether TLS negotiated HTTP/2 (ALPN `h2`): hyper-util then speaks HTTP/2.
    pub fn negotiated_h2(&self) -> bool {
        self.h2
    }

    /// The taps connection underneath.
    pub fn connection(&self) -> &Connection {
        self.io.inner()
    }

    /// Unwraps the taps connection.
    pub fn into_connection(self) -> Connection {
        self.io.into_inner()
    }
}

impl HyperConnection for HttpStream {
    fn connected(&self) -> Connected {
        let c = Connected::new().extra(self.details.clone());
        if self.h2 {
            c.negotiated_h2()
        } else {
            c
        }
    }
}

impl Read for HttpStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for HttpStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
