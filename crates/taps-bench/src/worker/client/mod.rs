//! The client side of the workers: one client per trial does its untimed setup, says
//! `READY`, runs the measured window on `go`, says `RESULT` and tears down on `end`.

#![forbid(unsafe_code)]

mod connect;
mod connector;
mod flow;
mod h3;
mod h3_raw;
mod handshakes;
mod http;
mod secure;
mod stall;
mod transfer;

use std::io::BufRead;
use std::time::{Duration, Instant};

use super::protocol::{ClientResult, ClientSpec};
use super::{phases, runtime, say};
use crate::measure::{self, Cpu};
use http::Load;

/// A client worker: runs the task of `spec` (see the module docs for the lines it says
/// and waits for).
pub(super) fn client_main(spec: ClientSpec) -> Result<(), String> {
    let rt = runtime()?;
    let result = rt.block_on(async move {
        match spec {
            ClientSpec::Connect { target, flows } => connect::connect_client(target, flows).await,
            ClientSpec::Transfer {
                target,
                flows,
                bytes,
            } => transfer::transfer_client(target, flows, bytes).await,
            ClientSpec::Handshakes {
                client,
                port,
                udp_port,
                count,
                hit_percent,
            } => handshakes::handshake_client(client, port, udp_port, count, hit_percent).await,
            ClientSpec::Secure {
                client,
                port,
                count,
                rate,
                object,
                hit_percent,
                pki,
            } => {
                let load = secure::Load {
                    count,
                    rate,
                    object,
                    hit_percent,
                };
                secure::secure_client(client, port, load, pki).await
            }
            ClientSpec::Http {
                client,
                port,
                udp_port,
                rate,
                duration_ms,
                object,
                calls_per_conn,
                hit_percent,
                seed,
            } => {
                let load = Load {
                    rate,
                    duration: Duration::from_millis(duration_ms),
                    object,
                    calls_per_conn: calls_per_conn.max(1),
                    seed,
                };
                http::http_client(client, port, udp_port, hit_percent, load).await
            }
            ClientSpec::H3(load) => h3::h3_client(load).await,
        }
    });
    rt.shutdown_timeout(Duration::from_millis(100));
    result
}

/// Waits for a line from the orchestrator; `false` at end of input.
fn wait_for(word: &str) -> bool {
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.trim() == word => return true,
            Some(Ok(_)) => continue,
            _ => return false,
        }
    }
}

/// Prints READY and blocks (outside the runtime's workers) until `go`.
async fn ready() -> Result<(), String> {
    say("READY")?;
    let go = tokio::task::spawn_blocking(|| wait_for("go"))
        .await
        .map_err(|e| e.to_string())?;
    if go {
        Ok(())
    } else {
        Err("the orchestrator went away before `go`".into())
    }
}

/// Prints the result and blocks until `end` (teardown happens after).
async fn send_result(result: &ClientResult) -> Result<(), String> {
    let json = serde_json::to_string(result).map_err(|e| e.to_string())?;
    say(&format!("RESULT {json}"))?;
    tokio::task::spawn_blocking(|| wait_for("end"))
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The measured window: what the client's process had used when it opened (or why
/// that could not be read).
struct Window {
    cpu: Result<Cpu, String>,
    rss: Result<u64, String>,
    anon: Result<u64, String>,
    t0: Instant,
}

impl Window {
    /// Opens the window now (records [`phases::WINDOW_OPEN`]).
    fn open() -> Window {
        phases::mark(phases::WINDOW_OPEN);
        Window {
            rss: measure::rss_kib(),
            anon: measure::anon_kib(),
            cpu: measure::process_cpu(),
            t0: Instant::now(),
        }
    }

    /// Closes the window (records [`phases::WINDOW_CLOSE`]): its CPU, RSS and wall time
    /// into `r`, with the phases recorded so far; a figure that could not be read is
    /// [`ClientResult::measure_error`], never a zero.
    fn close(&self, r: &mut ClientResult) {
        r.elapsed_us = self.t0.elapsed().as_micros() as u64;
        let cpu = measure::process_cpu();
        let (rss, anon) = (measure::rss_kib(), measure::anon_kib());
        phases::mark(phases::WINDOW_CLOSE);
        let mut errors = Vec::new();
        let mut get = |v: &Result<u64, String>| match v {
            Ok(v) => *v,
            Err(e) => {
                errors.push(e.clone());
                0
            }
        };
        r.rss_before_kib = get(&self.rss);
        r.rss_after_kib = get(&rss);
        r.anon_before_kib = get(&self.anon);
        r.anon_after_kib = get(&anon);
        match (&self.cpu, &cpu) {
            (Ok(before), Ok(after)) => r.cpu = after.since(before),
            (Err(e), _) | (_, Err(e)) => errors.push(e.clone()),
        }
        if !errors.is_empty() {
            r.measure_error = Some(errors.join("; "));
        }
        r.phases = phases::recorded();
    }
}

/// Counts a failure; the first one's message is kept.
fn note_failure(r: &mut ClientResult, e: impl std::fmt::Display) {
    r.failed += 1;
    if r.first_error.is_none() {
        r.first_error = Some(e.to_string());
    }
}
