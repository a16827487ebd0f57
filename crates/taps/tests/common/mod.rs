//! Helpers shared by the integration tests (each test file is its own binary and uses
//! a part of them).
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr, UdpSocket as StdUdp};

use taps::taps_core::properties::Protocol;
use taps::{Context, Listener, Preference, TransportProperties};

/// A context with an unused UDP encapsulation port and no DNS (literal addresses).
pub(crate) fn sctp_context(flow_mapping: bool) -> Context {
    let udp = StdUdp::bind("127.0.0.1:0").unwrap();
    let port = udp.local_addr().unwrap().port();
    drop(udp);
    Context::builder()
        .name_servers(vec![SocketAddr::from((Ipv4Addr::LOCALHOST, 9))])
        .sctp_udp_port(port)
        .flow_mapping(flow_mapping)
        .build()
        .unwrap()
}

/// NEAT's `transport: ["SCTP", "TCP"]`, one of them required, SCTP preferred.
pub(crate) fn sctp_then_tcp() -> TransportProperties {
    TransportProperties::new().protocols(Preference::Require, [Protocol::Sctp, Protocol::Tcp])
}

/// Echoes every message of every connection `listener` accepts, each in a task of its
/// own, until the listener or the connection ends.
pub(crate) fn spawn_echo(mut listener: Listener) {
    tokio::spawn(async move {
        while let Some(Ok(mut conn)) = listener.accept().await {
            tokio::spawn(async move {
                while let Ok(Some(m)) = conn.receive().await {
                    if conn.send(&m).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
}

/// A UDP relay on loopback in front of `server`: what a client sends to the returned
/// port goes to `server` and back, each datagram only if `forward(from_client, bytes)`
/// says so (a path that drops some packets, or dies).
pub(crate) async fn udp_relay(
    server: SocketAddr,
    forward: impl Fn(bool, &[u8]) -> bool + Send + Sync + 'static,
) -> u16 {
    use std::sync::{Arc, Mutex};
    let outer = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let inner = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
    inner.connect(server).await.unwrap();
    let port = outer.local_addr().unwrap().port();
    let forward = Arc::new(forward);
    let client = Arc::new(Mutex::new(None::<SocketAddr>));
    let (o, i, c, f) = (
        outer.clone(),
        inner.clone(),
        client.clone(),
        forward.clone(),
    );
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok((n, from)) = o.recv_from(&mut buf).await {
            *c.lock().unwrap() = Some(from);
            if f(true, &buf[..n]) {
                let _ = i.send(&buf[..n]).await;
            }
        }
    });
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = inner.recv(&mut buf).await {
            let to = *client.lock().unwrap();
            if let (Some(to), true) = (to, forward(false, &buf[..n])) {
                let _ = outer.send_to(&buf[..n], to).await;
            }
        }
    });
    port
}

/// A TCP port free on 127.0.0.1 now (for a listener on every protocol, SCTP's port too).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits (up to 20 s) until `c` has exactly one path to each of `remotes` (the peer's
/// addresses), every one active, and returns the paths; fails naming `side` otherwise.
pub(crate) async fn paths_become(
    c: &taps::Connection,
    remotes: &[&str],
    side: &str,
) -> Vec<taps::Path> {
    use std::collections::BTreeSet;
    let want: BTreeSet<std::net::IpAddr> = remotes.iter().map(|a| a.parse().unwrap()).collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let paths = c.paths().unwrap();
        let have: BTreeSet<std::net::IpAddr> = paths.iter().map(|p| p.remote.ip()).collect();
        if have == want && paths.iter().all(|p| p.state == taps::PathState::Active) {
            return paths;
        }
        assert!(std::time::Instant::now() < deadline, "{side}: {paths:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
