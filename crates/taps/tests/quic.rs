//! QUIC end to end on loopback: a taps listener serving QUIC and TLS/TCP on one port, a
//! taps client racing them, verification failures as typed causes, a cancelled QUIC
//! attempt that leaves nothing open, a port without QUIC refusing the attempt at once,
//! and an independent QUIC stack (ngtcp2's `gtlsserver`, HTTP/3) when installed.

mod common;
use common::spawn_echo;

use std::net::{Ipv4Addr, SocketAddr, UdpSocket as StdUdp};
use std::process::{Command, Stdio};
use std::time::Duration;

use taps::taps_core::properties::{Name, Protocol};
use taps::taps_core::race::{AttemptOutcome, AttemptReport, RaceEvent, RaceReport};
use taps::taps_core::VerifyFailure;
use taps::{
    AttemptCause, Context, Listener, Preconnection, RemoteEndpoint, SecurityParameters,
    TransportProperties,
};
use taps_testkit::{free_port, TestPki};

/// A listener on 127.0.0.1:`port` with `props`, presenting `pki`'s certificate.
async fn secure_listener(
    ctx: &Context,
    pki: &TestPki,
    port: u16,
    props: TransportProperties,
) -> Listener {
    Preconnection::new(ctx, props.compile().unwrap())
        .local(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .security(SecurityParameters::new().identity(&pki.cert, &pki.key))
        .listen()
        .await
        .unwrap()
}

/// A secure listener (QUIC and TLS/TCP) on 127.0.0.1, echoing messages.
async fn secure_echo(ctx: &Context, pki: &TestPki, port: u16) -> Listener {
    let props = TransportProperties::for_listener().require(Name::Security);
    let mut listener = secure_listener(ctx, pki, port, props).await;
    let stacks: Vec<String> = listener
        .local_addrs()
        .iter()
        .map(|(s, _)| s.to_string())
        .collect();
    assert!(stacks.contains(&"QUIC".to_string()), "{stacks:?}");
    let accepted = std::mem::replace(&mut listener, dummy(ctx).await);
    spawn_echo(accepted);
    listener
}

/// A plain UDP listener to hold the place of the one moved into the echo task.
async fn dummy(ctx: &Context) -> Listener {
    let props = TransportProperties::for_listener()
        .protocols(taps::Preference::Require, [Protocol::Udp])
        .compile()
        .unwrap();
    Preconnection::new(ctx, props)
        .local(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .listen()
        .await
        .unwrap()
}

/// A TLS/TCP-only echo listener on 127.0.0.1:`port` (nothing of it on the UDP port).
/// A context, its PKI, a free port and a secure listener there on `protocol` alone
/// (TCP: TLS/TCP only, nothing on the UDP port; QUIC: QUIC only).
async fn secure_only(protocol: Protocol) -> (TestPki, Context, u16, Listener) {
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ctx = Context::builder().build().unwrap();
    let port = free_port();
    let props = TransportProperties::for_listener()
        .require(Name::Security)
        .protocols(taps::Preference::Require, [protocol]);
    let listener = secure_listener(&ctx, &pki, port, props).await;
    (pki, ctx, port, listener)
}

/// [`secure_only`] TLS/TCP, echoing messages.
async fn tls_only_echo() -> (TestPki, Context, u16) {
    let (pki, ctx, port, listener) = secure_only(Protocol::Tcp).await;
    spawn_echo(listener);
    (pki, ctx, port)
}

/// QUIC alone to 127.0.0.1:`port` as "localhost", trusting the system's roots, which must
/// fail: the error's text and its attempts' causes (stacks this build lacks left out).
async fn quic_alone_fails(ctx: &Context, port: u16) -> (String, Vec<AttemptCause>) {
    let props = secure()
        .protocols(taps::Preference::Require, [Protocol::Quic])
        .compile()
        .unwrap();
    let err = Preconnection::new(ctx, props)
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port))
        .security(SecurityParameters::new().server_name("localhost"))
        .initiate()
        .await
        .unwrap_err();
    let causes = err
        .attempt_causes()
        .into_iter()
        .filter(|c| !matches!(c, AttemptCause::Unavailable(_)))
        .collect();
    (err.to_string(), causes)
}

/// The race's attempt of the stack named `stack` ("QUIC", "TLS/TCP").
fn attempt<'a>(report: &'a RaceReport, stack: &str) -> &'a AttemptReport {
    report
        .attempts
        .iter()
        .find(|a| a.candidate.stack.to_string() == stack)
        .unwrap_or_else(|| panic!("no {stack} attempt:\n{}", report.trace()))
}

fn secure() -> TransportProperties {
    TransportProperties::new().require(Name::Security)
}

fn trusting(pki: &TestPki) -> SecurityParameters {
    SecurityParameters::new()
        .ca_file(&pki.ca)
        .server_name("localhost")
}

#[tokio::test]
async fn quic_wins_when_both_quic_and_tls_serve_the_port() {
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ctx = Context::builder().build().unwrap();
    let port = free_port();
    let _listener = secure_echo(&ctx, &pki, port).await;
    let pre = Preconnection::new(&ctx, secure().compile().unwrap())
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port))
        .security(trusting(&pki));
    let mut conn = pre.initiate().await.unwrap();
    assert_eq!(conn.info().stack.to_string(), "QUIC");
    let sec = conn.info().security.clone().unwrap();
    assert!(sec.version.starts_with("TLS 1.3"), "{sec:?}");
    assert_eq!(sec.alpn.as_deref(), Some(&b"taps"[..]));
    conn.send(b"over QUIC").await.unwrap();
    assert_eq!(
        conn.receive().await.unwrap().as_deref(),
        Some(&b"over QUIC"[..])
    );
    // A second flow of the same context shares its QUIC socket.
    let mut second = pre.initiate().await.unwrap();
    assert_eq!(second.info().local, conn.info().local);
    second.send(b"2").await.unwrap();
    assert_eq!(second.receive().await.unwrap().as_deref(), Some(&b"2"[..]));
}

#[tokio::test]
async fn quic_verification_failure_is_typed() {
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ctx = Context::builder().build().unwrap();
    let port = free_port();
    let _listener = secure_echo(&ctx, &pki, port).await;
    let (err, causes) = quic_alone_fails(&ctx, port).await;
    assert_eq!(
        causes,
        [AttemptCause::Verification {
            server_name: "localhost".into(),
            reason: VerifyFailure::UnknownIssuer
        }],
        "{err}"
    );
}

/// UDP to the port is silently dropped (a socket that never reads): QUIC gets no answer,
/// TLS/TCP wins one attempt delay later, and the cancelled QUIC attempt leaves no
/// connection open on the context's socket.
#[tokio::test]
async fn blackholed_quic_loses_to_tls_and_leaves_nothing_open() {
    // TLS/TCP only on the port; a UDP socket on it that never answers.
    let (pki, ctx, port) = tls_only_echo().await;
    let _silent = StdUdp::bind(("127.0.0.1", port)).unwrap();
    let props = secure()
        .attempt_delay(Duration::from_millis(100))
        .compile()
        .unwrap();
    let mut conn = Preconnection::new(&ctx, props)
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port))
        .security(trusting(&pki))
        .initiate()
        .await
        .unwrap();
    assert_eq!(conn.info().stack.to_string(), "TLS/TCP");
    let report = conn.info().race.clone().unwrap();
    let quic = attempt(&report, "QUIC");
    assert_eq!(
        quic.outcome,
        AttemptOutcome::Cancelled,
        "{}",
        report.trace()
    );
    conn.send(b"tls").await.unwrap();
    assert_eq!(conn.receive().await.unwrap().as_deref(), Some(&b"tls"[..]));
    // The dropped attempt's connection was closed when it was cancelled; the endpoint
    // forgets it once its draining period (3 probe timeouts) is over.
    let cancelled = std::time::Instant::now();
    while ctx.open_quic_connections() > 0 && cancelled.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("QUIC attempt gone {:?} after the race", cancelled.elapsed());
    assert_eq!(ctx.open_quic_connections(), 0);
}

/// Nothing listens on the UDP port (the kernel answers ICMP port unreachable): the QUIC
/// attempt's port probe is refused at once, and TLS/TCP starts then, before QUIC's head
/// start is over (before the probe, QUIC stayed pending until TLS/TCP won, cancelled).
#[tokio::test]
async fn a_port_without_quic_refuses_the_quic_attempt_at_once() {
    let (pki, ctx, port) = tls_only_echo().await;
    let props = secure().compile().unwrap();
    let started = std::time::Instant::now();
    let conn = Preconnection::new(&ctx, props)
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port))
        .security(trusting(&pki))
        .initiate()
        .await
        .unwrap();
    let took = started.elapsed();
    let report = conn.info().race.clone().unwrap();
    assert_eq!(
        conn.info().stack.to_string(),
        "TLS/TCP",
        "{}",
        report.trace()
    );
    let quic = attempt(&report, "QUIC");
    assert_eq!(
        quic.outcome,
        AttemptOutcome::Failed(AttemptCause::Refused),
        "{}",
        report.trace()
    );
    // TLS/TCP started when QUIC was refused, not when QUIC's head start ran out.
    let head_start = report
        .timeline
        .iter()
        .find_map(|(_, e)| match e {
            RaceEvent::Started { id, next } if *id == quic.id => *next,
            _ => None,
        })
        .unwrap_or(Duration::from_millis(250));
    let tls = attempt(&report, "TLS/TCP");
    assert!(
        tls.start < quic.start + head_start,
        "TLS/TCP started at {:?}, QUIC's head start {head_start:?}\n{}",
        tls.start,
        report.trace()
    );
    println!("TLS/TCP won {took:?} after the start:\n{}", report.trace());
}

/// QUIC alone to a port where nothing listens fails in milliseconds, refused, instead of
/// after QUIC's 10 s idle timeout.
#[tokio::test]
async fn quic_alone_to_a_closed_port_is_refused() {
    let ctx = Context::builder().build().unwrap();
    let port = free_port();
    let started = std::time::Instant::now();
    let (err, causes) = quic_alone_fails(&ctx, port).await;
    let took = started.elapsed();
    assert_eq!(causes, [AttemptCause::Refused], "{err}");
    // The refusal, not QUIC's 10 s idle timeout, ended it.
    assert!(took < Duration::from_secs(10), "{took:?}: {err}");
    // The server is this host, so the refusal came while the probe was sent: no QUIC
    // connection was built (one built and then closed stays open while it drains).
    assert_eq!(ctx.open_quic_connections(), 0);
}

/// Against ngtcp2 (an independent QUIC stack; its HTTP/3 server `gtlsserver`): the QUIC
/// handshake completes, the certificate verifies, ALPN h3 is agreed.
#[tokio::test]
async fn interoperates_with_ngtcp2() {
    if Command::new("gtlsserver").arg("--help").output().is_err() {
        taps_testkit::skip(
            "interoperates_with_ngtcp2",
            "ngtcp2-server is not installed (scripts/deps.sh installs it)",
        );
        return;
    }
    let pki = TestPki::new(&["localhost"]).unwrap();
    let port = free_port();
    let mut server = Command::new("gtlsserver")
        .args(["-q", "127.0.0.1", &port.to_string()])
        .arg(&pki.key)
        .arg(&pki.cert)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ctx = Context::builder().build().unwrap();
    let props = secure()
        .protocols(taps::Preference::Require, [Protocol::Quic])
        .compile()
        .unwrap();
    let pre = Preconnection::new(&ctx, props)
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port))
        .security(trusting(&pki).alpn(["h3"]));
    let mut conn = None;
    for _ in 0..50 {
        match pre.initiate().await {
            Ok(c) => {
                conn = Some(c);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    let conn = conn.expect("gtlsserver answered");
    let sec = conn.info().security.clone().unwrap();
    assert_eq!(sec.alpn.as_deref(), Some(&b"h3"[..]));
    assert_eq!(sec.peer_certificates.len(), 1);
}

/// Flows to the same remote with the same properties become streams of one QUIC
/// connection (no second handshake), as does `clone_flow`; the listener hands out each
/// stream as a connection; the QUIC connection closes after its last stream.
#[tokio::test]
async fn flows_map_onto_streams_of_one_quic_connection() {
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ctx = Context::builder().build().unwrap();
    let port = free_port();
    let _listener = secure_echo(&ctx, &pki, port).await;
    let props = secure()
        .protocols(taps::Preference::Require, [Protocol::Quic])
        .compile()
        .unwrap();
    let pre = Preconnection::new(&ctx, props)
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port))
        .security(trusting(&pki));
    let mut first = pre.initiate().await.unwrap();
    let mut second = pre.initiate().await.unwrap();
    assert!(first.info().race.is_some(), "the first flow raced");
    assert!(
        second.info().race.is_none(),
        "the second is a stream of the first's connection"
    );
    assert_eq!(second.info().stack.to_string(), "QUIC");
    assert!(second.info().security.is_some());
    let mut third = first.clone_flow().await.unwrap();
    assert!(third.info().race.is_none(), "a clone ran no race");
    for (i, c) in [&mut first, &mut second, &mut third]
        .into_iter()
        .enumerate()
    {
        let m = format!("stream {i}");
        c.send(m.as_bytes()).await.unwrap();
        assert_eq!(c.receive().await.unwrap().as_deref(), Some(m.as_bytes()));
    }
    // One QUIC connection on the client socket for all three.
    assert_eq!(
        ctx.open_quic_connections(),
        1,
        "the client socket holds one QUIC connection"
    );
    drop((first, second, third));
    let t0 = std::time::Instant::now();
    while ctx.open_quic_connections() > 0 && t0.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(ctx.open_quic_connections(), 0);
}

/// A UDP relay on loopback between a client and `server` that can be told to drop
/// everything (a path that dies). Returns its port and the switch.
async fn relay_to(server: SocketAddr) -> (u16, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dead = std::sync::Arc::new(AtomicBool::new(false));
    let d = dead.clone();
    let port = common::udp_relay(server, move |_, _| !d.load(Ordering::Relaxed)).await;
    (port, dead)
}

/// `connTimeout` (RFC 9622's abort timeout) bounds how long a QUIC connection lives on a
/// path that died: 1 s here, against QUIC's 10 s default idle timeout.
#[tokio::test]
async fn quic_gives_up_after_conn_timeout_when_the_path_dies() {
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ctx = Context::builder().build().unwrap();
    let port = free_port();
    let _listener = secure_echo(&ctx, &pki, port).await;
    let (relay, dead) = relay_to(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await;
    let props = secure()
        .protocols(taps::Preference::Require, [Protocol::Quic])
        .abort_timeout(Duration::from_secs(1))
        .compile()
        .unwrap();
    let mut conn = Preconnection::new(&ctx, props)
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", relay))
        .security(trusting(&pki))
        .initiate()
        .await
        .unwrap();
    conn.send(b"before").await.unwrap();
    assert_eq!(
        conn.receive().await.unwrap().as_deref(),
        Some(&b"before"[..])
    );
    dead.store(true, std::sync::atomic::Ordering::Relaxed);
    let t0 = std::time::Instant::now();
    let _ = conn.send(b"into the void").await;
    let outcome = tokio::time::timeout(Duration::from_secs(8), conn.receive()).await;
    let waited = t0.elapsed();
    println!("QUIC gave up {waited:?} after the path died: {outcome:?}");
    let ended = matches!(outcome, Ok(Err(_)) | Ok(Ok(None)));
    assert!(ended, "still waiting after {waited:?}: {outcome:?}");
    assert!(
        waited < Duration::from_secs(4),
        "gave up only after {waited:?}"
    );
}

/// A QUIC connection dropped with data still queued delivers it (the stream lingers
/// until the peer acknowledged it); one dropped after everything was acknowledged ends
/// at once. Both leave no connection open.
#[tokio::test]
async fn a_dropped_quic_connection_delivers_what_it_queued() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const BYTES: usize = 4 << 20;
    let (pki, ctx, port, mut listener) = secure_only(Protocol::Quic).await;
    let server = tokio::spawn(async move {
        let mut counts = Vec::new();
        for _ in 0..2 {
            let mut conn = listener.accept().await.unwrap().unwrap();
            let mut got = Vec::new();
            conn.read_to_end(&mut got).await.unwrap();
            assert!(got.iter().all(|&b| b == 7));
            counts.push(got.len());
        }
        counts
    });
    let client = secure().protocols(taps::Preference::Require, [Protocol::Quic]);
    let pre = Preconnection::new(&ctx, client.compile().unwrap())
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port))
        .security(trusting(&pki));
    // Written and dropped at once: most of it is still queued in the stream.
    let mut conn = pre.initiate().await.unwrap();
    conn.write_all(&vec![7u8; BYTES]).await.unwrap();
    drop(conn);
    // A small write, acknowledged before the drop.
    let mut conn = pre.initiate().await.unwrap();
    conn.write_all(&[7u8; 10]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(conn);
    let counts = tokio::time::timeout(Duration::from_secs(20), server)
        .await
        .expect("the server read both streams to their ends")
        .unwrap();
    assert_eq!(counts, vec![BYTES, 10]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while ctx.open_quic_connections() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "QUIC connections left open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Flows mapped onto one QUIC connection wait for the race that makes it; when that
/// race fails, the flows that waited fail with its error at once, instead of racing one
/// after another (8 flows to a peer that never answers took 8 establishment timeouts).
#[tokio::test]
async fn flows_waiting_on_a_failed_race_do_not_fail_one_after_another() {
    const FLOWS: usize = 8;
    const TIMEOUT: Duration = Duration::from_millis(300);
    let ctx = Context::builder().build().unwrap();
    // A UDP port where a socket takes every datagram and never answers: the race runs
    // until its establishment timeout (a closed port would refuse at once).
    let port = free_port();
    let _silent = StdUdp::bind(("127.0.0.1", port)).unwrap();
    let props = secure()
        .protocols(taps::Preference::Require, [Protocol::Quic])
        .timeout(TIMEOUT);
    let pre = std::sync::Arc::new(
        Preconnection::new(&ctx, props.compile().unwrap())
            .race_timeline(true)
            .remote(RemoteEndpoint::new("127.0.0.1", port))
            .security(SecurityParameters::new().server_name("localhost")),
    );
    let started = std::time::Instant::now();
    let mut flows = tokio::task::JoinSet::new();
    for _ in 0..FLOWS {
        let pre = pre.clone();
        flows.spawn(async move { pre.initiate().await.map(drop) });
    }
    let mut errors = Vec::new();
    while let Some(r) = flows.join_next().await {
        errors.push(r.unwrap().expect_err("no flow connects").to_string());
    }
    let took = started.elapsed();
    assert!(errors.iter().all(|e| e == &errors[0]), "{errors:?}");
    // One race's timeout, never eight.
    assert!(
        took < TIMEOUT * 2,
        "{FLOWS} failing flows took {took:?} (establishment timeout {TIMEOUT:?})"
    );
}
