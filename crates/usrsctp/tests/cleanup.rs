//! Dropping a pending `Connecting`, an `Association` (client and server side) and a listener
//! frees every usrsctp socket, conn address, UDP socket and task. One test per process (this
//! file) so the global counters are not disturbed by other tests.

mod common;
use common::settle;
use std::future::IntoFuture;
use std::time::Duration;

use tokio::time::timeout;
use usrsctp::{SctpOptions, SctpStack};

const T: Duration = Duration::from_secs(20);

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drops_free_everything() {
    let stack = SctpStack::global();
    let opts = SctpOptions::default();
    assert_eq!(stack.live_sockets(), 0);

    // 1. A pending connect to a silent UDP peer (bound, never answers): drop it.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let c = stack
        .connect(silent.local_addr().unwrap(), 6001, &opts)
        .unwrap();
    let s = stack.stats();
    assert_eq!((s.sctp_sockets, s.conn_addrs), (1, 1), "{s:?}");
    assert_eq!(settle(stack, 3).await, 3, "{:?}", stack.stats());
    drop(c);
    assert_eq!(
        settle(stack, 0).await,
        0,
        "after dropping a Connecting: {:?}",
        stack.stats()
    );

    // 2. Established associations, both sides, and the listener.
    let l = stack
        .listen("127.0.0.1:0".parse().unwrap(), 6002, &opts)
        .unwrap();
    let base = settle(stack, 2).await; // listening socket + shared UDP socket
    assert_eq!(base, 2, "{:?}", stack.stats());
    let threads_before = threads();
    for round in 0..20 {
        let c = stack.connect(l.local_addr(), 6002, &opts).unwrap();
        let (a, b) = tokio::join!(timeout(T, l.accept()), timeout(T, c.into_future()));
        let (server, _) = a.unwrap().unwrap();
        let client = b.unwrap().unwrap();
        client.send(0, b"ping", true, 0).await.unwrap();
        assert_eq!(
            timeout(T, server.recv())
                .await
                .unwrap()
                .unwrap()
                .unwrap()
                .data,
            b"ping"
        );
        let (s2, c2) = (server.clone(), client.stream(5).unwrap());
        if round % 2 == 0 {
            drop((client, c2));
            // The server sees the abort.
            assert!(timeout(T, server.recv()).await.unwrap().is_err());
            drop((server, s2));
        } else {
            drop((server, s2));
            assert!(timeout(T, client.recv()).await.unwrap().is_err());
            drop((client, c2));
        }
        assert_eq!(
            settle(stack, base).await,
            base,
            "round {round}: {:?}",
            stack.stats()
        );
    }
    // usrsctp's own work is done on our single timer thread: no per-association threads.
    assert!(
        threads() <= threads_before + 1,
        "threads grew: {threads_before} -> {}",
        threads()
    );
    drop(l);
    assert_eq!(
        settle(stack, 0).await,
        0,
        "after dropping the listener: {:?}",
        stack.stats()
    );
}
