//! A listener on port 0 listens on one port: the first socket bound picks it, and every
//! other stack and family takes the same one, so a client can race them all to it.

mod common;
use common::sctp_context;
use std::net::{Ipv6Addr, SocketAddr};

use taps::taps_core::properties::{Name, Protocol};
use taps::{Preconnection, Preference, RemoteEndpoint, TransportProperties};

#[tokio::test]
async fn every_stack_and_family_of_a_port_zero_listener_has_one_port() {
    let ctx = sctp_context(false);
    // UDP too (reliability and order not required): a port taken for TCP is not taken
    // for UDP.
    let props = TransportProperties::new()
        .set(Name::Reliability, Preference::NoPreference)
        .set(Name::PreserveOrder, Preference::NoPreference)
        .set(Name::CongestionControl, Preference::NoPreference)
        .protocols(
            Preference::Require,
            [Protocol::Tcp, Protocol::Sctp, Protocol::Udp],
        );
    for _ in 0..20 {
        let listener = Preconnection::new(&ctx, props.clone().compile().unwrap())
            .local(SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)))
            .listen()
            .await
            .expect("listen on port 0");
        assert!(listener.missing().is_empty(), "{:?}", listener.missing());
        let addrs = listener.local_addrs();
        let port = addrs[0].1.port();
        assert_ne!(port, 0, "{addrs:?}");
        assert!(
            addrs.iter().all(|(_, at)| at.port() == port),
            "one port for all: {addrs:?}"
        );
        for p in [Protocol::Tcp, Protocol::Sctp, Protocol::Udp] {
            assert!(addrs.iter().any(|(s, _)| s.protocol == p), "{p}: {addrs:?}");
        }
        // Both families of TCP answer on it.
        for host in ["127.0.0.1", "::1"] {
            let only_tcp =
                TransportProperties::new().protocols(Preference::Require, [Protocol::Tcp]);
            let conn = Preconnection::new(&ctx, only_tcp.compile().unwrap())
                .remote(RemoteEndpoint::new(host, port))
                .initiate()
                .await
                .unwrap_or_else(|e| panic!("TCP to {host} port {port}: {e}"));
            drop(conn);
        }
        listener.close().await;
    }
}
