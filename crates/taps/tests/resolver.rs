//! The resolver against a real DNS server on loopback (taps-testkit). Every resolver here
//! uses `NameServers::Custom` pointing at that server: no test reads /etc/resolv.conf or
//! sends a packet off the host.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use taps::resolver::{
    DnsAnswer, DnsFailure, NameServers, Resolution, ResolutionEvent, Resolver, ResolverConfig,
    ResolverConfigError,
};
use taps_core::Family;
use taps_testkit::DnsServer;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn server() -> DnsServer {
    DnsServer::start(
        "test.",
        &[
            ("both", ip("192.0.2.1")),
            ("both", ip("2001:db8::1")),
            ("v6only", ip("2001:db8::6")),
            ("v4only", ip("192.0.2.4")),
            ("multi", ip("192.0.2.10")),
            ("multi", ip("192.0.2.11")),
            ("multi", ip("2001:db8::10")),
            ("deep.sub", ip("192.0.2.20")),
        ],
    )
}

fn config(servers: Vec<SocketAddr>) -> ResolverConfig {
    ResolverConfig {
        name_servers: NameServers::Custom(servers),
        use_hosts_file: false,
        timeout: Duration::from_secs(2),
        attempts: 1,
    }
}

fn resolver(dns: &DnsServer) -> Resolver {
    Resolver::new(config(vec![dns.addr()])).unwrap()
}

/// Every answer, in arrival order, each with its time since `start`.
async fn collect(mut resolution: Resolution, start: Instant) -> Vec<(DnsAnswer, Duration)> {
    let mut out = Vec::new();
    let all = async {
        while let Some(answer) = resolution.next().await {
            out.push((answer, start.elapsed()));
        }
    };
    tokio::time::timeout(Duration::from_secs(10), all)
        .await
        .expect("the resolution finishes");
    out
}

async fn answers(resolver: &Resolver, host: &str) -> Vec<DnsAnswer> {
    collect(resolver.resolve(host), Instant::now())
        .await
        .into_iter()
        .map(|(a, _)| a)
        .collect()
}

fn of(answers: &[DnsAnswer], family: Family) -> &Result<Vec<IpAddr>, DnsFailure> {
    let mut it = answers.iter().filter(|a| a.family == family);
    let answer = it.next().unwrap_or_else(|| panic!("no {family} answer"));
    assert!(it.next().is_none(), "one {family} answer only");
    &answer.result
}

#[tokio::test]
async fn a_and_aaaa_both_answered() {
    let dns = server();
    let resolver = resolver(&dns);
    for host in ["both.test", "both.test.", "BOTH.Test"] {
        let got = answers(&resolver, host).await;
        assert_eq!(got.len(), 2, "{host}: {got:?}");
        assert_eq!(of(&got, Family::V4), &Ok(vec![ip("192.0.2.1")]), "{host}");
        assert_eq!(of(&got, Family::V6), &Ok(vec![ip("2001:db8::1")]), "{host}");
    }
    let got = answers(&resolver, "multi.test").await;
    assert_eq!(
        of(&got, Family::V4),
        &Ok(vec![ip("192.0.2.10"), ip("192.0.2.11")])
    );
    assert_eq!(of(&got, Family::V6), &Ok(vec![ip("2001:db8::10")]));
    // One query per family and name: separate A and AAAA lookups, never ANY.
    assert!(dns.queries(Family::V4) >= 1 && dns.queries(Family::V6) >= 1);
}

#[tokio::test]
async fn aaaa_only_and_a_only_names() {
    let dns = server();
    let resolver = resolver(&dns);
    let got = answers(&resolver, "v6only.test").await;
    assert_eq!(of(&got, Family::V6), &Ok(vec![ip("2001:db8::6")]));
    assert_eq!(of(&got, Family::V4), &Err(DnsFailure::NoRecords));

    let got = answers(&resolver, "v4only.test").await;
    assert_eq!(of(&got, Family::V4), &Ok(vec![ip("192.0.2.4")]));
    assert_eq!(of(&got, Family::V6), &Err(DnsFailure::NoRecords));

    // An empty non-terminal exists: NOERROR, no records.
    let got = answers(&resolver, "sub.test").await;
    assert_eq!(of(&got, Family::V4), &Err(DnsFailure::NoRecords));
    assert_eq!(of(&got, Family::V6), &Err(DnsFailure::NoRecords));
}

#[tokio::test]
async fn nxdomain_for_both_families() {
    let dns = server();
    let resolver = resolver(&dns);
    let got = answers(&resolver, "nope.test").await;
    assert_eq!(got.len(), 2);
    assert_eq!(of(&got, Family::V4), &Err(DnsFailure::NxDomain));
    assert_eq!(of(&got, Family::V6), &Err(DnsFailure::NxDomain));
    assert_eq!(DnsFailure::NxDomain.to_string(), "name does not exist");
}

#[tokio::test]
async fn answers_arrive_in_order_of_delay() {
    let dns = server();
    let resolver = resolver(&dns);
    let delay = Duration::from_millis(300);

    dns.set_delay(Family::V6, delay);
    let start = Instant::now();
    let got = collect(resolver.resolve("both.test"), start).await;
    assert_eq!(got.len(), 2);
    let (first, t1) = &got[0];
    let (second, t2) = &got[1];
    assert_eq!(first.family, Family::V4);
    assert_eq!(first.result, Ok(vec![ip("192.0.2.1")]));
    assert!(*t1 < delay, "A took {t1:?}");
    assert_eq!(second.family, Family::V6);
    assert_eq!(second.result, Ok(vec![ip("2001:db8::1")]));
    assert!(*t2 >= delay, "AAAA after {t2:?}");
    assert!(t2 > t1, "A {t1:?}, AAAA {t2:?}");

    // The other way round (another name: the answers above are cached).
    dns.set_delay(Family::V6, Duration::ZERO);
    dns.set_delay(Family::V4, delay);
    let start = Instant::now();
    let got = collect(resolver.resolve("multi.test"), start).await;
    assert_eq!(got[0].0.family, Family::V6);
    assert_eq!(got[1].0.family, Family::V4);
    assert!(got[1].1 >= delay);
}

#[tokio::test]
async fn both_lookups_run_at_once() {
    let dns = server();
    let resolver = resolver(&dns);
    let delay = Duration::from_millis(300);
    dns.set_delay(Family::V4, delay);
    dns.set_delay(Family::V6, delay);
    let start = Instant::now();
    let got = collect(resolver.resolve("both.test"), start).await;
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|(a, _)| a.result.is_ok()));
    // Sequential lookups would take twice the delay.
    assert!(got[1].1 < delay * 2 - Duration::from_millis(100), "{got:?}");
}

#[test]
fn literal_addresses_skip_dns() {
    // No runtime needed: nothing is spawned for a literal.
    let resolver = Resolver::new(config(vec![SocketAddr::from(([127, 0, 0, 1], 9))])).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (host, family, addr) in [
        ("192.0.2.7", Family::V4, ip("192.0.2.7")),
        ("2001:db8::7", Family::V6, ip("2001:db8::7")),
        ("::1", Family::V6, ip("::1")),
        ("[::1]", Family::V6, ip("::1")),
        ("[2001:db8::7]", Family::V6, ip("2001:db8::7")),
    ] {
        let mut resolution = resolver.resolve(host);
        let got = rt.block_on(async {
            let first = resolution.next().await;
            let second = resolution.next().await;
            (first, second)
        });
        assert_eq!(
            got.0,
            Some(DnsAnswer {
                family,
                result: Ok(vec![addr])
            }),
            "{host}"
        );
        assert_eq!(got.1, None, "{host}: exactly one answer");
    }
}

#[tokio::test]
async fn literal_addresses_send_no_query() {
    let dns = server();
    let resolver = resolver(&dns);
    for host in ["192.0.2.7", "2001:db8::7", "[::1]"] {
        assert_eq!(answers(&resolver, host).await.len(), 1);
    }
    assert_eq!(dns.total_queries(), 0);
}

#[tokio::test]
async fn localhost_gives_both_families() {
    let dns = server();
    for use_hosts_file in [true, false] {
        let resolver = Resolver::new(ResolverConfig {
            use_hosts_file,
            ..config(vec![dns.addr()])
        })
        .unwrap();
        for host in ["localhost", "localhost."] {
            let got = answers(&resolver, host).await;
            assert_eq!(got.len(), 2, "{host}: {got:?}");
            assert_eq!(of(&got, Family::V4), &Ok(vec![ip("127.0.0.1")]), "{host}");
            assert_eq!(
                of(&got, Family::V6),
                &Ok(vec![IpAddr::from(Ipv6Addr::LOCALHOST)]),
                "{host}"
            );
        }
    }
    // RFC 6761: localhost never goes to DNS.
    assert_eq!(dns.total_queries(), 0);
}

#[tokio::test]
async fn dropping_a_resolution_aborts_its_lookups() {
    let dns = server();
    let resolver = resolver(&dns);
    dns.set_delay(Family::V4, Duration::from_secs(5));
    dns.set_delay(Family::V6, Duration::from_secs(5));
    let metrics = tokio::runtime::Handle::current().metrics();

    let mut resolution = resolver.resolve("both.test");
    let pending = tokio::time::timeout(Duration::from_millis(200), resolution.next()).await;
    assert!(pending.is_err(), "no answer before the delay");
    assert_eq!(dns.queries(Family::V4), 1);
    assert_eq!(dns.queries(Family::V6), 1);
    let during = metrics.num_alive_tasks();

    let start = Instant::now();
    drop(resolution);
    // Let the runtime reap the aborted tasks.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    // Dropping does not wait for the lookups' 5 s answers.
    assert!(start.elapsed() < Duration::from_secs(5));
    let after = metrics.num_alive_tasks();
    assert!(
        after + 2 <= during,
        "both lookup tasks are gone: {during} alive during, {after} after"
    );

    // The resolver still works.
    dns.set_delay(Family::V4, Duration::ZERO);
    dns.set_delay(Family::V6, Duration::ZERO);
    let got = answers(&resolver, "v4only.test").await;
    assert_eq!(of(&got, Family::V4), &Ok(vec![ip("192.0.2.4")]));
}

#[tokio::test]
async fn unreachable_server_fails_within_the_timeout() {
    // A loopback port nobody listens on.
    let closed = {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.local_addr().unwrap()
    };
    let resolver = Resolver::new(ResolverConfig {
        timeout: Duration::from_millis(300),
        ..config(vec![closed])
    })
    .unwrap();
    let start = Instant::now();
    let got = answers(&resolver, "both.test").await;
    assert_eq!(got.len(), 2);
    for answer in &got {
        let err = answer.result.as_ref().unwrap_err();
        assert!(
            matches!(err, DnsFailure::Timeout | DnsFailure::Other(_)),
            "{err:?}"
        );
        assert!(!err.to_string().is_empty());
    }
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn empty_custom_list_is_rejected() {
    let err = Resolver::new(config(Vec::new())).unwrap_err();
    assert!(matches!(err, ResolverConfigError::NoNameServers));
    assert_eq!(err.to_string(), "no name servers configured");
}

/// One family asked for: one query, one answer; localhost answers that family alone; the
/// HTTPS lookup still runs beside it when asked for.
#[tokio::test]
async fn one_family_asks_one_query() {
    let dns = server();
    let resolver = resolver(&dns);
    for family in [Family::V4, Family::V6] {
        let got: Vec<DnsAnswer> = collect(
            resolver.resolve_families("both.test", Some(family), false),
            Instant::now(),
        )
        .await
        .into_iter()
        .map(|(a, _)| a)
        .collect();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].family, family);
    }
    assert_eq!(dns.queries(Family::V4), 1);
    assert_eq!(dns.queries(Family::V6), 1);

    let got = collect(
        resolver.resolve_families("localhost", Some(Family::V4), false),
        Instant::now(),
    )
    .await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0.result, Ok(vec![ip("127.0.0.1")]));

    let mut resolution = resolver.resolve_families("both.test", Some(Family::V4), true);
    assert!(resolution.service_pending());
    let mut families = Vec::new();
    while let Some(event) = resolution.next_event().await {
        if let ResolutionEvent::Addresses(a) = event {
            families.push(a.family);
        }
    }
    assert_eq!(families, [Family::V4]);
    assert_eq!(dns.queries(Family::V6), 1, "no second AAAA query");
    assert_eq!(dns.queries(hickory_proto::rr::RecordType::HTTPS), 1);
}
