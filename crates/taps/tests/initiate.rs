//! Initiate and listen end to end on loopback: real sockets, a real DNS server on
//! 127.0.0.1 (taps-testkit), real races.

use std::net::{Ipv6Addr, SocketAddr, TcpListener as StdListener};
use std::time::Duration;

use taps::taps_core::properties::Protocol;
use taps::taps_core::race::{AttemptOutcome, RaceEvent};
use taps::{
    AttemptCause, Context, Error, EstablishError, Preconnection, RemoteEndpoint,
    TransportProperties,
};
use taps_testkit::{Blackhole, DnsServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A context whose resolver asks only the test DNS server (never /etc/resolv.conf).
fn context(dns: &DnsServer) -> Context {
    Context::builder()
        .name_servers(vec![dns.addr()])
        .build()
        .unwrap()
}

fn tcp() -> TransportProperties {
    TransportProperties::new().protocols(taps::Preference::Require, [Protocol::Tcp])
}

#[tokio::test]
async fn refused_ipv6_starts_ipv4_at_once() {
    let dns = DnsServer::start("test.", &[]);
    let ctx = context(&dns);
    let v4 = StdListener::bind("127.0.0.1:0").unwrap();
    let port = v4.local_addr().unwrap().port();
    let pre = Preconnection::new(&ctx, tcp().compile().unwrap())
        .remote(RemoteEndpoint::new("localhost", port));
    let conn = pre.initiate().await.unwrap();
    let info = conn.info();
    assert_eq!(info.remote, SocketAddr::from(([127, 0, 0, 1], port)));
    let report = info.race.as_ref().unwrap();
    let attempts = &report.attempts;
    assert_eq!(attempts.len(), 2, "{report:?}");
    assert!(attempts[0].candidate.remote.is_ipv6());
    assert!(matches!(
        attempts[0].outcome,
        AttemptOutcome::Failed(AttemptCause::Refused)
    ));
    let gap = attempts[1].start - attempts[0].end.unwrap();
    assert!(
        gap < Duration::from_millis(20),
        "waited {gap:?} after the refusal"
    );
    assert!(matches!(attempts[1].outcome, AttemptOutcome::Won));
}

#[tokio::test]
async fn second_connection_skips_the_dead_address() {
    let dns = DnsServer::start("test.", &[]);
    let ctx = context(&dns);
    let v6 = Blackhole::v6().unwrap();
    let port = v6.addr().port();
    let _v4 = StdListener::bind(("127.0.0.1", port)).unwrap();
    let props = tcp()
        .attempt_delay(Duration::from_millis(100))
        .timeout(Duration::from_millis(400))
        .compile()
        .unwrap();
    let pre = Preconnection::new(&ctx, props).remote(RemoteEndpoint::new("localhost", port));
    // First race: ::1 hangs, 127.0.0.1 wins after the attempt delay; ::1 was cancelled,
    // so the CIB knows 127.0.0.1 worked.
    let first = pre.initiate().await.unwrap();
    assert!(first.info().remote.is_ipv4());
    // Second race: 127.0.0.1 (known good) goes first and wins without waiting.
    let second = pre.initiate().await.unwrap();
    let report = second.info().race.clone().unwrap();
    assert_eq!(report.attempts.len(), 1, "{report:?}");
    assert!(report.attempts[0].candidate.remote.is_ipv4());
}

#[tokio::test]
async fn unknown_host_is_one_clear_error() {
    let dns = DnsServer::start("test.", &[("known.test.", "127.0.0.1".parse().unwrap())]);
    let ctx = context(&dns);
    let pre = Preconnection::new(&ctx, tcp().compile().unwrap())
        .remote(RemoteEndpoint::new("unknown.test", 80));
    let err = pre.initiate().await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("unknown.test"), "{text}");
    assert!(
        text.contains("does not exist") || text.contains("not resolve"),
        "{text}"
    );
}

#[tokio::test]
async fn every_candidate_ruled_out_says_why_for_each() {
    let dns = DnsServer::start("test.", &[]);
    let ctx = context(&dns);
    // IPv4 required, and the only address is IPv6.
    let props = tcp()
        .ip_version(taps::Preference::Require, taps::taps_core::Family::V4)
        .compile()
        .unwrap();
    let pre = Preconnection::new(&ctx, props).remote(RemoteEndpoint::new("::1", 80));
    let err = pre.initiate().await.unwrap_err();
    let Error::Establish(EstablishError::NoCandidates { pruned, .. }) = &err else {
        panic!("{err}")
    };
    assert_eq!(pruned.len(), 1, "{err}");
    assert_eq!(pruned[0].remote.to_string(), "[::1]:80");
    assert!(err.to_string().contains("TCP [::1]:80"), "{err}");
    assert!(err.to_string().contains("::1"), "{err}");
}

#[tokio::test]
async fn all_refused_lists_every_cause() {
    let dns = DnsServer::start("test.", &[]);
    let ctx = context(&dns);
    // A port nobody listens on, on both families.
    let port = StdListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pre = Preconnection::new(&ctx, tcp().compile().unwrap())
        .remote(RemoteEndpoint::new("localhost", port));
    let started = std::time::Instant::now();
    let err = pre.initiate().await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
    let Some(race) = err.race() else {
        panic!("{err}")
    };
    // The causes are data: each attempt was refused, no text to match.
    assert_eq!(
        err.attempt_causes(),
        [AttemptCause::Refused, AttemptCause::Refused],
        "{err}"
    );
    let text = race.to_string();
    assert!(text.contains(&format!("[::1]:{port}")), "{text}");
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert_eq!(text.matches("refused").count(), 2, "{text}");
}

#[tokio::test]
async fn listener_accepts_both_families_and_messages_round_trip() {
    let dns = DnsServer::start("test.", &[]);
    let ctx = context(&dns);
    let port = StdListener::bind("[::1]:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = Preconnection::new(&ctx, TransportProperties::for_listener().compile().unwrap())
        .local(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)));
    let mut listener = server.listen().await.unwrap();
    assert!(
        listener.local_addrs().len() >= 2,
        "{:?}",
        listener.local_addrs()
    );
    let echo = tokio::spawn(async move {
        for _ in 0..2 {
            let mut c = listener.accept().await.unwrap().unwrap();
            tokio::spawn(async move {
                while let Some(m) = c.receive().await.unwrap() {
                    c.send(&m).await.unwrap();
                }
            });
        }
    });
    for host in ["::1", "127.0.0.1"] {
        let pre = Preconnection::new(&ctx, tcp().compile().unwrap())
            .remote(RemoteEndpoint::new(host, port));
        let mut c = pre.initiate().await.unwrap();
        c.send(b"hello").await.unwrap();
        c.send(b"").await.unwrap();
        c.send(&vec![7u8; 100_000]).await.unwrap();
        assert_eq!(c.receive().await.unwrap().unwrap(), b"hello");
        assert_eq!(c.receive().await.unwrap().unwrap(), b"");
        assert_eq!(c.receive().await.unwrap().unwrap().len(), 100_000);
        let s = c.statistics();
        assert_eq!(s.messages_sent, 3);
        assert_eq!(s.messages_received, 3);
        assert_eq!(s.bytes_sent, 100_005);
        assert!(s.rtt.is_some());
        c.close().await.unwrap();
    }
    echo.await.unwrap();
}

#[tokio::test]
async fn byte_stream_read_write() {
    let dns = DnsServer::start("test.", &[]);
    let ctx = context(&dns);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).await.unwrap();
        all.len()
    });
    let mut c = Preconnection::new(&ctx, tcp().compile().unwrap())
        .remote(RemoteEndpoint::addr(addr))
        .initiate()
        .await
        .unwrap();
    c.write_all(&vec![1u8; 1_000_000]).await.unwrap();
    c.shutdown().await.unwrap();
    assert_eq!(server.await.unwrap(), 1_000_000);
    assert_eq!(c.statistics().bytes_sent, 1_000_000);
    // The one path counts what the kernel sent (tcp_info): every byte, the peer having
    // read them all; it received nothing but the peer's FIN (which tcp_info counts as 1).
    let paths = c.paths().unwrap();
    assert_eq!(paths.len(), 1);
    assert!(paths[0].bytes_sent.unwrap() >= 1_000_000, "{paths:?}");
    assert!(paths[0].bytes_received.unwrap() <= 1, "{paths:?}");
}

#[tokio::test]
async fn udp_message_flow_through_listener() {
    let dns = DnsServer::start("test.", &[]);
    let ctx = context(&dns);
    let udp = || TransportProperties::new().protocols(taps::Preference::Require, [Protocol::Udp]);
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = Preconnection::new(&ctx, udp().compile().unwrap())
        .local(SocketAddr::from(([127, 0, 0, 1], port)));
    let mut listener = server.listen().await.unwrap();
    let mut c = Preconnection::new(&ctx, udp().compile().unwrap())
        .remote(RemoteEndpoint::new("127.0.0.1", port))
        .initiate()
        .await
        .unwrap();
    assert_eq!(c.info().stack.protocol, Protocol::Udp);
    c.send(b"ping").await.unwrap();
    let mut accepted = listener.accept().await.unwrap().unwrap();
    assert_eq!(accepted.receive().await.unwrap().unwrap(), b"ping");
    accepted.send(b"pong").await.unwrap();
    assert_eq!(c.receive().await.unwrap().unwrap(), b"pong");
}

/// A whole race over real sockets in virtual time: the runtime's clock is paused, so the
/// 30 s establishment timeout passes as soon as nothing else can happen, and the cause
/// says exactly how long the silent attempt ran.
#[tokio::test(start_paused = true)]
async fn blackholed_address_times_out_with_a_timeout_cause_in_virtual_time() {
    let ctx = Context::builder().build().unwrap();
    let dead = Blackhole::v6().unwrap();
    let pre = Preconnection::new(&ctx, tcp().compile().unwrap())
        .remote(RemoteEndpoint::addr(dead.addr()));
    let wall = std::time::Instant::now();
    let virtual_start = tokio::time::Instant::now();
    let err = pre.initiate().await.unwrap_err();
    assert_eq!(
        tokio::time::Instant::now() - virtual_start,
        Duration::from_secs(30),
        "{err}"
    );
    assert!(
        wall.elapsed() < Duration::from_secs(5),
        "{:?}",
        wall.elapsed()
    );
    assert_eq!(
        err.attempt_causes(),
        [AttemptCause::TimedOut {
            after: Some(Duration::from_secs(30))
        }],
        "{err}"
    );
    assert!(err.attempt_causes()[0].is_timeout());
    assert!(
        err.to_string().contains("timed out after 30000 ms"),
        "{err}"
    );
}

/// With one address family required, the other family's records are not asked for, and
/// the race does not wait for them: an AAAA answer that would come after 2 s neither
/// delays an IPv4-only connection (RFC 8305's 50 ms resolution delay waits for AAAA only
/// when IPv6 could be used) nor is queried at all.
#[tokio::test]
async fn a_required_family_asks_only_its_records() {
    use taps::taps_core::Family;
    let dns = DnsServer::start("test.", &[("v4.test.", "127.0.0.1".parse().unwrap())]);
    dns.set_delay(Family::V6, Duration::from_secs(2));
    let ctx = context(&dns);
    let listener = StdListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let props = tcp()
        .ip_version(taps::Preference::Require, Family::V4)
        .compile()
        .unwrap();
    let pre = Preconnection::new(&ctx, props)
        .remote(RemoteEndpoint::new("v4.test.", port))
        .race_timeline(true);
    let start = std::time::Instant::now();
    let conn = pre.initiate().await.unwrap();
    let took = start.elapsed();
    assert_eq!(conn.info().remote, SocketAddr::from(([127, 0, 0, 1], port)));
    assert_eq!(dns.queries(Family::V6), 0, "AAAA was asked for");
    assert_eq!(dns.queries(Family::V4), 1);
    // The race never waited for AAAA: no Resolution Delay in its timeline (a fact of
    // the race, not a time a busy machine could stretch), and well under the AAAA delay.
    let report = conn.info().race.as_ref().unwrap();
    let waited = report.timeline.iter().any(|(_, e)| {
        matches!(
            e,
            RaceEvent::Dns {
                waiting_for: Some(_),
                ..
            } | RaceEvent::ResolutionDelayOver { .. }
        )
    });
    assert!(!waited, "the race waited for AAAA:\n{}", report.trace());
    assert!(took < Duration::from_secs(2), "connected after {took:?}");

    // IPv6 required: no A query, and the name's lack of AAAA records is the error.
    dns.clear_delays();
    let props = tcp()
        .ip_version(taps::Preference::Require, Family::V6)
        .compile()
        .unwrap();
    let pre = Preconnection::new(&ctx, props).remote(RemoteEndpoint::new("v4.test.", port));
    let err = pre.initiate().await.unwrap_err();
    assert_eq!(dns.queries(Family::V4), 1, "A was asked for again: {err}");
    assert_eq!(dns.queries(Family::V6), 1, "{err}");
    assert_eq!(
        err.to_string(),
        "v4.test. does not resolve: AAAA: no record of that type"
    );
}
