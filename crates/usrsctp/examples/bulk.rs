//! Load reproducer: several streams of one association sending at once.
//!
//! `bulk server` listens on 127.0.0.1 (prints the UDP port) and sinks every association;
//! `bulk client UDP_PORT STREAMS MBYTES [SECS]` opens one association and sends MBYTES MB
//! on each of STREAMS streams concurrently (64 KiB messages), then an end message per
//! stream, and waits for the server's answer on each; exits 3 if not done within SECS
//! (default 20) and prints how far each stream got. `bulk both ...` runs both in one process.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use usrsctp::{Association, SctpListener, SctpOptions, SctpStack};

const SCTP_PORT: u16 = 5998;
const END_PPID: u32 = 99;
const CHUNK: usize = 64 * 1024;

fn serve(l: SctpListener) {
    tokio::spawn(async move {
        while let Ok((a, _)) = l.accept().await {
            tokio::spawn(sink(a));
        }
    });
}

async fn sink(a: Association) {
    loop {
        match a.recv().await {
            Ok(Some(m)) if m.ppid == END_PPID => {
                let _ = a.send(m.stream, &[0], true, END_PPID).await;
            }
            Ok(Some(_)) => {}
            _ => break,
        }
    }
}

async fn client(udp: SocketAddr, streams: u16, mbytes: u64, secs: u64) -> bool {
    let a = SctpStack::global()
        .connect(udp, SCTP_PORT, &SctpOptions::default())
        .unwrap()
        .await
        .unwrap();
    let t = Instant::now();
    let written: Arc<Vec<AtomicU64>> = Arc::new((0..streams).map(|_| AtomicU64::new(0)).collect());
    let mut set = tokio::task::JoinSet::new();
    for sid in 0..streams {
        let s = a.stream(sid).unwrap();
        let written = written.clone();
        set.spawn(async move {
            let chunk = vec![0x5au8; CHUNK];
            let mut left = mbytes * 1_000_000;
            while left > 0 {
                let n = left.min(CHUNK as u64) as usize;
                s.send(&chunk[..n], true, 0).await.unwrap();
                left -= n as u64;
                written[sid as usize].fetch_add(n as u64, Ordering::Relaxed);
            }
            s.send(&[0], true, END_PPID).await.unwrap();
            loop {
                match s.recv().await.unwrap() {
                    Some(m) if m.ppid == END_PPID => return,
                    Some(_) => {}
                    None => panic!("ended"),
                }
            }
        });
    }
    let all = async { while set.join_next().await.is_some() {} };
    match tokio::time::timeout(Duration::from_secs(secs), all).await {
        Ok(()) => {
            println!("done in {:?}", t.elapsed());
            true
        }
        Err(_) => {
            let w: Vec<u64> = written.iter().map(|w| w.load(Ordering::Relaxed)).collect();
            println!(
                "STUCK after {:?}: written {:?}, queued total {}",
                t.elapsed(),
                w,
                a.queued_bytes_total()
            );
            if std::env::var_os("BULK_HOLD").is_some() {
                println!("holding, pid {}", std::process::id());
                std::thread::sleep(Duration::from_secs(600));
            }
            false
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let stack = SctpStack::global();
    let opts = SctpOptions::default();
    let arg = |i: usize, d: u64| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(d);
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
            let udp = SocketAddr::from(([127, 0, 0, 1], arg(2, 0) as u16));
            if !client(udp, arg(3, 8) as u16, arg(4, 10), arg(5, 20)).await {
                std::process::exit(3);
            }
        }
        Some("both") => {
            let l = stack
                .listen("127.0.0.1:0".parse().unwrap(), SCTP_PORT, &opts)
                .unwrap();
            let udp = l.local_addr();
            serve(l);
            if !client(udp, arg(2, 8) as u16, arg(3, 10), arg(4, 20)).await {
                std::process::exit(3);
            }
        }
        _ => eprintln!("usage: bulk server | client UDP_PORT STREAMS MBYTES [SECS] | both STREAMS MBYTES [SECS]"),
    }
}
