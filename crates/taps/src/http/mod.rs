//! An HTTP client connector: hyper-util's legacy client gets taps' racing, its CIB and its
//! explanations with one line of setup (feature `http`, off by default so that the core
//! library does not pull in hyper).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! # type Body = String;
//! let ctx = taps::Context::new()?;                                   // once per application
//! let client: Client<_, Body> =
//!     Client::builder(TokioExecutor::new()).build(taps::http::Connector::new(&ctx)?);
//! let res = client.get("http://example.test/".parse()?).await?;
//! if let Some(d) = res.extensions().get::<taps::http::ConnectionDetails>() {
//!     println!("won: {} {}", d.stack, d.remote);                   // and d.race: why
//! }
//! # Ok(()) }
//! ```
//!
//! What a request to a new connection gets:
//! - `http://`: a race of the reliable byte-stream stacks the properties allow, TCP and
//!   MPTCP by default (never SCTP, UDP or a message-framed stack: hyper needs a plain byte
//!   stream), over every address family, address and local interface, the CIB's outcomes
//!   first (a second connection to a host skips what failed for the first, across clients
//!   that share the [`Context`]).
//! - `https://`: the same race of TLS over TCP or MPTCP (taps' security layer: verified by
//!   default against the URI's host, ALPN `h2`,`http/1.1` unless set otherwise); the
//!   stream reports the negotiated protocol, so hyper-util speaks HTTP/2 when the server
//!   chose `h2`. **QUIC is never raced**: it carries only HTTP/3, which hyper's legacy
//!   client does not speak (for HTTP/3, use [`Client`]). A secure race never falls back
//!   to plain text.
//!
//! [`Client`] speaks HTTP/3 too: for `https://` it races HTTP/3 over QUIC (h3 and
//! h3-quinn on taps' QUIC connections) against HTTP/2 and HTTP/1.1 over this connector's
//! TLS/TCP, with QUIC's head start, the CIB's broken-QUIC marks, HTTPS records and
//! `Alt-Svc`; every response says which protocol and why ([`Exchange`],
//! [`ProtocolRace`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let ctx = taps::Context::new()?;
//! let client = taps::http::Client::new(&ctx)?;
//! let res = client.get("https://example.test/".parse()?).await?;
//! if let Some(x) = res.extensions().get::<taps::http::Exchange>() {
//!     println!("{:?}: {}", x.connection.version, x.connection.race);
//! }
//! # Ok(()) }
//! ```
//!
//! Failures are [`crate::Error`]s (for a race: every attempt with its cause), boxed as
//! the service error; hyper-util reports them as connect errors whose source is the taps
//! error.
//!
//! Cost: the properties are compiled and checked once, when the connector is built. The
//! first connection to a `(scheme, host, port)` builds that origin's [`Preconnection`]
//! (its candidate plan, and for `https` its TLS configuration: CA files read then),
//! kept for later connections (up to [`ORIGINS`] origins, then the cache starts over).
//! After that, a connection costs a lock and a map lookup, plus the race itself (DNS,
//! connection attempts) and an `Arc` of the connection's information. hyper-util's pool
//! reuses connections, so the connector runs only when the pool has none to give.

mod altsvc;
mod client;
mod race;
mod report;
mod stream;

pub use altsvc::Alternative;
pub use client::{Client, ClientBuilder};
pub use report::{ClientError, Established, Exchange, Leg, ProtocolRace, Protocols};
pub use stream::{ConnectionDetails, HttpStream};

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};

use http::Uri;
use taps_core::properties::{Name, Preference, Protocol, TransportProperties};
use taps_core::Security;

use crate::{
    ConfigError, Context, Error, Preconnection, Properties, RemoteEndpoint, SecurityParameters,
};

/// How many origins' preconnections a connector keeps; when one more comes, it forgets
/// them all and starts over (the CIB, in the context, remembers what it learned).
pub const ORIGINS: usize = 256;

/// The ALPN list offered over TLS when the security parameters set none.
const DEFAULT_ALPN: [&str; 2] = ["h2", "http/1.1"];

/// A connector for hyper-util's legacy client (`tower_service::Service<http::Uri>`):
/// every new connection is a taps race. Cheap to clone (one `Arc`); clones share the
/// origins' preconnections.
#[derive(Clone)]
pub struct Connector {
    inner: Arc<Inner>,
}

struct Inner {
    ctx: Context,
    /// The properties of `http://` (plain byte streams) and `https://` (TLS over them).
    plain: Properties,
    secure: Properties,
    security: SecurityParameters,
    /// Whether races keep their timelines.
    race_timeline: bool,
    /// One preconnection per origin.
    origins: Mutex<HashMap<Origin, Arc<Preconnection>>>,
}

/// An origin: `(https, host, port)`.
type Origin = (bool, Box<str>, u16);

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("plain", &self.inner.plain)
            .field("secure", &self.inner.secure)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Connector`]: a context, and optionally properties and security parameters.
pub struct ConnectorBuilder {
    ctx: Context,
    props: TransportProperties,
    security: SecurityParameters,
    race_timeline: bool,
}

impl std::fmt::Debug for ConnectorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectorBuilder")
            .field("props", &self.props)
            .field("security", &self.security)
            .finish_non_exhaustive()
    }
}

impl ConnectorBuilder {
    /// The transport properties to race with (RFC 9622 defaults otherwise). Without a
    /// `transport` entry, HTTP allows TCP and MPTCP; with one, it must allow nothing but
    /// TCP and MPTCP. `security` is set by the URI's scheme (required for `https`, not
    /// used for `http`), whatever these say.
    pub fn properties(mut self, props: TransportProperties) -> ConnectorBuilder {
        self.props = props;
        self
    }

    /// The security parameters of `https` connections: extra CA files or only them,
    /// another name to verify, ALPN (`h2`,`http/1.1` when unset), a client certificate.
    pub fn security(mut self, params: SecurityParameters) -> ConnectorBuilder {
        self.security = params;
        self
    }

    /// Whether each connection's race keeps its timeline (see
    /// [`Preconnection::race_timeline`]; off by default).
    pub fn race_timeline(mut self, keep: bool) -> ConnectorBuilder {
        self.race_timeline = keep;
        self
    }

    /// Compiles the properties for `http` and `https` and checks that they allow only
    /// byte streams hyper can speak over. Errors: bad properties, no stack left, or a
    /// stack other than TCP/MPTCP allowed. Cost: two compilations and two plans, once.
    pub fn build(self) -> Result<Connector, Error> {
        let mut props = self.props;
        if props.get(Name::Transport).is_none() {
            props = props.protocols(Preference::Require, [Protocol::Tcp, Protocol::Mptcp]);
        }
        let plain = props.clone().ignore(Name::Security).compile()?;
        let secure = props.require(Name::Security).compile()?;
        for (props, security) in [(&plain, false), (&secure, true)] {
            check_stacks(&self.ctx, props, security)?;
        }
        let mut params = self.security;
        if params.alpn.is_empty() {
            params = params.alpn(DEFAULT_ALPN);
        }
        Ok(Connector {
            inner: Arc::new(Inner {
                ctx: self.ctx,
                plain,
                secure,
                security: params,
                race_timeline: self.race_timeline,
                origins: Mutex::new(HashMap::new()),
            }),
        })
    }
}

/// Fails unless `props` let taps run at least one stack and every stack it may run is a
/// byte stream over TCP or MPTCP, plain or TLS as `secure` says.
fn check_stacks(ctx: &Context, props: &Properties, secure: bool) -> Result<(), Error> {
    let plan = Preconnection::new(ctx, props.clone()).plan()?;
    let runnable: Vec<_> = plan
        .stacks()
        .iter()
        .filter(|s| s.unavailable.is_none())
        .map(|s| s.stack)
        .collect();
    if let Some(bad) = runnable.iter().find(|s| {
        !matches!(s.protocol, Protocol::Tcp | Protocol::Mptcp)
            || (s.security != Security::None) != secure
    }) {
        return Err(Error::config(ConfigError::HttpStack {
            secure,
            stack: *bad,
        }));
    }
    if runnable.is_empty() {
        return Err(Error::config(ConfigError::HttpNoStack(secure)));
    }
    Ok(())
}

impl Connector {
    /// A connector in `ctx` with the default properties and security parameters: TCP or
    /// MPTCP for `http`, TLS over them for `https` (verified against the system's trust
    /// store and the Mozilla roots, ALPN `h2`,`http/1.1`).
    pub fn new(ctx: &Context) -> Result<Connector, Error> {
        Connector::builder(ctx).build()
    }

    /// A builder, to set properties or security parameters.
    pub fn builder(ctx: &Context) -> ConnectorBuilder {
        ConnectorBuilder {
            ctx: ctx.clone(),
            props: TransportProperties::new(),
            security: SecurityParameters::new(),
            race_timeline: false,
        }
    }

    /// The context (resolver, PIB, CIB) the races run in.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// Races a connection to `uri`'s origin (`http` or `https`; the port defaults to 80
    /// or 443). Errors: a URI without a host or with another scheme, a bad security file
    /// (first connection to the origin), every failure of the race.
    pub async fn connect(&self, uri: &Uri) -> Result<HttpStream, Error> {
        let pre = self.preconnection(uri)?;
        let conn = pre.initiate().await?;
        Ok(HttpStream::new(conn))
    }

    /// The origin's preconnection: from the cache, or built (and its plan and TLS
    /// configuration prepared) and kept.
    pub(crate) fn preconnection(&self, uri: &Uri) -> Result<Arc<Preconnection>, Error> {
        let (secure, host, port) = origin_of(uri)?;
        let key: Origin = (secure, host.into(), port);
        if let Some(pre) = lock(&self.inner.origins).get(&key) {
            return Ok(pre.clone());
        }
        // Built outside the lock (reading CA files takes a while); if two first requests
        // to an origin race here, the first one stored is kept.
        let inner = &self.inner;
        let props = if secure { &inner.secure } else { &inner.plain };
        let mut pre = Preconnection::new(&inner.ctx, props.clone())
            .race_timeline(inner.race_timeline)
            .remote(RemoteEndpoint::new(host, port));
        if secure {
            pre = pre.security(inner.security.clone());
        }
        pre.prepare()?;
        let mut origins = lock(&inner.origins);
        if origins.len() >= ORIGINS {
            origins.clear();
        }
        Ok(origins.entry(key).or_insert_with(|| Arc::new(pre)).clone())
    }
}

/// The origin of `uri`: whether it is `https`, its host (IPv6 without brackets) and port
/// (the scheme's default when it names none). Fails for another scheme or no host.
pub(crate) fn origin_of(uri: &Uri) -> Result<(bool, &str, u16), Error> {
    let secure = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(Error::config(ConfigError::HttpScheme(uri.clone()))),
    };
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| Error::config(ConfigError::HttpNoHost(uri.clone())))?
        .trim_matches(['[', ']']);
    let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
    Ok((secure, host, port))
}

/// Locks `m`, also after a panic elsewhere (the map stays consistent: every change is
/// one call).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl tower_service::Service<Uri> for Connector {
    type Response = HttpStream;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = Pin<Box<dyn Future<Output = Result<HttpStream, Self::Error>> + Send>>;

    /// Always ready: connections are raced concurrently, with no limit of their own.
    fn poll_ready(&mut self, _cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    /// Races a connection to `uri`'s origin ([`Connector::connect`]); a failure is the
    /// taps [`Error`], boxed.
    fn call(&mut self, uri: Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { this.connect(&uri).await.map_err(Into::into) })
    }
}
