//! The test DNS server itself: lifecycle and counters.

use std::time::Duration;

use taps_core::Family;
use taps_testkit::DnsServer;

#[tokio::test]
async fn listens_on_loopback_and_stops_on_drop() {
    let dns = DnsServer::start("test.", &[("www", [192, 0, 2, 1].into())]);
    let addr = dns.addr();
    assert!(addr.ip().is_loopback());
    assert_ne!(addr.port(), 0);
    assert_eq!(dns.zone(), "test.");
    assert_eq!(dns.total_queries(), 0);
    assert_eq!(dns.queries(Family::V4), 0);
    drop(dns);
    // The aborted tasks are dropped at the runtime's next turns, closing the sockets.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    std::net::TcpListener::bind(addr).expect("the TCP port is free again");
    std::net::UdpSocket::bind(addr).expect("the UDP port is free again");
}

#[tokio::test]
async fn rejects_bad_names() {
    let err = DnsServer::try_start("test.", &[("bad..name", [192, 0, 2, 1].into())]).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}
