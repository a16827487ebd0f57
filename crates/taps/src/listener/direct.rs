//! The listener's fast path: a lone plain TCP socket accepted from in
//! [`Listener::accept`](super::Listener::accept) itself, and what an accepted stream
//! runs.

use std::net::SocketAddr;

use taps_core::properties::Protocol;
use taps_core::Stack;
use tokio::net::TcpListener;

use super::{out_of_resources, Accepting, RESOURCE_PAUSE};
use crate::connection::Connection;
use crate::transport;
use crate::Error;

/// A listener's only socket, plain TCP: [`Listener::accept`] accepts from it itself, so
/// a connection costs no task hand-over (a channel send and a wake-up of the caller).
pub(super) struct DirectTcp {
    pub(super) listener: TcpListener,
    /// The listener's address when not a wildcard (see [`accept_stream`](super::accept_stream)).
    pub(super) local: Option<SocketAddr>,
    pub(super) mptcp: bool,
    pub(super) acc: Accepting,
    /// Out of file descriptors: accepting resumes then.
    pub(super) paused_until: Option<tokio::time::Instant>,
}

impl DirectTcp {
    /// The next connection, as [`accept_stream`](super::accept_stream) would hand it on (the same slots, pause
    /// and errors). Cancel-safe.
    pub(super) async fn accept(&mut self) -> Option<Result<Connection, Error>> {
        if let Some(until) = self.paused_until {
            tokio::time::sleep_until(until).await;
            self.paused_until = None;
        }
        loop {
            let slot = self.acc.slot().await?;
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) if out_of_resources(&e) => {
                    tracing::warn!("accepting paused for {RESOURCE_PAUSE:?}: {e}");
                    self.paused_until = Some(tokio::time::Instant::now() + RESOURCE_PAUSE);
                    return Some(Err(Error::Io(e)));
                }
                Err(e) => {
                    tracing::debug!("accept: {e}");
                    continue;
                }
            };
            let (mptcp, protocol) = accepted_kind(&stream, self.mptcp);
            let conn =
                Connection::accepted(stream, Stack::plain(protocol), mptcp, self.local, peer);
            return Some(self.acc.adopt(conn, slot));
        }
    }
}

/// No-delay on an accepted stream, and what it runs: whether MPTCP is active (asked only
/// of an MPTCP listener's sockets: a plain TCP listener hands out plain TCP only) and
/// the protocol.
pub(super) fn accepted_kind(
    stream: &tokio::net::TcpStream,
    mptcp_listener: bool,
) -> (Option<bool>, Protocol) {
    let _ = stream.set_nodelay(true);
    let mptcp = if mptcp_listener {
        transport::is_mptcp(stream)
    } else {
        None
    };
    let protocol = if mptcp == Some(true) {
        Protocol::Mptcp
    } else {
        Protocol::Tcp
    };
    (mptcp, protocol)
}
