//! `taps connect` and `taps listen` over TLS and QUIC, end to end with the real binary:
//! against OpenSSL's `s_server` (an independent TLS stack), and `taps listen --cert`
//! against `openssl s_client` and `taps connect`. Certificates are made at run time.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use taps_testkit::openssl::{s_server_rev, Killed};
use taps_testkit::{free_port, TestPki};

fn have_openssl() -> bool {
    Command::new("openssl").arg("version").output().is_ok()
}

fn taps(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_taps"))
        .args(args)
        .output()
        .expect("run taps")
}

/// Runs `taps` with `args`, asserts it succeeded, and returns its standard output.
fn connect_ok(args: &[&str]) -> String {
    let out = taps(args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// `taps listen PORT --local 127.0.0.1 --echo --cert --key` with `pki`'s identity and
/// `extra` arguments; a thread reads its standard output into a channel (so the pipe stays
/// open under the listener, which would end at its next line otherwise).
struct TapsListener {
    _child: Killed,
    lines: std::sync::mpsc::Receiver<String>,
}

impl TapsListener {
    fn start(port: u16, pki: &TestPki, extra: &[&str]) -> TapsListener {
        let mut child = Killed(
            Command::new(env!("CARGO_BIN_EXE_taps"))
                .args([
                    "listen",
                    &port.to_string(),
                    "--local",
                    "127.0.0.1",
                    "--echo",
                ])
                .args(extra)
                .arg("--cert")
                .arg(&pki.cert)
                .arg("--key")
                .arg(&pki.key)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let stdout = child.0.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        TapsListener {
            _child: child,
            lines,
        }
    }

    /// The next line starting with `prefix` within 10 s (lines before it are skipped).
    fn wait_line(&self, prefix: &str) -> Option<String> {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            match self.lines.recv_timeout(Duration::from_millis(200)) {
                Ok(l) if l.starts_with(prefix) => return Some(l),
                _ => {}
            }
        }
        None
    }
}

const SECURE: &str = r#"{"security":"require"}"#;

#[test]
fn connect_to_openssl_s_server_verified_and_not() {
    if !have_openssl() {
        taps_testkit::skip(
            "connect_to_openssl_s_server_verified_and_not",
            "openssl is not installed (scripts/deps.sh installs it)",
        );
        return;
    }
    let pki = TestPki::new(&["localhost"]).unwrap();
    let (_server, port) = s_server_rev(&pki, &["-alpn", "h2"]);
    let p = port.to_string();
    let ca = pki.ca.to_str().unwrap();
    let text = connect_ok(&[
        "connect",
        "127.0.0.1",
        &p,
        "--props",
        SECURE,
        "--ca",
        ca,
        "--server-name",
        "localhost",
        "--alpn",
        "h2",
        "--line",
        "hi",
        "--trace",
    ]);
    assert!(text.contains("connected: TLS/TCP"), "{text}");
    assert!(text.contains("security: TLS 1.3"), "{text}");
    assert!(text.contains("ALPN h2"), "{text}");
    assert!(text.contains("reply: ih"), "{text}");
    // Without the CA: a verification error naming the host and why; non-zero exit.
    let out = taps(&[
        "connect",
        "127.0.0.1",
        &p,
        "--props",
        SECURE,
        "--server-name",
        "localhost",
        "--line",
        "hi",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "certificate of localhost rejected: issued by an unknown certificate authority"
        ),
        "{err}"
    );
}

#[test]
fn taps_listen_serves_tls_to_openssl_and_tls_and_quic_to_taps() {
    let pki = TestPki::new(&["localhost"]).unwrap();
    let port = free_port();
    let p = port.to_string();
    let listener = TapsListener::start(port, &pki, &[]);
    let listening: Vec<String> = (0..2)
        .map(|_| listener.wait_line("listening:").expect("listener output"))
        .collect();
    let all = listening.join("\n");
    assert!(all.contains("TLS/") && all.contains("QUIC"), "{all}");
    let ca = pki.ca.to_str().unwrap();
    // taps over QUIC (ranked first) and over TLS/TCP (required).
    for (props, stack) in [
        (SECURE, "QUIC"),
        (
            r#"{"security":"require","transport":{"value":"TCP","precedence":2}}"#,
            "TLS/TCP",
        ),
    ] {
        echo_hello(&p, props, ca, stack);
    }
    if !have_openssl() {
        taps_testkit::skip(
            "taps_listen_serves_tls_to_openssl_and_tls_and_quic_to_taps",
            "the openssl s_client part (openssl is not installed)",
        );
        return;
    }
    let mut client = Command::new("openssl")
        .args([
            "s_client",
            "-quiet",
            "-no_ign_eof",
            "-verify_return_error",
            "-connect",
        ])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-servername", "localhost", "-CAfile"])
        .arg(&pki.ca)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // taps' echo frames messages: send one framed message, read it back.
    let mut stdin = client.stdin.take().unwrap();
    stdin.write_all(&[0, 0, 0, 2, b'o', b'k']).unwrap();
    // End of input closes the connection (-no_ign_eof): give the echo time to come back.
    std::thread::sleep(Duration::from_millis(500));
    drop(stdin);
    let out = client.wait_with_output().unwrap();
    assert_eq!(out.stdout, [0, 0, 0, 2, b'o', b'k'], "{:?}", out);
}

/// `taps listen --alpn h3` accepts ngtcp2's HTTP/3 client (`gtlsclient`, an independent
/// QUIC stack; Debian's ngtcp2-client): the QUIC handshake completes with ALPN h3 and the
/// listener reports a QUIC connection. (taps' echo is not HTTP/3, so what the client makes
/// of the echoed request afterwards is not checked.) Without `--alpn` a taps listener
/// offers only its own ALPN (`taps`), and the h3 client is refused in the handshake.
#[test]
fn taps_listen_accepts_an_ngtcp2_quic_client() {
    if Command::new("gtlsclient").arg("--help").output().is_err() {
        taps_testkit::skip(
            "taps_listen_accepts_an_ngtcp2_quic_client",
            "ngtcp2's gtlsclient is not installed (scripts/deps.sh installs it)",
        );
        return;
    }
    let pki = TestPki::new(&["localhost"]).unwrap();
    for (alpn, accepted) in [(Some("h3"), true), (None, false)] {
        let port = free_port();
        let p = port.to_string();
        let extra: Vec<&str> = alpn.map_or(Vec::new(), |a| vec!["--alpn", a]);
        let listener = TapsListener::start(port, &pki, &extra);
        assert!(
            listener.wait_line("listening: QUIC").is_some(),
            "no QUIC listener"
        );
        let out = Command::new("timeout")
            .args([
                "20",
                "gtlsclient",
                "--exit-on-all-streams-close",
                "--timeout=3s",
            ])
            .args(["127.0.0.1", &p, &format!("https://localhost:{port}/")])
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        let handshake = log.contains("QUIC handshake has completed");
        if accepted {
            assert!(
                handshake && log.contains("Negotiated ALPN is h3"),
                "ngtcp2 client log: {}",
                log.lines().rev().take(20).collect::<Vec<_>>().join("\n")
            );
            let line = listener.wait_line("accepted #1:");
            assert!(
                line.as_deref().is_some_and(|l| l.contains(": QUIC ")),
                "the listener reported no QUIC connection: {line:?}"
            );
        } else {
            assert!(!handshake, "the handshake completed without a common ALPN");
            assert!(
                log.contains("peer doesn't support any known protocol"),
                "ngtcp2 client log: {}",
                log.lines().rev().take(20).collect::<Vec<_>>().join("\n")
            );
        }
    }
}

/// `taps listen` with UDP and security required serves DTLS: `taps connect` (verified
/// against the test CA) and OpenSSL's DTLS 1.2 client both get their message echoed.
#[test]
fn taps_listen_serves_dtls_to_taps_and_openssl_s_client() {
    const DTLS: &str = r#"{"transport":{"value":"UDP","precedence":2},"security":"require"}"#;
    let pki = TestPki::new(&["localhost"]).unwrap();
    let port = free_port();
    let p = port.to_string();
    let listener = TapsListener::start(port, &pki, &["--props", DTLS]);
    let line = listener.wait_line("listening:").expect("listener output");
    assert!(line.starts_with("listening: DTLS/UDP"), "{line}");
    let text = connect_ok(&[
        "connect",
        "127.0.0.1",
        &p,
        "--props",
        DTLS,
        "--ca",
        pki.ca.to_str().unwrap(),
        "--server-name",
        "localhost",
        "--message",
        "over dtls",
    ]);
    assert!(text.contains("connected: DTLS/UDP"), "{text}");
    assert!(text.contains("reply: over dtls"), "{text}");
    if !have_openssl() {
        taps_testkit::skip(
            "taps_listen_serves_dtls_to_taps_and_openssl_s_client",
            "the openssl s_client -dtls1_2 part (openssl is not installed)",
        );
        return;
    }
    assert_eq!(
        openssl_dtls_echo(port, &pki, "from openssl\n"),
        "from openssl\n"
    );
}

/// `taps connect` to the echo listener on 127.0.0.1:`port` with `props`, trusting `ca`
/// for `localhost`: connected over `stack`, "hello" echoed.
fn echo_hello(port: &str, props: &str, ca: &str, stack: &str) {
    let text = connect_ok(&[
        "connect",
        "127.0.0.1",
        port,
        "--props",
        props,
        "--ca",
        ca,
        "--server-name",
        "localhost",
        "--message",
        "hello",
    ]);
    assert!(text.contains(&format!("connected: {stack}")), "{text}");
    assert!(text.contains("reply: hello"), "{text}");
}

/// Sends `line` with `openssl s_client -dtls1_2` (verifying against the test CA) to the
/// taps DTLS echo on `port` and returns the line that comes back.
fn openssl_dtls_echo(port: u16, pki: &TestPki, line: &str) -> String {
    let mut client = Killed(
        Command::new("openssl")
            .args(["s_client", "-dtls1_2", "-quiet", "-verify_return_error"])
            .args(["-connect", &format!("127.0.0.1:{port}"), "-CAfile"])
            .arg(&pki.ca)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // A DTLS record is a message: the echo sends the datagram's bytes back as they came.
    let mut stdin = client.0.stdin.take().unwrap();
    stdin.write_all(line.as_bytes()).unwrap();
    let stdout = client.0.stdout.take().unwrap();
    let got = std::thread::spawn(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    });
    let t0 = Instant::now();
    while !got.is_finished() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(got.is_finished(), "no echo from the taps DTLS listener");
    drop(stdin);
    got.join().unwrap().unwrap()
}

#[test]
fn taps_listen_serves_quic_and_dtls_on_one_port() {
    // DTLS/UDP gives no reliability, order or congestion control, which RFC 9622's
    // defaults require: a listener for both says it does not need them.
    const QUIC_OR_DTLS: &str = r#"{"transport":{"value":["QUIC","UDP"],"precedence":2},
        "security":"require","reliability":"ignore","preserveOrder":"ignore",
        "congestionControl":"ignore"}"#;
    const QUIC: &str = r#"{"transport":{"value":"QUIC","precedence":2},"security":"require"}"#;
    const DTLS: &str = r#"{"transport":{"value":"UDP","precedence":2},"security":"require"}"#;
    let pki = TestPki::new(&["localhost"]).unwrap();
    let port = free_port();
    let p = port.to_string();
    let listener = TapsListener::start(port, &pki, &["--props", QUIC_OR_DTLS]);
    let mut listening: Vec<String> = (0..2)
        .map(|_| listener.wait_line("listening:").expect("listener output"))
        .collect();
    listening.sort();
    assert!(
        listening[0].starts_with("listening: DTLS/UDP on"),
        "{listening:?}"
    );
    assert!(
        listening[1].starts_with("listening: QUIC on"),
        "{listening:?}"
    );
    let ca = pki.ca.to_str().unwrap();
    // Alternately, so that each protocol's datagrams arrive while the other's session
    // lives on the same socket.
    for (props, stack) in [(QUIC, "QUIC"), (DTLS, "DTLS/UDP"), (QUIC, "QUIC")] {
        echo_hello(&p, props, ca, stack);
    }
    if !have_openssl() {
        taps_testkit::skip(
            "taps_listen_serves_quic_and_dtls_on_one_port",
            "the openssl s_client -dtls1_2 part (openssl is not installed)",
        );
        return;
    }
    assert_eq!(
        openssl_dtls_echo(port, &pki, "dtls beside quic\n"),
        "dtls beside quic\n"
    );
}
