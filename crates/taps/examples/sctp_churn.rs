//! Sequential connections raced SCTP-then-TCP to a `taps listen` on 127.0.0.1 (one at a
//! time, each closed at once, flow mapping off), as `taps-bench he` makes them: prints
//! every connection slower than 100 ms with its race, and a summary. A stress harness for
//! handshakes that stall.
//! `cargo run --release -p taps --example sctp_churn -- PORT UDP_PORT N`

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use taps::taps_core::properties::Protocol;
use taps::{Context, Preconnection, Preference, RemoteEndpoint, TransportProperties};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = args.get(1).and_then(|s| s.parse().ok()).expect("PORT");
    let udp: u16 = args.get(2).and_then(|s| s.parse().ok()).expect("UDP_PORT");
    let n: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let ctx = Context::builder()
        .name_servers(vec![SocketAddr::from((Ipv4Addr::LOCALHOST, 9))])
        .sctp_udp_port(udp)
        .flow_mapping(false)
        .build()
        .unwrap();
    let props = TransportProperties::new()
        .protocols(Preference::Require, [Protocol::Sctp, Protocol::Tcp])
        .compile()
        .unwrap();
    let pre = Preconnection::new(&ctx, props)
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port));
    let (mut slow, mut tcp, mut failed) = (0, 0, 0);
    let t0 = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        match pre.initiate().await {
            Ok(c) => {
                let took = t.elapsed();
                if c.info().stack.protocol != Protocol::Sctp {
                    tcp += 1;
                }
                if took > Duration::from_millis(100) {
                    slow += 1;
                    let trace = c
                        .info()
                        .race
                        .as_ref()
                        .map(|r| r.trace())
                        .unwrap_or_default();
                    println!("#{i}: {took:?} on {}\n{trace}", c.info().stack);
                }
                drop(c);
            }
            Err(e) => {
                failed += 1;
                println!("#{i}: failed after {:?}: {e}", t.elapsed());
            }
        }
    }
    println!(
        "{n} connections in {:?}: {slow} over 100 ms, {tcp} on TCP, {failed} failed",
        t0.elapsed()
    );
}
