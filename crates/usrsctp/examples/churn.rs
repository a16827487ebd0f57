//! Load reproducer: associations opened and aborted at a high rate.
//!
//! `churn server` listens on 127.0.0.1 (prints the UDP port) and sinks every accepted
//! association; `churn client UDP_PORT RATE SECS` opens RATE associations/s for SECS seconds
//! and drops each once established (ABORT); `churn both RATE SECS` does both in one process.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use usrsctp::{SctpListener, SctpOptions, SctpStack};

const SCTP_PORT: u16 = 5999;

fn serve(l: SctpListener) {
    tokio::spawn(async move {
        while let Ok((a, _)) = l.accept().await {
            tokio::spawn(async move { while let Ok(Some(_)) = a.recv().await {} });
        }
    });
}

async fn client(udp: SocketAddr, rate: f64, secs: f64) {
    let ok = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let start = tokio::time::Instant::now();
    let n = (rate * secs) as usize;
    let mut set = tokio::task::JoinSet::new();
    for i in 0..n {
        tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate)).await;
        let (ok, failed) = (ok.clone(), failed.clone());
        set.spawn(async move {
            let r = async {
                let c = SctpStack::global().connect(udp, SCTP_PORT, &SctpOptions::default())?;
                tokio::time::timeout(timeout_dur(), c)
                    .await
                    .map_err(|_| usrsctp::Error::Closed)?
            }
            .await;
            match r {
                Ok(a) => {
                    ok.fetch_add(1, Ordering::Relaxed);
                    drop(a);
                }
                Err(_) => {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    while set.join_next().await.is_some() {}
    println!(
        "client: {} ok, {} failed in {:?}",
        ok.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        start.elapsed()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let stack = SctpStack::global();
    let opts = SctpOptions::default();
    match args.get(1).map(String::as_str) {
        Some("server") => {
            let l = stack
                .listen("127.0.0.1:0".parse().unwrap(), SCTP_PORT, &opts)
                .unwrap();
            println!("{}", l.local_addr().port());
            serve(l);
            std::future::pending::<()>().await;
        }
        Some("client") => {
            let port: u16 = args[2].parse().unwrap();
            let rate: f64 = args[3].parse().unwrap();
            let secs: f64 = args[4].parse().unwrap();
            client(SocketAddr::from(([127, 0, 0, 1], port)), rate, secs).await;
        }
        Some("burst") => {
            // burst UDP_PORT N SECS: repeatedly open N associations at once, then drop all.
            let port: u16 = args[2].parse().unwrap();
            let n: usize = args[3].parse().unwrap();
            let secs: f64 = args[4].parse().unwrap();
            let udp = SocketAddr::from(([127, 0, 0, 1], port));
            let t = Instant::now();
            let (mut ok, mut failed) = (0, 0);
            while t.elapsed().as_secs_f64() < secs {
                let mut set = tokio::task::JoinSet::new();
                for _ in 0..n {
                    set.spawn(async move {
                        let c =
                            SctpStack::global().connect(udp, SCTP_PORT, &SctpOptions::default())?;
                        tokio::time::timeout(timeout_dur(), c)
                            .await
                            .map_err(|_| usrsctp::Error::Closed)?
                    });
                }
                let mut held = Vec::new();
                while let Some(r) = set.join_next().await {
                    match r {
                        Ok(Ok(a)) => {
                            ok += 1;
                            held.push(a)
                        }
                        _ => failed += 1,
                    }
                }
                drop(held);
            }
            println!("burst: {ok} ok, {failed} failed");
        }
        Some("both") => {
            let rate: f64 = args[2].parse().unwrap();
            let secs: f64 = args[3].parse().unwrap();
            let l = stack
                .listen("127.0.0.1:0".parse().unwrap(), SCTP_PORT, &opts)
                .unwrap();
            let udp = l.local_addr();
            serve(l);
            let t = Instant::now();
            client(udp, rate, secs).await;
            let _ = t;
        }
        _ => eprintln!("usage: churn server | client UDP_PORT RATE SECS | both RATE SECS"),
    }
}

/// Connect timeout (env CHURN_TIMEOUT_MS, default 10 s).
fn timeout_dur() -> Duration {
    let ms = std::env::var("CHURN_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    Duration::from_millis(ms)
}
