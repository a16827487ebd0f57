//! The client of the HTTP/3 experiment (`taps-bench http3`): GET requests to an HTTP/3 +
//! HTTP/2 server on `localhost` (caddy), one after the other, through `taps::http::Client`
//! (HTTP/3 only, raced, HTTP/2 only) or a baseline used directly (see [`super::h3_raw`]).

#![forbid(unsafe_code)]

use std::time::Duration;

use http::{Uri, Version};
use taps::http::{Client, Exchange, Protocols};
use taps::{Context, SecurityParameters};

use super::h3_raw::{Fetched, RawH2, RawH3};
use super::{note_failure, ready, send_result, Window};
use crate::worker::protocol::{ClientResult, H3Client, H3Load};

/// A taps client, as the baselines keep their endpoint or connector: one [`Client`]
/// (its prepared preconnections and TLS sessions), its connections closed by
/// [`Client::close_connections`] when each request is to open its own.
struct Taps(Client);

impl Taps {
    fn new(load: &H3Load, protocols: Protocols) -> Result<Taps, String> {
        let ctx = Context::new().map_err(|e| format!("context: {e}"))?;
        let security = SecurityParameters::new()
            .ca_file(&load.ca)
            .without_system_roots();
        let mut b = Client::builder(&ctx)
            .security(security)
            .protocols(protocols);
        if let Some(ms) = load.head_start_ms {
            b = b.quic_head_start(Duration::from_millis(ms));
        }
        Ok(Taps(b.build().map_err(|e| format!("taps client: {e}"))?))
    }

    /// One GET; `close`: the client's connections are closed after it.
    async fn fetch(&mut self, uri: &Uri, close: bool) -> Result<Fetched, String> {
        let got = self.0.get(uri.clone()).await;
        if close {
            self.0.close_connections();
        }
        let res = got.map_err(|e| e.to_string())?;
        let reused = res.extensions().get::<Exchange>().map(|x| x.reused);
        Ok(Fetched {
            status: res.status().as_u16(),
            bytes: res.body().len(),
            h3: res.version() == Version::HTTP_3,
            new_connection: !reused.ok_or("no exchange report")?,
        })
    }
}

/// The client variant, set up before the window.
enum Fetcher {
    Taps(Taps),
    RawH3(Box<RawH3>),
    RawH2(RawH2),
}

impl Fetcher {
    fn new(load: &H3Load) -> Result<Fetcher, String> {
        Ok(match load.client {
            H3Client::TapsH3 => Fetcher::Taps(Taps::new(load, Protocols::Http3)?),
            H3Client::TapsRace => Fetcher::Taps(Taps::new(load, Protocols::Any)?),
            H3Client::TapsH2 => Fetcher::Taps(Taps::new(load, Protocols::Http2)?),
            H3Client::RawH3 => Fetcher::RawH3(Box::new(RawH3::new(&load.ca)?)),
            H3Client::RawH2 => Fetcher::RawH2(RawH2::new(&load.ca)?),
        })
    }

    /// One GET of `uri`; `close`: its connection is closed after it (the next request
    /// opens a new one).
    async fn fetch(&mut self, uri: &Uri, close: bool) -> Result<Fetched, String> {
        match self {
            Fetcher::Taps(t) => t.fetch(uri, close).await,
            Fetcher::RawH3(r) => r.fetch(uri, close).await,
            Fetcher::RawH2(r) => r.fetch(uri, close).await,
        }
    }
}

/// Whether `f` is the response every request must get: status 200, `object` bytes.
fn check(f: &Fetched, object: usize) -> Result<(), String> {
    if f.status != 200 || f.bytes != object {
        return Err(format!(
            "status {} with {} bytes, expected 200 with {object}",
            f.status, f.bytes
        ));
    }
    Ok(())
}

/// The HTTP/3 experiment's client: see [`crate::worker::ClientSpec::H3`].
pub(super) async fn h3_client(load: H3Load) -> Result<(), String> {
    let uri: Uri = format!("https://localhost:{}/", load.port)
        .parse()
        .map_err(|e| format!("URL: {e}"))?;
    let mut fetcher = Fetcher::new(&load)?;
    // The warm-up: a connection opened (and kept, unless every request opens its own),
    // a TLS session cached, the CIB told QUIC's connect time.
    let warm = fetcher.fetch(&uri, load.new_connections).await;
    check(
        &warm.map_err(|e| format!("warm-up request: {e}"))?,
        load.object,
    )
    .map_err(|e| format!("warm-up request: {e}"))?;
    ready().await?;
    let mut r = ClientResult::default();
    let w = Window::open();
    for _ in 0..load.requests {
        let got = fetcher.fetch(&uri, load.new_connections).await;
        match got.and_then(|f| check(&f, load.object).map(|()| f)) {
            Ok(f) => {
                r.ok += 1;
                r.requests += 1;
                r.bytes += f.bytes as u64;
                r.attempts += usize::from(f.new_connection);
                r.quic += usize::from(f.h3);
            }
            Err(e) => note_failure(&mut r, e),
        }
    }
    w.close(&mut r);
    send_result(&r).await
}
