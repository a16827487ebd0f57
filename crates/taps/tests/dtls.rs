//! DTLS over UDP end to end on loopback: a taps listener and client (certificates from
//! taps-testkit's TestPki), typed verification failures, OpenSSL as an independent peer
//! on both sides when it is installed, and no socket left by a cancelled attempt.
//!
//! The tests take one lock in turn: the leak test counts the process's sockets.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket as StdUdp};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use taps::taps_core::properties::{Name, Protocol};
use taps::taps_core::race::{AttemptOutcome, RaceEvent};
use taps::taps_core::VerifyFailure;
use taps::{
    AttemptCause, Connection, Context, Error, Listener, Preconnection, RemoteEndpoint,
    SecurityParameters, TransportProperties,
};
use taps_testkit::{open_sockets, TestPki};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::const_new(());

/// What `taps listen --props '{"security":"require","transport":{"value":"UDP","precedence":2}}'` asks for.
fn secure_udp(props: TransportProperties) -> TransportProperties {
    props
        .require(Name::Security)
        .protocols(taps::Preference::Require, [Protocol::Udp])
}

fn context() -> Context {
    Context::builder()
        .name_servers(vec![SocketAddr::from((Ipv4Addr::LOCALHOST, 9))])
        .build()
        .unwrap()
}

/// A DTLS listener on `ip` (ephemeral port unless `port` is given) echoing messages.
async fn echo_server(ctx: &Context, pki: &TestPki, at: SocketAddr) -> (Listener, u16) {
    let props = secure_udp(TransportProperties::for_listener())
        .compile()
        .unwrap();
    let listener = Preconnection::new(ctx, props)
        .local(at)
        .security(SecurityParameters::new().identity(&pki.cert, &pki.key))
        .listen()
        .await
        .unwrap();
    let (stack, addr) = listener.local_addrs()[0];
    assert_eq!(stack.to_string(), "DTLS/UDP");
    (listener, addr.port())
}

fn spawn_echo(mut listener: Listener) {
    tokio::spawn(async move {
        while let Some(Ok(mut conn)) = listener.accept().await {
            tokio::spawn(async move {
                let sec = conn
                    .info()
                    .security
                    .clone()
                    .expect("accepted DTLS has security");
                assert!(sec.version.starts_with("DTLS 1."), "{sec:?}");
                while let Ok(Some(m)) = conn.receive().await {
                    if conn.send(&m).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
}

fn client(ctx: &Context, host: &str, port: u16, params: SecurityParameters) -> Preconnection {
    Preconnection::new(
        ctx,
        secure_udp(TransportProperties::new()).compile().unwrap(),
    )
    .race_timeline(true)
    .remote(RemoteEndpoint::new(host, port))
    .security(params)
}

fn trusted(pki: &TestPki) -> SecurityParameters {
    SecurityParameters::new()
        .ca_file(&pki.ca)
        .server_name("localhost")
}

#[tokio::test]
async fn verified_dtls_round_trip() {
    let _serial = SERIAL.lock().await;
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ctx = context();
    let (listener, port) = echo_server(&ctx, &pki, (Ipv4Addr::LOCALHOST, 0).into()).await;
    spawn_echo(listener);
    let mut conn = client(&ctx, "127.0.0.1", port, trusted(&pki))
        .initiate()
        .await
        .unwrap();
    let info = conn.info().clone();
    assert_eq!(info.stack.to_string(), "DTLS/UDP");
    let sec = info.security.as_ref().expect("security info");
    assert_eq!(sec.version, "DTLS 1.3", "{sec:?}");
    assert_eq!(sec.peer_certificates.len(), 1);
    // The finish line was the handshake: the server answered before it was done.
    let report = info.race.as_ref().unwrap();
    assert!(report
        .timeline
        .iter()
        .any(|(_, e)| matches!(e, RaceEvent::TransportUp { .. })));
    // Messages: one per record, boundaries kept.
    for m in [&b"hello over DTLS"[..], b"", &[7u8; 1400], &[9u8; 16384]] {
        conn.send(m).await.unwrap();
        assert_eq!(conn.receive().await.unwrap().as_deref(), Some(m));
    }
    // Bytes: one datagram per write and per read.
    conn.write_all(b"one").await.unwrap();
    let mut buf = [0u8; 64];
    let n = conn.read(&mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"one");
    // Too big for one record: refused, not split.
    assert!(matches!(
        conn.send(&[0u8; 16385]).await,
        Err(Error::MessageTooBig { max: 16384, .. })
    ));
    let stats = conn.statistics();
    assert_eq!(stats.messages_sent, 4);
    conn.close().await.unwrap();
}

/// Causes of the attempts of a failed race, without the stacks never started.
fn causes(err: &Error) -> Vec<AttemptCause> {
    err.attempt_causes()
        .into_iter()
        .filter(|c| !matches!(c, AttemptCause::Unavailable(_)))
        .collect()
}

#[tokio::test]
async fn verification_failures_are_typed() {
    let _serial = SERIAL.lock().await;
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ctx = context();
    let (listener, port) = echo_server(&ctx, &pki, (Ipv4Addr::LOCALHOST, 0).into()).await;
    spawn_echo(listener);

    // Not trusting the test CA: unknown issuer, naming the host.
    let params = SecurityParameters::new().server_name("localhost");
    let err = client(&ctx, "127.0.0.1", port, params)
        .initiate()
        .await
        .unwrap_err();
    assert_eq!(
        causes(&err),
        [AttemptCause::Verification {
            server_name: "localhost".into(),
            reason: VerifyFailure::UnknownIssuer
        }],
        "{err}"
    );
    assert!(err.to_string().contains("localhost"), "{err}");
    let report = err.race().unwrap().report();
    assert!(report
        .attempts
        .iter()
        .all(|a| a.candidate.stack.security != taps::taps_core::Security::None));

    // Trusting the CA, asking for another name: name mismatch.
    let params = SecurityParameters::new()
        .ca_file(&pki.ca)
        .server_name("other.test");
    let err = client(&ctx, "127.0.0.1", port, params)
        .initiate()
        .await
        .unwrap_err();
    assert_eq!(
        causes(&err),
        [AttemptCause::Verification {
            server_name: "other.test".into(),
            reason: VerifyFailure::NameMismatch
        }],
        "{err}"
    );

    // The explicit opt-out connects (encrypted, not authenticated).
    let params = SecurityParameters::new().danger_accept_any_certificate();
    let mut conn = client(&ctx, "127.0.0.1", port, params)
        .initiate()
        .await
        .unwrap();
    conn.send(b"x").await.unwrap();
    assert_eq!(conn.receive().await.unwrap().as_deref(), Some(&b"x"[..]));
}

/// A UDP port with a socket that never reads: DTLS gets no answer and no ICMP.
fn silent_udp(at: SocketAddr) -> Option<StdUdp> {
    StdUdp::bind(at).ok()
}

/// Waits up to a second for the socket count to come back to `want` (sessions end in
/// their own task after the connection is dropped).
async fn sockets_settle(want: usize) -> usize {
    for _ in 0..100 {
        if open_sockets() == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    open_sockets()
}

#[tokio::test]
async fn a_cancelled_dtls_attempt_leaves_no_socket() {
    let _serial = SERIAL.lock().await;
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ctx = context();
    // 127.0.0.1:P serves DTLS; [::1]:P is silent.
    let (listener, port) = echo_server(&ctx, &pki, (Ipv4Addr::LOCALHOST, 0).into()).await;
    spawn_echo(listener);
    let Some(_silent) = silent_udp((std::net::Ipv6Addr::LOCALHOST, port).into()) else {
        taps_testkit::skip_by_chance(
            "dtls silent [::1]",
            &format!("[::1]:{port} is taken or IPv6 is off"),
        );
        return;
    };
    let props = secure_udp(TransportProperties::new())
        .attempt_delay(Duration::from_millis(50))
        .compile()
        .unwrap();
    let pre = Preconnection::new(&ctx, props)
        .race_timeline(true)
        .remote(RemoteEndpoint::new("localhost", port))
        .security(trusted(&pki));
    // Warm up what a context opens once (its interface watcher), on another remote.
    let warm = client(&ctx, "127.0.0.1", port, trusted(&pki));
    drop(warm.initiate().await.unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await; // its session sends close_notify
    let mut cancelled = 0;
    for round in 0..3 {
        let before = open_sockets();
        let mut conn = pre.initiate().await.unwrap();
        assert!(conn.info().remote.is_ipv4(), "{:?}", conn.info());
        // Exactly one new socket: the winner's. The [::1] attempt's is closed.
        assert_eq!(open_sockets(), before + 1, "round {round}");
        let report = conn.info().race.clone().unwrap();
        cancelled += report
            .attempts
            .iter()
            .filter(|a| a.candidate.remote.is_ipv6())
            .filter(|a| matches!(a.outcome, AttemptOutcome::Cancelled))
            .count();
        conn.send(b"ok").await.unwrap();
        assert_eq!(conn.receive().await.unwrap().as_deref(), Some(&b"ok"[..]));
        drop(conn);
        assert_eq!(sockets_settle(before).await, before, "round {round}");
    }
    assert!(cancelled >= 1, "no race cancelled the [::1] attempt");

    // An attempt dropped in its handshake (the application gave up) closes its socket.
    let silent = silent_udp((Ipv4Addr::LOCALHOST, 0).into()).unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let before = open_sockets();
    let pre = client(&ctx, "127.0.0.1", silent_port, trusted(&pki));
    let r = tokio::time::timeout(Duration::from_millis(300), pre.initiate()).await;
    assert!(r.is_err(), "a silent server cannot finish a handshake");
    assert_eq!(sockets_settle(before).await, before);
}

/// Runs `cmd` and kills it when dropped.
struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn openssl_missing() -> bool {
    if Command::new("openssl").arg("version").output().is_err() {
        taps_testkit::skip(
            "dtls openssl interop",
            "openssl is not installed (scripts/deps.sh installs it)",
        );
        return true;
    }
    false
}

/// Reads what `child` prints until `want` has come (on a blocking thread: the pipe
/// blocks, and the runtime must go on running the DTLS session).
fn expect_output(child: &mut Child, want: &'static [u8]) -> tokio::task::JoinHandle<bool> {
    let mut stdout = child.stdout.take().unwrap();
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        while !got.windows(want.len()).any(|w| w == want) {
            match stdout.read(&mut buf) {
                Ok(0) | Err(_) => return false,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        true
    })
}

fn write_line(child: &mut Child, line: &[u8]) {
    use std::io::Write;
    let stdin = child.stdin.as_mut().unwrap();
    stdin.write_all(line).unwrap();
    stdin.flush().unwrap();
}

/// taps' client against OpenSSL's DTLS 1.2 server (`-rev` is TLS-only: the server
/// prints what it receives and sends what it reads from its standard input).
#[tokio::test]
async fn client_interoperates_with_openssl_s_server_dtls12() {
    let _serial = SERIAL.lock().await;
    if openssl_missing() {
        return;
    }
    let pki = TestPki::new(&["localhost"]).unwrap();
    let port = StdUdp::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Peer(
        Command::new("openssl")
            .args(["s_server", "-dtls1_2", "-quiet", "-accept"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("-cert")
            .arg(&pki.cert)
            .arg("-key")
            .arg(&pki.key)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let ctx = context();
    let pre = client(&ctx, "127.0.0.1", port, trusted(&pki));
    let mut conn = None;
    for _ in 0..20 {
        // Until s_server listens, the attempt is refused at once (ICMP).
        match pre.initiate().await {
            Ok(c) => {
                conn = Some(c);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let mut conn = conn.expect("s_server answered");
    let sec = conn.info().security.clone().unwrap();
    assert_eq!(sec.version, "DTLS 1.2");
    assert_eq!(sec.peer_certificates.len(), 1);
    let printed = expect_output(&mut server.0, b"hello from taps");
    conn.send(b"hello from taps\n").await.unwrap();
    let printed = tokio::time::timeout(Duration::from_secs(5), printed).await;
    assert!(printed.unwrap().unwrap(), "s_server printed the message");
    write_line(&mut server.0, b"hello from openssl\n");
    let reply = tokio::time::timeout(Duration::from_secs(5), conn.receive())
        .await
        .expect("s_server sent a line")
        .unwrap();
    assert_eq!(reply.as_deref(), Some(&b"hello from openssl\n"[..]));
}

/// OpenSSL's DTLS 1.2 client against a taps DTLS listener (echo).
#[tokio::test]
async fn listener_interoperates_with_openssl_s_client_dtls12() {
    let _serial = SERIAL.lock().await;
    if openssl_missing() {
        return;
    }
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ctx = context();
    let (mut listener, port) = echo_server(&ctx, &pki, (Ipv4Addr::LOCALHOST, 0).into()).await;
    let mut s_client = s_client(port, None, &pki);
    let mut conn = tokio::time::timeout(Duration::from_secs(10), listener.accept())
        .await
        .expect("s_client connected")
        .unwrap()
        .unwrap();
    assert_eq!(conn.info().security.as_ref().unwrap().version, "DTLS 1.2");
    exchange(&mut conn, &mut s_client).await;
}

/// OpenSSL's DTLS 1.2 client to 127.0.0.1:`port`, verifying the name localhost, from
/// the local UDP port `local` if given.
fn s_client(port: u16, local: Option<u16>, pki: &TestPki) -> Peer {
    let mut cmd = Command::new("openssl");
    cmd.args(["s_client", "-dtls1_2", "-quiet", "-connect"])
        .arg(format!("127.0.0.1:{port}"));
    if let Some(local) = local {
        cmd.args(["-bind", &format!("127.0.0.1:{local}")]);
    }
    cmd.arg("-CAfile")
        .arg(&pki.ca)
        .args(["-verify_return_error", "-verify_hostname", "localhost"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    Peer(cmd.spawn().unwrap())
}

/// A line from `s_client` reaches `conn`, and `conn`'s answer is printed by `s_client`.
async fn exchange(conn: &mut Connection, s_client: &mut Peer) {
    let printed = expect_output(&mut s_client.0, b"back at you");
    write_line(&mut s_client.0, b"from openssl\n");
    let m = tokio::time::timeout(Duration::from_secs(5), conn.receive())
        .await
        .expect("a message from s_client")
        .unwrap()
        .unwrap();
    assert_eq!(m, b"from openssl\n");
    conn.send(b"back at you\n").await.unwrap();
    let printed = tokio::time::timeout(Duration::from_secs(5), printed).await;
    assert!(printed.unwrap().unwrap(), "s_client printed the reply");
}

/// A DTLS client that restarts from the same address and port without a close_notify
/// (killed, as a crash or a port-keeping NAT would have it) connects again: its new
/// ClientHello starts a second session (RFC 9147 section 4.2.8), which replaces the old
/// one once its handshake is done. Before, the ClientHello went to the old session and
/// the new client's handshake never finished.
#[tokio::test]
async fn a_client_restarted_from_the_same_port_connects_again() {
    let _serial = SERIAL.lock().await;
    if openssl_missing() {
        return;
    }
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ctx = context();
    let (mut listener, port) = echo_server(&ctx, &pki, (Ipv4Addr::LOCALHOST, 0).into()).await;
    let local = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .unwrap()
        .port();
    let first = s_client(port, Some(local), &pki);
    let mut old = tokio::time::timeout(Duration::from_secs(10), listener.accept())
        .await
        .expect("the first client connected")
        .unwrap()
        .unwrap();
    drop(first); // SIGKILL: no close_notify

    let mut second = s_client(port, Some(local), &pki);
    let mut conn = tokio::time::timeout(Duration::from_secs(10), listener.accept())
        .await
        .expect("the restarted client connected")
        .unwrap()
        .unwrap();
    exchange(&mut conn, &mut second).await;
    // The old session ended when the new one replaced it.
    let end = tokio::time::timeout(Duration::from_secs(5), old.receive())
        .await
        .expect("the old session ended");
    assert!(!matches!(end, Ok(Some(_))), "{end:?}");
}
