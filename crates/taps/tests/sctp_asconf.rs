//! A local address added to and removed from an established SCTP connection through taps'
//! public API, on loopback: the client, multihomed on ::1 alone, connects to a listener
//! multihomed on 127.0.0.1 and ::1; it adds 127.0.0.1 and the server's connection gets a
//! path change "added" and a second path (SCTP's ASCONF, so nothing is done on the server's
//! side); the client removes it and the server gets "removed". Bad requests fail with
//! errors that name the address or the property. One test per process: the process has
//! one SCTP tunnelling port.

mod common;
use common::{free_port, paths_become, sctp_context};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use taps::{PathChangeKind, Preconnection, RemoteEndpoint, TransportProperties};
use tokio::time::timeout;

const T: Duration = Duration::from_secs(20);

fn multihomed(locals: &[&str]) -> taps::taps_core::properties::Properties {
    let json = serde_json::json!({
        "transport": {"value": "SCTP", "precedence": 2},
        "multihoming": {"value": true, "precedence": 2},
        "local_ips": {"value": locals, "precedence": 2},
    });
    TransportProperties::new()
        .merge_neat_json(&json.to_string())
        .unwrap()
        .compile()
        .unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_added_address_reaches_the_peer_through_the_protocol() {
    if let Err(e) = usrsctp::multihome_available() {
        taps_testkit::skip("taps SCTP multihoming", &e.to_string());
        return;
    }
    let ctx = sctp_context(false);
    let port = free_port();
    let mut listener = Preconnection::new(&ctx, multihomed(&["127.0.0.1", "::1"]))
        .local(SocketAddr::from((Ipv6Addr::LOCALHOST, port)))
        .listen()
        .await
        .unwrap();
    let mut c = Preconnection::new(&ctx, multihomed(&["::1"]))
        .remote(RemoteEndpoint::new("::1", port))
        .initiate()
        .await
        .unwrap();
    let mut s = timeout(T, listener.accept())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let mut changes = s.path_changes().unwrap();
    paths_become(&s, &["::1"], "server, before the add").await;

    c.add_local_address(ip("127.0.0.1")).unwrap();
    let added = timeout(T, async {
        loop {
            let ch = changes.next().await.expect("path changes ended");
            if ch.kind == PathChangeKind::Added {
                return ch;
            }
        }
    })
    .await
    .expect("the server was never told of the added address");
    assert_eq!(added.remote.ip(), ip("127.0.0.1"), "{added:?}");
    paths_become(&s, &["::1", "127.0.0.1"], "server, after the add").await;
    c.send(b"hello").await.unwrap();
    assert_eq!(s.receive().await.unwrap().unwrap(), b"hello");

    c.remove_local_address(ip("127.0.0.1")).unwrap();
    timeout(T, async {
        while changes.next().await.expect("path changes ended").kind != PathChangeKind::Removed {}
    })
    .await
    .expect("the server was never told of the removed address");
    paths_become(&s, &["::1"], "server, after the removal").await;

    // An address this host does not have, and the last address: refused, naming it.
    let err = c.add_local_address(ip("192.0.2.77")).unwrap_err();
    assert!(err.to_string().contains("192.0.2.77"), "{err}");
    let err = c.remove_local_address(ip("::1")).unwrap_err();
    assert!(err.to_string().contains("last local address"), "{err}");
    c.close().await.unwrap();

    // A connection without multihoming keeps its address: the error names the property.
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    let plain = Preconnection::new(&ctx, TransportProperties::new().compile().unwrap())
        .remote(RemoteEndpoint::new("127.0.0.1", tcp_port))
        .initiate()
        .await
        .unwrap();
    let err = plain.add_local_address(ip("::1")).unwrap_err();
    assert!(err.to_string().contains("`multihoming`"), "{err}");
}
