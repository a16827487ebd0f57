//! What a connection's futures weigh. A program that spawns a task per connection pays a
//! future's full size per task (and copies it when spawning), whatever state it is in:
//! the race's state is boxed for the race's duration, and `close` keeps only the
//! transport, so neither makes every caller's task kilobytes larger. Real sockets on
//! loopback; the bounds leave room for growth but catch a big inline state coming back.

use std::net::TcpListener as StdListener;

use taps::taps_core::properties::Protocol;
use taps::{Context, Preconnection, RemoteEndpoint, TransportProperties};

/// Above this, `initiate`'s race state is inline again (it was 3.5 KB inline).
const INITIATE_MAX: usize = 1024;
/// Above this, `close` holds the whole connection again (it was 2 KB).
const CLOSE_MAX: usize = 512;

#[tokio::test]
async fn initiate_and_close_futures_stay_small() {
    let ctx = Context::builder().build().unwrap();
    let server = StdListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let props = TransportProperties::new()
        .protocols(taps::Preference::Require, [Protocol::Tcp])
        .compile()
        .unwrap();
    let pre = Preconnection::new(&ctx, props).remote(RemoteEndpoint::new("127.0.0.1", port));
    let initiate = pre.initiate();
    let initiate_size = std::mem::size_of_val(&initiate);
    let conn = initiate.await.unwrap();
    let close = conn.close();
    let close_size = std::mem::size_of_val(&close);
    close.await.unwrap();
    assert!(
        initiate_size <= INITIATE_MAX,
        "initiate's future is {initiate_size} bytes (bound {INITIATE_MAX})"
    );
    assert!(
        close_size <= CLOSE_MAX,
        "close's future is {close_size} bytes (bound {CLOSE_MAX})"
    );
}
