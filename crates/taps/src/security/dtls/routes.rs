//! Which session of a DTLS listener a peer's datagram goes to.
//!
//! A listener keeps one session per peer address. A peer can start a new handshake from
//! the same address while its old session still lives: a client that restarted without a
//! close_notify (it crashed, or was killed), or a new client behind a NAT that gave it the
//! old one's port. As RFC 9147 (section 4.2.8) asks, a ClientHello in epoch 0 to an
//! established session starts a second session beside it, which replaces the old one only
//! once its handshake is done (the peer has then shown that it receives at that address,
//! so a forged ClientHello cannot take a session away). Meanwhile the peer's handshake
//! records go to the new session and everything else to the old one. Cost per datagram
//! of a known peer: an atomic load and a look at the first record's header.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;

use super::HANDSHAKE_RECORD;

/// A session of a peer: where its datagrams go, and whether its handshake is done.
pub(super) struct SessionHandle {
    pub(super) tx: mpsc::Sender<Vec<u8>>,
    /// Set by the session when its handshake finished.
    pub(super) done: Arc<AtomicBool>,
}

/// Where a known peer's datagrams go.
pub(super) struct Route {
    session: SessionHandle,
    /// A new handshake from the same address, while `session` lives.
    next: Option<SessionHandle>,
}

/// What became of a datagram handed to a [`Route`].
pub(super) enum Delivery {
    /// Queued for one of the peer's sessions (or dropped because its queue was full; the
    /// peer retransmits).
    Queued,
    /// A ClientHello to an established session: the caller starts a new session for it
    /// and gives it to [`Route::set_next`].
    NewHandshake(Vec<u8>),
    /// The peer's sessions have all ended: the caller forgets the route and treats the
    /// datagram as the first of a new peer.
    Ended(Vec<u8>),
}

impl Route {
    /// A route to the peer's first session.
    pub(super) fn new(session: SessionHandle) -> Route {
        Route {
            session,
            next: None,
        }
    }

    /// The new handshake's session, after [`Delivery::NewHandshake`].
    pub(super) fn set_next(&mut self, next: SessionHandle) {
        self.next = Some(next);
    }

    /// Whether every session of this peer has ended.
    pub(super) fn is_closed(&self) -> bool {
        self.session.tx.is_closed() && self.next.as_ref().is_none_or(|n| n.tx.is_closed())
    }

    /// Hands `datagram` to the session it belongs to.
    pub(super) fn deliver(&mut self, datagram: Vec<u8>) -> Delivery {
        // A new handshake that finished replaces the old session (whose queue closes with
        // its sender: it ends when it next waits); one that failed is forgotten; one
        // whose old session ended meanwhile takes its place at once.
        if let Some(next) = self.next.take() {
            if next.done.load(Ordering::Acquire) || self.session.tx.is_closed() {
                self.session = next;
            } else if !next.tx.is_closed() {
                self.next = Some(next);
            }
        }
        let to = match &self.next {
            Some(next) if is_handshake_traffic(&datagram) => &next.tx,
            Some(_) => &self.session.tx,
            None if is_client_hello(&datagram) && self.session.done.load(Ordering::Acquire) => {
                return Delivery::NewHandshake(datagram);
            }
            None => &self.session.tx,
        };
        match to.try_send(datagram) {
            Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => Delivery::Queued,
            Err(mpsc::error::TrySendError::Closed(d)) if self.is_closed() => Delivery::Ended(d),
            // The one it was for just ended; the other lives on.
            Err(mpsc::error::TrySendError::Closed(_)) => Delivery::Queued,
        }
    }
}

/// Handshake message type "ClientHello".
const CLIENT_HELLO: u8 = 1;

/// Whether `datagram` starts with a ClientHello in epoch 0 (DTLSPlaintext header: type,
/// version, epoch, sequence number, length: 13 bytes; then the handshake message's type).
pub(super) fn is_client_hello(datagram: &[u8]) -> bool {
    datagram.len() > 13
        && datagram[0] == HANDSHAKE_RECORD
        && datagram[3..5] == [0, 0]
        && datagram[13] == CLIENT_HELLO
}

/// Whether `datagram` belongs to a handshake rather than to an established session, by
/// its first record: any plaintext record of epoch 0, DTLS 1.2's Finished (a handshake
/// record of epoch 1), and DTLS 1.3's records under handshake keys (a unified header,
/// `001CSLEE`, whose epoch bits say 2).
pub(super) fn is_handshake_traffic(datagram: &[u8]) -> bool {
    match datagram.first() {
        Some(&b) if b & 0xe0 == 0x20 => b & 0x03 == 2,
        Some(&kind) if datagram.len() >= 5 => {
            let epoch = u16::from_be_bytes([datagram[3], datagram[4]]);
            epoch == 0 || (kind == HANDSHAKE_RECORD && epoch == 1)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plaintext(kind: u8, epoch: u16, first_body_byte: u8) -> Vec<u8> {
        let mut d = vec![kind, 0xfe, 0xfd];
        d.extend_from_slice(&epoch.to_be_bytes());
        d.extend_from_slice(&[0; 6]); // sequence number
        d.extend_from_slice(&[0, 1]); // length
        d.push(first_body_byte);
        d
    }

    fn handle(done: bool) -> (SessionHandle, mpsc::Receiver<Vec<u8>>) {
        let (tx, rx) = mpsc::channel(4);
        let done = Arc::new(AtomicBool::new(done));
        (SessionHandle { tx, done }, rx)
    }

    #[test]
    fn records_are_told_apart_by_their_first_header() {
        assert!(is_client_hello(&plaintext(22, 0, 1)));
        assert!(!is_client_hello(&plaintext(22, 0, 2))); // a ServerHello
        assert!(!is_client_hello(&plaintext(22, 1, 1)));
        assert!(!is_client_hello(&plaintext(23, 0, 1)));
        assert!(!is_client_hello(&[22, 0xfe, 0xfd]));
        assert!(is_handshake_traffic(&plaintext(22, 0, 16)));
        assert!(is_handshake_traffic(&plaintext(20, 0, 1))); // ChangeCipherSpec
        assert!(is_handshake_traffic(&plaintext(22, 1, 20))); // DTLS 1.2 Finished
        assert!(!is_handshake_traffic(&plaintext(23, 1, 0))); // application data
        assert!(!is_handshake_traffic(&plaintext(21, 1, 0))); // an encrypted alert
        assert!(is_handshake_traffic(&[0x2e, 0, 0])); // DTLS 1.3, epoch 2
        assert!(!is_handshake_traffic(&[0x2f, 0, 0])); // DTLS 1.3, epoch 3
        assert!(!is_handshake_traffic(&[]));
    }

    #[test]
    fn a_client_hello_to_an_established_session_starts_a_second_one() {
        let (old, mut old_rx) = handle(true);
        let mut route = Route::new(old);
        let hello = plaintext(22, 0, 1);
        let Delivery::NewHandshake(d) = route.deliver(hello.clone()) else {
            panic!("no new handshake");
        };
        assert_eq!(d, hello);
        let (next, mut next_rx) = handle(false);
        let next_done = next.done.clone();
        route.set_next(next);
        // Handshake records go to the new session, the rest to the old one.
        assert!(matches!(
            route.deliver(plaintext(22, 0, 16)),
            Delivery::Queued
        ));
        assert!(matches!(
            route.deliver(plaintext(23, 1, 0)),
            Delivery::Queued
        ));
        assert_eq!(next_rx.try_recv().ok(), Some(plaintext(22, 0, 16)));
        assert_eq!(old_rx.try_recv().ok(), Some(plaintext(23, 1, 0)));
        // Its handshake done, the new session takes everything; the old one's queue ends.
        next_done.store(true, Ordering::Release);
        assert!(matches!(
            route.deliver(plaintext(23, 1, 7)),
            Delivery::Queued
        ));
        assert_eq!(next_rx.try_recv().ok(), Some(plaintext(23, 1, 7)));
        assert!(old_rx.try_recv().is_err());
        assert!(old_rx.is_closed());
    }

    #[test]
    fn a_client_hello_to_a_session_in_its_handshake_is_its_own() {
        // A retransmitted ClientHello, or the second one after a cookie: the same session.
        let (first, mut rx) = handle(false);
        let mut route = Route::new(first);
        assert!(matches!(
            route.deliver(plaintext(22, 0, 1)),
            Delivery::Queued
        ));
        assert_eq!(rx.try_recv().ok(), Some(plaintext(22, 0, 1)));
    }

    #[test]
    fn a_failed_new_handshake_leaves_the_old_session() {
        let (old, mut old_rx) = handle(true);
        let mut route = Route::new(old);
        assert!(matches!(
            route.deliver(plaintext(22, 0, 1)),
            Delivery::NewHandshake(_)
        ));
        let (next, next_rx) = handle(false);
        route.set_next(next);
        drop(next_rx); // the new handshake failed
        assert!(matches!(
            route.deliver(plaintext(22, 0, 16)),
            Delivery::Queued
        ));
        assert_eq!(old_rx.try_recv().ok(), Some(plaintext(22, 0, 16)));
        drop(old_rx);
        assert!(matches!(
            route.deliver(plaintext(23, 1, 0)),
            Delivery::Ended(_)
        ));
    }
}
