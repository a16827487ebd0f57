//! Stream schedulers (RFC 8260) and per-stream queued bytes, under a blocked receiver.

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use tokio::time::{sleep, timeout};
use usrsctp::{Association, Scheduler, SctpOptions, SctpStack};

const T: Duration = Duration::from_secs(30);
const MSG: usize = 1000;
const PER_STREAM: usize = 100;

/// A client with a big send buffer and the given scheduler, and a server that reads nothing
/// until told (tiny receive buffer and budget, so the receive window closes at once).
async fn blocked_pair(
    port: u16,
    sched: Option<Scheduler>,
) -> (Association, Association, usrsctp::SctpListener) {
    let stack = SctpStack::global();
    let server_opts = SctpOptions {
        recv_buffer: Some(16 * 1024),
        recv_budget: 1,
        ..SctpOptions::default()
    };
    // Packets of an ordinary path's size: round robin per packet takes one packet per
    // turn, and a loopback packet (64 KiB) would hold 64 of these messages.
    let client_opts = SctpOptions {
        send_buffer: Some(1 << 20),
        scheduler: sched,
        path_mtu: Some(1200),
        ..SctpOptions::default()
    };
    let l = stack
        .listen("127.0.0.1:0".parse().unwrap(), port, &server_opts)
        .unwrap();
    let c = stack.connect(l.local_addr(), port, &client_opts).unwrap();
    let (a, b) = tokio::join!(timeout(T, l.accept()), timeout(T, c.into_future()));
    (b.unwrap().unwrap(), a.unwrap().unwrap().0, l)
}

/// Queues 100 messages on stream 1, then 100 on 2, then 100 on 3; returns the order in which
/// the server then receives them (stream ids).
async fn delivery_order(port: u16, sched: Scheduler) -> Vec<u16> {
    let (client, server, _l) = blocked_pair(port, Some(sched)).await;
    if sched == Scheduler::Priority {
        // Lower value first: stream 3 most urgent, then 2, then 1.
        client.set_stream_value(3, 0).unwrap();
        client.set_stream_value(2, 1).unwrap();
        client.set_stream_value(1, 2).unwrap();
    }
    let msg = vec![7u8; MSG];
    for s in [1u16, 2, 3] {
        for _ in 0..PER_STREAM {
            timeout(T, client.send(s, &msg, true, 0))
                .await
                .unwrap()
                .unwrap();
        }
    }
    let mut order = Vec::new();
    while order.len() < 3 * PER_STREAM {
        let m = timeout(T, server.recv()).await.unwrap().unwrap().unwrap();
        order.push(m.stream);
    }
    order
}

fn first(order: &[u16], s: u16) -> usize {
    order.iter().position(|&x| x == s).unwrap()
}
fn last(order: &[u16], s: u16) -> usize {
    order.iter().rposition(|&x| x == s).unwrap()
}
/// How many messages of stream `s` arrived before the last message of stream `before`.
fn count_before_last(order: &[u16], s: u16, before: u16) -> usize {
    order[..last(order, before)]
        .iter()
        .filter(|&&x| x == s)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedulers_change_delivery_order() {
    let fcfs = delivery_order(7001, Scheduler::FirstCome).await;
    let rr = delivery_order(7002, Scheduler::RoundRobin).await;
    let prio = delivery_order(7003, Scheduler::Priority).await;
    let rrp = delivery_order(7004, Scheduler::RoundRobinPacket).await;
    let fb = delivery_order(7005, Scheduler::FairBandwidth).await;
    let show = |o: &[u16]| {
        o.iter()
            .map(|s| char::from(b'0' + *s as u8))
            .collect::<String>()
    };
    for (n, o) in [
        ("fcfs", &fcfs),
        ("rr", &rr),
        ("prio", &prio),
        ("rrp", &rrp),
        ("fb", &fb),
    ] {
        eprintln!("{n:5} {}", show(o));
    }
    // FCFS: queue order, every stream-1 message before any stream-2, every 2 before any 3.
    assert!(
        last(&fcfs, 1) < first(&fcfs, 2) && last(&fcfs, 2) < first(&fcfs, 3),
        "{}",
        show(&fcfs)
    );
    // Priority: stream 3 (queued last, most urgent) overtakes most of stream 2 and 1.
    assert!(
        count_before_last(&prio, 2, 3) < PER_STREAM / 4,
        "{}",
        show(&prio)
    );
    assert!(first(&prio, 3) < PER_STREAM, "{}", show(&prio));
    // Round robin: streams interleave; stream 3 starts early and stream 2 is far from done
    // when... rather, stream 3 does not wait for streams 1 and 2 to finish.
    for o in [&rr, &rrp, &fb] {
        assert!(first(o, 3) < PER_STREAM, "{}", show(o));
        assert!(count_before_last(o, 2, 3) > PER_STREAM / 2, "{}", show(o));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_bytes_per_stream() {
    let (client, server, _l) = blocked_pair(7010, Some(Scheduler::FirstCome)).await;
    let msg = vec![1u8; MSG];
    for _ in 0..200 {
        client.send(1, &msg, true, 0).await.unwrap();
    }
    for _ in 0..100 {
        client.send(2, &msg, true, 0).await.unwrap();
    }
    client.send(4, &msg, true, 0).await.unwrap();
    sleep(Duration::from_millis(200)).await;
    let (q1, q2, q4, total) = (
        client.queued_bytes(1),
        client.queued_bytes(2),
        client.queued_bytes(4),
        client.queued_bytes_total(),
    );
    eprintln!(
        "blocked: stream1 {q1} stream2 {q2} stream4 {q4} total {total} closed {}",
        client.is_closed()
    );
    // What the receiver window let through (~16 KiB) has left; the rest is queued.
    assert!(q1 > 150_000 && q1 <= 200_000, "{q1}");
    assert!(q2 > 80_000 && q2 <= 100_000, "{q2}");
    assert!(q4 > 0 && q4 <= 1000, "{q4}");
    assert_eq!(client.queued_bytes(9), 0);
    assert!(total >= q1.max(q2) && total <= 301_000, "{total}");

    // Drain the receiver; everything is acknowledged and the counts fall to zero.
    for _ in 0..301 {
        timeout(T, server.recv()).await.unwrap().unwrap().unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.queued_bytes_total() != 0 && Instant::now() < deadline {
        sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        (
            client.queued_bytes(1),
            client.queued_bytes(2),
            client.queued_bytes(4),
            client.queued_bytes_total()
        ),
        (0, 0, 0, 0)
    );
}
