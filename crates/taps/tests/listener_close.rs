//! Closing a listener frees its ports: after `Listener::close().await` the same port can be
//! listened on again at once, over TCP alone (accepted from in `accept` itself), over TCP and
//! SCTP together (SCTP's UDP encapsulation port included), and over UDP. Connections
//! accepted before the close live on.

mod common;
use common::{sctp_context, sctp_then_tcp};
use std::net::{Ipv4Addr, SocketAddr};
use taps_testkit::free_port;

use taps::taps_core::properties::Protocol;
use taps::{Context, Listener, Preconnection, Preference, RemoteEndpoint, TransportProperties};

fn only(p: Protocol) -> TransportProperties {
    TransportProperties::new().protocols(Preference::Require, [p])
}

async fn listen(
    ctx: &Context,
    props: &TransportProperties,
    port: u16,
) -> Result<Listener, taps::Error> {
    Preconnection::new(ctx, props.clone().compile().unwrap())
        .local(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .listen()
        .await
}

/// Listens, closes, and listens again on the same port at once: every stack that
/// listened the first time listens the second time.
async fn listen_close_listen(ctx: &Context, props: TransportProperties) {
    let port = free_port();
    let first = listen(ctx, &props, port).await.expect("first listen");
    let stacks: Vec<_> = first.local_addrs().iter().map(|(s, _)| *s).collect();
    assert!(first.missing().is_empty(), "{:?}", first.missing());
    first.close().await;
    let second = listen(ctx, &props, port)
        .await
        .expect("listening again right after close");
    let again: Vec<_> = second.local_addrs().iter().map(|(s, _)| *s).collect();
    assert_eq!(again, stacks, "missing after close: {:?}", second.missing());
    second.close().await;
}

#[tokio::test]
async fn tcp_only_port_is_free_after_close() {
    listen_close_listen(&sctp_context(true), only(Protocol::Tcp)).await;
}

#[tokio::test]
async fn tcp_and_sctp_ports_are_free_after_close() {
    listen_close_listen(&sctp_context(true), sctp_then_tcp()).await;
}

#[tokio::test]
async fn udp_port_is_free_after_close() {
    // Requiring UDP relaxes the reliability and order defaults.
    let udp = only(Protocol::Udp);
    listen_close_listen(&sctp_context(true), udp).await;
}

/// A connection accepted over SCTP outlives the listener's close (its association keeps
/// the UDP socket), and the listener's SCTP port is refused afterwards only for new
/// associations.
#[tokio::test]
async fn accepted_sctp_connection_outlives_close() {
    let ctx = sctp_context(false);
    let port = free_port();
    let props = only(Protocol::Sctp);
    let mut listener = listen(&ctx, &props, port).await.unwrap();
    let pre = Preconnection::new(&ctx, props.clone().compile().unwrap())
        .remote(RemoteEndpoint::new("127.0.0.1", port));
    let (client, accepted) = tokio::join!(pre.initiate(), listener.accept());
    let mut client = client.unwrap();
    let mut server = accepted.unwrap().unwrap();
    listener.close().await;
    client.send(b"after close").await.unwrap();
    let got = server.receive().await.unwrap().unwrap();
    assert_eq!(&got[..], b"after close");
}

/// TLS over TCP and QUIC on one port: both sockets are closed when `close` returns.
#[tokio::test]
async fn tls_and_quic_ports_are_free_after_close() {
    let ctx = sctp_context(true);
    let pki = taps_testkit::TestPki::new(&["localhost"]).unwrap();
    let port = free_port();
    let secure = || {
        Preconnection::new(
            &ctx,
            TransportProperties::for_listener()
                .require(taps::taps_core::properties::Name::Security)
                .compile()
                .unwrap(),
        )
        .local(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .security(taps::SecurityParameters::new().identity(&pki.cert, &pki.key))
    };
    let first = secure().listen().await.expect("first listen");
    let stacks: Vec<_> = first.local_addrs().iter().map(|(s, _)| *s).collect();
    assert!(stacks.len() >= 2, "{stacks:?}");
    first.close().await;
    let second = secure()
        .listen()
        .await
        .expect("listening again right after close");
    let again: Vec<_> = second.local_addrs().iter().map(|(s, _)| *s).collect();
    assert_eq!(again, stacks, "missing after close: {:?}", second.missing());
}

/// A listener on TCP and SCTP hands out connections of both (the SCTP accept task stops
/// on `close`, the TCP socket is accepted from like any other socket then).
#[tokio::test]
async fn tcp_and_sctp_listener_accepts_both() {
    let ctx = sctp_context(false);
    let port = free_port();
    let mut listener = listen(&ctx, &sctp_then_tcp(), port).await.unwrap();
    for p in [Protocol::Sctp, Protocol::Tcp] {
        let pre = Preconnection::new(&ctx, only(p).compile().unwrap())
            .remote(RemoteEndpoint::new("127.0.0.1", port));
        let accept = tokio::time::timeout(std::time::Duration::from_secs(5), listener.accept());
        let (client, accepted) = tokio::join!(pre.initiate(), accept);
        client.unwrap();
        let server = accepted
            .unwrap_or_else(|_| panic!("{p:?} connection not accepted within 5 s"))
            .unwrap()
            .unwrap();
        assert_eq!(server.info().stack.protocol, p);
    }
    listener.close().await;
}
