//! SCTP's first-contact port probe: an SCTP attempt with no success on record asks the
//! encapsulation port first, so where nothing listens on this host it is refused without
//! a usrsctp association; with a success on record it goes straight to its INIT. In its
//! own test binary: usrsctp's count of sockets made is per process.

mod common;
use common::sctp_context;
use std::net::{Ipv4Addr, SocketAddr};

use taps::taps_core::properties::Protocol;
use taps::{AttemptCause, Preconnection, Preference, RemoteEndpoint, TransportProperties};
use usrsctp::SctpStack;

fn sctp_only() -> TransportProperties {
    TransportProperties::new().protocols(Preference::Require, [Protocol::Sctp])
}

#[tokio::test]
async fn first_contact_to_a_dead_port_makes_no_association_a_known_peer_skips_the_probe() {
    let stack = SctpStack::global();
    let ctx = sctp_context(false);
    let port = 7401;
    let client = Preconnection::new(&ctx, sctp_only().compile().unwrap())
        .remote(RemoteEndpoint::new("127.0.0.1", port));

    // First contact, nothing on the encapsulation port: refused, no usrsctp socket made.
    let made = stack.sockets_made();
    let err = client.initiate().await.unwrap_err();
    assert_eq!(err.attempt_causes(), [AttemptCause::Refused], "{err}");
    assert_eq!(
        stack.sockets_made(),
        made,
        "a probed attempt made an association"
    );

    // A listener comes up: the probe is dropped by it, the association comes up, and
    // the CIB records the success.
    let listener = Preconnection::new(&ctx, sctp_only().compile().unwrap())
        .local(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .listen()
        .await
        .unwrap();
    let conn = client.initiate().await.unwrap();
    assert_eq!(conn.info().stack.protocol, Protocol::Sctp);
    drop(conn);
    drop(listener);
    // Until the association has closed and the listener's UDP socket is gone (an INIT
    // that reached it meanwhile would wait for its retransmission).
    for _ in 0..500 {
        if stack.live_sockets() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(stack.live_sockets(), 0, "{:?}", stack.stats());

    // With a success on record, the attempt sends its INIT without asking first (one
    // usrsctp socket), and is refused all the same.
    let made = stack.sockets_made();
    let err = client.initiate().await.unwrap_err();
    assert_eq!(err.attempt_causes(), [AttemptCause::Refused], "{err}");
    assert_eq!(
        stack.sockets_made() - made,
        1,
        "a known peer's attempt goes straight to its INIT"
    );
}
