//! Multihoming errors and single-path behaviour, in a process where the CMT sysctl stays
//! off: one path listed without the shim's help, NR-SACK only when asked, CMT and pinned
//! sends refused with errors that say what to do, and (in a build without the shim, e.g.
//! `TAPS_NO_MULTIHOME=1`) the "needs usrsctp's source headers" error; nothing leaks. Real
//! usrsctp, loopback.

mod common;

use std::future::IntoFuture;
use std::time::Duration;

use tokio::time::timeout;
use usrsctp::{Association, CmtMode, Error, SctpOptions, SctpPath, SctpStack};

const T: Duration = Duration::from_secs(20);

async fn pair(port: u16, opts: &SctpOptions) -> (Association, Association, usrsctp::SctpListener) {
    let stack = SctpStack::global();
    let l = stack
        .listen("127.0.0.1:0".parse().unwrap(), port, opts)
        .unwrap();
    let c = stack.connect(l.local_addr(), port, opts).unwrap();
    let (a, b) = tokio::join!(timeout(T, l.accept()), timeout(T, c.into_future()));
    let (server, _) = a.unwrap().unwrap();
    (b.unwrap().unwrap(), server, l)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_path_and_clear_errors() {
    // Some(Off) is accepted although CMT is off process-wide (that is what it asks for).
    let opts = SctpOptions {
        cmt: Some(CmtMode::Off),
        ..Default::default()
    };
    let (client, server, l) = pair(5111, &opts).await;
    assert!(!client.nr_sack().unwrap() && !server.nr_sack().unwrap());
    let paths = client.paths().unwrap();
    assert_eq!(paths.len(), 1);
    assert!(paths[0].primary && paths[0].state == usrsctp::PathState::Active);
    assert_eq!(server.paths().unwrap().len(), 1);

    let err = client.set_cmt(CmtMode::Base).unwrap_err();
    assert!(err.to_string().contains("set_cmt_global"), "{err}");
    let p = paths[0].id;
    let err = client.send_on_path(p, 0, b"x", true, 0).await.unwrap_err();
    assert!(err.to_string().contains("set_cmt_global"), "{err}");
    // A CMT mode asked for in the options fails the same way, at connect.
    let cmt = SctpOptions {
        cmt: Some(CmtMode::Base),
        ..Default::default()
    };
    let Err(err) = SctpStack::global().connect("127.0.0.1:9".parse().unwrap(), 5111, &cmt) else {
        panic!("a CMT mode was accepted with CMT off process-wide");
    };
    assert!(err.to_string().contains("set_cmt_global"), "{err}");

    // Adding a path: works with the shim, else the clear error; the association is unharmed.
    let extra = SctpPath::open(
        "127.0.0.1:0".parse().unwrap(),
        "127.0.0.1:9".parse().unwrap(),
    )
    .unwrap();
    match usrsctp::multihome_available() {
        Ok(()) => {
            let pp = client.add_peer_path(extra).unwrap();
            assert_eq!(client.paths().unwrap().len(), 2);
            drop(pp);
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("scripts/deps.sh"), "{msg}");
            let err = client.add_peer_path(extra).unwrap_err();
            assert!(matches!(err, Error::MultihomeUnavailable(_)));
            assert_eq!(err.to_string(), msg);
            eprintln!("no shim in this build: {msg}");
        }
    }
    client.send(0, b"ok", true, 0).await.unwrap();
    let m = timeout(T, server.recv()).await.unwrap().unwrap().unwrap();
    assert_eq!(m.data, b"ok");

    // Nothing leaks: paths, associations and the listener give back every socket, conn
    // address and reader task.
    drop((client, server, l));
    assert_eq!(common::settle(SctpStack::global(), 0).await, 0);
}
