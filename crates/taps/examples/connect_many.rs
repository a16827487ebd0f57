//! Opens N concurrent TCP flows to a local listener, R rounds, with taps or raw tokio;
//! a harness for profiling the per-flow cost of `initiate` (`perf record`).
//! `cargo run --release -p taps --example connect_many -- taps|raw|size N R` (size: prints
//! the initiate future and Connection sizes).

use std::sync::Arc;
use std::time::Instant;

use taps::taps_core::properties::Protocol;
use taps::{Context, Preconnection, Preference, RemoteEndpoint, TransportProperties};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map_or("taps", String::as_str).to_string();
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(256);
    let rounds: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(50);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            let mut keep = Vec::new();
            while let Ok((s, _)) = l.accept().await {
                keep.push(s);
                if keep.len() > 4096 {
                    keep.clear();
                }
            }
        });
        let ctx = Context::builder().build().unwrap();
        let props = TransportProperties::new()
            .protocols(Preference::Require, [Protocol::Tcp])
            .compile()
            .unwrap();
        let pre = Arc::new(
            Preconnection::new(&ctx, props).remote(RemoteEndpoint::new("127.0.0.1", port)),
        );
        if mode == "size" {
            println!(
                "initiate future: {} bytes",
                std::mem::size_of_val(&pre.initiate())
            );
            let c = pre.initiate().await.unwrap();
            println!("connection: {} bytes", std::mem::size_of_val(&c));
            return;
        }
        let t = Instant::now();
        for _ in 0..rounds {
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..n {
                let pre = pre.clone();
                let raw = mode == "raw";
                set.spawn(async move {
                    if raw {
                        let s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                            .await
                            .unwrap();
                        s.set_nodelay(true).unwrap();
                        drop(s);
                    } else {
                        let c = pre.initiate().await.unwrap();
                        drop(c);
                    }
                });
            }
            while set.join_next().await.is_some() {}
        }
        println!("{mode}: {n} flows x {rounds}: {:?}", t.elapsed());
    });
}
