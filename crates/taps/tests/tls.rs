//! TLS over TCP end to end on loopback: a taps listener and client, certificates made at
//! run time (taps-testkit's TestPki), verification on by default, typed causes for every
//! way it can fail, and a real independent peer (`openssl s_server`) when installed.

mod common;
use common::spawn_echo;

use std::net::{Ipv4Addr, SocketAddr, TcpListener as StdListener};
use std::process::Command;
use std::time::Duration;

use taps::taps_core::properties::{Name, Protocol};
use taps::taps_core::race::{AttemptOutcome, RaceEvent};
use taps::taps_core::VerifyFailure;
use taps::{
    AttemptCause, Context, Error, FileProblem, Listener, Preconnection, RemoteEndpoint,
    SecurityParameters, SetupError, TransportProperties,
};
use taps_testkit::openssl::s_server_rev;
use taps_testkit::{TestPki, Validity};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn secure_tcp() -> TransportProperties {
    TransportProperties::new()
        .require(Name::Security)
        .protocols(taps::Preference::Require, [Protocol::Tcp])
}

/// A TLS listener on 127.0.0.1 (ephemeral port) presenting `cert`/`key`, echoing messages.
async fn echo_server(ctx: &Context, params: SecurityParameters) -> (Listener, u16) {
    let props = TransportProperties::for_listener()
        .require(Name::Security)
        .protocols(taps::Preference::Require, [Protocol::Tcp])
        .compile()
        .unwrap();
    let listener = Preconnection::new(ctx, props)
        .local(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .security(params)
        .listen()
        .await
        .unwrap();
    let port = listener.local_addrs()[0].1.port();
    (listener, port)
}

fn client(ctx: &Context, port: u16, params: SecurityParameters) -> Preconnection {
    Preconnection::new(ctx, secure_tcp().compile().unwrap())
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port))
        .security(params)
}

/// A client offering ALPN `offer` to an echo server (verified, "localhost") that accepts
/// `accepted`; with the certificates, which must outlive the preconnection's use.
async fn alpn_client(accepted: &[&str], offer: &str) -> (Preconnection, TestPki) {
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ctx = Context::builder().build().unwrap();
    let server = SecurityParameters::new()
        .identity(&pki.cert, &pki.key)
        .alpn(accepted.iter().copied());
    let (listener, port) = echo_server(&ctx, server).await;
    spawn_echo(listener);
    let params = SecurityParameters::new()
        .ca_file(&pki.ca)
        .server_name("localhost")
        .alpn([offer]);
    (client(&ctx, port, params), pki)
}

#[tokio::test]
async fn verified_tls_round_trip_with_alpn() {
    let (pre, _pki) = alpn_client(&["h2", "http/1.1"], "http/1.1").await;
    let mut conn = pre.initiate().await.unwrap();
    let info = conn.info().clone();
    assert_eq!(info.stack.to_string(), "TLS/TCP");
    let sec = info.security.as_ref().expect("security info");
    assert_eq!(sec.version, "TLS 1.3");
    assert_eq!(sec.alpn.as_deref(), Some(&b"http/1.1"[..]));
    assert_eq!(sec.peer_certificates.len(), 1);
    assert!(!sec.resumed);
    // The race's finish line was the handshake: the transport came up first.
    let report = info.race.as_ref().unwrap();
    assert!(report
        .timeline
        .iter()
        .any(|(_, e)| matches!(e, RaceEvent::TransportUp { .. })));
    conn.send(b"hello over TLS").await.unwrap();
    assert_eq!(
        conn.receive().await.unwrap().as_deref(),
        Some(&b"hello over TLS"[..])
    );
}

/// Causes of the only attempt of a failed race.
fn causes(err: &Error) -> Vec<AttemptCause> {
    err.attempt_causes()
        .into_iter()
        .filter(|c| !matches!(c, AttemptCause::Unavailable(_)))
        .collect()
}

#[tokio::test]
async fn verification_failures_are_typed_and_never_fall_back() {
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ctx = Context::builder().build().unwrap();
    let server = SecurityParameters::new().identity(&pki.cert, &pki.key);
    let (listener, port) = echo_server(&ctx, server).await;
    spawn_echo(listener);

    // Not trusting the test CA: unknown issuer, naming the host.
    let err = client(
        &ctx,
        port,
        SecurityParameters::new().server_name("localhost"),
    )
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
    assert!(
        err.to_string()
            .contains("certificate of localhost rejected"),
        "{err}"
    );
    // No plain-text stack was tried.
    let report = err.race().unwrap().report();
    assert!(report
        .attempts
        .iter()
        .all(|a| a.candidate.stack.security != taps::taps_core::Security::None));

    // Trusting the CA, but asking for another name: name mismatch.
    let params = SecurityParameters::new()
        .ca_file(&pki.ca)
        .server_name("other.test");
    let err = client(&ctx, port, params).initiate().await.unwrap_err();
    assert_eq!(
        causes(&err),
        [AttemptCause::Verification {
            server_name: "other.test".into(),
            reason: VerifyFailure::NameMismatch
        }],
        "{err}"
    );

    // The address itself is not in the certificate: verified against what was asked
    // for (the literal 127.0.0.1), not accepted because it resolved.
    let err = client(&ctx, port, SecurityParameters::new().ca_file(&pki.ca))
        .initiate()
        .await
        .unwrap_err();
    assert!(
        matches!(&causes(&err)[..], [AttemptCause::Verification { server_name, reason: VerifyFailure::NameMismatch }] if &**server_name == "127.0.0.1"),
        "{err}"
    );

    // The explicit opt-out connects (encrypted, not authenticated).
    let mut conn = client(
        &ctx,
        port,
        SecurityParameters::new().danger_accept_any_certificate(),
    )
    .initiate()
    .await
    .unwrap();
    conn.send(b"x").await.unwrap();
    assert_eq!(conn.receive().await.unwrap().as_deref(), Some(&b"x"[..]));
}

/// A handshake that fails for a reason other than the certificate keeps rustls' own error
/// inside the cause, and says what happened in words written from its variant.
#[tokio::test]
async fn a_failed_handshake_keeps_rustls_error() {
    let (pre, _pki) = alpn_client(&["h2"], "http/1.1").await;
    let err = pre.initiate().await.unwrap_err();
    let [AttemptCause::Handshake(kept)] = &causes(&err)[..] else {
        panic!("not one handshake failure: {err}");
    };
    assert!(
        matches!(
            kept.find::<rustls::Error>(),
            Some(rustls::Error::AlertReceived(
                rustls::AlertDescription::NoApplicationProtocol
            ))
        ),
        "{kept:?}"
    );
    let words = err.to_string();
    assert!(
        words.contains("no application protocol in common"),
        "{words}"
    );
}

#[tokio::test]
async fn an_expired_certificate_says_so() {
    let pki = TestPki::new(&["localhost"]).unwrap();
    let (cert, key) = pki.leaf("old", &["localhost"], Validity::Expired).unwrap();
    let ctx = Context::builder().build().unwrap();
    let (listener, port) = echo_server(&ctx, SecurityParameters::new().identity(cert, key)).await;
    spawn_echo(listener);
    let params = SecurityParameters::new()
        .ca_file(&pki.ca)
        .server_name("localhost");
    let err = client(&ctx, port, params).initiate().await.unwrap_err();
    assert_eq!(
        causes(&err),
        [AttemptCause::Verification {
            server_name: "localhost".into(),
            reason: VerifyFailure::Expired
        }],
        "{err}"
    );
}

#[tokio::test]
async fn a_second_connection_resumes_the_session() {
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ctx = Context::builder().build().unwrap();
    let (listener, port) = echo_server(
        &ctx,
        SecurityParameters::new().identity(&pki.cert, &pki.key),
    )
    .await;
    spawn_echo(listener);
    let pre = client(
        &ctx,
        port,
        SecurityParameters::new()
            .ca_file(&pki.ca)
            .server_name("localhost"),
    );
    let mut first = pre.initiate().await.unwrap();
    // TLS 1.3 tickets arrive after the handshake: read once so the client takes them.
    first.send(b"1").await.unwrap();
    first.receive().await.unwrap();
    let second = pre.initiate().await.unwrap();
    assert!(second.info().security.as_ref().unwrap().resumed);
}

/// A TCP port that accepts but whose TLS server never answers (a TCP-terminating middle
/// box with nothing behind it) must not win: the attempt fails or is overtaken, and a
/// working candidate wins.
#[tokio::test]
async fn tcp_up_but_tls_stuck_does_not_win() {
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ctx = Context::builder().build().unwrap();
    // [::1]:P accepts TCP and then says nothing; 127.0.0.1:P is a real TLS server.
    let (listener, port) = echo_server(
        &ctx,
        SecurityParameters::new().identity(&pki.cert, &pki.key),
    )
    .await;
    spawn_echo(listener);
    let Ok(stuck) = StdListener::bind(("::1", port)) else {
        taps_testkit::skip_by_chance("tls stuck [::1]", &format!("[::1]:{port} is taken"));
        return;
    };
    let held = std::thread::spawn(move || {
        let mut held = Vec::new();
        if let Ok((s, _)) = stuck.accept() {
            held.push(s);
            std::thread::sleep(Duration::from_secs(2));
        }
    });
    let props = secure_tcp()
        .attempt_delay(Duration::from_millis(100))
        .compile()
        .unwrap();
    let mut conn = Preconnection::new(&ctx, props)
        .race_timeline(true)
        .remote(RemoteEndpoint::new("localhost", port))
        .security(
            SecurityParameters::new()
                .ca_file(&pki.ca)
                .server_name("localhost"),
        )
        .initiate()
        .await
        .unwrap();
    assert!(conn.info().remote.is_ipv4(), "{:?}", conn.info());
    let report = conn.info().race.clone().unwrap();
    let first = &report
        .attempts
        .iter()
        .find(|a| a.candidate.remote.is_ipv6())
        .unwrap();
    assert!(
        matches!(
            first.outcome,
            AttemptOutcome::Cancelled | AttemptOutcome::Failed(_)
        ),
        "{}",
        report.trace()
    );
    conn.send(b"ok").await.unwrap();
    assert_eq!(conn.receive().await.unwrap().as_deref(), Some(&b"ok"[..]));
    drop(conn);
    let _ = held.join();
}

#[tokio::test]
async fn bad_security_files_are_clear_errors_naming_the_file() {
    let pki = TestPki::new(&["localhost"]).unwrap();
    let other = TestPki::new(&["localhost"]).unwrap();
    let ctx = Context::builder().build().unwrap();
    let listen = |params: SecurityParameters| {
        let ctx = ctx.clone();
        async move {
            let props = TransportProperties::for_listener()
                .require(Name::Security)
                .compile()
                .unwrap();
            Preconnection::new(&ctx, props)
                .local(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
                .security(params)
                .listen()
                .await
                .map(|_| ())
        }
    };
    let file_error = |r: Result<(), Error>| match r {
        Err(Error::Setup(SetupError::SecurityFile { file, problem })) => (file, problem),
        other => panic!("{other:?}"),
    };
    let missing = pki.dir().join("missing.pem");
    let (file, problem) =
        file_error(listen(SecurityParameters::new().identity(&missing, &pki.key)).await);
    assert_eq!(file, missing);
    assert!(matches!(problem, FileProblem::Unreadable(_)), "{problem}");
    assert!(problem.to_string().contains("cannot read"), "{problem}");
    // A key that belongs to another certificate.
    let (file, problem) =
        file_error(listen(SecurityParameters::new().identity(&pki.cert, &other.key)).await);
    assert_eq!(file, other.key);
    assert!(
        matches!(&problem, FileProblem::KeyMismatch { cert, .. } if *cert == pki.cert),
        "{problem}"
    );
    assert!(problem.to_string().contains("does not fit"), "{problem}");
    // A "CA file" with a key in it and no certificate.
    let pre = client(&ctx, 1, SecurityParameters::new().ca_file(&pki.key));
    let (file, problem) = file_error(pre.prepare());
    assert_eq!(file, pki.key);
    assert!(matches!(problem, FileProblem::NoCertificate), "{problem}");
    // A certificate where the key should be.
    let (file, problem) =
        file_error(listen(SecurityParameters::new().identity(&pki.cert, &pki.cert)).await);
    assert_eq!(file, pki.cert);
    assert!(matches!(problem, FileProblem::NoPrivateKey), "{problem}");
    // ALPN lists are checked.
    assert!(SecurityParameters::parse_alpn("h2,http/1.1").is_ok());
    assert!(SecurityParameters::parse_alpn("h2,,x").is_err());
    assert!(SecurityParameters::parse_alpn("h 2").is_err());
}

/// Against an independent TLS implementation: OpenSSL's s_server, TLS 1.3 and ALPN.
#[tokio::test]
async fn interoperates_with_openssl_s_server() {
    if Command::new("openssl").arg("version").output().is_err() {
        taps_testkit::skip(
            "interoperates_with_openssl_s_server",
            "openssl is not installed (scripts/deps.sh installs it)",
        );
        return;
    }
    let pki = TestPki::new(&["localhost"]).unwrap();
    let (_server, port) = s_server_rev(&pki, &["-alpn", "h2"]);
    let ctx = Context::builder().build().unwrap();
    let pre = client(
        &ctx,
        port,
        SecurityParameters::new()
            .ca_file(&pki.ca)
            .server_name("localhost")
            .alpn(["h2"]),
    );
    let mut conn = pre.initiate().await.expect("s_server answered");
    let sec = conn.info().security.clone().unwrap();
    assert_eq!(sec.version, "TLS 1.3");
    assert_eq!(sec.alpn.as_deref(), Some(&b"h2"[..]));
    conn.write_all(b"hello\n").await.unwrap();
    let mut line = [0u8; 6];
    conn.read_exact(&mut line).await.unwrap();
    assert_eq!(&line, b"olleh\n");
}
