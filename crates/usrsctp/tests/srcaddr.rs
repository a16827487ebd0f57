//! A server UDP socket bound to the unspecified address must answer each client from the
//! address that client sent to. 127.0.0.2 is loopback on Linux but not the address routing
//! picks as source (127.0.0.1), so a reply sent with plain `send_to` would be dropped by the
//! client's connected UDP socket and the connect would time out.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::timeout;
use usrsctp::{SctpOptions, SctpStack};

const T: Duration = Duration::from_secs(3);

async fn via_second_loopback(bind: &str, sctp_port: u16) {
    let opts = SctpOptions {
        init_attempts: 2,
        init_max_timeout_ms: 1000,
        ..SctpOptions::default()
    };
    let stack = SctpStack::global();
    let l = stack
        .listen(bind.parse().unwrap(), sctp_port, &opts)
        .unwrap();
    let port = l.local_addr().port();
    let to: SocketAddr = SocketAddr::from(([127, 0, 0, 2], port));
    let c = stack.connect(to, sctp_port, &opts).unwrap();
    let (a, b) = tokio::join!(timeout(T, l.accept()), timeout(T, c.into_future()));
    let client = b
        .expect("connect timed out: reply came from the wrong source address")
        .expect("connect");
    let (server, peer) = a.expect("accept timed out").expect("accept");
    let local = client.local_addr();
    assert_eq!(
        (peer.ip().to_canonical(), peer.port()),
        (local.ip().to_canonical(), local.port())
    );
    client.send(0, b"ping", true, 1).await.unwrap();
    let m = timeout(T, server.recv()).await.unwrap().unwrap().unwrap();
    assert_eq!(m.data.as_slice(), b"ping");
    server.send(0, b"pong", true, 2).await.unwrap();
    let m = timeout(T, client.recv()).await.unwrap().unwrap().unwrap();
    assert_eq!(m.data.as_slice(), b"pong");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv4_wildcard_replies_from_destination_address() {
    via_second_loopback("0.0.0.0:0", 5101).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dual_stack_wildcard_replies_from_mapped_destination_address() {
    // Where IPv6 is unavailable the test says it skipped (and fails as root in CI).
    if let Err(e) = std::net::UdpSocket::bind("[::]:0") {
        skip(
            "dual_stack_wildcard_replies_from_mapped_destination_address",
            &format!("no IPv6 socket ({e})"),
        );
        return;
    }
    via_second_loopback("[::]:0", 5102).await;
}

/// Prints `SKIPPED: <test>: <reason>` past libtest's capture (scripts/test.sh counts these
/// lines); as root with `TAPS_REQUIRE_ROOT_TESTS=1` or `CI` set, fails instead. (The same
/// rule as `taps_testkit::skip`; this crate does not depend on the test kit.)
fn skip(test: &str, reason: &str) {
    use std::io::Write;
    let set = |n: &str| std::env::var(n).is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1))
            == Some("0")
    });
    if root && (set("TAPS_REQUIRE_ROOT_TESTS") || set("CI")) {
        panic!("{test} cannot run as root in CI: {reason}");
    }
    let _ = writeln!(std::io::stderr(), "SKIPPED: {test}: {reason}");
}
