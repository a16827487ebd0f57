//! What a race costs with the policy manager and without: N TCP races to a listener on
//! 127.0.0.1 with the daemon off, then with a daemon running in a child process (this
//! example run again), alternating rounds; CPU per race from `getrusage(RUSAGE_SELF)`
//! (this process only: the daemon's own CPU is its process's) and wall time per race.
//!
//! ```sh
//! cargo run --release --example pm_race_cost -p taps -- 2000 5
//! ```

#![allow(unsafe_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use taps::pm::{Daemon, DaemonConfig, PolicyManager};
use taps::taps_core::properties::Protocol;
use taps::{Context, Preconnection, RemoteEndpoint, TransportProperties};

/// This process's user + system CPU time so far, microseconds.
fn cpu_us() -> u64 {
    // SAFETY: a zeroed rusage is a valid value for getrusage to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage; RUSAGE_SELF is always valid.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0;
    }
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(usage.ru_utime) + us(usage.ru_stime)
}

/// `races` races on a fresh context (built with `pm`); CPU and wall per race (µs).
async fn round(pm: PolicyManager, port: u16, races: usize) -> (f64, f64, bool) {
    let ctx = Context::builder()
        .policy_manager(pm)
        .watch_interfaces(false)
        .build()
        .unwrap();
    let used = ctx.policy_manager_stats().is_some();
    let props = TransportProperties::new()
        .protocols(taps::Preference::Require, [Protocol::Tcp])
        .compile()
        .unwrap();
    let pre = Preconnection::new(&ctx, props).remote(RemoteEndpoint::new("127.0.0.1", port));
    let (cpu0, t0) = (cpu_us(), Instant::now());
    for _ in 0..races {
        drop(pre.initiate().await.unwrap());
    }
    let flushed = ctx.flush_policy_manager(Duration::from_secs(5)).await;
    let (cpu, wall) = (cpu_us() - cpu0, t0.elapsed());
    if used {
        let stats = ctx.policy_manager_stats().unwrap();
        assert!(flushed, "the daemon did not confirm");
        assert_eq!(stats.sent, races as u64, "{stats:?}");
    }
    let n = races as f64;
    (cpu as f64 / n, wall.as_secs_f64() * 1e6 / n, used)
}

fn daemon(socket: &Path) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let d = Daemon::bind(DaemonConfig::new(socket)).unwrap();
    println!("ready");
    rt.block_on(d.run(std::future::pending())).unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("daemon") {
        return daemon(Path::new(&args[1]));
    }
    let races: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let dir = tempfile_dir();
    let socket = dir.join("pm.sock");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg("daemon")
        .arg(&socket)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in listener.incoming() {
            drop(c)
        }
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut sums = [(0.0, 0.0); 2];
    rt.block_on(async {
        // Warm-up (connection setup code paths, the allocator).
        round(PolicyManager::Off, port, races / 10 + 1).await;
        for r in 0..rounds {
            for (i, pm) in [PolicyManager::Off, PolicyManager::Socket(socket.clone())]
                .into_iter()
                .enumerate()
            {
                let (cpu, wall, used) = round(pm, port, races).await;
                assert_eq!(used, i == 1);
                println!(
                    "round {r} {:>12}: {cpu:6.1} us CPU/race, {wall:6.1} us wall/race",
                    if used { "with daemon" } else { "without" }
                );
                sums[i].0 += cpu / rounds as f64;
                sums[i].1 += wall / rounds as f64;
            }
        }
    });
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "mean over {rounds} rounds of {races} races: without {:.1} us CPU ({:.1} wall), with daemon {:.1} us CPU ({:.1} wall): ratio {:.3}",
        sums[0].0,
        sums[0].1,
        sums[1].0,
        sums[1].1,
        sums[1].0 / sums[0].0
    );
}

/// A fresh owner-only directory for the socket.
fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("taps-pm-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}
