//! CPU cost of one association attempt, sequentially on a current-thread runtime (the
//! thread's CPU time from /proc/thread-self/schedstat; the usrsctp timer thread is not
//! counted): to a dead UDP port (refused by ICMP, what a race against a dead SCTP pays)
//! and to a live listener (handshake, then abort), for a few stream counts.
//!
//! `cargo run --release -p usrsctp --example attempt_cost [N]` (N attempts per figure).

/// This thread's CPU time so far, µs (0 if the kernel does not say).
fn cpu_us() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |ns| ns / 1e3)
}

use usrsctp::{SctpOptions, SctpStack};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let stack = SctpStack::global();
    // A UDP port with nothing on it: bind, note, close.
    let dead = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free UDP port");
    let l = stack
        .listen(
            "127.0.0.1:0".parse().expect("address"),
            5998,
            &SctpOptions::default(),
        )
        .expect("listen");
    let live = l.local_addr();
    tokio::spawn(async move { while let Ok((_a, _)) = l.accept().await {} });
    for streams in [1024u16, 256, 64] {
        let opts = SctpOptions {
            streams,
            ..SctpOptions::default()
        };
        let t = cpu_us();
        for _ in 0..n {
            let c = stack.connect(dead, 5998, &opts).expect("connect");
            let _ = c.await;
        }
        let dead_us = (cpu_us() - t) / n as f64;
        let t = cpu_us();
        for _ in 0..n {
            let c = stack.connect(live, 5998, &opts).expect("connect");
            let _ = c.await;
        }
        let live_us = (cpu_us() - t) / n as f64;
        println!(
            "streams {streams:5}: dead attempt {dead_us:6.1} us, live handshake {live_us:6.1} us"
        );
    }
}
