//! Helpers shared by the usrsctp integration tests.

use std::time::{Duration, Instant};

use tokio::time::sleep;
use usrsctp::SctpStack;

/// Waits until the stack holds `want` resources (tasks and UDP readers end
/// asynchronously); gives up after 5 s and returns what it holds then.
pub(crate) async fn settle(stack: SctpStack, want: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let n = stack.live_sockets();
        if n == want || Instant::now() > deadline {
            return n;
        }
        sleep(Duration::from_millis(10)).await;
    }
}
