//! The server side of the workers: listens (taps or raw, TCP and/or SCTP), serves every
//! connection (a sink or an HTTP server) and answers the orchestrator's `stats` lines.

#![forbid(unsafe_code)]

mod listen;
mod secure;
mod serve;

pub(crate) use secure::QUIC_LINGER;

use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::protocol::{Impl, Listen, ServerSpec, ServerStats, STATS_WAIT};
use super::{runtime, say};
use crate::measure;

/// What a server has seen so far (shared by its accepting and serving tasks), and the
/// `stats` thread waiting for counts: it is woken when they are reached rather than
/// polling on a timer, so its CPU in a measurement window does not grow with the
/// window's length (a slower client would otherwise pay for the server's polling).
#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    closed: AtomicU64,
    bytes: AtomicU64,
    requests: AtomicU64,
    /// The counts the waiting `stats` thread wants (0 = none: a count just made is at
    /// least 1) and the thread.
    want_accepted: AtomicU64,
    want_closed: AtomicU64,
    waiter: OnceLock<std::thread::Thread>,
}

impl Counters {
    /// One more connection accepted; wakes the `stats` thread if that was the count
    /// it waits for. An atomic add and a load (an unpark once per window).
    fn count_accepted(&self) {
        let now = self.accepted.fetch_add(1, Ordering::SeqCst) + 1;
        self.wake_if(now, &self.want_accepted);
    }

    /// One more connection closed; wakes as [`count_accepted`](Self::count_accepted).
    fn count_closed(&self) {
        let now = self.closed.fetch_add(1, Ordering::SeqCst) + 1;
        self.wake_if(now, &self.want_closed);
    }

    fn wake_if(&self, now: u64, want: &AtomicU64) {
        if now == want.load(Ordering::SeqCst) {
            if let Some(t) = self.waiter.get() {
                t.unpark();
            }
        }
    }

    /// Blocks the calling (`stats`) thread until `accepted` and `closed` reach the given
    /// counts or `deadline` passes; true if it timed out.
    fn wait_for(&self, accepted: u64, closed: u64, deadline: Instant) -> bool {
        let _ = self.waiter.set(std::thread::current());
        // SeqCst on both sides: either the counting task sees the wanted count or this
        // thread sees the count it reached (never neither, which would sleep to the
        // deadline).
        self.want_accepted.store(accepted, Ordering::SeqCst);
        self.want_closed.store(closed, Ordering::SeqCst);
        let reached = || {
            self.accepted.load(Ordering::SeqCst) >= accepted
                && self.closed.load(Ordering::SeqCst) >= closed
        };
        let mut timed_out = false;
        while !reached() {
            let now = Instant::now();
            if now >= deadline {
                timed_out = true;
                break;
            }
            // A count passed between the check and the park leaves the unpark token
            // set, so the park returns at once; a wake-up for one count while the other
            // is short only loops.
            std::thread::park_timeout(deadline - now);
        }
        self.want_accepted.store(0, Ordering::Release);
        self.want_closed.store(0, Ordering::Release);
        timed_out
    }
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
                let timed_out =
                    counters.wait_for(want_accepted, want_closed, Instant::now() + STATS_WAIT);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn counters() -> Arc<Counters> {
        Arc::new(Counters::default())
    }

    /// The `stats` wait ends when the counting tasks reach the wanted counts (woken, not
    /// at its deadline), counts reached before it began included; a count never reached
    /// ends it at the deadline, timed out.
    #[test]
    fn the_stats_wait_ends_when_the_counts_are_reached() {
        let c = counters();
        c.count_accepted();
        let counting = {
            let c = c.clone();
            std::thread::spawn(move || {
                for _ in 0..2 {
                    std::thread::sleep(Duration::from_millis(5));
                    c.count_accepted();
                }
                c.count_closed();
            })
        };
        let start = Instant::now();
        assert!(!c.wait_for(3, 1, start + Duration::from_secs(30)));
        assert!(start.elapsed() < Duration::from_secs(10), "woken at once");
        counting.join().unwrap();
        assert!(!c.wait_for(2, 1, Instant::now() + Duration::from_secs(30)));
        let start = Instant::now();
        assert!(c.wait_for(4, 0, start + Duration::from_millis(20)));
        assert!(start.elapsed() >= Duration::from_millis(20));
    }
}
