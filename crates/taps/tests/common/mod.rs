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
