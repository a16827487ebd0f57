//! SCTP multihoming through taps' public API on loopback: a listener and a connection, each
//! asking for `multihoming` with two local addresses (127.0.0.1 and ::1), set up one
//! association over which both ends list both of the other's addresses, learnt from the
//! handshake alone (usrsctp's IP mode; no path is added by hand on either side). The
//! primary path moves to the other address and data follows. One test per process: the
//! process has one SCTP tunnelling port.

mod common;
use common::{free_port, paths_become, sctp_context};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use taps::taps_core::properties::Protocol;
use taps::{Preconnection, RemoteEndpoint, TransportProperties};

const MULTIHOMED: &str = r#"{"transport": {"value": "SCTP", "precedence": 2},
    "multihoming": {"value": true, "precedence": 2},
    "local_ips": {"value": ["127.0.0.1", "::1"], "precedence": 2}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_ends_learn_both_paths_from_the_handshake() {
    if let Err(e) = usrsctp::multihome_available() {
        taps_testkit::skip("taps SCTP multihoming", &e.to_string());
        return;
    }
    let ctx = sctp_context(false);
    let port = free_port();
    let props = || {
        TransportProperties::new()
            .merge_neat_json(MULTIHOMED)
            .unwrap()
            .compile()
            .unwrap()
    };
    let mut listener = Preconnection::new(&ctx, props())
        .local(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .listen()
        .await
        .unwrap();
    let server = tokio::spawn(async move {
        let mut s = listener.accept().await.unwrap().unwrap();
        let paths = paths_become(&s, &["127.0.0.1", "::1"], "server").await;
        while let Ok(Some(m)) = s.receive().await {
            if s.send(&m).await.is_err() {
                break;
            }
        }
        paths
    });
    let mut c = Preconnection::new(&ctx, props())
        .remote(RemoteEndpoint::new("127.0.0.1", port))
        .initiate()
        .await
        .unwrap();
    assert_eq!(c.info().stack.protocol, Protocol::Sctp);
    let mut changes = c.path_changes().unwrap();
    let paths = paths_become(&c, &["127.0.0.1", "::1"], "client").await;
    assert_eq!(paths.iter().filter(|p| p.primary).count(), 1, "{paths:?}");
    c.send(b"one").await.unwrap();
    assert_eq!(c.receive().await.unwrap().unwrap(), b"one");
    let other = paths.iter().find(|p| !p.primary).unwrap().remote;
    c.set_primary_path(other).unwrap();
    let now = c.paths().unwrap();
    assert!(
        now.iter().any(|p| p.primary && p.remote == other),
        "{now:?}"
    );
    c.send(b"two").await.unwrap();
    assert_eq!(c.receive().await.unwrap().unwrap(), b"two");
    // Pinned to the first path (stream-to-path mapping), then unpinned; a foreign address
    // is refused by name.
    let first = paths.iter().find(|p| p.primary).unwrap().remote;
    c.pin_to_path(Some(first)).unwrap();
    c.send(b"three").await.unwrap();
    assert_eq!(c.receive().await.unwrap().unwrap(), b"three");
    assert_eq!(c.unsent_bytes(), Some(0));
    // Each path counts its bytes: "one" went over the first, "two" over the other.
    let counted = c.paths().unwrap();
    assert!(
        counted
            .iter()
            .all(|p| p.bytes_sent.unwrap_or(0) > 0 && p.bytes_received.is_some()),
        "{counted:?}"
    );
    c.pin_to_path(None).unwrap();
    let foreign = SocketAddr::new("127.0.0.9".parse().unwrap(), first.port());
    let err = c.pin_to_path(Some(foreign)).unwrap_err();
    assert!(err.to_string().contains("127.0.0.9"), "{err}");
    c.close().await.unwrap();
    // The association is gone: the watch ends (what it saw before is not checked here:
    // both paths were confirmed before it started; netlab's sctp-taps-failover sees a
    // path go down).
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while changes.next().await.is_some() {}
    })
    .await;
    assert!(
        ended.is_ok(),
        "path changes did not end with the connection"
    );
    let server_paths = tokio::time::timeout(Duration::from_secs(20), server)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(server_paths.len(), 2, "{server_paths:?}");
}
