//! A server UDP socket bound to the unspecified address must answer each client from the
//! address that client sent to. 127.0.0.2 is loopback on Linux but not the address routing
//! picks as source (127.0.0.1), so a reply sent with plain `send_to` would be dropped by the
//! client's connected UDP socket and the connect would time out.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::timeout;
use usrsctp::{SctpOptions, SctpStack};

const T: Duration = Duration::from_secs(3);

async fn via_second_loopback(bind: &str, sctp_port: u16) {
    let opts = SctpOptions {
        init_attempts: 2,
        init_max_timeout_ms: 1000,
        ..SctpOptions::default()
    };
    let stack = SctpStack::global();
    let l = stack
        .listen(bind.parse().unwrap(), sctp_port, &opts)
        .unwrap();
    let port = l.local_addr().port();
    let to: SocketAddr = SocketAddr::from(([127, 0, 0, 2], port));
    let c = stack.connect(to, sctp_port, &opts).unwrap();
    let (a, b) = tokio::join!(timeout(T, l.accept()), timeout(T, c.into_future()));
    let client = b
        .expect("connect timed out: reply came from the wrong source address")
        .expect("connect");
    let (server, peer) = a.expect("accept timed out").expect("accept");
    let local = client.local_addr();
    assert_eq!(
        (peer.ip().to_canonical(), peer.port()),
        (local.ip().to_canonical(), local.port())
    );
    client.send(0, b"ping", true, 1).await.unwrap();
    let m = timeout(T, server.recv()).await.unwrap().unwrap().unwrap();
    assert_eq!(m.data.as_slice(), b"ping");
    server.send(0, b"pong", true, 2).await.unwrap();
    let m = timeout(T, client.recv()).await.unwrap().unwrap().unwrap();
    assert_eq!(m.data.as_slice(), b"pong");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv4_wildcard_replies_from_destination_address() {
    via_second_loopback("0.0.0.0:0", 5101).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dual_stack_wildcard_replies_from_mapped_destination_address() {
    // Skip quietly where IPv6 is unavailable.
    if std::net::UdpSocket::bind("[::]:0").is_err() {
        return;
    }
    via_second_loopback("[::]:0", 5102).await;
}
