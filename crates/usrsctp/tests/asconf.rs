//! Local addresses added and removed after the handshake (ASCONF, RFC 5061), on loopback in
//! one process (IP mode has one tunnelling port per process): a client bound to ::1 alone
//! connects to a listener on 127.0.0.1 and ::1; the server's association has one path. The
//! client adds 127.0.0.1: the server is told (ASCONF ADD-IP), gets an "added" path event
//! and a second path, which it confirms, and data still flows. The client removes it again:
//! the server is told (DELETE-IP) and is back to one path. Then 20 adds and removals while
//! data flows lose nothing. Bad requests fail with messages that say why: an address this
//! host lacks, the last address.

use std::future::IntoFuture;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::time::{sleep, timeout};
use usrsctp::{Association, Error, PathEventKind, PathState, SctpOptions, SctpStack};

const T: Duration = Duration::from_secs(20);

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Waits until `assoc` lists exactly `want` peer addresses, every one active.
async fn paths_become(assoc: &Association, want: &[IpAddr], what: &str) {
    let deadline = Instant::now() + T;
    loop {
        let paths = assoc.paths().unwrap();
        let mut ips: Vec<IpAddr> = paths.iter().filter_map(|p| p.id.ip()).collect();
        ips.sort();
        let mut want = want.to_vec();
        want.sort();
        if ips == want && paths.iter().all(|p| p.state == PathState::Active) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {paths:?}");
        sleep(Duration::from_millis(20)).await;
    }
}

/// Sends `text` from `from` and checks that `to` receives it.
async fn exchange(from: &Association, to: &Association, text: &[u8]) {
    from.send(0, text, true, 0).await.unwrap();
    let m = timeout(T, to.recv()).await.unwrap().unwrap().unwrap();
    assert_eq!(m.data, text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_and_removed_addresses_reach_the_peer() {
    let stack = SctpStack::global();
    let opts = SctpOptions {
        heartbeat_interval_ms: 200,
        rto_max_ms: 1000,
        ..SctpOptions::default()
    };
    let sctp_port = 6011;
    let listener = match stack.listen_multihomed(&[ip("127.0.0.1"), ip("::1")], 0, sctp_port, &opts)
    {
        Ok(l) => l,
        Err(e @ Error::MultihomeUnavailable(_)) => {
            taps_testkit::skip("usrsctp IP mode", &e.to_string());
            return;
        }
        Err(e) => panic!("listen: {e}"),
    };
    let udp_port = listener.local_addr().port();
    let remote = SocketAddr::new(ip("::1"), udp_port);
    let c = stack
        .connect_multihomed(&[ip("::1")], remote, sctp_port, &opts)
        .unwrap();
    let (a, b) = tokio::join!(timeout(T, listener.accept()), timeout(T, c.into_future()));
    let (server, _) = a.expect("accept timed out").expect("accept");
    let client = b.expect("connect timed out").expect("connect");
    let mut events = server.path_events().unwrap();
    paths_become(&server, &[ip("::1")], "server, before the add").await;
    exchange(&client, &server, b"one path").await;

    client.add_local_address(ip("127.0.0.1")).unwrap();
    let added = timeout(T, async {
        loop {
            let ev = events.next().await.expect("path events ended");
            if ev.kind == PathEventKind::Added {
                return ev;
            }
        }
    })
    .await
    .expect("the server was never told of the added address");
    eprintln!("server: {added:?}");
    paths_become(
        &server,
        &[ip("::1"), ip("127.0.0.1")],
        "server, after the add",
    )
    .await;
    exchange(&client, &server, b"two paths").await;
    exchange(&server, &client, b"and back").await;

    client.remove_local_address(ip("127.0.0.1")).unwrap();
    timeout(T, async {
        loop {
            let ev = events.next().await.expect("path events ended");
            if ev.kind == PathEventKind::Removed {
                return;
            }
        }
    })
    .await
    .expect("the server was never told of the removed address");
    paths_become(&server, &[ip("::1")], "server, after the removal").await;
    exchange(&client, &server, b"one path again").await;

    // Churn: the address added and removed 20 times while the client sends; every
    // message arrives, in order (usrsctp's iterator thread sends the ASCONFs between the
    // client's sends).
    let sender = {
        let client = client.clone();
        tokio::spawn(async move {
            for i in 0u32..400 {
                client.send(0, &i.to_be_bytes(), true, 0).await.unwrap();
            }
        })
    };
    for _ in 0..20 {
        client.add_local_address(ip("127.0.0.1")).unwrap();
        sleep(Duration::from_millis(5)).await;
        // A removal right behind its add can find the address not yet in use.
        let _ = client.remove_local_address(ip("127.0.0.1"));
        sleep(Duration::from_millis(5)).await;
    }
    for i in 0u32..400 {
        let m = timeout(T, server.recv()).await.unwrap().unwrap().unwrap();
        assert_eq!(m.data, i.to_be_bytes(), "message {i}");
    }
    sender.await.unwrap();

    // Bad requests, each refused with the reason.
    let err = client.add_local_address(ip("192.0.2.77")).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("192.0.2.77") && msg.contains("not one of the addresses"),
        "{msg}"
    );
    let err = client.remove_local_address(ip("::1")).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("::1") && msg.contains("last local address"),
        "{msg}"
    );
}
