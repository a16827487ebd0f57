//! [`Client`]: HTTP/3, HTTP/2 and HTTP/1.1 behind one API, the protocol chosen the way
//! browsers choose it (see [`race`](super::race)), one pooled connection per origin.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use http::{header, Request, Response, Uri};
use http_body_util::{BodyExt, Full};
use taps_core::properties::{Name, Preference, Protocol, TransportProperties};

use super::altsvc::AltSvcCache;
use super::race::{self, Conn, Origin, PoolKey, Shared};
use super::report::{ClientError, Established, Exchange, Protocols};
use super::{lock, Connector};
use crate::SecurityParameters;
use crate::{Context, Error};

/// An HTTP client over taps: for `https://` it races HTTP/3 over QUIC against HTTP/2 and
/// HTTP/1.1 over TLS/TCP (Happy Eyeballs v3: QUIC first with a head start, the CIB's
/// broken-QUIC marks, HTTPS records through taps' resolver), learns HTTP/3 alternatives
/// from `Alt-Svc` headers, and keeps one connection per origin and protocol for later
/// requests. Each response says which protocol carried it and why ([`Exchange`]).
///
/// Cheap to clone (one `Arc`); clones share the pool and the `Alt-Svc` cache. Cost of a
/// request on a pooled connection: two map lookups under a lock, the exchange, and the
/// body collected into one buffer; a new connection adds the race.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("protocols", &self.shared.protocols)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Client`].
pub struct ClientBuilder {
    ctx: Context,
    security: SecurityParameters,
    protocols: Protocols,
    head_start: Option<Duration>,
    race_timeline: bool,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("security", &self.security)
            .field("protocols", &self.protocols)
            .field("head_start", &self.head_start)
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// Security parameters for both legs (CA files, client certificate, verification);
    /// their ALPN is ignored: QUIC offers `h3`, TLS/TCP `h2`,`http/1.1`.
    pub fn security(mut self, params: SecurityParameters) -> ClientBuilder {
        self.security = params;
        self
    }

    /// Which HTTP versions may be used ([`Protocols::Any`] by default).
    pub fn protocols(mut self, protocols: Protocols) -> ClientBuilder {
        self.protocols = protocols;
        self
    }

    /// A fixed head start for QUIC, instead of `2 × its connect time + 10 ms` when the CIB
    /// knows one, or 100 ms.
    pub fn quic_head_start(mut self, head_start: Duration) -> ClientBuilder {
        self.head_start = Some(head_start);
        self
    }

    /// Whether each leg's address race keeps its timeline (off by default).
    pub fn race_timeline(mut self, keep: bool) -> ClientBuilder {
        self.race_timeline = keep;
        self
    }

    /// The client. Errors: the properties (see [`Connector`]). Cost: three property
    /// compilations and plans, once.
    pub fn build(self) -> Result<Client, Error> {
        let tls = self.security.clone().alpn(super::DEFAULT_ALPN);
        let connector = Connector::builder(&self.ctx)
            .security(tls)
            .race_timeline(self.race_timeline)
            .build()?;
        let quic_props = TransportProperties::new()
            .protocols(Preference::Require, [Protocol::Quic])
            .require(Name::Security)
            .compile()?;
        Ok(Client {
            shared: Arc::new(Shared {
                ctx: self.ctx,
                connector,
                protocols: self.protocols,
                head_start: self.head_start,
                altsvc: AltSvcCache::default(),
                quic_props,
                security: self.security,
                race_timeline: self.race_timeline,
                quic_pres: Mutex::new(HashMap::new()),
                pool: Mutex::new(HashMap::new()),
            }),
        })
    }
}

impl Client {
    /// A client in `ctx` with the defaults: every HTTP version, certificates verified
    /// against the system's trust store and the Mozilla roots.
    pub fn new(ctx: &Context) -> Result<Client, Error> {
        Client::builder(ctx).build()
    }

    /// A builder, for security parameters, allowed versions or QUIC's head start.
    pub fn builder(ctx: &Context) -> ClientBuilder {
        ClientBuilder {
            ctx: ctx.clone(),
            security: SecurityParameters::new(),
            protocols: Protocols::Any,
            head_start: None,
            race_timeline: false,
        }
    }

    /// The context the races run in (its CIB holds what they learned).
    pub fn context(&self) -> &Context {
        &self.shared.ctx
    }

    /// Closes every pooled connection (each as its last in-flight request ends): the
    /// next request to an origin races for a new one. What the client learned is kept
    /// (prepared preconnections, TLS sessions to resume, `Alt-Svc` alternatives, the
    /// CIB). Cost: one lock and the pool's entries dropped.
    pub fn close_connections(&self) {
        lock(&self.shared.pool).clear();
    }

    /// `GET uri` ([`Client::request`]).
    pub async fn get(&self, uri: Uri) -> Result<Response<Bytes>, ClientError> {
        let mut req = Request::new(Bytes::new());
        *req.uri_mut() = uri;
        self.request(req).await
    }

    /// Sends `req` (an absolute `http` or `https` URI) and reads the whole response, over
    /// the origin's pooled connection or a new one raced for it. The response carries an
    /// [`Exchange`]; its `Alt-Svc` header, if any, is learned for the origin's next
    /// connection (unless the client may not use HTTP/3). Errors: [`ClientError`].
    pub async fn request(&self, req: Request<Bytes>) -> Result<Response<Bytes>, ClientError> {
        let started = Instant::now();
        let origin = Origin::of(req.uri())?;
        let (conn, connection, connect) = self.connection(&origin).await?;
        let (mut res, first_byte) = match send(&conn, &origin, req).await {
            Ok(sent) => sent,
            Err(message) => {
                // A connection that failed an exchange (GOAWAY, reset, closed) is not
                // offered again: the next request races anew.
                self.evict(&origin, &conn);
                return Err(ClientError::Exchange {
                    origin: origin.name(),
                    version: conn.version(),
                    message,
                });
            }
        };
        // An HTTP/2-only client has no use for HTTP/3 alternatives: nothing to learn.
        let alt_svc = (self.shared.protocols != Protocols::Http2)
            .then(|| res.headers().get(header::ALT_SVC))
            .flatten()
            .and_then(|v| v.to_str().ok());
        if let Some(v) = alt_svc {
            let sh = &self.shared;
            sh.altsvc
                .learn(&origin.host, origin.port, v, Instant::now());
        }
        if let Conn::H3(_) = conn {
            // hyper reports what the server said (HTTP/1.0 stays so); h3 leaves the default.
            *res.version_mut() = http::Version::HTTP_3;
        }
        let exchange = Exchange {
            connection,
            reused: connect.is_none(),
            connect,
            first_byte: first_byte - started,
            total: started.elapsed(),
        };
        res.extensions_mut().insert(exchange);
        Ok(res)
    }

    /// What the pool offers `origin`: a connection to use as it is, or a race to run
    /// (with the pooled HTTP/2 or HTTP/1.1 connection to stand in, if any); and the
    /// origin's race gate.
    fn pooled(&self, origin: &Origin, key: &PoolKey) -> (Pooled, Arc<tokio::sync::Mutex<()>>) {
        let sh = &self.shared;
        let (h3, tcp, gate) = {
            let mut pool = lock(&sh.pool);
            let entry = pool.entry(key.clone()).or_default();
            entry.h3.take_if(|(c, _)| c.is_closed());
            entry.tcp.take_if(|(c, _)| c.is_closed());
            (entry.h3.clone(), entry.tcp.clone(), entry.racing.clone())
        };
        if let Some((conn, est)) = h3 {
            return (Pooled::Use(conn, est), gate);
        }
        if let Some((conn, est)) = &tcp {
            let alt = sh.altsvc.get(&origin.host, origin.port, Instant::now());
            let try_h3 = origin.secure
                && sh.protocols != Protocols::Http2
                && alt.is_some_and(|a| !race::quic_broken(&sh.ctx, &a.host, a.port));
            if !try_h3 {
                return (Pooled::Use(conn.clone(), est.clone()), gate);
            }
        }
        (Pooled::Race(tcp), gate)
    }

    /// Forgets the pooled connection of `origin` that speaks `conn`'s version.
    fn evict(&self, origin: &Origin, conn: &Conn) {
        let key = (origin.secure, origin.host.clone(), origin.port);
        if let Some(entry) = lock(&self.shared.pool).get_mut(&key) {
            match conn {
                Conn::H3(_) => entry.h3 = None,
                _ => entry.tcp = None,
            }
        }
    }

    /// The connection for `origin`: pooled HTTP/3; else a race when none is pooled or an
    /// HTTP/3 alternative is known and not marked broken (the pooled HTTP/2 or HTTP/1.1
    /// one standing in after QUIC's head start); else the pooled one.
    async fn connection(
        &self,
        origin: &Origin,
    ) -> Result<(Conn, Established, Option<Duration>), ClientError> {
        let sh = &self.shared;
        let key = (origin.secure, origin.host.clone(), origin.port);
        let gate = match self.pooled(origin, &key) {
            (Pooled::Use(conn, est), _) => return Ok((conn, est, None)),
            (Pooled::Race(_), gate) => gate,
        };
        // One race per origin at a time: requests that come meanwhile wait for it and
        // take what it pooled (one HTTP/3 connection per origin, RFC 9114 §3.3).
        let _turn = gate.lock().await;
        let tcp = match self.pooled(origin, &key).0 {
            Pooled::Use(conn, est) => return Ok((conn, est, None)),
            Pooled::Race(tcp) => tcp,
        };
        let started = Instant::now();
        let pooled = tcp.as_ref().map(|(_, est)| est.clone());
        let (conn, est) = race::race(sh, origin, pooled).await?;
        let took = Some(started.elapsed());
        let Some(conn) = conn else {
            let (conn, _) = tcp.expect("the pooled connection stood in");
            return Ok((conn, est, took));
        };
        let mut pool = lock(&sh.pool);
        if pool.len() >= super::ORIGINS {
            pool.clear();
        }
        let entry = pool.entry(key).or_default();
        let slot = match conn {
            Conn::H3(_) => &mut entry.h3,
            _ => &mut entry.tcp,
        };
        *slot = Some((conn.clone(), est.clone()));
        Ok((conn, est, took))
    }
}

/// What the pool offers a request.
enum Pooled {
    /// This connection, as it is.
    Use(Conn, Established),
    /// A race, with the pooled HTTP/2 or HTTP/1.1 connection (if any) to stand in.
    Race(Option<(Conn, Established)>),
}

/// Sends `req` over `conn` and collects the response; also returns when its head came.
async fn send(
    conn: &Conn,
    origin: &Origin,
    req: Request<Bytes>,
) -> Result<(Response<Bytes>, Instant), String> {
    match conn {
        Conn::H3(h3) => send_h3(&h3.send, req).await,
        Conn::H2(s) => {
            let mut s = s.clone();
            s.ready().await.map_err(|e| e.to_string())?;
            let res = s.send_request(req.map(Full::new)).await;
            collect(res.map_err(|e| e.to_string())?).await
        }
        Conn::H1(s) => {
            let (mut parts, body) = req.into_parts();
            if !parts.headers.contains_key(header::HOST) {
                let host = match origin.uri.port_u16() {
                    Some(p) => format!("{}:{p}", origin.uri.host().unwrap_or_default()),
                    None => origin.uri.host().unwrap_or_default().to_owned(),
                };
                let host = header::HeaderValue::from_str(&host).map_err(|e| e.to_string())?;
                parts.headers.insert(header::HOST, host);
            }
            let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
            parts.uri = path
                .parse()
                .map_err(|e: http::uri::InvalidUri| e.to_string())?;
            let mut s = s.lock().await;
            s.ready().await.map_err(|e| e.to_string())?;
            let res = s
                .send_request(Request::from_parts(parts, Full::new(body)))
                .await;
            collect(res.map_err(|e| e.to_string())?).await
        }
    }
}

/// Reads a hyper response's body whole.
async fn collect(
    res: Response<hyper::body::Incoming>,
) -> Result<(Response<Bytes>, Instant), String> {
    let head = Instant::now();
    let (parts, body) = res.into_parts();
    let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((Response::from_parts(parts, body), head))
}

/// One HTTP/3 request: the head, the body if any, then the response read whole.
async fn send_h3(
    send: &h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    req: Request<Bytes>,
) -> Result<(Response<Bytes>, Instant), String> {
    let (parts, body) = req.into_parts();
    let mut send = send.clone();
    let mut stream = send
        .send_request(Request::from_parts(parts, ()))
        .await
        .map_err(|e| e.to_string())?;
    let mut sent = Ok(());
    if !body.is_empty() {
        sent = stream.send_data(body).await;
    }
    if sent.is_ok() {
        sent = stream.finish().await;
    }
    if let Err(e) = sent.as_ref() {
        if !stopped_without_error(e) {
            return Err(e.to_string());
        }
    }
    let res = stream.recv_response().await.map_err(|e| e.to_string())?;
    let head = Instant::now();
    let mut buf = BytesMut::new();
    while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
        let n = chunk.remaining();
        buf.extend_from_slice(&chunk.copy_to_bytes(n));
    }
    let (parts, ()) = res.into_parts();
    Ok((Response::from_parts(parts, buf.freeze()), head))
}

/// Whether the server stopped the request's sending side with `H3_NO_ERROR`: it needs no
/// more of the request and its response still comes, which the client must read (RFC
/// 9114 §4.1).
fn stopped_without_error(e: &h3::error::StreamError) -> bool {
    matches!(e, h3::error::StreamError::RemoteTerminate { code, .. } if *code == h3::error::Code::H3_NO_ERROR)
}
