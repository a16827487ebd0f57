//! HTTPS records (RFC 9460) in the race, HEv3 style, against a real DNS server on
//! loopback (taps-testkit) and a taps listener serving QUIC and TLS/TCP: `alpn=h3`
//! makes QUIC worth racing, a record without h3 drops QUIC, `port` moves the
//! connection, and address hints stand in for a slow A answer.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use taps::taps_core::properties::Name;
use taps::taps_core::{Family, ServiceRecord};
use taps::{
    Context, Listener, Preconnection, RemoteEndpoint, SecurityParameters, TransportProperties,
};
use taps_testkit::{free_port, DnsServer, TestPki};

/// A secure echo listener (QUIC and TLS/TCP) on 127.0.0.1:`port`.
async fn server(ctx: &Context, pki: &TestPki, port: u16) {
    let props = TransportProperties::for_listener()
        .require(Name::Security)
        .compile()
        .unwrap();
    let mut listener: Listener = Preconnection::new(ctx, props)
        .local(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .security(SecurityParameters::new().identity(&pki.cert, &pki.key))
        .listen()
        .await
        .unwrap();
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

fn record(alpn: &[&str]) -> ServiceRecord {
    ServiceRecord {
        priority: 1,
        target: ".".into(),
        alpn: alpn.iter().map(|a| a.to_string()).collect(),
        ..ServiceRecord::default()
    }
}

struct Setup {
    dns: DnsServer,
    ctx: Context,
    pki: TestPki,
}

fn setup() -> Setup {
    let dns = DnsServer::start("test.", &[("svc", Ipv4Addr::LOCALHOST.into())]);
    let ctx = Context::builder()
        .name_servers(vec![dns.addr()])
        .build()
        .unwrap();
    let pki = TestPki::new(&["svc.test"]).unwrap();
    Setup { dns, ctx, pki }
}

async fn connect(s: &Setup, port: u16) -> taps::Connection {
    Preconnection::new(
        &s.ctx,
        TransportProperties::new()
            .require(Name::Security)
            .compile()
            .unwrap(),
    )
    .race_timeline(true)
    .remote(RemoteEndpoint::new("svc.test", port))
    .security(SecurityParameters::new().ca_file(&s.pki.ca))
    .initiate()
    .await
    .unwrap()
}

#[tokio::test]
async fn an_h3_record_races_quic_and_quic_wins() {
    let s = setup();
    let port = free_port();
    server(&s.ctx, &s.pki, port).await;
    s.dns.set_https("svc", &[record(&["h3", "h2"])]).unwrap();
    let conn = connect(&s, port).await;
    assert_eq!(conn.info().stack.to_string(), "QUIC");
    let trace = conn.info().race.as_ref().unwrap().trace();
    assert!(trace.contains("HTTPS answered: 1 . alpn=h3,h2"), "{trace}");
}

#[tokio::test]
async fn a_record_without_h3_drops_quic() {
    let s = setup();
    let port = free_port();
    server(&s.ctx, &s.pki, port).await;
    s.dns
        .set_https("svc", &[record(&["h2", "http/1.1"])])
        .unwrap();
    let conn = connect(&s, port).await;
    assert_eq!(conn.info().stack.to_string(), "TLS/TCP");
    let report = conn.info().race.clone().unwrap();
    assert!(
        report
            .attempts
            .iter()
            .all(|a| a.candidate.stack.to_string() != "QUIC"),
        "{}",
        report.trace()
    );
}

#[tokio::test]
async fn the_records_port_is_used() {
    let s = setup();
    let (origin, service) = (free_port(), free_port());
    server(&s.ctx, &s.pki, service).await;
    let mut r = record(&["h3"]);
    r.port = Some(service);
    s.dns.set_https("svc", &[r]).unwrap();
    let conn = connect(&s, origin).await;
    assert_eq!(conn.info().remote.port(), service);
}

#[tokio::test]
async fn hints_stand_in_for_a_slow_a_answer() {
    let s = setup();
    let port = free_port();
    server(&s.ctx, &s.pki, port).await;
    let mut r = record(&["h3"]);
    r.hints = vec![Ipv4Addr::LOCALHOST.into()];
    s.dns.set_https("svc", &[r]).unwrap();
    s.dns.set_delay(Family::V4, Duration::from_millis(800));
    let t0 = Instant::now();
    let conn = connect(&s, port).await;
    assert!(
        t0.elapsed() < Duration::from_millis(600),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(
        conn.info().remote.ip(),
        std::net::IpAddr::from(Ipv4Addr::LOCALHOST)
    );
}
