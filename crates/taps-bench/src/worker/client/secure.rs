//! The client of the secure experiment: sequential secure connections (raw tokio-rustls,
//! raw quinn, or taps: TLS/TCP only, QUIC only, or QUIC raced against TLS/TCP), each
//! fetching one object over HTTP/1.0 and then closed.

#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls_pki_types::ServerName;
use taps::taps_core::policy::CibConfig;
use taps::taps_core::properties::Name;
use taps::{
    Connection, Context, Preconnection, Preference, Protocol, RemoteEndpoint, TransportProperties,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpSocket;
use tokio_rustls::TlsConnector;

use super::flow::started_attempts;
use super::http::http_session;
use super::{note_failure, ready, send_result, Window};
use crate::measure;
use crate::worker::protocol::{ClientResult, SecureClient};
use crate::worker::secure::{self, Pki, SERVER_NAME};
use crate::worker::server::QUIC_LINGER;
use crate::worker::setup::{client_context, compile, localhost_v4};

/// How a secure client connects; set up before the window.
enum Connector {
    RawTls(TlsConnector),
    RawQuic(quinn::Endpoint, quinn::ClientConfig),
    /// taps: the single preconnection, or the hit and the miss preconnections of a race
    /// (each of its own context, kept alive here).
    Taps {
        hit: Arc<Preconnection>,
        miss: Arc<Preconnection>,
        _contexts: Vec<Context>,
    },
}

/// What one connection did.
struct Done {
    attempts: usize,
    quic: bool,
}

impl Connector {
    async fn new(kind: SecureClient, port: u16, pki: &Pki) -> Result<Connector, String> {
        let props = |p: Option<Protocol>| {
            let t = TransportProperties::new().require(Name::Security);
            compile(match p {
                Some(p) => t.protocols(Preference::Require, [p]),
                None => t,
            })
        };
        let taps = |ctx: &Context, props| {
            let pre = Preconnection::new(ctx, props)
                .remote(RemoteEndpoint::new("127.0.0.1", port))
                .security(secure::taps_client(pki));
            pre.plan().map_err(|e| format!("plan: {e}"))?;
            Ok::<_, String>(Arc::new(pre))
        };
        Ok(match kind {
            SecureClient::RawTls => {
                Connector::RawTls(TlsConnector::from(Arc::new(secure::raw_client(pki)?)))
            }
            SecureClient::RawQuic => {
                // As taps' QUIC socket: dual-stack where the host allows.
                let endpoint = quinn::Endpoint::client((std::net::Ipv6Addr::UNSPECIFIED, 0).into())
                    .or_else(|_| {
                        quinn::Endpoint::client((std::net::Ipv4Addr::UNSPECIFIED, 0).into())
                    })
                    .map_err(|e| format!("QUIC endpoint: {e}"))?;
                Connector::RawQuic(endpoint, secure::raw_quic_client(pki)?)
            }
            SecureClient::TapsTls | SecureClient::TapsQuic => {
                let p = if kind == SecureClient::TapsTls {
                    Protocol::Tcp
                } else {
                    Protocol::Quic
                };
                let ctx = client_context(0, false, None)?;
                let pre = taps(&ctx, props(Some(p))?)?;
                Connector::Taps {
                    hit: pre.clone(),
                    miss: pre,
                    _contexts: vec![ctx],
                }
            }
            SecureClient::TapsRace => {
                let hit_ctx = client_context(0, false, None)?;
                let forget = CibConfig {
                    lifetime: Duration::ZERO,
                    ..CibConfig::default()
                };
                let miss_ctx = client_context(0, false, Some(forget))?;
                Connector::Taps {
                    hit: taps(&hit_ctx, props(None)?)?,
                    miss: taps(&miss_ctx, props(None)?)?,
                    _contexts: vec![hit_ctx, miss_ctx],
                }
            }
        })
    }

    /// One connection: connect, fetch `object` bytes, close.
    async fn fetch(&self, port: u16, hit: bool, object: usize) -> Result<Done, String> {
        let io = |e: std::io::Error| e.to_string();
        match self {
            Connector::RawTls(tls) => {
                let socket = TcpSocket::new_v4().map_err(io)?;
                socket.set_nodelay(true).map_err(io)?;
                let tcp = socket.connect(localhost_v4(port)).await.map_err(io)?;
                let name = ServerName::try_from(SERVER_NAME).map_err(|e| e.to_string())?;
                let s = tls.connect(name, tcp).await.map_err(io)?;
                session(s, object).await?;
                Ok(Done {
                    attempts: 1,
                    quic: false,
                })
            }
            Connector::RawQuic(endpoint, config) => {
                let conn = endpoint
                    .connect_with(config.clone(), localhost_v4(port), SERVER_NAME)
                    .map_err(|e| e.to_string())?
                    .await
                    .map_err(|e| e.to_string())?;
                let (send, recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
                let mut s = tokio::io::join(recv, send);
                let result = session(&mut s, object).await;
                // What a dropped taps QUIC connection does: linger (in a task) until the
                // peer acknowledged the stream, then close.
                let (_, mut send) = s.into_inner();
                tokio::spawn(async move {
                    let _ = send.finish();
                    let _ = tokio::time::timeout(QUIC_LINGER, send.stopped()).await;
                    conn.close(0u32.into(), b"");
                });
                result.map(|_| Done {
                    attempts: 1,
                    quic: true,
                })
            }
            Connector::Taps { hit: h, miss, .. } => {
                let pre = if hit { h } else { miss };
                let c: Connection = pre.initiate().await.map_err(|e| e.to_string())?;
                let done = Done {
                    attempts: started_attempts(&c),
                    quic: c.info().stack.protocol == Protocol::Quic,
                };
                session(c, object).await?;
                Ok(done)
            }
        }
    }
}

/// One HTTP/1.0 request for `object` bytes, then the end of the stream.
async fn session<S: AsyncRead + AsyncWrite + Unpin>(s: S, object: usize) -> Result<(), String> {
    let (bytes, _) = http_session(s, object, 1)
        .await
        .map_err(|e| format!("HTTP: {e}"))?;
    if bytes as usize != object {
        return Err(format!("HTTP: {bytes} bytes instead of {object}"));
    }
    Ok(())
}

/// What a secure client does in its window.
pub(super) struct Load {
    /// Connections.
    pub(super) count: usize,
    /// Connections started per second.
    pub(super) rate: f64,
    /// Object fetched per connection, bytes.
    pub(super) object: usize,
    /// Share of races that find the CIB seeded, percent.
    pub(super) hit_percent: u32,
}

/// The secure experiment's client: see [`crate::worker::ClientSpec::Secure`]. Before the
/// window, one connection per context warms it up the way an application would (the
/// QUIC socket exists, a session is cached for resumption, the race's hit context has
/// its CIB seeded); the raw clients make theirs too. In the window connection `i`
/// starts at `i / rate` seconds, in a task of its own.
pub(super) async fn secure_client(
    kind: SecureClient,
    port: u16,
    load: Load,
    pki: Pki,
) -> Result<(), String> {
    let object = load.object;
    let connector = Arc::new(Connector::new(kind, port, &pki).await?);
    connector
        .fetch(port, true, object)
        .await
        .map_err(|e| format!("warm-up connection: {e}"))?;
    if kind == SecureClient::TapsRace {
        connector
            .fetch(port, false, object)
            .await
            .map_err(|e| format!("warm-up connection (miss context): {e}"))?;
    }
    ready().await?;
    let mut r = ClientResult::default();
    let w = Window::open();
    let start = tokio::time::Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..load.count {
        let at = start + Duration::from_secs_f64(i as f64 / load.rate.max(1e-3));
        tokio::time::sleep_until(at).await;
        let connector = connector.clone();
        let hit = measure::is_hit(i, load.hit_percent);
        set.spawn(async move {
            let t = Instant::now();
            connector
                .fetch(port, hit, object)
                .await
                .map(|d| (t.elapsed(), d))
        });
    }
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(Ok((delay, d))) => {
                r.delays_us.push(delay.as_secs_f64() * 1e6);
                r.attempts += d.attempts;
                r.quic += usize::from(d.quic);
                r.bytes += object as u64;
                r.requests += 1;
                r.ok += 1;
            }
            Ok(Err(e)) => note_failure(&mut r, e),
            Err(e) => note_failure(&mut r, e),
        }
    }
    w.close(&mut r);
    send_result(&r).await
}
