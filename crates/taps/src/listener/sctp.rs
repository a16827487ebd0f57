//! SCTP's accept path: associations from the listener, stream 0 of each a connection,
//! and every further stream the peer opens on it another.

use std::io;
use std::sync::Arc;

use taps_core::properties::Protocol;
use taps_core::Stack;
use tokio_util::sync::CancellationToken;

use super::{Accepting, RESOURCE_PAUSE};
use crate::connection::{Connection, Io};
use crate::sctp_flow::{SctpFlow, SharedAssociation};

/// Accepts SCTP associations until `stop` or the listener is gone, then closes the SCTP
/// listener (awaiting its UDP socket's reader, see [`Listener::close`]).
pub(super) async fn accept_sctp(
    listener: usrsctp::SctpListener,
    acc: Accepting,
    stop: CancellationToken,
) {
    tokio::select! {
        () = stop.cancelled() => {}
        () = accept_sctp_loop(&listener, &acc) => {}
    }
    listener.close().await;
}

/// Accepts SCTP associations: stream 0 of each is a connection, and a task per
/// association turns every further stream the peer opens into one.
async fn accept_sctp_loop(listener: &usrsctp::SctpListener, acc: &Accepting) {
    loop {
        let Some(slot) = acc.slot().await else {
            return;
        };
        let (association, _) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!("SCTP accept: {e}");
                tokio::time::sleep(RESOURCE_PAUSE).await;
                continue;
            }
        };
        let shared = SharedAssociation::accepted(association.clone());
        let first = association
            .stream(0)
            .map_err(io::Error::other)
            .and_then(|s| sctp_connection(SctpFlow::new(shared.clone(), s)));
        if !acc.hand_on(first, slot).await {
            return;
        }
        tokio::spawn(accept_sctp_streams(
            association,
            Arc::downgrade(&shared),
            acc.clone(),
        ));
    }
}

/// Turns every further stream the peer opens on `association` into a connection. Ends
/// with the association or when the listener is gone.
async fn accept_sctp_streams(
    association: usrsctp::Association,
    mut shared: std::sync::Weak<SharedAssociation>,
    acc: Accepting,
) {
    loop {
        let stream = tokio::select! {
            s = association.accept_stream() => match s {
                Ok(Some(s)) => s,
                _ => return,
            },
            // The listener is gone: stop holding the association open for new streams.
            _ = acc.tx.closed() => return,
        };
        // A stream beyond the connection limit is refused: its handle is dropped, which
        // discards what it received (and frees the buffer); later messages on it come
        // back here and go the same way while the limit holds.
        let Ok(slot) = acc.slots.clone().try_acquire_owned() else {
            tracing::debug!("SCTP stream {} refused: connection limit", stream.id());
            continue;
        };
        let shared = match shared.upgrade() {
            Some(s) => s,
            // Every connection of the association is gone; it serves the peer's new ones.
            None => {
                let s = SharedAssociation::accepted(association.clone());
                shared = Arc::downgrade(&s);
                s
            }
        };
        let conn = sctp_connection(SctpFlow::new(shared, stream));
        if !acc.hand_on(conn, slot).await {
            return;
        }
    }
}

fn sctp_connection(flow: SctpFlow) -> io::Result<Connection> {
    Connection::new(Io::Sctp(flow), Stack::plain(Protocol::Sctp), None, None)
}
