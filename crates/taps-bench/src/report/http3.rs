//! The HTTP/3 experiment's section of the report: client CPU per request of every
//! variant, in both shapes of work, and its ratio to the baseline.

#![forbid(unsafe_code)]

use std::fmt::Write;

use crate::experiments::{human_bytes, H3Results};
use crate::Results;

/// The section (nothing when the experiment was not planned).
pub(super) fn http3_section(s: &mut String, r: &Results) {
    let Some(h) = &r.http3 else { return };
    let _ = writeln!(
        s,
        "## 4b. HTTP client CPU per request: HTTP/3, raced, HTTP/2\n"
    );
    if let Some(why) = &h.skipped {
        let _ = writeln!(s, "**{why}**\n");
        return;
    }
    intro(s, h);
    for new_connections in [false, true] {
        let mut pts = h
            .points
            .iter()
            .filter(|p| p.new_connections == new_connections)
            .peekable();
        let Some(first) = pts.peek() else { continue };
        let _ = writeln!(
            s,
            "### {} requests {}, {} bodies\n\n\
             | client | CPU µs/request | × baseline | baseline | connections opened | over HTTP/3 | problems |\n\
             |---|---|---|---|---|---|---|",
            first.requests,
            if new_connections {
                "each on a new connection"
            } else {
                "on one connection"
            },
            human_bytes(first.object as u64)
        );
        for p in pts {
            let c = &p.cpu_per_request_us;
            let problem = match (&p.work_problem, p.failed) {
                (Some(w), _) => w.replace('|', "\\|"),
                (None, n) if n > 0 => format!(
                    "{n} failed: {}",
                    p.first_error.as_deref().unwrap_or("?").replace('|', "\\|")
                ),
                _ => "–".into(),
            };
            let _ = writeln!(
                s,
                "| {} | {:.1} ({:.1}–{:.1}) | {} | {} | {:.0} | {:.0} | {problem} |",
                p.variant.label(),
                c.median,
                c.min,
                c.max,
                if p.vs_baseline.is_finite() {
                    format!("{:.3}", p.vs_baseline)
                } else {
                    "–".into()
                },
                p.baseline.map_or("–", |b| b.label()),
                p.connections.median,
                p.h3_responses.median,
            );
        }
        s.push('\n');
    }
}

/// What was measured and how.
fn intro(s: &mut String, h: &H3Results) {
    let _ = writeln!(
        s,
        "The server is caddy ({}), serving HTTP/3 and HTTP/2 on one port of `localhost` \
         with a test CA's certificate; its CPU is not measured. Each client is a process \
         of its own (user + system CPU from `getrusage` over the window; 2 tokio worker \
         threads), every variant once per repetition, interleaved. Before the window each \
         sends one warm-up request (a connection opened, a TLS session cached, taps' CIB \
         told QUIC's connect time); in the window it sends the requests one after the \
         other, `GET https://localhost:PORT/`, each response read whole, on the warm-up's \
         connection or each on a new connection closed after it. Every client verifies the \
         certificate against the test CA alone, resumes sessions, sends no 0-RTT, offers \
         ALPN `h3` over QUIC and `h2`,`http/1.1` over TLS/TCP, and looks `localhost` up \
         for each new connection. A trial counts only when every response had status 200 \
         and the body's size, it opened the connections its shape says (none, or one per \
         request) and every response came over the expected protocol. taps' clients are \
         `taps::http::Client` (HTTP/3 only; every version, QUIC raced against TLS/TCP with \
         QUIC's head start {}; HTTP/2 only), one `Client` whose connections \
         `Client::close_connections` closes after each request that is to have its own. \
         Baselines: h3 + h3-quinn on one quinn `Endpoint`, hyper's \
         HTTP/2 client connection over tokio-rustls over tokio TCP.\n",
        if h.server.is_empty() { "?" } else { &h.server },
        h.head_start_ms.map_or(
            "taps' default (2 × its known connect time + 10 ms)".into(),
            |ms| { format!("fixed at {ms} ms") }
        ),
    );
}
