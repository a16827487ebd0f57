//! Measures, on loopback, when each protocol's "the peer answered" signal arrives:
//! TCP's connect (SYN-ACK, one round trip), SCTP's INIT-ACK (one round trip) and SCTP's
//! COOKIE-ACK (two round trips, when the association is usable). Prints medians over
//! many runs. `cargo run --release -p taps --example sctp_signal [runs]`
//!
//! The race takes the INIT-ACK as SCTP's finish line; this shows how much earlier it
//! comes than establishment, i.e. how much of a head start SCTP would otherwise need.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use usrsctp::{SctpOptions, SctpStack};

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let stack = SctpStack::global();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0")?;
    let udp_addr = udp.local_addr()?;
    drop(udp);
    let listener = stack.listen(udp_addr, 5000, &SctpOptions::default())?;
    // Keep accepted associations until the client aborts them (an early server-side
    // abort could overtake the client's COOKIE-ACK).
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((a, _)) = listener.accept().await {
            held.retain(|a: &usrsctp::Association| !a.is_closed());
            held.push(a);
        }
    });
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let tcp_addr: SocketAddr = tcp.local_addr()?;
    tokio::spawn(async move {
        while let Ok((s, _)) = tcp.accept().await {
            drop(s);
        }
    });
    let (mut syn_ack, mut init_ack, mut cookie_ack) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        let s = tokio::net::TcpStream::connect(tcp_addr).await?;
        syn_ack.push(t.elapsed());
        drop(s);
        let t = Instant::now();
        let mut c = stack.connect(udp_addr, 5000, &SctpOptions::default())?;
        c.reachable().await?;
        init_ack.push(t.elapsed());
        let a = c.established().await?;
        cookie_ack.push(t.elapsed());
        a.abort();
    }
    let (s, i, c) = (
        median(&mut syn_ack),
        median(&mut init_ack),
        median(&mut cookie_ack),
    );
    println!("loopback, median of {runs} runs:");
    println!(
        "  TCP connected (SYN-ACK)        {:>8.1} µs",
        s.as_secs_f64() * 1e6
    );
    println!(
        "  SCTP reachable (INIT-ACK)      {:>8.1} µs",
        i.as_secs_f64() * 1e6
    );
    println!(
        "  SCTP established (COOKIE-ACK)  {:>8.1} µs",
        c.as_secs_f64() * 1e6
    );
    println!(
        "  INIT-ACK comes {:.1} µs ({:.0}%) before establishment",
        (c - i).as_secs_f64() * 1e6,
        100.0 * (c - i).as_secs_f64() / c.as_secs_f64()
    );
    Ok(())
}
