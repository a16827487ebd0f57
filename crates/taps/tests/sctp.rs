//! SCTP end to end on loopback: user-space SCTP over UDP (usrsctp), real races against
//! TCP, listening on both at once, flow mapping onto streams, and cleanup of losers.
//! Every test uses its own UDP encapsulation port so tests run in parallel.

mod common;
use common::{free_port, sctp_context, sctp_then_tcp};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use taps::taps_core::properties::Protocol;
use taps::taps_core::race::RaceEvent;
use taps::{
    Context, Listener, PathState, Preconnection, Preference, RemoteEndpoint, SetupError,
    TransportProperties, UsageError,
};

fn only(p: Protocol) -> TransportProperties {
    TransportProperties::new().protocols(Preference::Require, [p])
}

async fn listen(ctx: &Context, props: TransportProperties, port: u16) -> Listener {
    let props = props.compile().unwrap();
    Preconnection::new(ctx, props)
        .local(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .listen()
        .await
        .unwrap()
}

/// Echoes every message of every accepted connection; counts associations (stream 0).
fn echo(mut listener: Listener) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(Ok(mut c)) = listener.accept().await {
            tokio::spawn(async move {
                while let Ok(Some(m)) = c.receive().await {
                    if c.send(&m).await.is_err() {
                        break;
                    }
                }
                let _ = c.close().await;
            });
        }
    })
}

/// An SCTP-only connection to an SCTP echo listener on 127.0.0.1, and the listener's
/// task.
async fn sctp_echo_connection() -> (taps::Connection, tokio::task::JoinHandle<()>) {
    let ctx = sctp_context(true);
    let port = free_port();
    let server = echo(listen(&ctx, only(Protocol::Sctp), port).await);
    let pre = Preconnection::new(&ctx, only(Protocol::Sctp).compile().unwrap())
        .remote(RemoteEndpoint::new("127.0.0.1", port));
    (pre.initiate().await.unwrap(), server)
}

#[tokio::test]
async fn sctp_only_connects_and_carries_messages() {
    let (mut c, server) = sctp_echo_connection().await;
    assert_eq!(c.info().stack.protocol, Protocol::Sctp);
    assert_eq!(c.sctp_stream(), Some(0));
    c.send(b"hello").await.unwrap();
    c.send(b"").await.unwrap();
    c.send(&vec![7u8; 200_000]).await.unwrap();
    assert_eq!(c.receive().await.unwrap().unwrap(), b"hello");
    assert_eq!(c.receive().await.unwrap().unwrap(), b"");
    assert_eq!(c.receive().await.unwrap().unwrap().len(), 200_000);
    assert_eq!(c.queued_bytes(), Some(0));
    c.close().await.unwrap();
    server.abort();
}

/// An SCTP connection lists its association's path with usrsctp's figures; the primary
/// path can be set to it, and an address that is no path's is refused by name.
#[tokio::test]
async fn an_sctp_connection_shows_its_path_and_refuses_a_foreign_primary() {
    let (mut c, server) = sctp_echo_connection().await;
    c.send(b"rtt sample").await.unwrap();
    c.receive().await.unwrap().unwrap();
    let paths = c.paths().unwrap();
    let [path] = &paths[..] else {
        panic!("not one path: {paths:?}")
    };
    assert_eq!((path.local, path.remote), (c.info().local, c.info().remote));
    assert_eq!(path.state, PathState::Active);
    assert!(path.primary);
    assert!(path.srtt.is_some() && path.rto.is_some(), "{path:?}");
    assert!(path.cwnd.unwrap() > 0 && path.mtu.unwrap() > 0, "{path:?}");
    // The message and its echo, with the handshake and SACKs, went over this one path.
    assert!(
        path.bytes_sent.unwrap() > 10 && path.bytes_received.unwrap() > 10,
        "{path:?}"
    );
    c.set_primary_path(path.remote).unwrap();
    let foreign = SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), path.remote.port()));
    let err = c.set_primary_path(foreign).unwrap_err();
    assert!(
        matches!(
            err,
            taps::Error::Setup(SetupError::Usage(UsageError::NotAPath { remote, protocol: Protocol::Sctp }))
                if remote == foreign
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("127.0.0.2"), "{err}");
    c.close().await.unwrap();
    server.abort();
}

#[tokio::test]
async fn sctp_wins_against_tcp_when_both_listen_on_the_port() {
    let ctx = sctp_context(false);
    let port = free_port();
    let listener = listen(&ctx, sctp_then_tcp(), port).await;
    let stacks: Vec<Protocol> = listener
        .local_addrs()
        .iter()
        .map(|(s, _)| s.protocol)
        .collect();
    assert!(
        stacks.contains(&Protocol::Sctp) && stacks.contains(&Protocol::Tcp),
        "{stacks:?}"
    );
    let server = echo(listener);
    let pre = Preconnection::new(&ctx, sctp_then_tcp().compile().unwrap())
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port));
    let mut c = pre.initiate().await.unwrap();
    let report = c.info().race.clone().unwrap();
    assert_eq!(
        c.info().stack.protocol,
        Protocol::Sctp,
        "{}",
        report.trace()
    );
    assert!(
        report
            .timeline
            .iter()
            .any(|(_, e)| matches!(e, RaceEvent::Reachable(_))),
        "{}",
        report.trace()
    );
    c.send(b"ping").await.unwrap();
    assert_eq!(c.receive().await.unwrap().unwrap(), b"ping");
    c.close().await.unwrap();
    server.abort();
}

/// Whether the SCTP packet `pkt` (12-byte common header, then chunks of type, flags,
/// length, padded to 4 bytes) holds a chunk of type `ty`.
fn has_chunk(pkt: &[u8], ty: u8) -> bool {
    let mut off = 12;
    while off + 4 <= pkt.len() {
        if pkt[off] == ty {
            return true;
        }
        let len = u16::from_be_bytes([pkt[off + 2], pkt[off + 3]]) as usize;
        if len < 4 {
            return false;
        }
        off += (len + 3) & !3;
    }
    false
}

/// A UDP relay on loopback in front of `server` (an SCTP encapsulation port) that drops
/// every client packet holding a COOKIE ECHO (chunk type 10): the server answers INIT,
/// so a race commits to SCTP, but the handshake never completes. Returns its port.
async fn cookie_dropping_relay(server: SocketAddr) -> u16 {
    common::udp_relay(server, |from_client, pkt| {
        !(from_client && has_chunk(pkt, 10))
    })
    .await
}

/// The server answers SCTP's INIT but never its COOKIE ECHO: the race commits to SCTP
/// when the INIT ACK arrives, and when the handshake has not completed by the end of
/// the commitment (the attempt delay here) TCP starts and wins, long before the
/// establishment timeout (30 s) the race used to wait for.
#[tokio::test]
async fn a_stalled_sctp_handshake_lets_tcp_win_when_the_commitment_lapses() {
    let server_ctx = sctp_context(false);
    let port = free_port();
    let server = echo(listen(&server_ctx, sctp_then_tcp(), port).await);
    let encapsulation = SocketAddr::from((Ipv4Addr::LOCALHOST, server_ctx.sctp_udp_port()));
    let relay = cookie_dropping_relay(encapsulation).await;
    let ctx = Context::builder()
        .name_servers(vec![SocketAddr::from((Ipv4Addr::LOCALHOST, 9))])
        .sctp_udp_port(relay)
        .flow_mapping(false)
        .build()
        .unwrap();
    let pre = Preconnection::new(&ctx, sctp_then_tcp().compile().unwrap())
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port));
    let started = std::time::Instant::now();
    let c = tokio::time::timeout(Duration::from_secs(5), pre.initiate())
        .await
        .expect("the race waited for its establishment timeout")
        .unwrap();
    let took = started.elapsed();
    let report = c.info().race.clone().unwrap();
    assert_eq!(c.info().stack.protocol, Protocol::Tcp, "{}", report.trace());
    let timeline = &report.timeline;
    let committed = timeline
        .iter()
        .any(|(_, e)| matches!(e, RaceEvent::Reachable(_)));
    let lapsed = timeline
        .iter()
        .any(|(_, e)| matches!(e, RaceEvent::CommitmentLapsed { .. }));
    assert!(committed && lapsed, "{}", report.trace());
    assert!(
        took < Duration::from_secs(2),
        "{took:?}: {}",
        report.trace()
    );
    server.abort();
}

async fn flows(ctx: &Context, port: u16, n: usize) -> Vec<taps::Connection> {
    let pre = Preconnection::new(ctx, only(Protocol::Sctp).compile().unwrap())
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port));
    let pre = std::sync::Arc::new(pre);
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let pre = pre.clone();
            tokio::spawn(async move { pre.initiate().await.unwrap() })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// Accepts `n` connections and returns how many were associations (stream 0).
async fn accept_counting(mut listener: Listener, n: usize) -> (usize, Listener) {
    let mut associations = 0;
    for _ in 0..n {
        let c = tokio::time::timeout(Duration::from_secs(10), listener.accept())
            .await
            .expect("accept in time")
            .unwrap()
            .unwrap();
        if c.sctp_stream() == Some(0) {
            associations += 1;
        }
        std::mem::forget(c);
    }
    (associations, listener)
}

#[tokio::test]
async fn flow_mapping_puts_many_flows_on_one_association() {
    let ctx = sctp_context(true);
    let port = free_port();
    let listener = listen(&ctx, only(Protocol::Sctp), port).await;
    let server = tokio::spawn(accept_counting(listener, 32));
    let conns = flows(&ctx, port, 32).await;
    let mut streams: Vec<u16> = conns.iter().map(|c| c.sctp_stream().unwrap()).collect();
    streams.sort();
    streams.dedup();
    assert_eq!(streams.len(), 32, "every flow has its own stream");
    let (associations, _listener) = server.await.unwrap();
    assert_eq!(associations, 1);
}

#[tokio::test]
async fn without_flow_mapping_each_flow_is_an_association() {
    let ctx = sctp_context(false);
    let port = free_port();
    let listener = listen(&ctx, only(Protocol::Sctp), port).await;
    let server = tokio::spawn(accept_counting(listener, 8));
    let conns = flows(&ctx, port, 8).await;
    assert!(conns.iter().all(|c| c.sctp_stream() == Some(0)));
    let (associations, _listener) = server.await.unwrap();
    assert_eq!(associations, 8);
}

#[tokio::test]
async fn clone_flow_is_a_new_stream_the_peer_accepts() {
    let ctx = sctp_context(true);
    let port = free_port();
    let server = echo(listen(&ctx, only(Protocol::Sctp), port).await);
    let pre = Preconnection::new(&ctx, only(Protocol::Sctp).compile().unwrap())
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port));
    let mut first = pre.initiate().await.unwrap();
    let mut second = first.clone_flow().await.unwrap();
    assert_ne!(second.sctp_stream(), first.sctp_stream());
    // The first flow's race chose the association; the clone ran none.
    let won = first.info().candidate().expect("the first flow's winner");
    assert_eq!(won.remote.port(), port);
    assert!(second.info().race.is_none() && second.info().candidate().is_none());
    second.send(b"on the clone").await.unwrap();
    first.send(b"on the first").await.unwrap();
    assert_eq!(second.receive().await.unwrap().unwrap(), b"on the clone");
    assert_eq!(first.receive().await.unwrap().unwrap(), b"on the first");
    server.abort();
}

#[tokio::test]
async fn each_side_opens_streams_of_its_own_parity() {
    // The initiator opens odd stream ids, the accepting side even ones, so streams both
    // open at the same moment never share an id.
    let ctx = sctp_context(true);
    let port = free_port();
    let mut listener = listen(&ctx, only(Protocol::Sctp), port).await;
    let pre = Preconnection::new(&ctx, only(Protocol::Sctp).compile().unwrap())
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port));
    let first = pre.initiate().await.unwrap();
    let accepted = listener.accept().await.unwrap().unwrap();
    assert_eq!(
        (first.sctp_stream(), accepted.sctp_stream()),
        (Some(0), Some(0))
    );
    let (a, b) = (
        first.clone_flow().await.unwrap(),
        first.clone_flow().await.unwrap(),
    );
    let c = accepted.clone_flow().await.unwrap();
    assert_eq!(a.sctp_stream(), Some(1));
    assert_eq!(b.sctp_stream(), Some(3));
    assert_eq!(c.sctp_stream(), Some(2));
}

#[tokio::test]
async fn scheduler_property_is_accepted() {
    let ctx = sctp_context(false);
    let port = free_port();
    let server = echo(listen(&ctx, only(Protocol::Sctp), port).await);
    for word in [
        "fcfs",
        "round-robin",
        "round-robin-packet",
        "priority",
        "fair-bandwidth",
    ] {
        let props = only(Protocol::Sctp)
            .merge_neat_json(&format!(r#"{{"connScheduler": "{word}"}}"#))
            .unwrap()
            .compile()
            .unwrap();
        let pre = Preconnection::new(&ctx, props)
            .race_timeline(true)
            .remote(RemoteEndpoint::new("127.0.0.1", port));
        let mut c = pre.initiate().await.unwrap();
        // A lone message on an idle association goes out at once with every scheduler
        // (libusrsctp's round-robin-per-packet one used to hold it until the 30 s heartbeat).
        let echoed = tokio::time::timeout(Duration::from_secs(5), async {
            c.send(word.as_bytes()).await.unwrap();
            c.receive().await.unwrap().unwrap()
        })
        .await
        .unwrap_or_else(|_| panic!("{word}: no echo within 5 s"));
        assert_eq!(echoed, word.as_bytes());
    }
    server.abort();
}

/// A byte-stream echo server: copies each connection's bytes back until end of stream,
/// then closes.
fn byte_echo(mut listener: Listener) -> tokio::task::JoinHandle<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tokio::spawn(async move {
        while let Some(Ok(mut c)) = listener.accept().await {
            tokio::spawn(async move {
                let mut data = Vec::new();
                if c.read_to_end(&mut data).await.is_ok() {
                    let _ = c.write_all(&data).await;
                }
                let _ = c.close().await;
            });
        }
    })
}

#[tokio::test]
async fn shutdown_ends_a_mapped_flow_like_a_fin_and_the_association_outlives_it() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ctx = sctp_context(true);
    let port = free_port();
    let server = byte_echo(listen(&ctx, only(Protocol::Sctp), port).await);
    let pre = Preconnection::new(&ctx, only(Protocol::Sctp).compile().unwrap())
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port));
    let mut first = pre.initiate().await.unwrap();
    let mut second = pre.initiate().await.unwrap();
    assert_eq!(second.sctp_stream(), Some(1));
    let run = async {
        // Half-close the second flow: the server reads end of stream, answers, and closes
        // its side; the first flow on the same association is unaffected.
        second.write_all(b"on stream one").await.unwrap();
        second.shutdown().await.unwrap();
        let mut back = Vec::new();
        second.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"on stream one");
        second.close().await.unwrap();

        first.write_all(&[9u8; 100_000]).await.unwrap();
        first.shutdown().await.unwrap();
        let mut back = Vec::new();
        first.read_to_end(&mut back).await.unwrap();
        assert_eq!(back.len(), 100_000);
        // The last flow: closing shuts the association down (SHUTDOWN completes).
        first.close().await.unwrap();
    };
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("half-close and close finish promptly");
    // A new flow after the association closed races for a new one.
    let mut third = pre.initiate().await.unwrap();
    assert_eq!(third.sctp_stream(), Some(0));
    third.send(b"x").await.unwrap();
    third.close().await.unwrap();
    server.abort();
}
