//! `taps::http::Client` against Debian's caddy (quic-go's HTTP/3, Go's HTTP/2; installed
//! by `scripts/deps.sh`), a server no one here wrote, on ports picked at run time:
//! - h3 and h2 on one port: the request goes over HTTP/3, the next one on the same
//!   connection; eight concurrent first requests make one connection;
//! - UDP to the port blackholed (caddy on TCP only, a UDP socket that never answers on
//!   the port): HTTP/2 once QUIC's head start is over, and a new client in the same
//!   context skips QUIC (the CIB marks it broken);
//! - h3 only on another port, advertised in `Alt-Svc`: the first request over HTTP/2,
//!   the second over HTTP/3 to the alternative;
//! - a name whose HTTPS record (RFC 9460, from a DNS server on loopback) offers h3 on
//!   another port: the first request goes there over HTTP/3;
//! - lookups held back 300 ms with UDP blackholed: TLS/TCP starts QUIC's head start after
//!   QUIC's first attempt, not while QUIC still waits for its answers.
//!
//! Where QUIC must win, the head start is 10 s, so a busy machine cannot make TLS/TCP
//! win instead; nothing here measures time against a bound.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use http::Version;
use taps::http::{Client, Exchange, Leg, Protocols};
use taps::taps_core::ServiceRecord;
use taps::{Context, SecurityParameters};
use taps_testkit::caddy::{have_caddy, Caddy, Site};
use taps_testkit::{free_port, skip, DnsServer, RecordType, TestPki};

const GENEROUS: Duration = Duration::from_secs(10);

fn site(h3: bool, body: &str) -> Site {
    Site {
        h3,
        body: body.into(),
        ..Site::default()
    }
}

fn client(ctx: &Context, pki: &TestPki, head_start: Option<Duration>) -> Client {
    let mut b = Client::builder(ctx).security(SecurityParameters::new().ca_file(&pki.ca));
    if let Some(h) = head_start {
        b = b.quic_head_start(h);
    }
    b.build().unwrap()
}

async fn get(client: &Client, port: u16) -> (Version, Exchange, String) {
    let uri = format!("https://localhost:{port}/").parse().unwrap();
    let res = client.get(uri).await.expect("a response");
    assert_eq!(res.status(), 200);
    let x = res
        .extensions()
        .get::<Exchange>()
        .expect("exchange")
        .clone();
    let body = String::from_utf8(res.body().to_vec()).unwrap();
    println!("{:?} {}: {}", res.version(), body, x.connection.race);
    (res.version(), x, body)
}

fn ready() -> Option<TestPki> {
    if !have_caddy() {
        skip(
            "http3",
            "caddy is not installed (scripts/deps.sh installs it)",
        );
        return None;
    }
    Some(TestPki::new(&["localhost"]).unwrap())
}

#[tokio::test]
async fn h3_and_h2_on_one_port_goes_over_http3() {
    let Some(pki) = ready() else { return };
    let caddy = Caddy::start(&[site(true, "one port")], &pki.cert, &pki.key);
    let ctx = Context::new().unwrap();
    let c = client(&ctx, &pki, Some(GENEROUS));
    let (v, x, body) = get(&c, caddy.ports[0]).await;
    assert_eq!((v, body.as_str()), (Version::HTTP_3, "one port"));
    assert!(
        matches!(x.connection.race.quic, Leg::Won(_)),
        "{:?}",
        x.connection.race
    );
    assert_eq!(x.connection.race.tcp, Leg::NotStarted);
    assert!(!x.reused && x.connect.is_some());
    let alpn = x.connection.details.security.as_ref().unwrap().alpn.clone();
    assert_eq!(alpn.as_deref(), Some(&b"h3"[..]));
    // The next request: the same HTTP/3 connection, no race.
    let (v, x2, _) = get(&c, caddy.ports[0]).await;
    assert_eq!(v, Version::HTTP_3);
    assert!(x2.reused && x2.connect.is_none());
    assert_eq!(x2.connection.details.local, x.connection.details.local);
    // Its connections closed: the next request opens a new one.
    c.close_connections();
    let (v, x3, _) = get(&c, caddy.ports[0]).await;
    assert_eq!(v, Version::HTTP_3);
    assert!(!x3.reused && x3.connect.is_some());
    // HTTP/2 only: the same server over TLS/TCP, QUIC not tried.
    let h2 = Client::builder(&ctx)
        .security(SecurityParameters::new().ca_file(&pki.ca))
        .protocols(Protocols::Http2)
        .build()
        .unwrap();
    let (v, x, _) = get(&h2, caddy.ports[0]).await;
    assert_eq!(v, Version::HTTP_2);
    assert!(matches!(x.connection.race.quic, Leg::Skipped(_)));
}

#[tokio::test]
async fn concurrent_first_requests_share_one_http3_connection() {
    let Some(pki) = ready() else { return };
    let caddy = Caddy::start(&[site(true, "shared")], &pki.cert, &pki.key);
    let ctx = Context::new().unwrap();
    let c = client(&ctx, &pki, Some(GENEROUS));
    let port = caddy.ports[0];
    let gets: Vec<_> = (0..8)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { get(&c, port).await })
        })
        .collect();
    let mut new = 0;
    let mut locals = Vec::new();
    for g in gets {
        let (v, x, _) = g.await.unwrap();
        assert_eq!(v, Version::HTTP_3);
        new += usize::from(!x.reused);
        locals.push(x.connection.details.local);
    }
    // One race; the seven others waited for it and took its connection.
    assert_eq!(new, 1);
    assert!(locals.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(ctx.open_quic_connections(), 1);
}

/// UDP sockets on `port` of both loopback addresses that never read: QUIC's packets
/// there get no answer and no ICMP error.
fn udp_blackhole(port: u16) -> Vec<UdpSocket> {
    let mut socks = vec![UdpSocket::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).unwrap()];
    if let Ok(s) = UdpSocket::bind(SocketAddr::from((Ipv6Addr::LOCALHOST, port))) {
        socks.push(s);
    }
    socks
}

#[tokio::test]
async fn udp_blackholed_falls_back_to_http2_and_the_next_client_skips_quic() {
    let Some(pki) = ready() else { return };
    let caddy = Caddy::start(&[site(false, "tcp only")], &pki.cert, &pki.key);
    let port = caddy.ports[0];
    let _hole = udp_blackhole(port);
    let ctx = Context::new().unwrap();
    let first = client(&ctx, &pki, None);
    let (v, x, _) = get(&first, port).await;
    assert_eq!(v, Version::HTTP_2);
    let race = &x.connection.race;
    assert!(matches!(race.tcp, Leg::Won(_)), "{race:?}");
    assert!(matches!(race.quic, Leg::Lost(_)), "{race:?}");
    // TLS/TCP started only when QUIC's head start (100 ms, nothing known) was over.
    assert_eq!(race.head_start, Duration::from_millis(100));
    assert!(race.took >= race.head_start, "{race:?}");
    // A new client (no pooled connection) in the same context: QUIC is marked broken
    // in the CIB, so TLS/TCP starts at once.
    let second = client(&ctx, &pki, None);
    let (v, x, _) = get(&second, port).await;
    assert_eq!(v, Version::HTTP_2);
    let race = &x.connection.race;
    match &race.quic {
        Leg::Skipped(why) => assert!(why.contains("broken"), "{why}"),
        other => panic!("QUIC tried again: {other:?}"),
    }
    assert_eq!(race.head_start, Duration::ZERO);
}

#[tokio::test]
async fn the_head_start_counts_from_quics_first_attempt_not_from_its_lookups() {
    if ready().is_none() {
        return;
    }
    let pki = TestPki::new(&["slow.test"]).unwrap();
    let site = Site {
        host: "slow.test".into(),
        ..site(false, "tcp only")
    };
    let caddy = Caddy::start(&[site], &pki.cert, &pki.key);
    let port = caddy.ports[0];
    let _hole = udp_blackhole(port);
    // Every answer held back 300 ms: QUIC's first attempt starts after them.
    let dns = DnsServer::start("test.", &[("slow", Ipv4Addr::LOCALHOST.into())]);
    let lookup = Duration::from_millis(300);
    for qtype in [RecordType::A, RecordType::AAAA, RecordType::HTTPS] {
        dns.set_delay(qtype, lookup);
    }
    let ctx = Context::builder()
        .name_servers(vec![dns.addr()])
        .build()
        .unwrap();
    let c = client(&ctx, &pki, None);
    let uri = format!("https://slow.test:{port}/").parse().unwrap();
    let res = c.get(uri).await.expect("a response");
    let x = res.extensions().get::<Exchange>().unwrap();
    let race = &x.connection.race;
    println!("{race}");
    assert_eq!(res.version(), Version::HTTP_2);
    assert!(matches!(race.quic, Leg::Lost(_)), "{race:?}");
    let began = race.quic_began.expect("QUIC started an attempt");
    assert!(began >= lookup, "{race:?}");
    // TLS/TCP started a full head start after QUIC's first attempt, not 100 ms into the
    // race while QUIC still waited for its answers.
    assert!(race.took >= began + race.head_start, "{race:?}");
}

#[tokio::test]
async fn h3_advertised_only_in_alt_svc_moves_the_second_request() {
    let Some(pki) = ready() else { return };
    let origin = Site {
        h3: false,
        alt_svc: Some(r#"h3=":{PORT1}"; ma=60"#.into()),
        body: "origin".into(),
        ..Site::default()
    };
    let caddy = Caddy::start(&[origin, site(true, "alternative")], &pki.cert, &pki.key);
    let ctx = Context::new().unwrap();
    let c = client(&ctx, &pki, Some(GENEROUS));
    let (v, x, body) = get(&c, caddy.ports[0]).await;
    assert_eq!((v, body.as_str()), (Version::HTTP_2, "origin"));
    let race = &x.connection.race;
    assert!(!race.from_alt_svc);
    // Nothing on the origin's UDP port: the kernel's refusal ends QUIC at once.
    assert!(matches!(race.quic, Leg::Failed { .. }), "{race:?}");
    let (v, x, body) = get(&c, caddy.ports[0]).await;
    assert_eq!((v, body.as_str()), (Version::HTTP_3, "alternative"));
    let race = &x.connection.race;
    assert!(race.from_alt_svc, "{race:?}");
    assert_eq!(race.quic_target, ("localhost".to_string(), caddy.ports[1]));
    assert!(matches!(race.quic, Leg::Won(_)), "{race:?}");
    // The third: the pooled HTTP/3 connection.
    let (v, x, _) = get(&c, caddy.ports[0]).await;
    assert_eq!(v, Version::HTTP_3);
    assert!(x.reused);
}

#[tokio::test]
async fn an_https_record_sends_the_first_request_to_h3_on_its_port() {
    if !have_caddy() {
        skip(
            "http3",
            "caddy is not installed (scripts/deps.sh installs it)",
        );
        return;
    }
    let pki = TestPki::new(&["svc.test"]).unwrap();
    let site = Site {
        host: "svc.test".into(),
        h3: true,
        body: "by record".into(),
        ..Site::default()
    };
    let caddy = Caddy::start(&[site], &pki.cert, &pki.key);
    let dns = DnsServer::start("test.", &[("svc", Ipv4Addr::LOCALHOST.into())]);
    let record = ServiceRecord {
        priority: 1,
        target: ".".into(),
        alpn: vec!["h3".into(), "h2".into()],
        port: Some(caddy.ports[0]),
        ..ServiceRecord::default()
    };
    dns.set_https("svc", &[record]).unwrap();
    let ctx = Context::builder()
        .name_servers(vec![dns.addr()])
        .build()
        .unwrap();
    let c = client(&ctx, &pki, Some(GENEROUS));
    // The URL's port has nothing behind it: only the record's port answers.
    let uri = format!("https://svc.test:{}/", free_port())
        .parse()
        .unwrap();
    let res = c.get(uri).await.expect("a response");
    let x = res.extensions().get::<Exchange>().unwrap();
    println!("{}", x.connection.race);
    assert_eq!(res.version(), Version::HTTP_3);
    assert_eq!(res.body().as_ref(), b"by record");
    assert_eq!(x.connection.details.remote.port(), caddy.ports[0]);
}
