//! Hostile and broken peers, each started by the test on loopback: a framing length of
//! 0xFFFFFFFF, a peer that never reads, 10,000 idle connections (slowloris), the
//! listener's connection limit, a peer that resets mid-transfer, an SCTP INIT flood from
//! thousands of addresses, a peer opening every SCTP stream, and an SCTP server under
//! 3,000 new associations per second. Figures are printed (`--nocapture` shows them);
//! the assertions are about bounds (memory, counts), never about speed.

mod common;
use common::sctp_context;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

use taps::taps_core::properties::Protocol;
use taps::{
    Connection, Context, Error, ListenFailure, Listener, ListenerOptions, Preconnection,
    Preference, RemoteEndpoint, TransportProperties,
};

const T: Duration = Duration::from_secs(20);

/// The SCTP tests read the process-wide usrsctp counters and load the one usrsctp
/// instance: one at a time.
static SCTP_SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Resident set size of this process in KiB (`/proc/self/status`).
fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

fn only(p: Protocol) -> TransportProperties {
    TransportProperties::new().protocols(Preference::Require, [p])
}

fn context() -> Context {
    sctp_context(false)
}

async fn connect(ctx: &Context, p: Protocol, port: u16) -> Connection {
    let pre = Preconnection::new(ctx, only(p).compile().unwrap())
        .remote(RemoteEndpoint::new("127.0.0.1", port));
    timeout(T, pre.initiate()).await.unwrap().unwrap()
}

async fn listen(ctx: &Context, p: Protocol, limits: &ListenerOptions) -> (Listener, u16) {
    let port = taps_testkit::free_port();
    let l = Preconnection::new(ctx, only(p).compile().unwrap())
        .local(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .listen_with(limits)
        .await
        .unwrap();
    (l, port)
}

/// A framing length of 0xFFFFFFFF: a clear error at once, nothing of that size
/// allocated, and the connection's receiving side stays failed. A settable smaller
/// limit applies the same way, and an announced 16 MiB that never comes costs nothing.
#[tokio::test]
async fn huge_length_prefix_is_a_clear_error_without_allocation() {
    let ctx = context();
    let raw = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = raw.local_addr().unwrap().port();
    let peer = tokio::spawn(async move {
        let mut held = Vec::new();
        for prefix in [
            [0xff; 4],
            2048u32.to_be_bytes(),
            (16u32 << 20).to_be_bytes(),
        ] {
            let (mut s, _) = raw.accept().await.unwrap();
            s.write_all(&prefix).await.unwrap();
            s.write_all(b"0123456789").await.unwrap();
            held.push(s);
        }
        held
    });
    let before = rss_kib();
    let mut c = connect(&ctx, Protocol::Tcp, port).await;
    let e = timeout(T, c.receive()).await.unwrap().unwrap_err();
    assert!(
        matches!(e, Error::MessageTooBig { size: 0xffff_ffff, max } if max == 16 << 20),
        "{e:?}"
    );
    println!("0xFFFFFFFF prefix: {e}");
    let again = timeout(T, c.receive()).await.unwrap().unwrap_err();
    assert!(matches!(again, Error::MessageTooBig { .. }), "{again:?}");

    let mut small = connect(&ctx, Protocol::Tcp, port).await;
    small.set_max_message_size(1024);
    let e = timeout(T, small.receive()).await.unwrap().unwrap_err();
    assert!(
        matches!(
            e,
            Error::MessageTooBig {
                size: 2048,
                max: 1024
            }
        ),
        "{e:?}"
    );
    let big = vec![0u8; 1025];
    let e = small.send(&big).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::MessageTooBig {
                size: 1025,
                max: 1024
            }
        ),
        "{e:?}"
    );

    // 16 MiB announced, 10 bytes sent: receive waits, and holds ~64 KiB, not 16 MiB.
    let mut slow = connect(&ctx, Protocol::Tcp, port).await;
    assert!(timeout(Duration::from_millis(300), slow.receive())
        .await
        .is_err());
    let grown = rss_kib().saturating_sub(before);
    println!("RSS growth after the three peers: {grown} KiB");
    assert!(grown < 8 * 1024, "RSS grew by {grown} KiB");
    drop(peer.await.unwrap());
}

/// The listener side of the same: a client announcing 0xFFFFFFFF gets the accepted
/// connection's receive to fail with the clear error.
#[tokio::test]
async fn listener_rejects_huge_length_prefix() {
    let ctx = context();
    let (mut l, port) = listen(&ctx, Protocol::Tcp, &ListenerOptions::default()).await;
    let mut raw = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    raw.write_all(&[0xff; 4]).await.unwrap();
    let mut c = timeout(T, l.accept()).await.unwrap().unwrap().unwrap();
    let e = timeout(T, c.receive()).await.unwrap().unwrap_err();
    assert!(
        matches!(
            e,
            Error::MessageTooBig {
                size: 0xffff_ffff,
                ..
            }
        ),
        "{e:?}"
    );
}

/// Bytes the kernel holds unsent or unacknowledged for TCP sockets on local port
/// `port` (the tx_queue column of /proc/net/tcp).
fn tcp_tx_queue(port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local_port = u16::from_str_radix(f.get(1)?.split(':').nth(1)?, 16).ok()?;
            let tx = u64::from_str_radix(f.get(4)?.split(':').next()?, 16).ok()?;
            (local_port == port).then_some(tx)
        })
        .sum()
}

/// A peer that never reads: `send` stops completing once the kernel buffers are full
/// (backpressure), what is queued stays bounded by those buffers, and the sender's
/// memory does not grow with what the application tries to send.
#[tokio::test]
async fn peer_that_never_reads_gets_backpressure_tcp() {
    let ctx = context();
    let raw = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = raw.local_addr().unwrap().port();
    let peer = tokio::spawn(async move { raw.accept().await.unwrap().0 });
    let mut c = connect(&ctx, Protocol::Tcp, port).await;
    let _held = peer.await.unwrap();
    let msg = vec![7u8; 64 * 1024];
    let before = rss_kib();
    let mut sent = 0usize;
    loop {
        match timeout(Duration::from_millis(500), c.send(&msg)).await {
            Ok(r) => r.unwrap(),
            Err(_) => break, // blocked: backpressure
        }
        sent += msg.len();
        assert!(
            sent < 256 << 20,
            "send never blocked: {sent} bytes accepted"
        );
    }
    let queued = tcp_tx_queue(c.info().local.port());
    let grown = rss_kib().saturating_sub(before);
    println!(
        "never-reading TCP peer: send blocked after {} KiB; kernel send queue {} KiB; RSS +{grown} KiB",
        sent / 1024,
        queued / 1024
    );
    assert!(grown < 8 * 1024, "RSS grew by {grown} KiB");
}

/// The same over SCTP: the association's send queue stays bounded (usrsctp's send
/// buffer) and `send` blocks.
#[tokio::test]
async fn peer_that_never_reads_gets_backpressure_sctp() {
    let _serial = SCTP_SERIAL.lock().await;
    let ctx = context();
    let (mut l, port) = listen(&ctx, Protocol::Sctp, &ListenerOptions::default()).await;
    let server = tokio::spawn(async move {
        let c = l.accept().await.unwrap().unwrap();
        (l, c) // held, never read
    });
    let mut c = connect(&ctx, Protocol::Sctp, port).await;
    let _held = timeout(T, server).await.unwrap().unwrap();
    let msg = vec![7u8; 16 * 1024];
    let before = rss_kib();
    let mut sent = 0usize;
    let mut most_queued = 0;
    loop {
        match timeout(Duration::from_millis(500), c.send(&msg)).await {
            Ok(r) => r.unwrap(),
            Err(_) => break,
        }
        sent += msg.len();
        most_queued = most_queued.max(c.queued_bytes().unwrap());
        assert!(
            sent < 256 << 20,
            "send never blocked: {sent} bytes accepted"
        );
    }
    let grown = rss_kib().saturating_sub(before);
    println!(
        "never-reading SCTP peer: send blocked after {} KiB; most queued {} KiB; RSS +{grown} KiB",
        sent / 1024,
        most_queued / 1024
    );
    assert!(most_queued <= 4 << 20, "queued {most_queued}");
    assert!(grown < 16 * 1024, "RSS grew by {grown} KiB");
}

/// Raises this process's open-file limit to 30,000 (root may raise the hard limit too)
/// or else to its hard limit; returns the new soft limit.
fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read the one struct we pass, which lives on
    // this stack frame for the duration of the calls.
    #[allow(unsafe_code)]
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        let wanted = libc::rlimit {
            rlim_cur: lim.rlim_max.max(30_000),
            rlim_max: lim.rlim_max.max(30_000),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) != 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    lim.rlim_cur
}

/// Accepts everything; each connection in a task of its own echoes what it receives
/// (the idle ones wait forever).
fn echo_all(mut l: Listener) -> tokio::task::JoinHandle<Listener> {
    tokio::spawn(async move {
        while let Some(accepted) = l.accept().await {
            let Ok(mut c) = accepted else { continue };
            tokio::spawn(async move {
                while let Ok(Some(m)) = c.receive().await {
                    if c.send(&m).await.is_err() {
                        break;
                    }
                }
            });
        }
        l
    })
}

/// Slowloris: 10,000 idle connections (from another process, this test binary run again
/// as [`slowloris_idle_clients`], so that each side needs 10,000 descriptors; both raise
/// RLIMIT_NOFILE to 30,000 or their hard limit, and use fewer connections if that is
/// still too low) while a normal client is still accepted and served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_idle_connections_do_not_starve_a_normal_client() {
    use tokio::io::AsyncBufReadExt;
    let nofile = raise_nofile();
    let n = 10_000.min(nofile.saturating_sub(256) as usize);
    let ctx = context();
    let (l, port) = listen(&ctx, Protocol::Tcp, &ListenerOptions::default()).await;
    let server = echo_all(l);
    let started = Instant::now();
    let mut idle = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "slowloris_idle_clients",
            "--ignored",
            "--nocapture",
        ])
        .env("TAPS_SLOWLORIS", format!("{port} {n}"))
        .stdout(std::process::Stdio::piped())
        .stdin(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(idle.stdout.take().unwrap()).lines();
    let opened: usize = timeout(Duration::from_secs(120), async {
        while let Some(l) = lines.next_line().await.unwrap() {
            if let Some(k) = l.strip_prefix("idle: ") {
                return k.parse().unwrap();
            }
        }
        panic!("the idle clients' process ended before opening its connections");
    })
    .await
    .unwrap();
    let open_time = started.elapsed();
    let t = Instant::now();
    let mut c = connect(&ctx, Protocol::Tcp, port).await;
    let connect_time = t.elapsed();
    c.send(b"hello").await.unwrap();
    let echoed = timeout(T, c.receive()).await.unwrap().unwrap().unwrap();
    let served = t.elapsed();
    assert_eq!(echoed, b"hello");
    println!(
        "slowloris: {opened} idle connections (RLIMIT_NOFILE {nofile}) opened in \
         {open_time:?}; normal client connected in {connect_time:?}, echo after {served:?}"
    );
    drop(idle.stdin.take());
    let _ = timeout(T, idle.wait()).await;
    server.abort();
}

/// The idle clients of the test above (does nothing unless started by it): opens
/// `TAPS_SLOWLORIS` = "port count" connections that never send, prints how many, and
/// holds them until its standard input closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "started by slowloris_idle_connections_do_not_starve_a_normal_client"]
async fn slowloris_idle_clients() {
    let Ok(spec) = std::env::var("TAPS_SLOWLORIS") else {
        return;
    };
    let (port, n) = spec.split_once(' ').unwrap();
    let (port, n): (u16, usize) = (port.parse().unwrap(), n.parse().unwrap());
    let n = n.min(raise_nofile().saturating_sub(64) as usize);
    let mut idle = Vec::with_capacity(n);
    while idle.len() < n {
        let batch: Vec<_> = (0..256.min(n - idle.len()))
            .map(|_| tokio::spawn(TcpStream::connect(("127.0.0.1", port))))
            .collect();
        for b in batch {
            idle.push(b.await.unwrap().unwrap());
        }
    }
    println!("idle: {}", idle.len());
    let mut rest = Vec::new();
    let _ = tokio::io::stdin().read_to_end(&mut rest).await;
}

/// `max_connections`: at the limit accepting pauses; when a connection is dropped the
/// waiting client is accepted.
#[tokio::test]
async fn connection_limit_pauses_accepting_until_a_slot_frees() {
    let ctx = context();
    let limits = ListenerOptions {
        max_connections: 4,
        backlog: 16,
        ..ListenerOptions::default()
    };
    let (mut l, port) = listen(&ctx, Protocol::Tcp, &limits).await;
    let mut clients = Vec::new();
    let mut accepted = Vec::new();
    for _ in 0..4 {
        clients.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
        accepted.push(timeout(T, l.accept()).await.unwrap().unwrap().unwrap());
    }
    assert_eq!(l.connections(), 4);
    // The fifth completes its handshake in the kernel's backlog but is not accepted.
    clients.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    assert!(timeout(Duration::from_millis(300), l.accept())
        .await
        .is_err());
    drop(accepted.pop());
    let fifth = timeout(T, l.accept()).await.unwrap().unwrap().unwrap();
    assert_eq!(l.connections(), 4);
    drop(fifth);
    drop(accepted);
    assert_eq!(l.connections(), 0);
}

/// A peer that resets in the middle of a transfer: the sender's `send` and the
/// receiver's `receive` fail (no hang, no panic).
#[tokio::test]
async fn peer_resetting_mid_transfer_is_an_error() {
    let ctx = context();
    // The peer reads 100 KiB of what the client sends, then resets.
    let raw = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = raw.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut s, _) = raw.accept().await.unwrap();
        let mut buf = vec![0u8; 100 * 1024];
        s.read_exact(&mut buf).await.unwrap();
        s.set_zero_linger().unwrap();
        drop(s);
    });
    let mut c = connect(&ctx, Protocol::Tcp, port).await;
    let msg = vec![1u8; 256 * 1024];
    let failed = timeout(T, async {
        loop {
            if let Err(e) = c.send(&msg).await {
                return e;
            }
        }
    })
    .await
    .expect("send fails, no hang");
    println!("sender after the peer's reset: {failed}");

    // The receiving side: a client sends half a message, then resets.
    let (mut l, port) = listen(&ctx, Protocol::Tcp, &ListenerOptions::default()).await;
    let s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut s = s;
    s.write_all(&1000u32.to_be_bytes()).await.unwrap();
    s.write_all(&[0u8; 500]).await.unwrap();
    let mut c = timeout(T, l.accept()).await.unwrap().unwrap().unwrap();
    s.set_zero_linger().unwrap();
    drop(s);
    let e = timeout(T, c.receive()).await.expect("no hang").unwrap_err();
    println!("receiver after the peer's reset: {e}");
}

#[path = "hostile/sctp.rs"]
mod sctp;

/// Two SCTP servers on one host: the second process cannot have the encapsulation port
/// (usrsctp lives inside each process), and says so: its listener reports SCTP as
/// missing with the reason (and a warning), fails with `every_stack`, and fails when
/// SCTP is all the properties allow. The first process is this test binary run again
/// as [`sctp_port_holder`].
#[tokio::test]
async fn second_sctp_server_on_the_host_says_why_it_has_no_sctp() {
    use tokio::io::AsyncBufReadExt;
    let udp_port = taps_testkit::free_port();
    let mut holder = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "sctp_port_holder", "--ignored", "--nocapture"])
        .env("TAPS_HOLD_UDP_PORT", udp_port.to_string())
        .stdout(std::process::Stdio::piped())
        .stdin(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(holder.stdout.take().unwrap()).lines();
    timeout(T, async {
        while let Some(l) = lines.next_line().await.unwrap() {
            if l.starts_with("holder: listening") {
                return;
            }
        }
        panic!("the holder process ended before listening");
    })
    .await
    .unwrap();
    let ctx = Context::builder().sctp_udp_port(udp_port).build().unwrap();
    let at = |port| SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let both = TransportProperties::new()
        .protocols(Preference::Require, [Protocol::Sctp, Protocol::Tcp])
        .compile()
        .unwrap();
    let pre = Preconnection::new(&ctx, both.clone()).local(at(taps_testkit::free_port()));
    let l = pre.listen().await.unwrap();
    let stacks: Vec<Protocol> = l.local_addrs().iter().map(|(s, _)| s.protocol).collect();
    assert_eq!(stacks, [Protocol::Tcp]);
    let missing = l.missing();
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(missing[0].stack.protocol, Protocol::Sctp);
    assert!(
        matches!(missing[0].reason, ListenFailure::SctpPortInUse { .. }),
        "{}",
        missing[0]
    );
    assert!(missing[0].to_string().contains("another process"));
    println!("second server: {}", missing[0]);
    drop(l);
    let strict = ListenerOptions {
        every_stack: true,
        ..ListenerOptions::default()
    };
    let pre = Preconnection::new(&ctx, both).local(at(taps_testkit::free_port()));
    let e = pre.listen_with(&strict).await.unwrap_err();
    assert!(e.to_string().contains("not every allowed stack"), "{e}");
    let sctp_only = Preconnection::new(&ctx, only(Protocol::Sctp).compile().unwrap())
        .local(at(taps_testkit::free_port()));
    let e = sctp_only.listen().await.unwrap_err();
    assert!(e.to_string().contains("in use"), "{e}");
    drop(holder.stdin.take());
    let _ = timeout(T, holder.wait()).await;
}

/// The first SCTP server of the test above (does nothing unless started by it): listens
/// with SCTP on `TAPS_HOLD_UDP_PORT` until its standard input closes.
#[tokio::test]
#[ignore = "started by second_sctp_server_on_the_host_says_why_it_has_no_sctp"]
async fn sctp_port_holder() {
    let Ok(port) = std::env::var("TAPS_HOLD_UDP_PORT") else {
        return;
    };
    let ctx = Context::builder()
        .sctp_udp_port(port.parse().unwrap())
        .build()
        .unwrap();
    let (l, _) = listen(&ctx, Protocol::Sctp, &ListenerOptions::default()).await;
    println!("holder: listening {:?}", l.local_addrs());
    let mut rest = Vec::new();
    let _ = tokio::io::stdin().read_to_end(&mut rest).await;
}

/// A TLS client that connects and says nothing holds a connection slot only for the
/// handshake timeout: with one slot, a real client behind it is served once the silent
/// one has been dropped.
#[tokio::test]
async fn silent_tls_client_is_dropped_after_the_handshake_timeout() {
    use taps::taps_core::properties::Name;
    use taps::SecurityParameters;
    let pki = taps_testkit::TestPki::new(&["localhost"]).unwrap();
    let ctx = context();
    let limits = ListenerOptions {
        max_connections: 1,
        handshake_timeout: Duration::from_millis(300),
        ..ListenerOptions::default()
    };
    let props = TransportProperties::for_listener()
        .require(Name::Security)
        .protocols(Preference::Require, [Protocol::Tcp]);
    let l = Preconnection::new(&ctx, props.compile().unwrap())
        .local(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .security(SecurityParameters::new().identity(&pki.cert, &pki.key))
        .listen_with(&limits)
        .await
        .unwrap();
    let port = l.local_addrs()[0].1.port();
    let server = echo_all(l);
    let mut silent = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let t = Instant::now();
    let client = TransportProperties::new()
        .require(Name::Security)
        .protocols(Preference::Require, [Protocol::Tcp]);
    let pre = Preconnection::new(&ctx, client.compile().unwrap())
        .remote(RemoteEndpoint::new("127.0.0.1", port))
        .security(
            SecurityParameters::new()
                .ca_file(&pki.ca)
                .server_name("localhost"),
        );
    let mut c = timeout(T, pre.initiate()).await.unwrap().unwrap();
    c.send(b"hello").await.unwrap();
    let echoed = timeout(T, c.receive()).await.unwrap().unwrap().unwrap();
    assert_eq!(echoed, b"hello");
    let served = t.elapsed();
    let mut buf = [0u8; 16];
    let n = timeout(T, silent.read(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "the silent client was closed");
    println!("silent TLS client dropped; the real client was served after {served:?}");
    server.abort();
}
