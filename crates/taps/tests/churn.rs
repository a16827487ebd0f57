//! Churn: thousands of races in one process with random outcomes (refused, blackholed,
//! accepted, accepted slowly, closed at once; a real Happy Eyeballs race with a dead
//! IPv6 address), TCP and SCTP mixed, flow mapping on and off. Before and after (past a
//! warm-up): open descriptors, threads, tokio tasks, usrsctp sockets and conn addresses,
//! RSS. Goal: nothing grows (RSS under 1 MiB after warm-up).
//!
//! `churn_2000` is the CI bound; `TAPS_CHURN_RACES=10000 cargo test -p taps --test churn
//! -- --ignored --nocapture` runs the long one. Its own binary: nothing else runs here.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tokio::time::timeout;

use taps::taps_core::properties::Protocol;
use taps::{Context, Listener, Preconnection, Preference, RemoteEndpoint, TransportProperties};
use taps_testkit::{Blackhole, DnsServer};

/// What the process holds.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sample {
    fds: usize,
    threads: usize,
    tasks: usize,
    sctp: usrsctp::StackStats,
    rss_kib: u64,
}

fn status_field(name: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// Returns the heap's free memory to the OS first (glibc `malloc_trim`), so that RSS
/// counts what is in use rather than the allocator's high-water mark.
fn sample() -> Sample {
    // SAFETY: malloc_trim only releases free heap pages; it takes no pointer of ours.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
    Sample {
        fds: std::fs::read_dir("/proc/self/fd").unwrap().count(),
        threads: status_field("Threads:") as usize,
        tasks: tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        sctp: usrsctp::SctpStack::global().stats(),
        rss_kib: status_field("VmRSS:"),
    }
}

/// Waits until the counts (not RSS) come back to `want` or 20 s pass (a server forgets
/// half-open SCTP peers after 5 to 7.5 s); returns the last.
async fn settle(want: Sample) -> Sample {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = sample();
        let back = s.fds <= want.fds && s.tasks <= want.tasks && s.sctp == want.sctp;
        if back || Instant::now() > deadline {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A tiny xorshift (seeded: a failing run can be replayed).
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[derive(Debug, Clone, Copy)]
enum Outcome {
    Refused,
    Blackholed,
    Accepted,
    AcceptedSlowly,
    ClosedAtOnce,
    /// `both.test.`: ::1 blackholed, 127.0.0.1 accepts (a race with a loser).
    Raced,
}
const OUTCOMES: [Outcome; 6] = [
    Outcome::Refused,
    Outcome::Blackholed,
    Outcome::Accepted,
    Outcome::AcceptedSlowly,
    Outcome::ClosedAtOnce,
    Outcome::Raced,
];

/// Servers: echo, echo after 30 ms, close at once (each TCP and SCTP on one port).
fn serve(mut l: Listener, delay: Option<Duration>, close_at_once: bool) {
    tokio::spawn(async move {
        while let Some(accepted) = l.accept().await {
            let Ok(mut c) = accepted else { continue };
            if close_at_once {
                drop(c);
                continue;
            }
            tokio::spawn(async move {
                while let Ok(Some(m)) = c.receive().await {
                    if let Some(d) = delay {
                        tokio::time::sleep(d).await;
                    }
                    if c.send(&m).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
}

struct Lab {
    /// Flow mapping off and on, the same encapsulation port as the servers.
    clients: [Context; 2],
    /// SCTP to a UDP port that swallows everything.
    sctp_blackhole: Context,
    ports: [u16; 3],
    refused: u16,
    tcp_blackhole: SocketAddr,
    _keep: (Blackhole, UdpSocket, DnsServer, Blackhole),
}

async fn lab() -> Lab {
    let udp_port = taps_testkit::free_port();
    let dns_v6 = Blackhole::v6().unwrap();
    let raced_port = dns_v6.addr().port();
    let dns = DnsServer::start(
        "test.",
        &[
            ("both", [127, 0, 0, 1].into()),
            ("both", std::net::Ipv6Addr::LOCALHOST.into()),
        ],
    );
    let ctx = |mapping: bool, port: u16| {
        Context::builder()
            .name_servers(vec![dns.addr()])
            .sctp_udp_port(port)
            .flow_mapping(mapping)
            .build()
            .unwrap()
    };
    let server = ctx(true, udp_port);
    let props = TransportProperties::for_listener()
        .protocols(Preference::Require, [Protocol::Sctp, Protocol::Tcp])
        .compile()
        .unwrap();
    let mut ports = [0u16; 3];
    for (i, (delay, close)) in [
        (None, false),
        (Some(Duration::from_millis(30)), false),
        (None, true),
    ]
    .into_iter()
    .enumerate()
    {
        // The raced name's port serves the plain echo on 127.0.0.1.
        let port = if i == 0 {
            raced_port
        } else {
            taps_testkit::free_port()
        };
        let l = Preconnection::new(&server, props.clone())
            .local(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
            .listen()
            .await
            .unwrap();
        assert!(l.missing().is_empty(), "{:?}", l.missing());
        serve(l, delay, close);
        ports[i] = port;
    }
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tcp_blackhole = Blackhole::v6().unwrap();
    Lab {
        clients: [ctx(false, udp_port), ctx(true, udp_port)],
        sctp_blackhole: ctx(false, silent.local_addr().unwrap().port()),
        ports,
        refused: taps_testkit::free_port(),
        tcp_blackhole: tcp_blackhole.addr(),
        _keep: (dns_v6, silent, dns, tcp_blackhole),
    }
}

/// One race with a random outcome; returns whether it connected.
async fn one_race(lab: Arc<Lab>, seed: u64) -> bool {
    let mut rng = Rng(seed | 1);
    let outcome = OUTCOMES[rng.below(OUTCOMES.len() as u64) as usize];
    let protocols: &[Protocol] = match rng.below(3) {
        0 => &[Protocol::Tcp],
        1 => &[Protocol::Sctp],
        _ => &[Protocol::Sctp, Protocol::Tcp],
    };
    let mut ctx = &lab.clients[rng.below(2) as usize];
    let (host, port) = match outcome {
        Outcome::Refused => ("127.0.0.1".to_string(), lab.refused),
        Outcome::Blackholed if protocols == [Protocol::Sctp] => {
            ctx = &lab.sctp_blackhole;
            ("127.0.0.1".to_string(), lab.ports[0])
        }
        Outcome::Blackholed => ("::1".to_string(), lab.tcp_blackhole.port()),
        Outcome::Accepted => ("127.0.0.1".to_string(), lab.ports[0]),
        Outcome::AcceptedSlowly => ("127.0.0.1".to_string(), lab.ports[1]),
        Outcome::ClosedAtOnce => ("127.0.0.1".to_string(), lab.ports[2]),
        Outcome::Raced => ("both.test.".to_string(), lab.ports[0]),
    };
    let props = TransportProperties::new()
        .protocols(Preference::Require, protocols.iter().copied())
        .attempt_delay(Duration::from_millis(20))
        .timeout(Duration::from_millis(400))
        .compile()
        .unwrap();
    let pre = Preconnection::new(ctx, props).remote(RemoteEndpoint::new(&host, port));
    let Ok(Ok(mut c)) = timeout(Duration::from_secs(5), pre.initiate()).await else {
        return false;
    };
    if c.send(b"ping").await.is_ok() {
        let _ = timeout(Duration::from_secs(2), c.receive()).await;
    }
    if rng.below(2) == 0 {
        let _ = timeout(Duration::from_secs(2), c.close()).await;
    } else {
        c.abort();
    }
    true
}

async fn run(races: u64, warmup: u64, concurrency: usize) {
    let lab = Arc::new(lab().await);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut connected = 0u64;
    let mut batch = |n: u64| {
        let lab = lab.clone();
        let seeds: Vec<u64> = (0..n)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                seed
            })
            .collect();
        async move {
            let mut set = JoinSet::new();
            let mut ok = 0u64;
            for s in seeds {
                if set.len() >= concurrency {
                    ok += set.join_next().await.unwrap().unwrap() as u64;
                }
                set.spawn(one_race(lab.clone(), s));
            }
            while let Some(r) = set.join_next().await {
                ok += r.unwrap() as u64;
            }
            ok
        }
    };
    let start = sample();
    connected += batch(warmup).await;
    let warm = settle(start).await;
    let t = Instant::now();
    // In phases of (about) 2,000 races, printing RSS after each: growth that levels off
    // is the allocator, growth that goes on is a leak.
    let mut left = races - warmup;
    let mut end = warm;
    while left > 0 {
        let n = left.min(2000);
        connected += batch(n).await;
        left -= n;
        end = settle(warm).await;
        println!("after {} races: RSS {} KiB", races - left, end.rss_kib);
    }
    let elapsed = t.elapsed();
    println!(
        "churn: {races} races ({connected} connected) in {elapsed:?} after {warmup} warm-up\n\
         start  {start:?}\nwarm   {warm:?}\nend    {end:?}\n\
         growth after warm-up: fds {:+}, threads {:+}, tasks {:+}, usrsctp sockets {:+}, \
         conn addrs {:+}, UDP {:+}, RSS {:+} KiB",
        end.fds as i64 - warm.fds as i64,
        end.threads as i64 - warm.threads as i64,
        end.tasks as i64 - warm.tasks as i64,
        end.sctp.sctp_sockets as i64 - warm.sctp.sctp_sockets as i64,
        end.sctp.conn_addrs as i64 - warm.sctp.conn_addrs as i64,
        end.sctp.udp_sockets as i64 - warm.sctp.udp_sockets as i64,
        end.rss_kib as i64 - warm.rss_kib as i64,
    );
    assert!(
        connected > races / 4,
        "only {connected} of {races} connected"
    );
    assert!(end.fds <= warm.fds, "descriptors grew: {warm:?} -> {end:?}");
    assert!(end.tasks <= warm.tasks, "tasks grew: {warm:?} -> {end:?}");
    assert_eq!(end.sctp, warm.sctp, "usrsctp resources grew");
    assert!(
        end.threads <= warm.threads + 2,
        "threads grew: {warm:?} -> {end:?}"
    );
    assert!(
        end.rss_kib <= warm.rss_kib + 1024,
        "RSS grew by {} KiB",
        end.rss_kib - warm.rss_kib
    );
}

/// 2,000 races (the CI bound), 400 of them warm-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn churn_2000() {
    run(2000, 400, 32).await;
}

/// The long run: `TAPS_CHURN_RACES` races (default 10,000).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: 10,000 races (TAPS_CHURN_RACES), run by hand"]
async fn churn_long() {
    let races = std::env::var("TAPS_CHURN_RACES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000u64);
    run(races, races / 5, 32).await;
}
