//! The echo examples run as a pair over loopback. The test calls the examples' own
//! functions (the files are included as modules) rather than their binaries:
//! `cargo test --test examples` does not build example binaries, and a nested
//! `cargo run --example` would wait for the build lock the outer cargo holds.

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/echo_client.rs"]
mod echo_client;
#[allow(dead_code, unreachable_pub)]
#[path = "../examples/echo_server.rs"]
mod echo_server;

use std::net::{Ipv4Addr, SocketAddr};

use taps::{Context, Preconnection, RemoteEndpoint, TransportProperties};

#[tokio::test]
async fn echo_client_gets_back_what_it_sent_to_echo_server() {
    // The examples' default properties (TCP and SCTP), on a port free for both; SCTP on
    // a UDP port of its own so parallel tests do not collide on 9899.
    let port = taps_testkit::free_port();
    let ctx = Context::builder()
        .sctp_udp_port(taps_testkit::free_port())
        .build()
        .unwrap();
    let props = TransportProperties::new().compile().unwrap();
    let listener = Preconnection::new(&ctx, props.clone())
        .local(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .listen()
        .await
        .unwrap();
    let server = tokio::spawn(echo_server::serve(listener));
    let pre = Preconnection::new(&ctx, props).remote(RemoteEndpoint::new("127.0.0.1", port));
    let messages = ["hello".to_string(), "world".to_string()];
    let replies = echo_client::echo(&pre, &messages).await.unwrap();
    assert_eq!(replies, messages);
    server.abort();
}
