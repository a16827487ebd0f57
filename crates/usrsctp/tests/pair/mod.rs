//! One association on loopback for the tests that measure what it sends.

use std::future::IntoFuture;
use std::time::Duration;

use tokio::time::timeout;
use usrsctp::{Association, SctpListener, SctpOptions, SctpStack};

/// A listener on 127.0.0.1 (SCTP port 5001) and one association to it, both ends with
/// `opts`: `(listener, server end, client end)`. Panics if it does not come up in 30 s.
pub(crate) async fn connected_pair(
    stack: &SctpStack,
    opts: &SctpOptions,
) -> (SctpListener, Association, Association) {
    const T: Duration = Duration::from_secs(30);
    let l = stack
        .listen("127.0.0.1:0".parse().unwrap(), 5001, opts)
        .unwrap();
    let c = stack.connect(l.local_addr(), 5001, opts).unwrap();
    let (a, b) = tokio::join!(timeout(T, l.accept()), timeout(T, c.into_future()));
    let server = a.unwrap().unwrap().0;
    let client = b.unwrap().unwrap();
    (l, server, client)
}
