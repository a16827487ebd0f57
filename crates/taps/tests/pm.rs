//! The host-wide policy manager: a real daemon on a real Unix socket (in this process on
//! a thread of its own, or in a child process that is killed), real contexts racing real
//! loopback sockets, and child processes (this test binary run again) writing at the same
//! time as threads of this one.

use std::net::{SocketAddr, TcpListener as StdListener};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use taps::pm::{Daemon, DaemonConfig, DaemonHandle, PolicyManager};
use taps::taps_core::policy::{History, OutcomeKey};
use taps::taps_core::properties::Protocol;
use taps::taps_core::{Security, Stack};
use taps::{Context, Preconnection, RemoteEndpoint, TransportProperties};
use taps_testkit::{free_port, Blackhole, DnsServer};

/// A daemon on a thread with its own runtime; stopped (and joined) when dropped.
struct TestDaemon {
    socket: PathBuf,
    handle: DaemonHandle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl TestDaemon {
    fn start(configure: impl FnOnce(&mut DaemonConfig)) -> TestDaemon {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("pm").join("pm.sock");
        let mut config = DaemonConfig::new(&socket);
        configure(&mut config);
        let daemon = Daemon::bind(config).unwrap();
        let handle = daemon.handle();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(daemon.run(async {
                let _ = stopped.await;
            }))
            .unwrap();
        });
        TestDaemon {
            socket,
            handle,
            stop: Some(stop),
            thread: Some(thread),
            _dir: dir,
        }
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        let _ = self.thread.take().unwrap().join();
    }
}

/// A context on `socket` (literal addresses and localhost only: the DNS server answers
/// nothing else).
fn context(dns: &DnsServer, socket: &Path) -> Context {
    Context::builder()
        .name_servers(vec![dns.addr()])
        .policy_manager(PolicyManager::Socket(socket.into()))
        .build()
        .unwrap()
}

fn tcp() -> TransportProperties {
    TransportProperties::new().protocols(taps::Preference::Require, [Protocol::Tcp])
}

/// Races `n` connections to a port nobody listens on: each fails with "refused".
async fn refused_races(ctx: &Context, port: u16, n: usize) {
    let pre = Preconnection::new(ctx, tcp().compile().unwrap())
        .remote(RemoteEndpoint::new("127.0.0.1", port));
    for _ in 0..n {
        assert!(pre.initiate().await.is_err());
    }
}

fn refused_key(port: u16) -> OutcomeKey {
    OutcomeKey {
        interface: None,
        endpoint: Arc::from(format!("127.0.0.1:{port}")),
        stack: Stack::new(Protocol::Tcp, Security::None),
        remote: SocketAddr::from(([127, 0, 0, 1], port)),
    }
}

/// The daemon's count of failures in a row for `key`.
fn failures(handle: &DaemonHandle, key: &OutcomeKey) -> u32 {
    handle.with_cib(|cib| {
        cib.outcomes()
            .find(|(k, _)| *k == key)
            .map_or(0, |(_, o)| o.failures)
    })
}

/// Polls `f` every 10 ms for up to 5 s.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// This test binary run again as a child, running the ignored test `name` with `env`.
fn child(name: &str, env: &[(&str, String)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        name,
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    // Stdin piped: a child daemon reads it to the end, so when this process dies,
    // however it dies, the pipe closes and the daemon exits instead of living on.
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Child: `RACES` refused races to `PORT` through the daemon at `TAPS_PM_TEST_SOCKET`,
/// then a flush. Does nothing when run directly.
#[test]
#[ignore = "run as a child process by concurrent_writers_lose_no_update"]
fn child_writer() {
    let Ok(socket) = std::env::var("TAPS_PM_TEST_SOCKET") else {
        return;
    };
    let port: u16 = std::env::var("PORT").unwrap().parse().unwrap();
    let races: usize = std::env::var("RACES").unwrap().parse().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let dns = DnsServer::start("test.", &[]);
        let ctx = context(&dns, Path::new(&socket));
        assert!(ctx.policy_manager_stats().unwrap().connected);
        refused_races(&ctx, port, races).await;
        assert!(ctx.flush_policy_manager(Duration::from_secs(5)).await);
        let stats = ctx.policy_manager_stats().unwrap();
        assert_eq!((stats.sent, stats.dropped), (races as u64, 0));
    });
}

/// In a child: exits when the parent test process goes (its stdin reaches the end).
fn exit_with_parent() {
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(1);
    });
}

/// Child: a daemon on `TAPS_PM_TEST_SOCKET` until killed (or the parent goes).
#[test]
#[ignore = "run as a child process by daemon_killed_mid_run_breaks_nothing"]
fn child_daemon() {
    let Ok(socket) = std::env::var("TAPS_PM_TEST_SOCKET") else {
        return;
    };
    exit_with_parent();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let daemon = Daemon::bind(DaemonConfig::new(socket)).unwrap();
    println!("ready");
    rt.block_on(daemon.run(std::future::pending())).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_lose_no_update() {
    const RACES: usize = 60;
    const THREADS: usize = 3;
    const CHILDREN: usize = 2;
    let daemon = TestDaemon::start(|_| {});
    let port = free_port();
    let env = [
        ("TAPS_PM_TEST_SOCKET", daemon.socket.display().to_string()),
        ("PORT", port.to_string()),
        ("RACES", RACES.to_string()),
    ];
    let children: Vec<Child> = (0..CHILDREN).map(|_| child("child_writer", &env)).collect();
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let socket = daemon.socket.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let dns = DnsServer::start("test.", &[]);
                    let ctx = context(&dns, &socket);
                    refused_races(&ctx, port, RACES).await;
                    assert!(ctx.flush_policy_manager(Duration::from_secs(5)).await);
                    ctx.policy_manager_stats().unwrap()
                })
            })
        })
        .collect();
    for t in threads {
        let stats = t.join().unwrap();
        assert_eq!((stats.sent, stats.dropped), (RACES as u64, 0), "{stats:?}");
    }
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "child writer failed: {:?}",
            out.status
        );
    }
    // Every race of every writer counted, none lost: one failure in a row each.
    let total = ((THREADS + CHILDREN) * RACES) as u32;
    assert_eq!(failures(&daemon.handle, &refused_key(port)), total);
    assert_eq!(daemon.handle.stats().updates, u64::from(total));
    assert_eq!(daemon.handle.stats().clients, (THREADS + CHILDREN) as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outcomes_reach_the_other_programs() {
    let daemon = TestDaemon::start(|_| {});
    let dns = DnsServer::start("test.", &[]);
    let v6 = Blackhole::v6().unwrap();
    let port = v6.addr().port();
    let _v4 = StdListener::bind(("127.0.0.1", port)).unwrap();
    let props = tcp()
        .attempt_delay(Duration::from_millis(100))
        .timeout(Duration::from_millis(400))
        .compile()
        .unwrap();
    let early = context(&dns, &daemon.socket);
    let first = context(&dns, &daemon.socket);
    // First contact: ::1 hangs, 127.0.0.1 wins after the attempt delay.
    let pre =
        Preconnection::new(&first, props.clone()).remote(RemoteEndpoint::new("localhost", port));
    let conn = pre.initiate().await.unwrap();
    assert_eq!(conn.info().race.as_ref().unwrap().attempts.len(), 2);
    assert!(first.flush_policy_manager(Duration::from_secs(2)).await);
    let key = OutcomeKey {
        interface: None,
        endpoint: Arc::from(format!("localhost:{port}")),
        stack: Stack::new(Protocol::Tcp, Security::None),
        remote: SocketAddr::from(([127, 0, 0, 1], port)),
    };
    let now = Instant::now();
    assert!(daemon
        .handle
        .with_cib(|cib| matches!(cib.history(&key, now), History::Succeeded { .. })));
    // A context that was already running hears of it; one built later reads it in the
    // snapshot. Either one's first race skips the dead address.
    eventually("the update to reach the running context", || {
        early.policy_manager_stats().unwrap().received == 1
    });
    let late = context(&dns, &daemon.socket);
    for ctx in [&early, &late] {
        let pre =
            Preconnection::new(ctx, props.clone()).remote(RemoteEndpoint::new("localhost", port));
        let conn = pre.initiate().await.unwrap();
        let report = conn.info().race.clone().unwrap();
        assert_eq!(report.attempts.len(), 1, "{report:?}");
        assert!(report.attempts[0].candidate.remote.is_ipv4());
    }
    // The sender is not sent its own update back.
    assert_eq!(first.policy_manager_stats().unwrap().received, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_killed_mid_run_breaks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("pm").join("pm.sock");
    let mut daemon = child(
        "child_daemon",
        &[("TAPS_PM_TEST_SOCKET", socket.display().to_string())],
    );
    eventually("the child daemon to listen", || {
        assert!(
            daemon.try_wait().unwrap().is_none(),
            "the child daemon exited"
        );
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    let dns = DnsServer::start("test.", &[]);
    let ctx = context(&dns, &socket);
    assert!(ctx.policy_manager_stats().unwrap().connected);
    let port = free_port();
    refused_races(&ctx, port, 10).await;
    assert!(ctx.flush_policy_manager(Duration::from_secs(2)).await);
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    // Races go on (the outcomes stay in this context's CIB) and nothing waits.
    let started = Instant::now();
    refused_races(&ctx, port, 10).await;
    let listener = StdListener::bind("127.0.0.1:0").unwrap();
    let pre = Preconnection::new(&ctx, tcp().compile().unwrap()).remote(RemoteEndpoint::new(
        "127.0.0.1",
        listener.local_addr().unwrap().port(),
    ));
    pre.initiate().await.unwrap();
    eventually("the context to notice", || {
        !ctx.policy_manager_stats().unwrap().connected
    });
    assert!(!ctx.flush_policy_manager(Duration::from_secs(10)).await);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let now = Instant::now();
    assert!(matches!(
        ctx.cib_history(&refused_key(port), now),
        History::Failed { .. }
    ));
    // The socket file is left behind; a new context finds nobody there and goes alone.
    assert!(socket.exists());
    let after = context(&dns, &socket);
    assert_eq!(after.policy_manager_stats(), None);
    refused_races(&after, port, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_daemon_a_context_goes_alone_without_waiting() {
    let dns = DnsServer::start("test.", &[]);
    let dir = tempfile::tempdir().unwrap();
    // No socket at all: one failed connect, no link.
    let ctx = context(&dns, &dir.path().join("missing.sock"));
    assert_eq!(ctx.policy_manager_stats(), None);
    let started = Instant::now();
    let limit = Duration::from_secs(10);
    assert!(!ctx.flush_policy_manager(limit).await);
    // Gave up at once, not at the limit.
    assert!(started.elapsed() < limit, "{:?}", started.elapsed());
    refused_races(&ctx, free_port(), 3).await;
    assert_eq!(ctx.cib_len(), 1);
    // Something listening that never says hello: the build gives up after its budget.
    let silent_path = dir.path().join("silent.sock");
    let _silent = std::os::unix::net::UnixListener::bind(&silent_path).unwrap();
    let started = Instant::now();
    let ctx = context(&dns, &silent_path);
    assert_eq!(ctx.policy_manager_stats(), None);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // Off means off, whatever the environment says.
    let off = Context::builder()
        .policy_manager(PolicyManager::Off)
        .build()
        .unwrap();
    assert_eq!(off.policy_manager_stats(), None);
}

#[test]
fn socket_is_owner_only_and_foreign_directories_are_refused() {
    let daemon = TestDaemon::start(|_| {});
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&daemon.socket), 0o600);
    assert_eq!(mode(daemon.socket.parent().unwrap()), 0o700);
    // A second daemon on the same socket is refused, the first one untouched.
    let err = Daemon::bind(DaemonConfig::new(&daemon.socket))
        .err()
        .unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse, "{err}");
    assert!(std::os::unix::net::UnixStream::connect(&daemon.socket).is_ok());
    // A directory others can enter is refused.
    let dir = tempfile::tempdir().unwrap();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = Daemon::bind(DaemonConfig::new(open.join("pm.sock")))
        .err()
        .unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("lets others in"), "{err}");
    // A directory owned by someone else is refused (root can make one to show it).
    let theirs = dir.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
    if std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).is_ok() {
        let err = Daemon::bind(DaemonConfig::new(theirs.join("pm.sock")))
            .err()
            .unwrap();
        assert!(err.to_string().contains("owned by uid 65534"), "{err}");
    } else {
        eprintln!("SKIPPED part: cannot chown as this user (needs root)");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pib_directory_changes_reach_the_clients() {
    let pib = tempfile::tempdir().unwrap();
    let dir = pib.path().to_path_buf();
    let daemon = TestDaemon::start(|c| {
        c.pib_dir = Some(dir);
        c.pib_poll = Duration::from_millis(50);
    });
    let dns = DnsServer::start("test.", &[]);
    let ctx = context(&dns, &daemon.socket);
    let builtin = ctx.pib().profiles().len();
    // A context with a PIB directory of its own keeps it.
    let own = tempfile::tempdir().unwrap();
    let mine = Context::builder()
        .pib_dir(own.path())
        .policy_manager(PolicyManager::Socket(daemon.socket.clone()))
        .build()
        .unwrap();
    std::fs::write(
        pib.path().join("tcp_first.profile"),
        r#"{"uid": "tcp_first", "priority": 1, "match": {},
            "properties": {"transport": {"value": "TCP", "precedence": 1, "score": 5}}}"#,
    )
    .unwrap();
    eventually("the PIB reload", || {
        ctx.pib().profiles().len() == builtin + 1
    });
    assert_eq!(daemon.handle.stats().pib_reloads, 1);
    assert_eq!(mine.pib().profiles().len(), builtin);
    // A broken file is not served: clients keep the last good PIB.
    std::fs::write(pib.path().join("broken.profile"), "{").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(daemon.handle.stats().pib_reloads, 1);
    assert_eq!(ctx.pib().profiles().len(), builtin + 1);
}
