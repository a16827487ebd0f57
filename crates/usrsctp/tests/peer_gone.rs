//! A peer process that goes away: killed (SIGKILL: its host answers our heartbeat with an
//! ICMP port unreachable, which ends our side with `Error::PeerGone`), exiting (`exit()`,
//! SIGTERM: its own stack ends the association on the way out, queued data first), or
//! handling SIGINT itself (its handler is kept). The peer is this test binary run again
//! with `USRSCTP_PEER_GONE_CHILD` naming its role: the `child` test does nothing without
//! it. Each parent test listens on an SCTP port of its own (one listener per SCTP port
//! per process); UDP ports are the kernel's choice.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::net::UdpSocket;
use tokio::process::{Child, ChildStdout, Command};
use tokio::time::timeout;
use usrsctp::{Association, Error, SctpListener, SctpOptions, SctpStack};

/// Setup steps (process start, handshakes) must finish within this.
const T: Duration = Duration::from_secs(20);
/// What the issue asks: the surviving side learns of the end within 2 s on loopback.
const DETECT: Duration = Duration::from_secs(2);
/// The child's role, and for a child that connects the parent's UDP address and SCTP
/// port (`ADDR PORT`).
const CHILD_ENV: &str = "USRSCTP_PEER_GONE_CHILD";
const PEER_ENV: &str = "USRSCTP_PEER_GONE_PEER";
/// The SCTP port a child listens on.
const CHILD_SCTP_PORT: u16 = 7201;
/// What the child sends before `exit()` in the bulk test.
const BULK: usize = 1_000_000;
const BULK_MESSAGE: usize = 62_500;

/// Heartbeat settings of the side that must notice a killed peer: a heartbeat every
/// interval + RTO ± RTO/2 (usrsctp's jitter), so with these at most 200 + 600 ms after the
/// kill, and the ICMP answer on loopback at once.
fn heartbeat_opts() -> SctpOptions {
    SctpOptions {
        heartbeat_interval_ms: 200,
        rto_max_ms: 400,
        ..SctpOptions::default()
    }
}

/// The latest a heartbeat leaves after the peer died, with [`heartbeat_opts`].
fn heartbeat_bound() -> Duration {
    let o = heartbeat_opts();
    Duration::from_millis(u64::from(o.heartbeat_interval_ms) + u64::from(o.rto_max_ms) * 3 / 2)
}

// ---------------------------------------------------------------- the child process

/// The child's side of every test; returns at once in a normal test run.
#[test]
fn child() {
    let Ok(role) = std::env::var(CHILD_ENV) else {
        return;
    };
    let peer: Option<(SocketAddr, u16)> = std::env::var(PEER_ENV).ok().map(|p| {
        let (addr, port) = p.split_once(' ').unwrap();
        (addr.parse().unwrap(), port.parse().unwrap())
    });
    let multi = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    };
    match role.as_str() {
        // Connects, then holds the association until killed.
        "client-hold" => multi().block_on(async {
            let _a = connect_to(peer.unwrap()).await;
            say("established", "");
            std::future::pending::<()>().await
        }),
        // Listens, accepts one association, holds it until killed or signalled.
        "server-hold" => multi().block_on(async {
            let l = SctpStack::global()
                .listen(
                    "127.0.0.1:0".parse().unwrap(),
                    CHILD_SCTP_PORT,
                    &SctpOptions::default(),
                )
                .unwrap();
            say("listening", &l.local_addr().to_string());
            let (_a, _) = l.accept().await.unwrap();
            say("accepted", "");
            std::future::pending::<()>().await
        }),
        // The same in IP mode (the multihomed kind: real addresses, its own tunnelling
        // port), on 127.0.0.1 only.
        "server-hold-ip" => multi().block_on(async {
            let l = SctpStack::global()
                .listen_multihomed(
                    &["127.0.0.1".parse().unwrap()],
                    0,
                    CHILD_SCTP_PORT,
                    &SctpOptions::default(),
                )
                .unwrap();
            say("listening", &l.local_addr().to_string());
            let (_a, _) = l.accept().await.unwrap();
            say("accepted", "");
            std::future::pending::<()>().await
        }),
        // Connects, then calls exit(0) from a runtime worker with the association open.
        "client-exit" => multi().block_on(async {
            let a = connect_to(peer.unwrap()).await;
            say("established", "");
            tokio::spawn(async move {
                let _open = a;
                say("exiting", "");
                std::process::exit(0)
            })
            .await
            .unwrap();
        }),
        // Handles SIGINT itself (tokio's handler, installed before the stack's first
        // socket), then exits with status 3.
        "client-own-sigint" => multi().block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            let mut sigint = signal(SignalKind::interrupt()).unwrap();
            let _a = connect_to(peer.unwrap()).await;
            say("established", "");
            sigint.recv().await;
            say("own-handler", "");
            std::process::exit(3)
        }),
        // On a current-thread runtime (which `exit()` blocks: nothing of the runtime
        // runs any more), queues 1 MB and calls exit(0) at once.
        "client-bulk-exit" => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let a = connect_to(peer.unwrap()).await;
                say("established", "");
                for m in 0..BULK / BULK_MESSAGE {
                    a.send(0, &bulk_message(m), true, 0).await.unwrap();
                }
                say("sent", "");
                std::process::exit(0)
            }),
        other => panic!("unknown child role {other}"),
    }
}

async fn connect_to((udp, sctp_port): (SocketAddr, u16)) -> Association {
    let c = SctpStack::global()
        .connect(udp, sctp_port, &SctpOptions::default())
        .unwrap();
    timeout(T, c.into_future()).await.unwrap().unwrap()
}

/// One line the parent waits for.
fn say(key: &str, rest: &str) {
    println!("CHILD {key} {rest}");
}

/// Message `m` of the bulk test: bytes that say where they belong.
fn bulk_message(m: usize) -> Vec<u8> {
    (0..BULK_MESSAGE)
        .map(|i| ((m * 31 + i) % 251) as u8)
        .collect()
}

// ---------------------------------------------------------------- the parent's side

/// This test binary running one child role.
struct Peer {
    child: Child,
    out: Lines<BufReader<ChildStdout>>,
}

impl Peer {
    /// Starts the child in `role`; `listener`: the parent's, for a child that connects.
    fn spawn(role: &str, listener: Option<&SctpListener>) -> Peer {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "child", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, role)
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        if let Some(l) = listener {
            cmd.env(PEER_ENV, format!("{} {}", l.local_addr(), l.sctp_port()));
        }
        let mut child = cmd.spawn().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap()).lines();
        Peer { child, out }
    }

    /// Waits for the child's line `key` and returns what follows it.
    async fn line(&mut self, key: &str) -> String {
        let prefix = format!("CHILD {key} ");
        timeout(T, async {
            loop {
                let line = self.out.next_line().await.unwrap();
                let line = line.unwrap_or_else(|| panic!("child ended before saying {key}"));
                // The first one shares its line with libtest's "test child ... ".
                if let Some(at) = line.find(&prefix) {
                    return line[at + prefix.len()..].to_string();
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("child did not say {key}"))
    }

    /// Sends `sig` (a name `kill` knows) to the child.
    fn signal(&self, sig: &str) {
        let pid = self.child.id().unwrap().to_string();
        let ok = std::process::Command::new("kill")
            .args([&format!("-{sig}"), &pid])
            .status()
            .unwrap();
        assert!(ok.success(), "kill -{sig} {pid}");
    }

    async fn status(&mut self) -> ExitStatus {
        timeout(T, self.child.wait()).await.unwrap().unwrap()
    }
}

async fn listen(port: u16, opts: &SctpOptions) -> SctpListener {
    SctpStack::global()
        .listen("127.0.0.1:0".parse().unwrap(), port, opts)
        .unwrap()
}

/// A child client (`role`) associated with a listener of ours on SCTP port `port`: the
/// listener (kept open), the child, our end and the child's address.
async fn client_peer(
    port: u16,
    opts: &SctpOptions,
    role: &str,
) -> (SctpListener, Peer, Association, SocketAddr) {
    let l = listen(port, opts).await;
    let mut peer = Peer::spawn(role, Some(&l));
    let (a, remote) = timeout(T, l.accept()).await.unwrap().unwrap();
    peer.line("established").await;
    (l, peer, a, remote)
}

/// A child server ("server-hold") we associated with: the child, our end and the
/// child's address.
async fn server_peer(opts: &SctpOptions) -> (Peer, Association, SocketAddr) {
    let mut peer = Peer::spawn("server-hold", None);
    let at: SocketAddr = peer.line("listening").await.parse().unwrap();
    let c = SctpStack::global()
        .connect(at, CHILD_SCTP_PORT, opts)
        .unwrap();
    let a = timeout(T, c.into_future()).await.unwrap().unwrap();
    peer.line("accepted").await;
    (peer, a, at)
}

/// Waits (at most [`T`]) until `a` ends: how it ended and when, counted from `since`.
async fn end_of(a: &Association, since: Instant) -> (Result<(), Error>, Duration) {
    let end = timeout(T, async {
        loop {
            match a.recv().await {
                Ok(Some(_)) => {}
                Ok(None) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    })
    .await
    .expect("the association did not end");
    (end, since.elapsed())
}

/// Waits for `a`'s end, which must be graceful (a SHUTDOWN, not an ABORT), and says
/// `what` ended it; how long it took, counted from `since`.
async fn graceful_end(a: &Association, since: Instant, what: &str) -> Duration {
    let (end, took) = end_of(a, since).await;
    eprintln!("{what}: ended after {took:?}: {end:?}");
    assert!(end.is_ok(), "{what}: a graceful end, not {end:?}");
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_client_is_seen_by_the_server_through_icmp() {
    let (_l, mut peer, a, remote) = client_peer(7101, &heartbeat_opts(), "client-hold").await;
    let killed = Instant::now();
    peer.child.start_kill().unwrap();
    let (end, took) = end_of(&a, killed).await;
    eprintln!("killed client: server side ended after {took:?}: {end:?}");
    assert!(
        matches!(end, Err(Error::PeerGone(r)) if r == remote),
        "{end:?}"
    );
    assert!(
        took <= DETECT,
        "{took:?} (heartbeat due within {:?})",
        heartbeat_bound()
    );
    assert_eq!(peer.status().await.signal(), Some(9), "died by SIGKILL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_is_seen_by_the_client_through_icmp() {
    let (mut peer, a, at) = server_peer(&heartbeat_opts()).await;
    let killed = Instant::now();
    peer.child.start_kill().unwrap();
    let (end, took) = end_of(&a, killed).await;
    eprintln!("killed server: client side ended after {took:?}: {end:?}");
    assert!(matches!(end, Err(Error::PeerGone(r)) if r == at), "{end:?}");
    assert!(
        took <= DETECT,
        "{took:?} (heartbeat due within {:?})",
        heartbeat_bound()
    );
}

/// The same over IP mode: the ICMP port unreachable on the process's tunnelling socket ends
/// the association with the killed peer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_ip_mode_server_is_seen_by_the_client_through_icmp() {
    if let Err(e) = usrsctp::multihome_available() {
        taps_testkit::skip("usrsctp IP mode", &e.to_string());
        return;
    }
    let mut peer = Peer::spawn("server-hold-ip", None);
    let at: SocketAddr = peer.line("listening").await.parse().unwrap();
    let c = SctpStack::global()
        .connect_multihomed(
            &["127.0.0.1".parse().unwrap()],
            at,
            CHILD_SCTP_PORT,
            &heartbeat_opts(),
        )
        .unwrap();
    let a = timeout(T, c.into_future()).await.unwrap().unwrap();
    peer.line("accepted").await;
    let killed = Instant::now();
    peer.child.start_kill().unwrap();
    let (end, took) = end_of(&a, killed).await;
    eprintln!("killed IP-mode server: client side ended after {took:?}: {end:?}");
    assert!(matches!(end, Err(Error::PeerGone(r)) if r == at), "{end:?}");
    assert!(
        took <= DETECT,
        "{took:?} (heartbeat due within {:?})",
        heartbeat_bound()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_shuts_the_association_down() {
    // Default heartbeat (30 s): only the exiting side's SHUTDOWN can end it in time.
    let (_l, mut peer, a, _) = client_peer(7103, &SctpOptions::default(), "client-exit").await;
    peer.line("exiting").await;
    let took = graceful_end(&a, Instant::now(), "client exit(0), the server side").await;
    assert!(took <= DETECT, "{took:?}");
    assert_eq!(peer.status().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_shuts_the_association_down_and_the_peer_dies_by_it() {
    let (mut peer, a, _) = server_peer(&SctpOptions::default()).await;
    let sent = Instant::now();
    peer.signal("TERM");
    let took = graceful_end(&a, sent, "server SIGTERM, the client side").await;
    assert!(took <= DETECT, "{took:?}");
    let status = peer.status().await;
    assert_eq!(status.signal(), Some(15), "died by SIGTERM: {status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_sigint_handler_is_kept() {
    let (_l, mut peer, a, _) =
        client_peer(7105, &SctpOptions::default(), "client-own-sigint").await;
    let sent = Instant::now();
    peer.signal("INT");
    // The application's handler ran (ours would have ended the process by SIGINT) ...
    peer.line("own-handler").await;
    let status = peer.status().await;
    assert_eq!(status.code(), Some(3), "{status:?}");
    // ... and its exit(3) shut the association down.
    graceful_end(&a, sent, "client with its own SIGINT handler").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_queued_before_exit_is_delivered_before_the_end() {
    let (_l, mut peer, a, _) = client_peer(7106, &SctpOptions::default(), "client-bulk-exit").await;
    let started = Instant::now();
    let mut got = 0usize;
    let mut messages = 0usize;
    let end = timeout(T, async {
        loop {
            match a.recv().await {
                Ok(Some(m)) => {
                    assert_eq!(m.data, bulk_message(messages), "message {messages}");
                    got += m.data.len();
                    messages += 1;
                }
                Ok(None) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    })
    .await
    .expect("the association did not end");
    eprintln!(
        "1 MB then exit(0): {got} bytes in {messages} messages, then {end:?}, {:?} after establishment",
        started.elapsed()
    );
    assert_eq!(got, BULK);
    assert!(end.is_ok(), "a graceful end, not {end:?}");
    assert_eq!(peer.status().await.code(), Some(0));
}

// ---------------------------------------------------------------- stale refusals

/// Forwards a client's datagrams to the server from one socket of its own, and the
/// server's answers back to the client heard from last, keeping a copy of each answer.
struct Relay {
    front: SocketAddr,
    back: SocketAddr,
    from_server: Arc<Mutex<Vec<Vec<u8>>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Relay {
    async fn start(server: SocketAddr) -> Relay {
        let front = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let back = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        back.connect(server).await.unwrap();
        let from_server: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let client: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
        let mut relay = Relay {
            front: front.local_addr().unwrap(),
            back: back.local_addr().unwrap(),
            from_server: from_server.clone(),
            tasks: Vec::new(),
        };
        {
            let (front, back, client) = (front.clone(), back.clone(), client.clone());
            relay.tasks.push(tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok((n, from)) = front.recv_from(&mut buf).await {
                    *client.lock().unwrap() = Some(from);
                    let _ = back.send(&buf[..n]).await;
                }
            }));
        }
        relay.tasks.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            while let Ok(n) = back.recv(&mut buf).await {
                from_server.lock().unwrap().push(buf[..n].to_vec());
                let to = *client.lock().unwrap();
                if let Some(to) = to {
                    let _ = front.send_to(&buf[..n], to).await;
                }
            }
        }));
        relay
    }

    /// Stops the relay and returns once its sockets are closed: the server's packets to
    /// its back address draw ICMP port unreachables from then on.
    async fn stop(self) {
        for t in self.tasks {
            t.abort();
            let _ = t.await;
        }
    }

    /// The last packet the server sent through the relay.
    fn last_from_server(&self) -> Vec<u8> {
        self.from_server.lock().unwrap().last().unwrap().clone()
    }
}

/// A message each way.
async fn exchange(server: &Association, client: &Association) {
    client.send(0, b"ping", true, 0).await.unwrap();
    let m = timeout(T, server.recv()).await.unwrap().unwrap().unwrap();
    assert_eq!(m.data, b"ping");
    server.send(0, b"pong", true, 0).await.unwrap();
    let m = timeout(T, client.recv()).await.unwrap().unwrap().unwrap();
    assert_eq!(m.data, b"pong");
}

/// A refusal quoting a packet of an association that is gone, from the same remote UDP
/// address and between the same SCTP ports as a live one, must not end the live one:
/// only the verification tag tells them apart. A refusal quoting the live one's packet
/// ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_ends_only_the_association_whose_tag_it_quotes() {
    let l = listen(7107, &SctpOptions::default()).await;
    let relay = Relay::start(l.local_addr()).await;
    let opts = SctpOptions {
        local_port: 7301,
        ..SctpOptions::default()
    };
    let stack = SctpStack::global();

    // The first association, then its end (an ABORT from the client).
    let c = stack.connect(relay.front, 7107, &opts).unwrap();
    let (s, c) = tokio::join!(timeout(T, l.accept()), timeout(T, c.into_future()));
    let (server1, remote) = s.unwrap().unwrap();
    let client1 = c.unwrap().unwrap();
    assert_eq!(remote, relay.back);
    exchange(&server1, &client1).await;
    let stale = relay.last_from_server();
    drop(client1);
    assert!(timeout(T, server1.recv()).await.unwrap().is_err());
    drop(server1);

    // The second: same client SCTP port, same remote UDP address at the server.
    let c = stack.connect(relay.front, 7107, &opts).unwrap();
    let (s, c) = tokio::join!(timeout(T, l.accept()), timeout(T, c.into_future()));
    let (server2, remote2) = s.unwrap().unwrap();
    let client2 = c.unwrap().unwrap();
    assert_eq!(remote2, remote);
    exchange(&server2, &client2).await;

    l.inject_refusal(remote, &stale);
    // A quote too short for the common header is dropped.
    l.inject_refusal(remote, &relay.last_from_server()[..11]);
    // usrsctp handled the ABORTs inside the calls; a message each way shows the
    // association still up.
    exchange(&server2, &client2).await;
    assert!(!server2.is_closed());

    let fresh = relay.last_from_server();
    assert_ne!(
        fresh[4..8],
        stale[4..8],
        "the two associations' tags differ"
    );
    let injected = Instant::now();
    l.inject_refusal(remote, &fresh);
    let (end, took) = end_of(&server2, injected).await;
    eprintln!("refusal quoting the live association's packet: ended after {took:?}: {end:?}");
    assert!(
        matches!(end, Err(Error::PeerGone(r)) if r == remote),
        "{end:?}"
    );
}

/// A shared server socket whose remotes include dead ones: each packet to a dead remote
/// draws an ICMP port unreachable, queued on the socket and made its pending error, which
/// the socket's next send takes as its own result whatever its destination. That send is
/// made again, so the live remote loses nothing: each message to it, sent right after a
/// packet to a dead one, arrives well before the retransmission timeout (1 s at least)
/// that a lost packet would wait for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_from_dead_remotes_cost_a_live_remote_nothing() {
    const DEAD: usize = 10;
    let l = listen(7108, &SctpOptions::default()).await;
    let stack = SctpStack::global();
    let opts = SctpOptions::default();
    let c = stack.connect(l.local_addr(), 7108, &opts).unwrap();
    let (s, c) = tokio::join!(timeout(T, l.accept()), timeout(T, c.into_future()));
    let (live_server, _) = s.unwrap().unwrap();
    let live_client = c.unwrap().unwrap();
    let mut dead = Vec::new();
    for _ in 0..DEAD {
        let relay = Relay::start(l.local_addr()).await;
        let c = stack.connect(relay.front, 7108, &opts).unwrap();
        let (s, c) = tokio::join!(timeout(T, l.accept()), timeout(T, c.into_future()));
        let (server, _) = s.unwrap().unwrap();
        // The client end stays open (no ABORT reaches the server): only the relay goes.
        dead.push((server, c.unwrap().unwrap(), relay));
    }
    let mut servers = Vec::new();
    for (server, client, relay) in dead {
        relay.stop().await;
        servers.push((server, client));
    }
    let mut slowest = Duration::ZERO;
    for (i, (server, _client)) in servers.iter().enumerate() {
        server.send(0, b"to a dead remote", true, 0).await.unwrap();
        let sent = Instant::now();
        live_server.send(0, &[i as u8], true, 0).await.unwrap();
        let m = timeout(T, live_client.recv())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(m.data, [i as u8]);
        slowest = slowest.max(sent.elapsed());
    }
    eprintln!("live remote beside {DEAD} refused ones: slowest message {slowest:?}");
    // A lost message would wait a retransmission timeout, 1 s at least (RTO.min).
    assert!(slowest < Duration::from_secs(1), "{slowest:?}");
    for (server, _client) in &servers {
        let (end, _) = end_of(server, Instant::now()).await;
        assert!(matches!(end, Err(Error::PeerGone(_))), "{end:?}");
    }
}
