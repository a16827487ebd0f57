//! `taps get` with the real binary against Debian's caddy (installed by
//! `scripts/deps.sh`; quic-go's HTTP/3 and Go's HTTP/2) on ports picked at run time:
//! HTTP/3 with h2 on the same port (twice: the second request reuses the connection),
//! `--http2-only`, and with UDP to the port blackholed, HTTP/2 in one process and QUIC
//! skipped by the next one through the CIB file (`--cib`).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::process::Command;

use taps_testkit::caddy::{have_caddy, Caddy, Site};
use taps_testkit::{skip, TestPki};

/// Runs `taps get` with `args`, asserts it succeeded, and returns its standard output.
fn get_ok(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_taps"))
        .arg("get")
        .args(args)
        .output()
        .expect("run taps");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{text}");
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

fn caddy(h3: bool) -> Option<(TestPki, Caddy)> {
    if !have_caddy() {
        skip(
            "get",
            "caddy is not installed (scripts/deps.sh installs it)",
        );
        return None;
    }
    let pki = TestPki::new(&["localhost"]).unwrap();
    let site = Site {
        h3,
        body: "hello".into(),
        ..Site::default()
    };
    let caddy = Caddy::start(&[site], &pki.cert, &pki.key);
    Some((pki, caddy))
}

#[test]
fn get_over_http3_then_http2_only() {
    let Some((pki, caddy)) = caddy(true) else {
        return;
    };
    let url = format!("https://localhost:{}/", caddy.ports[0]);
    let ca = pki.ca.to_str().unwrap();
    // A 10 s head start: QUIC wins however busy the machine is.
    let text = get_ok(&[
        &url,
        "--ca",
        ca,
        "--quic-head-start",
        "10000",
        "-n",
        "2",
        "--body",
    ]);
    assert_eq!(text.matches("status: 200").count(), 2, "{text}");
    assert_eq!(text.matches("protocol: HTTP/3.0").count(), 2, "{text}");
    let won = format!("race: QUIC (h3) to localhost:{}: won", caddy.ports[0]);
    assert!(text.contains(&won), "{text}");
    assert!(
        text.contains("(new)") && text.contains("(reused)"),
        "{text}"
    );
    assert!(text.contains("hello"), "{text}");
    let text = get_ok(&[&url, "--ca", ca, "--http2-only"]);
    assert!(text.contains("protocol: HTTP/2.0"), "{text}");
    assert!(text.contains("skipped: HTTP/3 not allowed"), "{text}");
    // Caddy advertises its HTTP/3 on the same port.
    assert!(
        text.contains(&format!("alt-svc: h3=\":{}\"", caddy.ports[0])),
        "{text}"
    );
}

#[test]
fn udp_blackholed_http2_then_the_cib_file_skips_quic() {
    let Some((pki, caddy)) = caddy(false) else {
        return;
    };
    let port = caddy.ports[0];
    // Sockets that never read: QUIC's packets get no answer and no ICMP error.
    let _v4 = UdpSocket::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).unwrap();
    let _v6 = UdpSocket::bind(SocketAddr::from((Ipv6Addr::LOCALHOST, port)));
    let dir = tempfile::tempdir().unwrap();
    let cib = dir.path().join("cib.json");
    let url = format!("https://localhost:{port}/");
    let args = [
        &url,
        "--ca",
        pki.ca.to_str().unwrap(),
        "--cib",
        cib.to_str().unwrap(),
    ];
    let text = get_ok(&args);
    assert!(text.contains("protocol: HTTP/2.0"), "{text}");
    assert!(text.contains("given up (head start 100 ms)"), "{text}");
    let text = get_ok(&args);
    assert!(text.contains("protocol: HTTP/2.0"), "{text}");
    assert!(text.contains("skipped: the CIB marks it broken"), "{text}");
}
