//! Load regression tests (loopback, real sockets, a few seconds in all).
//!
//! * `churn_with_concurrent_aborts`: associations are set up in batches and then aborted from
//!   both ends at about the same time on two plain threads, while the runtime's workers feed
//!   the peers' ABORTs to usrsctp. libusrsctp 0.9.5 frees a socket's endpoint in
//!   `usrsctp_close` while a concurrent `usrsctp_conninput` processing an ABORT for it still
//!   reads it (heap use after free, "malloc(): unaligned tcache chunk detected" aborts under
//!   churn); the crate serialises its calls into usrsctp so this cannot happen. Before that
//!   fix this test crashed the process (or, with an AddressSanitizer build of libusrsctp,
//!   reported the use after free) in a fair share of runs.
//! * `many_streams_send_concurrently`: eight streams of one association send at once with
//!   the send buffer full most of the time. usrsctp_sendv returns 0 (no error) when the free
//!   space is positive but at most 1452 bytes; the send loop used to retry at once without
//!   yielding, so a worker spun and starved the task that feeds SACKs to usrsctp (livelock).
//!
//! One file, its own process: the global stack counters are checked at the end.

mod common;
use common::settle;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use tokio::sync::Mutex;
use tokio::time::timeout;
use usrsctp::{Association, SctpOptions, SctpStack};

const T: Duration = Duration::from_secs(20);

/// The tests check the global stack counters: one at a time.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// A tiny xorshift for jitter (no dependency).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn spin(us: u64) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_micros(us) {
        std::hint::spin_loop();
    }
}

/// Drops the associations one by one with a few microseconds of jitter in between.
fn drop_all(v: Vec<Association>, start: &Barrier, seed: u64) {
    let mut rng = Rng(seed);
    start.wait();
    for a in v {
        spin(rng.next() % 40);
        drop(a);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn churn_with_concurrent_aborts() {
    let _serial = SERIAL.lock().await;
    let stack = SctpStack::global();
    let opts = SctpOptions {
        streams: 4,
        ..SctpOptions::default()
    };
    let l = stack
        .listen("127.0.0.1:0".parse().unwrap(), 7101, &opts)
        .unwrap();
    let udp = l.local_addr();
    let base = settle(stack, 2).await;
    assert_eq!(base, 2, "{:?}", stack.stats());

    const BATCH: usize = 24;
    let started = Instant::now();
    let mut pairs = 0usize;
    let mut round = 0u64;
    while started.elapsed() < Duration::from_millis(2000) {
        round += 1;
        // Set up a batch: clients connect concurrently, the listener accepts them.
        let mut connecting = Vec::new();
        for _ in 0..BATCH {
            connecting.push(tokio::spawn(
                stack.connect(udp, 7101, &opts).unwrap().into_future(),
            ));
        }
        let mut servers: Vec<(Association, SocketAddr)> = Vec::new();
        while servers.len() < BATCH {
            servers.push(
                timeout(T, l.accept())
                    .await
                    .expect("accept")
                    .expect("accept"),
            );
        }
        let mut clients = Vec::new();
        for c in connecting {
            clients.push(timeout(T, c).await.unwrap().unwrap().expect("connect"));
        }
        // Half of the server sides have a task blocked in recv (it sees the abort and returns).
        let mut readers = Vec::new();
        let mut server_side = Vec::new();
        for (i, (s, _)) in servers.into_iter().enumerate() {
            if i % 2 == 0 {
                let s2 = s.clone();
                readers.push(tokio::spawn(async move { s2.recv().await.is_err() }));
            }
            server_side.push(s);
        }
        // Abort both ends at about the same time from two plain threads while the runtime
        // feeds the ABORTs to usrsctp.
        let start = Arc::new(Barrier::new(2));
        let (b1, b2) = (start.clone(), start.clone());
        let t1 = std::thread::spawn(move || drop_all(clients, &b1, round * 2 + 1));
        let t2 = std::thread::spawn(move || drop_all(server_side, &b2, round * 2 + 2));
        tokio::task::spawn_blocking(move || {
            t1.join().unwrap();
            t2.join().unwrap();
        })
        .await
        .unwrap();
        for r in readers {
            assert!(timeout(T, r).await.unwrap().unwrap(), "reader saw no abort");
        }
        pairs += BATCH;
    }
    assert!(pairs >= BATCH, "no association set up");
    assert_eq!(
        settle(stack, base).await,
        base,
        "after {pairs} aborted pairs: {:?}",
        stack.stats()
    );
    drop(l);
    assert_eq!(settle(stack, 0).await, 0, "{:?}", stack.stats());
}

/// usrsctp's send-buffer limit in these tests (`SctpOptions::send_buffer`; usrsctp uses it
/// as is, and the crate hands messages over in pieces of half of it).
const SNDBUF: usize = 64 * 1024;
/// The two messages of a round: A + the first piece of B leave 1000 bytes free.
const A: usize = SNDBUF / 2 - 1000;
const B: usize = SNDBUF / 2 + 2000;

/// The sending side, on a current-thread runtime of its own: every task of the association
/// (the UDP reader feeding SACKs to usrsctp included) runs on this thread, so nothing frees
/// send-buffer space unless the sender yields.
async fn fill_then_send(udp: SocketAddr, port: u16) -> Result<(), String> {
    let opts = SctpOptions {
        send_buffer: Some(SNDBUF as u32),
        ..SctpOptions::default()
    };
    let c = SctpStack::global().connect(udp, port, &opts).unwrap();
    let client = timeout(T, c.into_future())
        .await
        .map_err(|_| "connect timed out")?
        .map_err(|e| e.to_string())?;
    for round in 0..3u8 {
        // Messages go to usrsctp in pieces of SNDBUF / 2. A (one piece) and the first piece
        // of B fit and leave exactly 1000 bytes free; nothing of this runs a SACK through
        // usrsctp, as the sender does not yield. B's second piece (2000 bytes, continuing an
        // incomplete message) then meets 1000 free bytes: usrsctp_sendv takes nothing and
        // returns 0 (free space <= sctp_add_more_threshold, 1452). The sender must wait.
        client
            .send(0, &vec![round; A], true, 0)
            .await
            .map_err(|e| e.to_string())?;
        client
            .send(0, &vec![round; B], true, 1)
            .await
            .map_err(|e| e.to_string())?;
        let m = timeout(T, client.recv())
            .await
            .map_err(|_| "no answer")?
            .map_err(|e| e.to_string())?
            .ok_or("closed")?;
        if m.data != [round] {
            return Err(format!("round {round}: bad answer {:?}", m.data));
        }
    }
    Ok(())
}

/// A send that usrsctp accepts nothing of (free space 1..=1452 bytes, less than the piece)
/// waits for space instead of retrying at once. Before the fix the send loop treated the 0
/// returned by usrsctp_sendv as progress and spun without yielding: the 8-stream benchmark
/// livelocked when the spinning worker starved the task that feeds SACKs to usrsctp; on a
/// current-thread runtime it livelocks every time.
#[test]
fn send_waits_when_usrsctp_takes_nothing() {
    let _serial = SERIAL.blocking_lock();
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let l = {
        let _rt = server_rt.enter();
        SctpStack::global()
            .listen(
                "127.0.0.1:0".parse().unwrap(),
                7102,
                &SctpOptions::default(),
            )
            .unwrap()
    };
    let udp = l.local_addr();
    // The receiver: after each round's two messages, answers with the round number.
    let sink = server_rt.spawn(async move {
        let (server, _) = l.accept().await.unwrap();
        for round in 0..3u8 {
            let a = server.recv().await.unwrap().unwrap();
            assert_eq!((a.data.len(), a.ppid), (A, 0));
            let b = server.recv().await.unwrap().unwrap();
            assert_eq!((b.data.len(), b.ppid), (B, 1));
            assert!(a.data.iter().chain(&b.data).all(|x| *x == round));
            server.send(0, &[round], true, 0).await.unwrap();
        }
        (server, l)
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _ = tx.send(rt.block_on(fill_then_send(udp, 7102)));
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(r) => r.unwrap(),
        Err(_) => panic!("the sender is stuck (spinning in usrsctp_sendv?)"),
    }
    let (server, l) = server_rt
        .block_on(async { timeout(T, sink).await })
        .unwrap()
        .unwrap();
    drop((server, l));
}
