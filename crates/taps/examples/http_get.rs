//! Fetches a URL with hyper-util's legacy client over taps' connector and prints the
//! status, which candidate won and the body; or compares it with hyper-util's own
//! `HttpConnector` (what netlab's `http-rx` scenario runs).
//!
//! ```sh
//! cargo run --example http_get -p taps --features http -- http://localhost:8080/
//! cargo run --example http_get -p taps --features http -- https://localhost:8443/ --ca ca.pem
//! cargo run --example http_get -p taps --features http -- http://rx.netlab.test:8080/ \
//!     --connector hyper --repeat 2 --json --name-server 203.0.113.53:53
//! ```
//!
//! Options: `--ca FILE` (trust this CA too, https), `--connector taps|hyper` (hyper:
//! hyper-util's `HttpConnector`, http only, its defaults: Happy Eyeballs with 300 ms to
//! the other family, no cache), `--repeat N` (N requests, each with a new client; taps'
//! share one context, so its CIB), `--json` (timings, no bodies), `--name-server ADDR`
//! (DNS server for both connectors; hyper's gets taps' resolver, IPv6 answers first, as
//! getaddrinfo orders them on a dual-stack host), `--trace` (taps' race, in words).

use std::error::Error as StdError;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::rt::{Read, Write};
use hyper::Uri;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::client::legacy::connect::{Connection, HttpConnector, HttpInfo};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::json;
use taps::http::{ConnectionDetails, Connector};
use taps::resolver::{NameServers, ResolutionEvent, Resolver, ResolverConfig};
use taps::{Context, SecurityParameters};
use tower_service::Service;

type BoxError = Box<dyn StdError + Send + Sync>;

struct Args {
    url: Uri,
    ca: Option<String>,
    hyper: bool,
    repeat: usize,
    json: bool,
    name_server: Option<SocketAddr>,
    trace: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut url = None;
    let mut a = Args {
        url: Uri::default(),
        ca: None,
        hyper: false,
        repeat: 1,
        json: false,
        name_server: None,
        trace: false,
    };
    while let Some(arg) = args.next() {
        let mut value = |what: &str| args.next().ok_or(format!("{arg} needs {what}"));
        match arg.as_str() {
            "--ca" => a.ca = Some(value("a PEM file")?),
            "--connector" => match value("taps or hyper")?.as_str() {
                "taps" => a.hyper = false,
                "hyper" => a.hyper = true,
                other => return Err(format!("--connector {other}: taps or hyper")),
            },
            "--repeat" => {
                a.repeat = value("a count")?
                    .parse()
                    .ok()
                    .filter(|n| (1..=100).contains(n))
                    .ok_or("--repeat takes 1 to 100")?
            }
            "--name-server" => {
                let v = value("an address and port")?;
                a.name_server = Some(v.parse().map_err(|e| format!("--name-server {v}: {e}"))?)
            }
            "--json" => a.json = true,
            "--trace" => a.trace = true,
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s => url = Some(s.parse::<Uri>().map_err(|e| format!("{s}: {e}"))?),
        }
    }
    a.url = url.ok_or("usage: http_get URL [--ca FILE] [--connector taps|hyper] [--repeat N] [--json] [--name-server ADDR] [--trace]")?;
    if a.hyper && a.url.scheme_str() != Some("http") {
        return Err("--connector hyper speaks http:// only (no TLS in this example)".into());
    }
    Ok(a)
}

/// A connector that notes when its connection was established, from `start`.
#[derive(Clone)]
struct Timed<C> {
    inner: C,
    start: Instant,
    connected: Arc<Mutex<Option<Duration>>>,
}

impl<C> Service<Uri> for Timed<C>
where
    C: Service<Uri> + Send + 'static,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let fut = self.inner.call(uri);
        let (start, slot) = (self.start, self.connected.clone());
        Box::pin(async move {
            let conn = fut.await.map_err(Into::into)?;
            *slot.lock().unwrap() = Some(start.elapsed());
            Ok(conn)
        })
    }
}

/// hyper's resolver for `--name-server`: taps' resolver (A and AAAA), IPv6 first.
#[derive(Clone)]
struct Dns(Arc<Resolver>);

impl Service<Name> for Dns {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let resolver = self.0.clone();
        Box::pin(async move {
            let mut resolution = resolver.resolve(name.as_str());
            let mut addrs = Vec::new();
            while let Some(event) = resolution.next_event().await {
                if let ResolutionEvent::Addresses(answer) = event {
                    addrs.extend(answer.result.into_iter().flatten());
                }
            }
            addrs.sort_by_key(|ip| ip.is_ipv4());
            if addrs.is_empty() {
                return Err(std::io::Error::other(format!("{name}: no address")));
            }
            let addrs: Vec<SocketAddr> = addrs.into_iter().map(|ip| (ip, 0).into()).collect();
            Ok(addrs.into_iter())
        })
    }
}

/// One request's outcome.
struct Fetch {
    status: u16,
    version: String,
    connected: Option<Duration>,
    response: Duration,
    total: Duration,
    remote: Option<SocketAddr>,
    details: Option<ConnectionDetails>,
    body: Bytes,
}

/// A GET of `url` with a new client over `connector`; timings from the call.
async fn fetch<C>(connector: C, url: &Uri) -> Result<Fetch, BoxError>
where
    C: Service<Uri> + Clone + Send + Sync + 'static,
    C::Response: Read + Write + Connection + Unpin + Send + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    let start = Instant::now();
    let connected = Arc::new(Mutex::new(None));
    let timed = Timed {
        inner: connector,
        start,
        connected: connected.clone(),
    };
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build(timed);
    let res = client.get(url.clone()).await?;
    let response = start.elapsed();
    let status = res.status().as_u16();
    let version = format!("{:?}", res.version());
    let details = res.extensions().get::<ConnectionDetails>().cloned();
    let remote = details
        .as_ref()
        .map(|d| d.remote)
        .or_else(|| res.extensions().get::<HttpInfo>().map(|i| i.remote_addr()));
    let body = res.into_body().collect().await?.to_bytes();
    let connected = *connected.lock().unwrap();
    Ok(Fetch {
        status,
        version,
        connected,
        response,
        total: start.elapsed(),
        remote,
        details,
        body,
    })
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

fn report(a: &Args, n: usize, started: Instant, r: &Result<Fetch, BoxError>) -> serde_json::Value {
    match r {
        Ok(f) => {
            let stack = f.details.as_ref().map(|d| d.stack.to_string());
            if !a.json {
                println!(
                    "#{n}: {} {} via {} {} (connected in {} ms, response in {} ms)",
                    f.status,
                    f.version,
                    stack.as_deref().unwrap_or("TCP (hyper)"),
                    f.remote.map(|r| r.to_string()).unwrap_or_default(),
                    f.connected.map_or("?".into(), |d| ms(d).to_string()),
                    ms(f.response),
                );
                if let Some(race) = f.details.as_ref().and_then(|d| d.race.as_ref()) {
                    if a.trace {
                        print!("{}", race.trace());
                    }
                }
                println!("{}", String::from_utf8_lossy(&f.body));
            }
            json!({
                "n": n, "ok": true, "status": f.status, "version": f.version,
                "connect_ms": f.connected.map(ms), "response_ms": ms(f.response),
                "total_ms": ms(f.total), "remote": f.remote.map(|r| r.to_string()),
                "stack": stack, "bytes": f.body.len(),
                "attempts": f.details.as_ref().and_then(|d| d.race.as_ref()).map(|r| r.attempts.len()),
            })
        }
        Err(e) => {
            let mut text = e.to_string();
            let mut src = e.source();
            while let Some(s) = src {
                text.push_str(&format!(": {s}"));
                src = s.source();
            }
            if !a.json {
                eprintln!("#{n}: failed after {} ms: {text}", ms(started.elapsed()));
            }
            json!({"n": n, "ok": false, "error": text, "total_ms": ms(started.elapsed())})
        }
    }
}

async fn run(a: Args) -> Result<bool, BoxError> {
    let mut ctx = Context::builder();
    if let Some(ns) = a.name_server {
        ctx = ctx.name_servers(vec![ns]);
    }
    let ctx = ctx.build()?;
    let dns = Dns(Arc::new(Resolver::new(ResolverConfig {
        name_servers: a
            .name_server
            .map_or(NameServers::System, |ns| NameServers::Custom(vec![ns])),
        ..ResolverConfig::default()
    })?));
    let mut security = SecurityParameters::new();
    if let Some(ca) = &a.ca {
        security = security.ca_file(ca);
    }
    let mut results = Vec::new();
    let mut ok = true;
    for n in 1..=a.repeat {
        let started = Instant::now();
        // A new connector and client each time: only the context (its CIB) is shared.
        let r = if a.hyper {
            fetch(HttpConnector::new_with_resolver(dns.clone()), &a.url).await
        } else {
            let connector = Connector::builder(&ctx)
                .security(security.clone())
                .race_timeline(a.trace && !a.json)
                .build()?;
            fetch(connector, &a.url).await
        };
        ok &= r.is_ok();
        results.push(report(&a, n, started, &r));
    }
    if a.json {
        let connector = if a.hyper { "hyper" } else { "taps" };
        let out = json!({"connector": connector, "url": a.url.to_string(), "requests": results});
        println!("{out}");
    }
    Ok(ok)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("http_get: {e}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("http_get: {e}");
            ExitCode::FAILURE
        }
    }
}
