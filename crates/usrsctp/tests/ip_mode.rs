//! IP mode on loopback: an association between two endpoints each bound to 127.0.0.1 and
//! ::1, in one process (one tunnelling port, as usrsctp has one per process). Proves that
//! both sides learn both of the other's addresses from the handshake alone (no path is
//! added by hand), that both paths are confirmed, that data flows both ways and on each
//! path, that each path counts its bytes, that the primary path can be moved, and that an
//! address this host lacks is refused with a message that names it. Without the shim: the
//! clear error.

use std::future::IntoFuture;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::time::{sleep, timeout};
use usrsctp::{Association, CmtGlobal, Error, PathId, PathState, SctpOptions, SctpStack};

const T: Duration = Duration::from_secs(20);

fn locals() -> Vec<IpAddr> {
    vec!["127.0.0.1".parse().unwrap(), "::1".parse().unwrap()]
}

/// Waits until `assoc` lists both loopback addresses of the peer as active paths.
async fn both_active(assoc: &Association, side: &str) -> Vec<usrsctp::PathInfo> {
    let deadline = Instant::now() + T;
    loop {
        let paths = assoc.paths().unwrap();
        let active = paths
            .iter()
            .filter(|p| p.state == PathState::Active)
            .count();
        if paths.len() == 2 && active == 2 {
            return paths;
        }
        assert!(
            Instant::now() < deadline,
            "{side}: paths never both active: {paths:?}"
        );
        sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_learn_each_others_addresses_from_the_handshake() {
    let stack = SctpStack::global();
    let opts = SctpOptions {
        heartbeat_interval_ms: 200,
        rto_max_ms: 1000,
        ..SctpOptions::default()
    };
    let sctp_port = 5999;
    let listener = match stack.listen_multihomed(&locals(), 0, sctp_port, &opts) {
        Ok(l) => l,
        Err(e @ Error::MultihomeUnavailable(_)) => {
            let msg = e.to_string();
            assert!(msg.contains("scripts/deps.sh"), "unhelpful: {msg}");
            taps_testkit::skip("usrsctp IP mode", &msg);
            return;
        }
        Err(e) => panic!("listen: {e}"),
    };
    let udp_port = listener.local_addr().port();
    assert_ne!(udp_port, 0);
    let remote = SocketAddr::new("127.0.0.1".parse().unwrap(), udp_port);
    let c = stack
        .connect_multihomed(&locals(), remote, sctp_port, &opts)
        .unwrap();
    let (a, b) = tokio::join!(timeout(T, listener.accept()), timeout(T, c.into_future()));
    let (server, from) = a.expect("accept timed out").expect("accept");
    let client = b.expect("connect timed out").expect("connect");
    assert_eq!(
        from.port(),
        udp_port,
        "the client tunnels from the process's port"
    );

    let cp = both_active(&client, "client").await;
    let sp = both_active(&server, "server").await;
    eprintln!("client paths: {cp:?}\nserver paths: {sp:?}");
    for paths in [&cp, &sp] {
        let mut ips: Vec<IpAddr> = paths.iter().filter_map(|p| p.id.ip()).collect();
        ips.sort();
        assert_eq!(ips, {
            let mut l = locals();
            l.sort();
            l
        });
        for p in paths.iter() {
            let (local, remote) = p.addrs.expect("an IP path has addresses");
            assert_eq!(remote.port(), udp_port, "{p:?}");
            assert_eq!(local.port(), udp_port, "{p:?}");
            assert_eq!(
                local.ip(),
                remote.ip(),
                "loopback: routing picks the same address"
            );
        }
        assert_eq!(paths.iter().filter(|p| p.primary).count(), 1);
    }

    client.send(0, b"hello", true, 0).await.unwrap();
    let m = timeout(T, server.recv()).await.unwrap().unwrap().unwrap();
    assert_eq!(m.data, b"hello");
    server.send(0, b"back", true, 0).await.unwrap();
    let m = timeout(T, client.recv()).await.unwrap().unwrap().unwrap();
    assert_eq!(m.data, b"back");

    // Move the primary path to the other address and back: data follows each time.
    let first = client.primary_path().unwrap();
    let other = cp.iter().find(|p| p.id != first).unwrap().id;
    client.set_primary(other).unwrap();
    assert_eq!(client.primary_path().unwrap(), other);
    client
        .send(0, b"over the other path", true, 0)
        .await
        .unwrap();
    let m = timeout(T, server.recv()).await.unwrap().unwrap().unwrap();
    assert_eq!(m.data, b"over the other path");
    client.set_primary(first).unwrap();

    // Pinned sends, one per path (CMT switch on for the process, off for these sockets).
    usrsctp::set_cmt_global(&CmtGlobal {
        cmt: true,
        ..Default::default()
    })
    .unwrap();
    for id in [first, other] {
        client
            .send_on_path(id, 1, b"pinned", true, 0)
            .await
            .unwrap();
        let m = timeout(T, server.recv()).await.unwrap().unwrap().unwrap();
        assert_eq!(m.data, b"pinned");
    }
    // Bytes per path (every SCTP packet each way is counted): the pinned sends went out
    // on both of the client's paths and came in on both of the server's; and a send pinned
    // to a path adds at least its size there.
    let count = |assoc: &Association, sent: bool| -> Vec<u64> {
        let paths = assoc.paths().unwrap();
        let n = |p: &usrsctp::PathInfo| if sent { p.bytes_sent } else { p.bytes_received };
        paths.iter().map(|p| n(p).unwrap_or(0)).collect()
    };
    let (cs, sr) = (count(&client, true), count(&server, false));
    assert!(
        cs.len() == 2 && cs.iter().all(|&b| b > 0),
        "client sent {cs:?}"
    );
    assert!(
        sr.len() == 2 && sr.iter().all(|&b| b > 0),
        "server received {sr:?}"
    );
    assert!(count(&client, false).iter().sum::<u64>() > 0);
    assert!(count(&server, true).iter().sum::<u64>() > 0);
    let sent_on = |id: PathId| {
        let paths = client.paths().unwrap();
        paths.iter().find(|p| p.id == id).and_then(|p| p.bytes_sent)
    };
    let before = sent_on(other).unwrap();
    client
        .send_on_path(other, 1, &[7u8; 10_000], true, 0)
        .await
        .unwrap();
    let m = timeout(T, server.recv()).await.unwrap().unwrap().unwrap();
    assert_eq!(m.data.len(), 10_000);
    let after = sent_on(other).unwrap();
    assert!(after >= before + 10_000, "{before} then {after}");

    let foreign = PathId::from_ip("127.0.0.9".parse().unwrap());
    assert!(client.set_primary(foreign).is_err());

    // An address this host does not have is refused by name.
    let err = stack
        .connect_multihomed(&["192.0.2.77".parse().unwrap()], remote, sctp_port, &opts)
        .err()
        .expect("a foreign local address must be refused");
    assert!(err.to_string().contains("192.0.2.77"), "{err}");

    // A second tunnelling port in one process is refused, naming both.
    let err = stack
        .listen_multihomed(&locals(), udp_port.wrapping_add(1).max(1), 6000, &opts)
        .expect_err("a second tunnelling port must be refused");
    assert!(err.to_string().contains(&udp_port.to_string()), "{err}");
}
