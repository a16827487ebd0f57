//! Opens N concurrent TCP flows to a local listener, R rounds, with taps or raw tokio;
//! a harness for profiling the per-flow cost of `initiate` (`perf record`).
//! `cargo run --release -p taps --example connect_many -- taps|raw|listen|race-hit|race-miss|size|context|contexts|sctp-dead N R` (listen:
//! raw clients against a taps `Listener`; size:
//! prints the initiate future and Connection sizes; context: CPU and RSS of building a
//! context, and of its first connection; contexts: N contexts built and dropped;
//! sctp-dead: N SCTP attempts to a dead UDP port, one after another in a task; race-hit:
//! as taps, but racing SCTP (dead) before TCP with the CIB seeded; race-miss: the same
//! race with a CIB that forgets at once, so SCTP is tried and refused first). The runtime
//! has two workers; `RUNTIME=current` runs on one thread instead.

use std::sync::Arc;
use std::time::Instant;

use taps::taps_core::properties::Protocol;
use taps::{Context, Preconnection, Preference, RemoteEndpoint, TransportProperties};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map_or("taps", String::as_str).to_string();
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(256);
    let rounds: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(50);
    // RUNTIME=current: one thread (as `taps connect`); otherwise two workers.
    let rt = if std::env::var("RUNTIME").as_deref() == Ok("current") {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    };
    if mode == "context" {
        rt.block_on(context_cost());
        return;
    }
    if mode == "sctp-dead" {
        // n SCTP attempts, one after another, to a UDP port nobody listens on (the kernel
        // answers ICMP port unreachable): what a Happy Eyeballs miss costs when SCTP is dead.
        // In a task, as an application's connections run (not on the thread that blocks).
        rt.block_on(async move {
            tokio::spawn(async move {
                let dead = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                let port = dead.local_addr().unwrap().port();
                drop(dead);
                let ctx = Context::builder().sctp_udp_port(port).build().unwrap();
                let props = TransportProperties::new()
                    .protocols(Preference::Require, [Protocol::Sctp])
                    .compile()
                    .unwrap();
                let pre =
                    Preconnection::new(&ctx, props).remote(RemoteEndpoint::new("127.0.0.1", 80));
                let before = usage();
                let t = Instant::now();
                for _ in 0..n {
                    assert!(pre.initiate().await.is_err());
                }
                let cpu = usage().0 - before.0;
                println!(
                    "{n} dead SCTP attempts: {:?} wall, {} us CPU each",
                    t.elapsed() / n as u32,
                    cpu / n as u64
                );
            })
            .await
            .unwrap();
        });
        return;
    }
    if mode == "contexts" {
        // n contexts built and dropped, for `perf record`.
        rt.block_on(async move {
            let t = Instant::now();
            for _ in 0..n {
                drop(Context::builder().build().unwrap());
            }
            println!("{n} contexts: {:?} each", t.elapsed() / n as u32);
        });
        return;
    }
    rt.block_on(async move {
        let port = if mode == "listen" {
            taps_server().await
        } else {
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
            port
        };
        // race-hit: SCTP preferred, TCP allowed, SCTP dead (a UDP port nobody listens
        // on), the CIB seeded by one connection, flow mapping off (as in `taps-bench
        // he`): every flow's race is a cache hit that ends on TCP, what a race costs over
        // `taps` (TCP required) when history works.
        let race_hit = mode == "race-hit";
        let race = race_hit || mode == "race-miss";
        // family-hit / family-miss: TCP to `localhost` (::1 first, nothing listens
        // there; 127.0.0.1 live), the CIB seeded or forgetting at once, as `taps-bench
        // he`'s family race; localhost4: the same name with IPv4 required (its baseline).
        let family = mode.starts_with("family-") || mode == "localhost4";
        let ctx = if mode == "family-miss" {
            let forget = taps::taps_core::policy::CibConfig {
                lifetime: std::time::Duration::ZERO,
                ..Default::default()
            };
            Context::builder().cib_config(forget).build().unwrap()
        } else if race {
            let dead = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let udp = dead.local_addr().unwrap().port();
            drop(dead);
            let forget = taps::taps_core::policy::CibConfig {
                lifetime: std::time::Duration::ZERO,
                ..Default::default()
            };
            let builder = Context::builder().sctp_udp_port(udp).flow_mapping(false);
            let builder = if race_hit {
                builder
            } else {
                builder.cib_config(forget)
            };
            builder.build().unwrap()
        } else {
            Context::builder().build().unwrap()
        };
        let protocols = if race {
            vec![Protocol::Sctp, Protocol::Tcp]
        } else {
            vec![Protocol::Tcp]
        };
        let mut props = TransportProperties::new().protocols(Preference::Require, protocols);
        if mode == "localhost4" {
            props = props.ip_version(Preference::Require, taps::taps_core::Family::V4);
        }
        let props = props.compile().unwrap();
        let host = if family { "localhost" } else { "127.0.0.1" };
        let pre = Arc::new(Preconnection::new(&ctx, props).remote(RemoteEndpoint::new(host, port)));
        if race_hit || mode == "family-hit" {
            drop(pre.initiate().await.unwrap());
        }
        if mode == "size" {
            println!(
                "initiate future: {} bytes",
                std::mem::size_of_val(&pre.initiate())
            );
            let c = pre.initiate().await.unwrap();
            println!(
                "connection: {} bytes, its info {} bytes (a candidate {} bytes)",
                std::mem::size_of_val(&c),
                std::mem::size_of_val(c.info()),
                std::mem::size_of::<taps::taps_core::candidates::Candidate>(),
            );
            if let Some(r) = &c.info().race {
                println!(
                    "race report: {} bytes + {} attempts x {} + {} events x {} + {} DNS x {}",
                    std::mem::size_of_val(r),
                    r.attempts.capacity(),
                    std::mem::size_of::<taps::taps_core::race::AttemptReport>(),
                    r.timeline.capacity(),
                    std::mem::size_of::<(std::time::Duration, taps::taps_core::race::RaceEvent)>(),
                    r.dns.capacity(),
                    std::mem::size_of::<taps::taps_core::race::DnsEvent>(),
                );
            }
            return;
        }
        let t = Instant::now();
        for _ in 0..rounds {
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..n {
                let pre = pre.clone();
                let raw = mode == "raw" || mode == "listen";
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

/// The `listen` mode's server: a taps `Listener` (TCP required) on 127.0.0.1 that keeps
/// what it accepts, as the raw server does; returns its port.
async fn taps_server() -> u16 {
    let ctx = Context::builder().build().unwrap();
    let props = TransportProperties::new()
        .protocols(Preference::Require, [Protocol::Tcp])
        .compile()
        .unwrap();
    let mut l = Preconnection::new(&ctx, props)
        .local("127.0.0.1:0".parse().unwrap())
        .listen()
        .await
        .unwrap();
    let port = l.local_addrs()[0].1.port();
    tokio::spawn(async move {
        let _ctx = ctx;
        let mut keep = Vec::new();
        while let Some(c) = l.accept().await {
            keep.push(c.unwrap());
            if keep.len() > 4096 {
                keep.clear();
            }
        }
    });
    port
}

/// Process CPU time (user + system) in microseconds, RSS and its anonymous part in KiB.
#[allow(unsafe_code)]
fn usage() -> (u64, u64, u64) {
    // SAFETY: getrusage only writes into the zeroed struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (
        us(u.ru_utime) + us(u.ru_stime),
        field("VmRSS:"),
        field("RssAnon:"),
    )
}

/// Resident KiB per mapping (`/proc/self/smaps`), keyed by the mapped file (or
/// `[anon]`).
fn resident_by_mapping() -> std::collections::BTreeMap<String, i64> {
    let mut out = std::collections::BTreeMap::new();
    let text = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut current = String::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields
            .first()
            .is_some_and(|f| f.contains('-') && !f.ends_with(':'))
        {
            current = fields.get(5).map_or("[anon]".into(), |s| s.to_string());
        } else if fields.first() == Some(&"Rss:") {
            *out.entry(current.clone()).or_insert(0) += fields[1].parse::<i64>().unwrap_or(0);
        }
    }
    out
}

/// Prints what building a context and connecting once cost, step by step, then which
/// mappings grew.
async fn context_cost() {
    let mappings_before = resident_by_mapping();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let mut last = usage();
    let mut step = |what: &str| {
        let now = usage();
        println!(
            "{what:<28} cpu {:>6} us  rss {:>+6} KiB (anonymous {:>+6} KiB)",
            now.0 - last.0,
            now.1 as i64 - last.1 as i64,
            now.2 as i64 - last.2 as i64
        );
        last = usage();
    };
    step("start");
    let bare = Context::builder()
        .watch_interfaces(false)
        .without_builtin_pib()
        .build()
        .unwrap();
    step("context: no watcher, no PIB");
    let pib = Context::builder().watch_interfaces(false).build().unwrap();
    step("context: no watcher");
    let ctx = Context::builder().build().unwrap();
    step("context");
    drop((bare, pib));
    let props = TransportProperties::new()
        .protocols(Preference::Require, [Protocol::Tcp])
        .compile()
        .unwrap();
    step("properties");
    let pre = Preconnection::new(&ctx, props).remote(RemoteEndpoint::new("127.0.0.1", port));
    step("preconnection");
    let c = pre.initiate().await.unwrap();
    step("first initiate");
    let c2 = pre.initiate().await.unwrap();
    step("second initiate");
    drop((c, c2, l));
    let after = resident_by_mapping();
    for (name, kib) in &after {
        let grew = kib - mappings_before.get(name).copied().unwrap_or(0);
        if grew != 0 {
            println!("  {grew:>+6} KiB resident in {name}");
        }
    }
}
