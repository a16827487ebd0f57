//! `taps connect` over TLS and QUIC against independent peers, where interop found it
//! wanting (issue 37): OpenSSL's `s_server` (TLS), ngtcp2's `gtlsserver` (QUIC), with
//! certificates made as their users make them (`openssl req -x509`) or at run time.

use std::net::TcpListener;
use std::process::{Command, Output};

use taps_testkit::ngtcp2::have_gtlsserver;
use taps_testkit::openssl::s_server_rev;
use taps_testkit::TestPki;

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
