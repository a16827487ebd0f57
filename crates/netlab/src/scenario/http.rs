//! HTTP clients against `rx` (dead IPv6, live IPv4): hyper-util's legacy client over
//! taps' connector (`taps::http::Connector`) against the same client over hyper-util's
//! own `HttpConnector` (`http-rx`). Both run taps' `http_get` example in the client
//! namespace, two requests each, a new client per request (taps' share one context, so
//! its CIB); a small HTTP/1.1 server answers on port [`HTTP_PORT`] of every zone
//! address in the server namespace.
//!
//! What is measured is the time from the request to the connection (and to the
//! response headers), from the example's JSON. hyper's connector waits 300 ms before
//! trying the other family, every time (no cache); taps' waits its attempt delay (250 ms)
//! the first time and skips the dead address the second.

#![forbid(unsafe_code)]

use std::net::{Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::checks::millis_f64;
use super::runner::{Ctx, Outcome};
use super::setup::{answer_first, describe_rules, rtt_rules, ATTEMPT_DELAY};
use crate::dns::RecordType;
use crate::lab::{fqdn, Lab};

/// The port the HTTP server listens on (every zone address, both families).
pub const HTTP_PORT: u16 = 8080;

/// Environment variable naming the `http_get` example binary to run.
pub const HTTP_GET_ENV: &str = "NETLAB_HTTP_GET";

/// hyper-util's `HttpConnector` default: the wait before the other address family.
const HYPER_FALLBACK: Duration = Duration::from_millis(300);

/// Bound on the first request's DNS (the resolver's set-up and first lookup), in ms.
const FIRST_DNS: f64 = 70.0;

/// What the server answers to every request.
const BODY: &str = "hello from netlab\n";

/// Finds the `http_get` example: `$NETLAB_HTTP_GET`, else `examples/http_get` beside
/// the taps binary (cargo's layout). An error says how to build it.
pub fn http_get_binary() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(HTTP_GET_ENV) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{HTTP_GET_ENV}={} is not a file", p.display()))
        };
    }
    let taps = crate::taps::taps_binary()?;
    let p = taps
        .parent()
        .map(|d| d.join("examples/http_get"))
        .unwrap_or_default();
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "the http_get example was not found at {} (build it with `cargo build -p taps \
             --features http --example http_get`, or set {HTTP_GET_ENV})",
            p.display()
        ))
    }
}

/// A minimal HTTP/1.1 server in the server namespace: reads a request head, answers 200
/// with [`BODY`] and closes. Stops (its runtime and thread end) when dropped.
struct HttpServer {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HttpServer {
    fn start(lab: &Lab) -> Result<HttpServer, String> {
        let listener = lab
            .server()
            .run(|| std::net::TcpListener::bind((Ipv6Addr::UNSPECIFIED, HTTP_PORT)))
            .and_then(|r| r)
            .map_err(|e| {
                format!("cannot listen on port {HTTP_PORT} in the server namespace: {e}")
            })?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("netlab-http".into())
            .spawn(move || serve(listener, stopped))
            .map_err(|e| e.to_string())?;
        Ok(HttpServer {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves until `stopped` fires, then drops every connection.
fn serve(listener: std::net::TcpListener, stopped: tokio::sync::oneshot::Receiver<()>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    rt.block_on(async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        let mut conns = tokio::task::JoinSet::new();
        let accept = async {
            loop {
                if let Ok((stream, _)) = listener.accept().await {
                    conns.spawn(answer(stream));
                }
            }
        };
        tokio::select! {
            _ = stopped => {}
            _ = accept => {}
        }
    });
}

/// Reads one request head (up to 8 KiB, 10 s), answers it, closes.
async fn answer(mut stream: tokio::net::TcpStream) {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let read = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        true
    };
    if !matches!(
        tokio::time::timeout(Duration::from_secs(10), read).await,
        Ok(true)
    ) {
        return;
    }
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// One request of an `http_get --json` run.
#[derive(Debug)]
struct Request {
    connect_ms: Option<f64>,
    response_ms: Option<f64>,
    remote: String,
    error: Option<String>,
}

/// Runs `http_get URL --connector NAME --repeat 2 --json` in the client namespace.
fn http_get(lab: &Lab, connector: &str, url: &str) -> Result<Vec<Request>, String> {
    let bin = http_get_binary()?;
    let mut cmd: Command = lab.client().command(&bin);
    cmd.arg(url)
        .args(["--connector", connector, "--repeat", "2", "--json"])
        .arg("--name-server")
        .arg(lab.dns_addr().to_string());
    let out = lab
        .run_child(cmd, Duration::from_secs(30))
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let json: Value = serde_json::from_str(out.stdout.trim()).map_err(|e| {
        format!(
            "http_get --connector {connector} printed no JSON ({e}); exit {:?}; stdout: {}; stderr: {}",
            out.status.and_then(|s| s.code()),
            out.stdout.trim(),
            out.stderr.trim()
        )
    })?;
    let requests = json
        .get("requests")
        .and_then(Value::as_array)
        .ok_or("http_get: no requests in its JSON")?;
    Ok(requests
        .iter()
        .map(|r| Request {
            connect_ms: r.get("connect_ms").and_then(Value::as_f64),
            response_ms: r.get("response_ms").and_then(Value::as_f64),
            remote: r
                .get("remote")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string(),
            error: r.get("error").and_then(Value::as_str).map(str::to_string),
        })
        .collect())
}

fn show(out: &mut Outcome, who: &str, reqs: &[Request]) {
    for (i, r) in reqs.iter().enumerate() {
        match (&r.error, r.connect_ms, r.response_ms) {
            (None, Some(c), Some(resp)) => out.say(format!(
                "  {who} #{}: connected to {} in {c:.1} ms, response in {resp:.1} ms",
                i + 1,
                r.remote
            )),
            (e, ..) => out.say(format!("  {who} #{}: failed: {e:?}", i + 1)),
        }
    }
}

/// The connect time of request `i`, or a failed check.
fn connect_ms(out: &mut Outcome, who: &str, reqs: &[Request], i: usize) -> Option<f64> {
    let r = reqs.get(i);
    let ms = r.and_then(|r| r.connect_ms);
    let v4 = r.is_some_and(|r| r.remote.parse::<SocketAddr>().is_ok_and(|a| a.is_ipv4()));
    out.check(
        ms.is_some() && v4,
        format!(
            "{who} #{}: connected over IPv4 ({})",
            i + 1,
            r.map_or("no request", |r| r.remote.as_str())
        ),
    );
    ms
}

pub(super) fn http_rx(lab: &Lab, _ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let rtt = Duration::from_millis(50);
    lab.set_rules(rtt_rules(rtt, rtt));
    out.say(describe_rules(rtt, rtt));
    // AAAA first: both clients see the dead IPv6 address first (hyper's resolver here
    // waits for both answers and puts IPv6 first, as getaddrinfo does).
    answer_first(lab, RecordType::AAAA);
    let _server = HttpServer::start(lab)?;
    let url = format!("http://{}:{HTTP_PORT}/", fqdn("rx"));
    out.say(format!(
        "  {url}: dead IPv6, live IPv4; a small HTTP/1.1 server on port {HTTP_PORT}"
    ));
    let taps = http_get(lab, "taps", &url)?;
    show(out, "taps ", &taps);
    let hyper = http_get(lab, "hyper", &url)?;
    show(out, "hyper", &hyper);
    lab.dns().clear_delays();
    let slack = 30.0;
    let (delay, rtt_ms, fallback) = (
        millis_f64(ATTEMPT_DELAY),
        millis_f64(rtt),
        millis_f64(HYPER_FALLBACK),
    );
    // The first request of each process also sets its resolver up and waits for the
    // first DNS answers (tens of ms here, for hyper's as for taps').
    if let Some(ms) = connect_ms(out, "taps", &taps, 0) {
        out.check(
            ms <= delay + rtt_ms + FIRST_DNS + slack,
            format!(
                "taps #1 connected in {ms:.1} ms <= attempt delay 250 + RTT 50 + first DNS 70 + 30"
            ),
        );
    }
    let taps2 = connect_ms(out, "taps", &taps, 1);
    if let Some(ms) = taps2 {
        out.check(
            ms <= rtt_ms + slack,
            format!("taps #2 (same context: CIB) connected in {ms:.1} ms <= RTT 50 + 30: dead IPv6 skipped"),
        );
    }
    for i in 0..2 {
        if let Some(ms) = connect_ms(out, "hyper", &hyper, i) {
            out.check(
                ms >= fallback + rtt_ms - 5.0,
                format!(
                    "hyper #{} connected in {ms:.1} ms >= its fallback 300 + RTT 50 (no cache)",
                    i + 1
                ),
            );
        }
    }
    if let (Some(t), Some(h)) = (taps2, hyper.get(1).and_then(|r| r.connect_ms)) {
        out.check(
            h - t >= fallback - slack,
            format!(
                "second request: taps {t:.1} ms, hyper {h:.1} ms: {:.1} ms saved (>= 300 - 30)",
                h - t
            ),
        );
    }
    Ok(())
}
