//! The client of experiment 3: sequential connections, each closed at once.

#![forbid(unsafe_code)]

use std::time::Instant;

use super::connector::Connector;
use super::stall::StallWatch;
use super::{note_failure, ready, send_result, Window};
use crate::measure;
use crate::worker::protocol::{ClientKind, ClientResult};

/// Experiment 3's client: see [`crate::worker::ClientSpec::Handshakes`].
pub(super) async fn handshake_client(
    kind: ClientKind,
    port: u16,
    udp_port: u16,
    count: usize,
    hit_percent: u32,
) -> Result<(), String> {
    let connector = Connector::new(kind, port, udp_port).await?;
    ready().await?;
    let mut r = ClientResult::default();
    // Started before the window opens, stopped after it closes: the thread's creation
    // and join are outside what is measured.
    let watch = StallWatch::start("handshakes");
    let w = Window::open();
    for i in 0..count {
        let t = Instant::now();
        match connector.connect(measure::is_hit(i, hit_percent)).await {
            Ok(c) => {
                r.delays_us.push(t.elapsed().as_secs_f64() * 1e6);
                r.attempts += c.attempts;
                r.sctp += usize::from(c.sctp);
                r.ok += 1;
                drop(c.flow);
            }
            Err(e) => note_failure(&mut r, e),
        }
        watch.progress();
    }
    w.close(&mut r);
    drop(watch);
    send_result(&r).await
}
