//! `taps connect` over TLS and QUIC against independent peers, where interop found it
//! wanting (issue 37): OpenSSL's `s_server` (TLS), ngtcp2's `gtlsserver` (QUIC), with
//! certificates made as their users make them (`openssl req -x509`) or at run time.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

use taps_testkit::ngtcp2::{gtlsserver, have_gtlsserver};
use taps_testkit::openssl::{s_server_rev, s_server_rev_with, self_signed};
use taps_testkit::{TestPki, Validity};

const SECURE: &str = r#"{"security":"require"}"#;

fn taps(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_taps"))
        .args(args)
        .output()
        .expect("run taps")
}

/// `taps connect 127.0.0.1 PORT` with `args`: (exit code, stdout, stderr).
fn connect(port: u16, args: &[&str]) -> (Option<i32>, String, String) {
    let p = port.to_string();
    let mut all = vec!["connect", "127.0.0.1", &p];
    all.extend_from_slice(args);
    let out = taps(&all);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `taps connect` to 127.0.0.1:`port` with security required, trusting `ca` for `name`,
/// sending a line.
fn connect_trusting(port: u16, ca: &Path, name: &str) -> (Option<i32>, String, String) {
    let ca = ca.to_str().unwrap();
    let args = ["--props", SECURE, "--ca", ca, "--server-name", name];
    connect(port, &[&args[..], &["--line", "secret"]].concat())
}

/// Whether `tool` runs here; if not, the test is skipped (and fails where skips must).
fn have(tool: &str, test: &str) -> bool {
    let runs = match tool {
        "gtlsserver" => have_gtlsserver(),
        _ => Command::new(tool).arg("version").output().is_ok(),
    };
    if !runs {
        taps_testkit::skip(
            test,
            &format!("{tool} is not installed (scripts/deps.sh installs it)"),
        );
    }
    runs
}

/// The words after `certificate of NAME rejected: ` in a race's error, up to the next
/// attempt.
fn rejection(err: &str) -> &str {
    let at = err.find("rejected: ").map_or(0, |i| i + "rejected: ".len());
    err[at..].split("; ").next().unwrap_or_default().trim()
}

/// Issue 37, 1: a security option without `{"security":"require"}` used to race plain TCP
/// too, and the line went out in the clear (s_server: "wrong version number"). Now any
/// security option requires security; properties that rule it out are refused.
#[test]
fn security_options_alone_require_security() {
    if !have("openssl", "security_options_alone_require_security") {
        return;
    }
    let pki = TestPki::new(&["localhost"]).unwrap();
    let (_server, port) = s_server_rev(&pki, &["-alpn", "h2"]);
    let ca = pki.ca.to_str().unwrap();
    let (code, out, err) = connect(
        port,
        &[
            "--ca",
            ca,
            "--server-name",
            "localhost",
            "--alpn",
            "h2",
            "--line",
            "secret",
        ],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("connected: TLS/TCP"), "{out}");
    assert!(
        out.contains("ALPN h2") && out.contains("reply: terces"),
        "{out}"
    );
    // Only the security option: it alone turns security on.
    let (code, out, err) = connect(port, &["--alpn", "h2", "--insecure-skip-verify"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("connected: TLS/TCP"), "{out}");
    // Properties that rule security out beside an option: refused before any flow.
    let (code, out, err) = connect(
        port,
        &[
            "--props",
            r#"{"security":"prohibit"}"#,
            "--ca",
            ca,
            "--line",
            "secret",
        ],
    );
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("--ca") && err.contains("prohibit"), "{err}");
    assert!(!out.contains("connected"), "{out}");
}

/// Issue 37, 2: a self-signed certificate made with `openssl req -x509` (marked CA:TRUE)
/// and given with `--ca` was refused as a CA used as a server's certificate. Presented by
/// the server as its own, it is pinned now (as curl and OpenSSL trust it), over TLS/TCP
/// and QUIC; its name and validity are still checked, and other CA certificates are
/// still refused.
#[test]
fn a_self_signed_certificate_given_as_trusted_is_pinned() {
    let test = "a_self_signed_certificate_given_as_trusted_is_pinned";
    if !have("openssl", test) {
        return;
    }
    let pki = TestPki::new(&["localhost"]).unwrap();
    let (cert, key) = self_signed(pki.dir(), "server", "ec", "localhost", &[]).unwrap();
    let (server, port) = s_server_rev_with(&cert, &key, &[]);
    let (code, out, err) = connect_trusting(port, &cert, "localhost");
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("connected: TLS/TCP") && out.contains("reply: terces"),
        "{out}"
    );
    // The name is still checked.
    let (code, _, err) = connect_trusting(port, &cert, "other.test");
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(rejection(&err), "certificate is for another name", "{err}");
    // Another self-signed certificate of the same name is not this one.
    let (other, _) = self_signed(pki.dir(), "other", "ec", "localhost", &[]).unwrap();
    let (code, _, err) = connect_trusting(port, &other, "localhost");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("certificate of localhost rejected"), "{err}");
    drop(server);
    // A CA certificate presented as a server's, issued by a trusted CA: still refused.
    let (mid, mid_key) = pki
        .ca_marked("intermediate", &["localhost"], Validity::Current, false)
        .unwrap();
    let (server, port) = s_server_rev_with(&mid, &mid_key, &[]);
    let (code, _, err) = connect_trusting(port, &pki.ca, "localhost");
    assert_eq!(code, Some(1), "{err}");
    assert!(rejection(&err).contains("it is a CA certificate"), "{err}");
    drop(server);
    // A pinned certificate that expired: refused as expired.
    let (old, old_key) = pki
        .ca_marked("expired", &["localhost"], Validity::Expired, true)
        .unwrap();
    let (_server, port) = s_server_rev_with(&old, &old_key, &[]);
    let (code, _, err) = connect_trusting(port, &old, "localhost");
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(rejection(&err), "certificate expired", "{err}");
    // QUIC: ngtcp2's server presenting the same certificate.
    if !have("gtlsserver", test) {
        return;
    }
    let (_quic, port) = gtlsserver(&cert, &key, &[]);
    let (_, out, err) = connect(
        port,
        &[
            "--props",
            SECURE,
            "--ca",
            cert.to_str().unwrap(),
            "--server-name",
            "localhost",
            "--alpn",
            "h3",
        ],
    );
    assert!(out.contains("security: TLS 1.3 (QUIC)"), "{out}{err}");
    assert!(!err.contains("rejected"), "{err}");
}

/// Issue 37, 3: a certificate refused for a reason that carries fields printed rustls'
/// debug output (`UnsupportedSignatureAlgorithmForPublicKeyContext { signature_algorithm_id:
/// [6, 8, 42, ...] }`; over QUIC `Other(OtherError(...))`). Debian's snakeoil case: a
/// trusted RSA certificate named localhost, and a server presenting an EC certificate
/// whose issuer is named localhost, so webpki checks its ECDSA signature with the RSA key.
#[test]
fn certificate_reasons_with_fields_read_as_words() {
    let test = "certificate_reasons_with_fields_read_as_words";
    if !have("openssl", test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (snakeoil, _) = self_signed(dir.path(), "snakeoil", "rsa", "localhost", &[]).unwrap();
    let not_ca = ["-addext", "basicConstraints=critical,CA:FALSE"];
    let (cert, key) = self_signed(dir.path(), "server", "ec", "localhost", &not_ca).unwrap();
    let ca = snakeoil.to_str().unwrap();
    let args = [
        "--props",
        SECURE,
        "--ca",
        ca,
        "--server-name",
        "localhost",
        "--alpn",
        "h3",
    ];
    let expect = |err: &str| {
        let why = rejection(err);
        assert!(
            why.contains("signature algorithm, ecdsa-with-SHA256 (OID 1.2.840.10045.4.3.2)")
                && why.contains("key, RSA (OID 1.2.840.113549.1.1.1)"),
            "{err}"
        );
        assert!(
            !why.contains(['{', '[']) && !why.contains("Context"),
            "{err}"
        );
    };
    let (_server, port) = s_server_rev_with(&cert, &key, &[]);
    let (code, _, err) = connect(port, &args);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("TLS/TCP"), "{err}");
    expect(&err);
    if !have("gtlsserver", test) {
        return;
    }
    let (_quic, port) = gtlsserver(&cert, &key, &[]);
    let (code, _, err) = connect(port, &args);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("QUIC 127.0.0.1"), "{err}");
    expect(&err);
}

/// Issue 37, 4: when ngtcp2's HTTP/3 server closed the connection right after the
/// handshake (the line is no HTTP/3 frame: H3_FRAME_ERROR), taps printed neither
/// `connected: QUIC` nor the peer's close, only "after connecting: connection lost".
/// And its refusal of an ALPN reads as TLS/TCP's refusal by OpenSSL does.
#[test]
fn a_quic_peers_close_and_alpn_refusal_are_told() {
    let test = "a_quic_peers_close_and_alpn_refusal_are_told";
    if !have("gtlsserver", test) || !have("openssl", test) {
        return;
    }
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ca = pki.ca.to_str().unwrap();
    let (_quic, port) = gtlsserver(&pki.cert, &pki.key, &[]);
    let trust = ["--props", SECURE, "--ca", ca, "--server-name", "localhost"];
    let (code, out, err) = connect(
        port,
        &[&trust[..], &["--alpn", "h3", "--line", "hi"]].concat(),
    );
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("connected: QUIC"), "{out}{err}");
    assert!(
        err.contains(
            "after connecting: the peer closed the QUIC connection with application error 0x10"
        ) && err.contains("(H3_"),
        "{err}"
    );
    // An ALPN the server does not speak: refused in the handshake (crypto error 0x178).
    let (code, _, quic) = connect(port, &[&trust[..], &["--alpn", "foo"]].concat());
    assert_eq!(code, Some(1), "{quic}");
    let (_tls, port) = s_server_rev(&pki, &["-alpn", "h2"]);
    let (code, _, tls) = connect(port, &[&trust[..], &["--alpn", "foo"]].concat());
    assert_eq!(code, Some(1), "{tls}");
    let cause = |err: &str, stack: &str| {
        let at = err.find(stack).expect(stack);
        let rest = &err[at..];
        let words = rest[rest.find(": ").unwrap() + 2..]
            .split("; ")
            .next()
            .unwrap();
        words.trim().to_string()
    };
    let refused = "TLS handshake failed: no application protocol in common (ALPN, alert 120 \
                   no_application_protocol)";
    assert_eq!(cause(&quic, "QUIC 127.0.0.1"), refused, "{quic}");
    assert_eq!(cause(&tls, "TLS/TCP 127.0.0.1"), refused, "{tls}");
}

/// Issue 37, 5: every secure race's error listed `DTLS/SCTP ...: skipped: not
/// implemented` and said "all 2 attempts" while naming 3; and a server that accepts TCP
/// but never speaks TLS ended in "timed out", without a word that TCP connected.
#[test]
fn race_errors_count_what_they_list_and_name_a_silent_tls_server() {
    let test = "race_errors_count_what_they_list_and_name_a_silent_tls_server";
    if !have("openssl", test) {
        return;
    }
    let pki = TestPki::new(&["localhost"]).unwrap();
    let (_server, port) = s_server_rev(&pki, &[]);
    // No CA: the certificate is refused (unknown issuer); QUIC is refused (no UDP).
    let (code, _, err) = connect(port, &["--props", SECURE, "--server-name", "localhost"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(!err.contains("DTLS/SCTP"), "{err}");
    let listed = err.matches("127.0.0.1:").count();
    assert!(
        err.contains(&format!("all {listed} attempts failed: ")),
        "{err}"
    );
    // A TCP listener that accepts (the kernel does) and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let props = r#"{"security":"require","establishmentTimeout":3}"#;
    let ca = pki.ca.to_str().unwrap();
    let (code, _, err) = connect(
        port,
        &[
            "--props",
            props,
            "--ca",
            ca,
            "--server-name",
            "localhost",
            "--line",
            "x",
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("timed out after 3000 ms: "), "{err}");
    assert!(!err.contains("DTLS/SCTP"), "{err}");
    assert!(
        err.contains(&format!(
            "TLS/TCP 127.0.0.1:{port}: TCP connected to 127.0.0.1:{port} in "
        )) && err.contains(", then the TLS handshake did not finish within "),
        "{err}"
    );
}
