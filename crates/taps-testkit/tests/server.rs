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

/// A query for `name` of type `qtype` (wire format, one question, recursion desired).
fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes());
    q
}

#[tokio::test]
async fn serves_on_given_sockets_with_per_type_delays_and_counters() {
    use taps_testkit::RecordType;

    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = udp.local_addr().unwrap();
    let dns = DnsServer::start_on(
        "lab.test.",
        &[("www".to_string(), [192, 0, 2, 1].into())],
        5,
        vec![udp],
        vec![],
    )
    .unwrap();
    assert_eq!(dns.addrs(), &[addr]);
    assert_eq!(dns.addr(), addr);
    assert_eq!(dns.zone(), "lab.test.");

    let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut buf = [0u8; 512];
    // A (1) for www: NOERROR, one answer; MX (15) for www: delayed, NOERROR, no answer;
    // A for a name that does not exist: NXDOMAIN.
    dns.set_delay(RecordType::MX, Duration::from_millis(200));
    for (id, name, qtype, rcode, answers, min_ms) in [
        (1u16, "www.lab.test.", 1u16, 0u8, 1u16, 0u128),
        (2, "www.lab.test.", 15, 0, 0, 200),
        (3, "nope.lab.test.", 1, 3, 0, 0),
    ] {
        let start = std::time::Instant::now();
        client.send_to(&query(id, name, qtype), addr).await.unwrap();
        let n = tokio::time::timeout(Duration::from_secs(2), client.recv(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        assert!(n >= 12);
        assert_eq!(u16::from_be_bytes([buf[0], buf[1]]), id);
        assert_eq!(buf[3] & 0x0f, rcode, "rcode for {name} type {qtype}");
        assert_eq!(u16::from_be_bytes([buf[6], buf[7]]), answers);
        assert!(start.elapsed().as_millis() >= min_ms);
    }
    assert_eq!(dns.queries(Family::V4), 2);
    assert_eq!(dns.queries(RecordType::A), 2);
    assert_eq!(dns.queries(RecordType::MX), 1);
    assert_eq!(dns.queries(Family::V6), 0);
    assert_eq!(dns.total_queries(), 3);
    dns.clear_delays();
}

#[tokio::test]
async fn start_on_needs_a_udp_socket() {
    let err = DnsServer::start_on(
        "test.",
        &[("www", [192, 0, 2, 1].into())],
        5,
        vec![],
        vec![],
    )
    .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}
