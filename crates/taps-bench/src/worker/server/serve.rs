//! What a server does with a connection: sink everything (TCP, taps, raw SCTP) or answer
//! HTTP/1.0 requests.

#![forbid(unsafe_code)]

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use usrsctp::Association;

use super::Counters;
use crate::worker::protocol::{ServeMode, RAW_END_PPID};
use crate::worker::CHUNK;

/// Largest HTTP object the server hands out.
const MAX_OBJECT: usize = 16 << 20;

/// Serves one connection as `mode` says, then counts it as closed.
pub(super) async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    s: S,
    mode: ServeMode,
    counters: Arc<Counters>,
) {
    match mode {
        ServeMode::Sink => sink(s, &counters).await,
        ServeMode::Http => http_serve(s, &counters).await,
    }
    counters.count_closed();
}

/// Reads and drops everything until end of stream, then ends its own side.
async fn sink<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, counters: &Counters) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                counters.bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
    }
    let _ = s.shutdown().await;
}

/// The raw SCTP sink: reads messages until the peer's end-of-data message on a stream,
/// answers it with its own on that stream (the flow counts as closed; the raw baseline
/// has one flow per association, on stream 0), then holds the association until the peer
/// shuts it down or aborts it (dropping it earlier would abort it, and an ABORT can
/// overtake queued data).
pub(super) async fn raw_sctp_sink(a: Association, counters: Arc<Counters>) {
    let mut ended = 0u64;
    loop {
        match a.recv().await {
            Ok(Some(m)) if m.ppid == RAW_END_PPID => {
                let _ = a.send(m.stream, &[0], true, RAW_END_PPID).await;
                counters.count_closed();
                ended += 1;
            }
            Ok(Some(m)) => {
                counters
                    .bytes
                    .fetch_add(m.data.len() as u64, Ordering::Relaxed);
            }
            Ok(None) | Err(_) => break,
        }
    }
    if ended == 0 {
        counters.count_closed();
    }
}

/// A minimal HTTP/1.0 server: `GET /<n>` gets `n` bytes; `Connection: keep-alive`
/// keeps the connection for the next request.
async fn http_serve<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, counters: &Counters) {
    static BODY: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let body = BODY.get_or_init(|| vec![b'x'; MAX_OBJECT]);
    let mut buf = Vec::with_capacity(1024);
    loop {
        let Some(head_len) = read_head(&mut s, &mut buf).await else {
            break;
        };
        let head = String::from_utf8_lossy(&buf[..head_len]).into_owned();
        buf.drain(..head_len);
        let size = head
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|p| p.trim_start_matches('/').parse::<usize>().ok());
        let keep_alive = head.to_ascii_lowercase().contains("connection: keep-alive");
        let response = match size {
            Some(n) if n <= MAX_OBJECT => {
                let mut r = format!(
                    "HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {n}\r\n{}\r\n",
                    if keep_alive { "Connection: keep-alive\r\n" } else { "" }
                )
                .into_bytes();
                r.extend_from_slice(&body[..n]);
                r
            }
            _ => b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
        };
        if s.write_all(&response).await.is_err() {
            break;
        }
        counters.requests.fetch_add(1, Ordering::Relaxed);
        if !keep_alive {
            break;
        }
    }
    let _ = s.shutdown().await;
}

/// Reads until `buf` holds a full header block; returns its length (with the blank
/// line), or None at end of stream.
async fn read_head<S: AsyncRead + Unpin>(s: &mut S, buf: &mut Vec<u8>) -> Option<usize> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some(i + 4);
        }
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
    }
}
