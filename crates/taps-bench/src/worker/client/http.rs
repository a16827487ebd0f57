//! The client of experiment 4: an HTTP/1.0 load generator, connections arriving as a
//! Poisson process.

#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::connector::Connector;
use super::flow::Flow;
use super::{note_failure, ready, send_result, Window};
use crate::measure::{self, Rng};
use crate::worker::protocol::{ClientKind, ClientResult};
use crate::worker::CHUNK;

/// The load an HTTP client offers.
pub(super) struct Load {
    /// Requests per second.
    pub(super) rate: f64,
    /// Length of the load period.
    pub(super) duration: Duration,
    /// Object size, bytes.
    pub(super) object: usize,
    /// Requests per connection (keep-alive), at least 1.
    pub(super) calls_per_conn: usize,
    /// PRNG seed of the arrival process.
    pub(super) seed: u64,
}

/// One connection of the load: `calls` keep-alive requests. Returns (bytes, requests).
pub(super) async fn http_session<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    object: usize,
    calls: usize,
) -> std::io::Result<(u64, u64)> {
    let mut bytes = 0;
    let mut buf = Vec::with_capacity(object + 512);
    let mut chunk = vec![0u8; CHUNK];
    for _ in 0..calls {
        let req =
            format!("GET /{object} HTTP/1.0\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n");
        s.write_all(req.as_bytes()).await?;
        buf.clear();
        let (head, length) = loop {
            let n = s.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let text = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                let length = text
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                break (i + 4, length);
            }
        };
        let mut have = buf.len() - head;
        while have < length {
            let n = s.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            have += n;
        }
        bytes += length as u64;
    }
    s.shutdown().await?;
    Ok((bytes, calls as u64))
}

/// Experiment 4's client: see [`crate::worker::ClientSpec::Http`].
pub(super) async fn http_client(
    kind: ClientKind,
    port: u16,
    udp_port: u16,
    hit_percent: u32,
    load: Load,
) -> Result<(), String> {
    if kind == ClientKind::RawSctp {
        return Err("the HTTP load generator has no raw SCTP client".into());
    }
    let connector = Arc::new(Connector::new(kind, port, udp_port).await?);
    let conn_rate = load.rate / load.calls_per_conn as f64;
    let mut rng = Rng::new(load.seed);
    let mut arrivals = Vec::new();
    let mut at = 0.0;
    loop {
        at += rng.exponential(1.0 / conn_rate);
        if at >= load.duration.as_secs_f64() {
            break;
        }
        arrivals.push(Duration::from_secs_f64(at));
    }
    ready().await?;
    let mut r = ClientResult::default();
    let w = Window::open();
    let start = tokio::time::Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for (i, offset) in arrivals.into_iter().enumerate() {
        tokio::time::sleep_until(start + offset).await;
        let connector = connector.clone();
        let (object, calls) = (load.object, load.calls_per_conn);
        let hit = measure::is_hit(i, hit_percent);
        set.spawn(async move {
            let t = Instant::now();
            let c = connector.connect(hit).await?;
            let delay = t.elapsed();
            let moved = match c.flow {
                Some(Flow::Taps(conn)) => http_session(conn, object, calls).await,
                Some(Flow::RawTcp(s)) => http_session(s, object, calls).await,
                Some(Flow::RawSctp(_)) | None => Ok((0, 0)),
            }
            .map_err(|e| e.to_string())?;
            Ok::<_, String>((delay, c.attempts, c.sctp, moved))
        });
    }
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(Ok((delay, attempts, sctp, (bytes, requests)))) => {
                r.ok += 1;
                r.delays_us.push(delay.as_secs_f64() * 1e6);
                r.attempts += attempts;
                r.sctp += usize::from(sctp);
                r.bytes += bytes;
                r.requests += requests;
            }
            Ok(Err(e)) => note_failure(&mut r, e),
            Err(e) => note_failure(&mut r, e),
        }
    }
    w.close(&mut r);
    send_result(&r).await
}
