//! The server side of the workers: listens (taps or raw, TCP and/or SCTP), serves every
//! connection (a sink or an HTTP server) and answers the orchestrator's `stats` lines.

#![forbid(unsafe_code)]

mod listen;
mod secure;
mod serve;

pub(crate) use secure::QUIC_LINGER;

use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::protocol::{Impl, Listen, ServerSpec, ServerStats, STATS_WAIT};
use super::{runtime, say};
use crate::measure;

/// What a server has seen so far (shared by its accepting and serving tasks).
#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    closed: AtomicU64,
    bytes: AtomicU64,
    requests: AtomicU64,
}

/// A server worker: listens, says `PORT`, answers `stats` lines until `quit`.
pub(super) fn server_main(spec: ServerSpec) -> Result<(), String> {
    let rt = runtime()?;
    let counters = Arc::new(Counters::default());
    let (port, udp_port) = rt.block_on(start_server(&spec, counters.clone()))?;
    say(&format!("PORT {port} {udp_port}"))?;
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| format!("stdin: {e}"))?;
        let mut words = line.split_whitespace();
        match words.next() {
            Some("stats") => {
                let want_accepted: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                let want_closed: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                let deadline = Instant::now() + STATS_WAIT;
                let mut timed_out = false;
                while counters.accepted.load(Ordering::Acquire) < want_accepted
                    || counters.closed.load(Ordering::Acquire) < want_closed
                {
                    if Instant::now() > deadline {
                        timed_out = true;
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(500));
                }
                let (cpu, rss) = (measure::process_cpu(), measure::rss_kib());
                let error = [cpu.as_ref().err(), rss.as_ref().err()]
                    .into_iter()
                    .flatten()
                    .cloned()
                    .reduce(|a, b| format!("{a}; {b}"));
                let stats = ServerStats {
                    cpu: cpu.unwrap_or_default(),
                    rss_kib: rss.unwrap_or(0),
                    accepted: counters.accepted.load(Ordering::Acquire),
                    closed: counters.closed.load(Ordering::Acquire),
                    bytes: counters.bytes.load(Ordering::Acquire),
                    requests: counters.requests.load(Ordering::Acquire),
                    timed_out,
                    error,
                };
                let json = serde_json::to_string(&stats).map_err(|e| e.to_string())?;
                say(&format!("STATS {json}"))?;
            }
            Some("quit") => break,
            _ => {}
        }
    }
    rt.shutdown_timeout(Duration::from_millis(100));
    Ok(())
}

/// Starts listening (and accepting, in spawned tasks); returns the port (TCP port and
/// SCTP port) and the SCTP encapsulation UDP port (0 without SCTP).
async fn start_server(spec: &ServerSpec, counters: Arc<Counters>) -> Result<(u16, u16), String> {
    if let Some(secure) = &spec.secure {
        let port = secure::start_secure_server(spec.imp, spec.mode, secure, counters).await?;
        return Ok((port, 0));
    }
    if spec.dual && spec.listen != Listen::Tcp {
        return Err("dual-family servers listen on TCP only".into());
    }
    match spec.imp {
        Impl::Raw => listen::start_raw_server(spec, counters).await,
        Impl::Taps if spec.listen.includes_sctp() => {
            listen::start_taps_sctp_server(spec, counters).await
        }
        Impl::Taps => listen::start_taps_tcp_server(spec, counters).await,
    }
}
