//! `end_all_associations` inside a running process, with both ends of an association in
//! it and data flowing while it runs: the `before_exit` hook runs first, every
//! association closes gracefully, the listener is closed, a second call finds nothing to
//! do. Nothing of it is installed before the first usrsctp socket. One test per process
//! (this file): the call ends every association of the process.

use std::future::IntoFuture;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio::time::timeout;
use usrsctp::{
    before_exit, end_all_associations, Association, Ended, SctpOptions, SctpStack, EXIT_GRACE,
};

const T: Duration = Duration::from_secs(20);

/// The server end, for the hook to look at.
static SERVER: OnceLock<Association> = OnceLock::new();
/// Whether the hook ran while the association was still open.
static HOOK_SAW_IT_OPEN: AtomicBool = AtomicBool::new(false);

fn hook() {
    if SERVER.get().is_some_and(|a| !a.is_closed()) {
        HOOK_SAW_IT_OPEN.store(true, Ordering::SeqCst);
    }
}

/// Names of this process's threads.
fn threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ends_every_association_gracefully_once() {
    before_exit(hook);
    let stack = SctpStack::global();
    assert!(
        !threads().iter().any(|n| n == "usrsctp-signal"),
        "nothing before the first socket: {:?}",
        threads()
    );
    let opts = SctpOptions::default();
    let l = stack
        .listen("127.0.0.1:0".parse().unwrap(), 7401, &opts)
        .unwrap();
    // The thread names itself once it runs.
    let deadline = Instant::now() + T;
    while !threads().iter().any(|n| n == "usrsctp-signal") {
        assert!(
            Instant::now() < deadline,
            "no signal thread: {:?}",
            threads()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let c = stack.connect(l.local_addr(), 7401, &opts).unwrap();
    let (s, c) = tokio::join!(timeout(T, l.accept()), timeout(T, c.into_future()));
    let (server, _) = s.unwrap().unwrap();
    let client = c.unwrap().unwrap();
    SERVER.set(server.clone()).unwrap();

    // Data keeps flowing (and the tasks keep calling into usrsctp) while the
    // associations are ended from another thread. Paced, so the send buffer never fills:
    // a message only partly handed over when the SHUTDOWN is asked for cannot be
    // completed, and usrsctp aborts its association instead.
    let sender = {
        let client = client.clone();
        tokio::spawn(async move {
            let mut sent = 0usize;
            while client.send(0, &[7u8; 1_000], true, 0).await.is_ok() {
                sent += 1_000;
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            sent
        })
    };
    let reader = {
        let server = server.clone();
        tokio::spawn(async move {
            let mut got = 0usize;
            loop {
                match server.recv().await {
                    Ok(Some(m)) => got += m.data.len(),
                    Ok(None) => return Ok(got),
                    Err(e) => return Err(e),
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;

    let started = Instant::now();
    let ended = tokio::task::spawn_blocking(|| end_all_associations(EXIT_GRACE))
        .await
        .unwrap();
    let took = started.elapsed();
    eprintln!("end_all_associations: {ended:?} in {took:?}");
    assert!(
        HOOK_SAW_IT_OPEN.load(Ordering::SeqCst),
        "the hook runs first"
    );
    assert_eq!(
        ended,
        Ended {
            closed: 2,
            aborted: 0
        },
        "both ends shut down gracefully"
    );
    assert!(took < EXIT_GRACE, "{took:?}");

    let sent = timeout(T, sender).await.unwrap().unwrap();
    let got = timeout(T, reader).await.unwrap().unwrap();
    assert_eq!(
        got.as_ref().ok(),
        Some(&sent),
        "every byte sent arrived: {got:?}"
    );
    assert!(matches!(timeout(T, client.recv()).await.unwrap(), Ok(None)));
    assert!(
        timeout(T, l.accept()).await.unwrap().is_err(),
        "listener closed"
    );

    let again = Instant::now();
    assert_eq!(end_all_associations(EXIT_GRACE), Ended::default());
    // Nothing left to end: no grace period waited.
    assert!(again.elapsed() < EXIT_GRACE, "{:?}", again.elapsed());
}
