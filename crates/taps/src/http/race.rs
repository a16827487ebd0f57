//! The protocol race of [`Client`](super::Client): HTTP/3 over QUIC (ALPN `h3`, to the
//! origin or its `Alt-Svc` alternative) against HTTP/2 or HTTP/1.1 over TLS/TCP (ALPN
//! `h2`,`http/1.1`), each leg itself a taps race over addresses and families.
//!
//! QUIC starts first; TLS/TCP starts QUIC's head start (`2 × its connect time + 10 ms`
//! when the CIB saw QUIC connect there, 100 ms on first contact, or the client's fixed
//! one) after QUIC's first attempt (its lookups take none of it), or at once when QUIC
//! fails. QUIC the CIB marks broken (5 minutes, doubling per failure in a row) is not
//! tried; a QUIC attempt that TLS/TCP overtook is recorded there as overtaken, as taps'
//! own race does, so the next connection skips it.
//!
//! Also what a client's clones share ([`Shared`]: the connector, the QUIC
//! preconnections, the `Alt-Svc` cache, the pool) and the connections it pools
//! ([`Conn`]).

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Uri;
use http_body_util::Full;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::TokioExecutor;
use taps_core::policy::AttemptRecord;
use taps_core::properties::Protocol;
use taps_core::{AttemptCause, Security, Stack};

use super::altsvc::AltSvcCache;
use super::report::{ClientError, Established, Leg, ProtocolRace, Protocols};
use super::{lock, ConnectionDetails, Connector, HttpStream};
use crate::security::quic::SharedQuic;
use crate::SecurityParameters;
use crate::{Context, Error, Preconnection, Properties, RemoteEndpoint};

/// QUIC's head start on first contact (HEv3's recommended minimum, as taps' own race).
pub(crate) const HEAD_START: Duration = Duration::from_millis(100);

/// The origin of a request: `(scheme, host, port)`, and a URI naming it for the
/// connector.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Origin {
    pub(crate) secure: bool,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) uri: Uri,
}

impl Origin {
    pub(crate) fn of(uri: &Uri) -> Result<Origin, Error> {
        let (secure, host, port) = super::origin_of(uri)?;
        Ok(Origin {
            secure,
            host: host.to_owned(),
            port,
            uri: uri.clone(),
        })
    }

    pub(crate) fn name(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// A pool's key: `(https, host, port)`.
pub(crate) type PoolKey = (bool, String, u16);

/// The pooled connections of one origin: HTTP/3, and HTTP/2 or HTTP/1.1.
#[derive(Default)]
pub(crate) struct Entry {
    pub(crate) h3: Option<(Conn, Established)>,
    pub(crate) tcp: Option<(Conn, Established)>,
    /// Held while a race for the origin runs.
    pub(crate) racing: Arc<tokio::sync::Mutex<()>>,
}

/// What clones of a client share.
pub(crate) struct Shared {
    pub(crate) ctx: Context,
    pub(crate) connector: Connector,
    pub(crate) protocols: Protocols,
    pub(crate) head_start: Option<Duration>,
    pub(crate) altsvc: AltSvcCache,
    pub(crate) quic_props: Properties,
    pub(crate) security: SecurityParameters,
    pub(crate) race_timeline: bool,
    pub(crate) quic_pres: Mutex<HashMap<(String, u16, String), Arc<Preconnection>>>,
    pub(crate) pool: Mutex<HashMap<PoolKey, Entry>>,
}

impl Shared {
    /// The preconnection of QUIC to `(host, port)` for an origin named `origin_host`
    /// (the name verified): cached, built and prepared on first use.
    pub(crate) fn quic_preconnection(
        &self,
        host: &str,
        port: u16,
        origin_host: &str,
    ) -> Result<Arc<Preconnection>, Error> {
        let key = (host.to_owned(), port, origin_host.to_owned());
        if let Some(pre) = lock(&self.quic_pres).get(&key) {
            return Ok(pre.clone());
        }
        let mut params = self.security.clone().alpn(["h3"]);
        if host != origin_host && params.server_name.is_none() {
            params = params.server_name(origin_host);
        }
        let pre = Preconnection::new(&self.ctx, self.quic_props.clone())
            .race_timeline(self.race_timeline)
            .remote(RemoteEndpoint::new(host, port))
            .security(params);
        pre.prepare()?;
        let mut map = lock(&self.quic_pres);
        if map.len() >= super::ORIGINS {
            map.clear();
        }
        Ok(map.entry(key).or_insert_with(|| Arc::new(pre)).clone())
    }
}

/// HTTP/3's code for a request the client gave up (RFC 9114 §8.1): the stream taps'
/// QUIC connection opened is reset with it, unused.
const H3_REQUEST_CANCELLED: u32 = 0x10c;
/// HTTP/3's code for a connection closed without error.
const H3_NO_ERROR: u32 = 0x100;
/// The longest head start a QUIC connection that the CIB knows gets.
const MAX_HEAD_START: Duration = Duration::from_secs(2);

/// An HTTP connection: the handle requests are sent on. Cheap to clone.
#[derive(Clone)]
pub(crate) enum Conn {
    H3(Arc<H3Conn>),
    H2(http2::SendRequest<Full<Bytes>>),
    H1(Arc<tokio::sync::Mutex<http1::SendRequest<Full<Bytes>>>>),
}

impl Conn {
    /// Whether the connection can no longer carry requests.
    pub(crate) fn is_closed(&self) -> bool {
        match self {
            Conn::H3(c) => c.quic.conn.close_reason().is_some(),
            Conn::H2(s) => s.is_closed(),
            Conn::H1(s) => s.try_lock().is_ok_and(|s| s.is_closed()),
        }
    }

    pub(crate) fn version(&self) -> http::Version {
        match self {
            Conn::H3(_) => http::Version::HTTP_3,
            Conn::H2(_) => http::Version::HTTP_2,
            Conn::H1(_) => http::Version::HTTP_11,
        }
    }
}

/// An HTTP/3 connection: h3's request sender, and the QUIC connection it runs on (kept
/// open while this lives; closed with `H3_NO_ERROR` when the last clone goes).
pub(crate) struct H3Conn {
    pub(crate) send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    quic: Arc<SharedQuic>,
}

impl Drop for H3Conn {
    fn drop(&mut self) {
        self.quic.conn.close(H3_NO_ERROR.into(), b"");
    }
}

/// What the CIB knows of QUIC to a target.
enum QuicKnown {
    Unknown,
    Proven(Duration),
    Broken { cause: String, age: Duration },
}

/// QUIC's record at `(host, port)`: any unexpired success (its best connect time), else
/// any unexpired failure. Cost: one lock and a scan of the CIB.
fn quic_known(ctx: &crate::Context, host: &str, port: u16, now: Instant) -> QuicKnown {
    let cib = ctx.cib();
    let mut known = QuicKnown::Unknown;
    for (k, o) in cib.outcomes() {
        let ours = &*k.endpoint == host && k.stack.protocol == Protocol::Quic;
        let age = now.saturating_duration_since(o.at);
        if !ours || k.remote.port() != port || age >= cib.lifetime_of(k, o) {
            continue;
        }
        match (&o.last, &known) {
            (Ok(()), QuicKnown::Proven(best)) if *best <= o.rtt_median => {}
            (Ok(()), _) => known = QuicKnown::Proven(o.rtt_median),
            (Err(cause), QuicKnown::Unknown) => {
                let cause = cause.to_string();
                known = QuicKnown::Broken { cause, age };
            }
            (Err(_), _) => {}
        }
    }
    known
}

/// Whether the CIB marks QUIC to `(host, port)` broken.
pub(crate) fn quic_broken(ctx: &crate::Context, host: &str, port: u16) -> bool {
    matches!(
        quic_known(ctx, host, port, Instant::now()),
        QuicKnown::Broken { .. }
    )
}

type LegResult = Result<(Conn, ConnectionDetails), String>;
type Leg3 = Pin<Box<dyn Future<Output = LegResult> + Send>>;

/// What the race gives: a new connection, or `None` when the pooled one stood in; and
/// the details and race to report.
pub(crate) type Won = (Option<Conn>, Established);

/// What [`plan`] decides: the race's record so far, the QUIC leg's preconnection (if it
/// runs) and the TLS/TCP leg's (if it may run).
type Planned = (
    ProtocolRace,
    Option<Arc<Preconnection>>,
    Option<Arc<Preconnection>>,
);

/// The race's start: where QUIC goes, both legs' preconnections (built before the clock
/// starts: the first reads the trust store and CA files, and the head start is the
/// network's, not the setup's), whether QUIC runs and with what head start.
fn plan(sh: &Arc<Shared>, origin: &Origin) -> Result<Planned, ClientError> {
    let alt = sh.altsvc.get(&origin.host, origin.port, Instant::now());
    let from_alt_svc = alt.is_some();
    let target = alt.map_or((origin.host.clone(), origin.port), |a| (a.host, a.port));
    let mut race = ProtocolRace {
        quic_target: target.clone(),
        from_alt_svc,
        head_start: Duration::ZERO,
        quic_began: None,
        quic: Leg::NotStarted,
        tcp: Leg::NotStarted,
        took: Duration::ZERO,
    };
    let mut quic = None;
    // Both legs' preconnections are built before the clock starts (the first reads the
    // trust store and CA files): the head start is the network's, not the setup's.
    let tcp_pre = match sh.protocols {
        Protocols::Http3 if origin.secure => None,
        _ => Some(sh.connector.preconnection(&origin.uri)?),
    };
    let quic_pre = match (origin.secure, sh.protocols) {
        (false, _) | (_, Protocols::Http2) => None,
        _ => Some(sh.quic_preconnection(&target.0, target.1, &origin.host)?),
    };
    let known = quic_known(&sh.ctx, &target.0, target.1, Instant::now());
    match (sh.protocols, known) {
        _ if !origin.secure => race.quic = Leg::Skipped("http:// has no HTTP/3".into()),
        (Protocols::Http2, _) => race.quic = Leg::Skipped("HTTP/3 not allowed".into()),
        (Protocols::Any, QuicKnown::Broken { cause, age }) => {
            let why = format!(
                "the CIB marks it broken ({cause}, {:.0} s ago)",
                age.as_secs_f64()
            );
            race.quic = Leg::Skipped(why);
        }
        (_, known) => {
            race.head_start = sh.head_start.unwrap_or(match known {
                QuicKnown::Proven(rtt) => (2 * rtt + Duration::from_millis(10)).min(MAX_HEAD_START),
                _ => HEAD_START,
            });
            quic = Some(quic_pre.expect("prepared for a secure origin"));
        }
    }
    if tcp_pre.is_none() {
        race.tcp = Leg::Skipped("HTTP/2 and HTTP/1.1 not allowed".into());
    }
    Ok((race, quic, tcp_pre))
}

/// Races HTTP/3 against TLS/TCP for `origin`. `pooled`: the origin's pooled HTTP/2 or
/// HTTP/1.1 connection, which stands in for a new TLS/TCP one. Errors: the race, both
/// legs failed or skipped.
pub(crate) async fn race(
    sh: &Arc<Shared>,
    origin: &Origin,
    pooled: Option<Established>,
) -> Result<Won, ClientError> {
    let (mut race, quic_pre, tcp_pre) = plan(sh, origin)?;
    let target = race.quic_target.clone();
    let start = Instant::now();
    // Told when QUIC's race starts its first attempt: the head start counts from then.
    let began = Arc::new(tokio::sync::Notify::new());
    let mut quic: Option<Leg3> =
        quic_pre.map(|pre| -> Leg3 { Box::pin(connect_h3(pre, began.clone())) });
    let mut tcp: Option<Leg3> = None;
    // TLS/TCP's start: due at `tcp_at`, or (`tcp_after_quic`) once QUIC's attempt began.
    let mut tcp_after_quic = tcp_pre.is_some() && quic.is_some();
    let mut tcp_at = (tcp_pre.is_some() && !tcp_after_quic).then_some(start);
    let quic_began = began.notified();
    tokio::pin!(quic_began);
    let mut quic_started = start;
    loop {
        if quic.is_none() && tcp.is_none() && tcp_at.is_none() && !tcp_after_quic {
            race.took = start.elapsed();
            return Err(ClientError::Connect {
                origin: format!("{}:{}", origin.host, origin.port),
                race: Box::new(race),
            });
        }
        tokio::select! {
            r = opt(&mut quic) => {
                quic = None;
                let after = start.elapsed();
                match r {
                    Ok((conn, details)) => {
                        race.quic = Leg::Won(after);
                        if tcp.is_some() {
                            race.tcp = Leg::Lost(after);
                        }
                        race.took = after;
                        return Ok((Some(conn), Established::new(http::Version::HTTP_3, details, race)));
                    }
                    Err(error) => {
                        race.quic = Leg::Failed { after, error };
                        if tcp_after_quic || tcp_at.is_some() {
                            tcp_at = Some(Instant::now());
                        }
                        tcp_after_quic = false;
                    }
                }
            }
            r = opt(&mut tcp) => {
                tcp = None;
                let after = start.elapsed();
                match r {
                    Ok((conn, details)) => {
                        race.tcp = Leg::Won(after);
                        if quic.is_some() {
                            race.quic = Leg::Lost(after);
                            overtaken(sh, &target, details.remote, quic_started);
                        }
                        race.took = after;
                        let version = conn.version();
                        return Ok((Some(conn), Established::new(version, details, race)));
                    }
                    Err(error) => race.tcp = Leg::Failed { after, error },
                }
            }
            () = &mut quic_began, if race.quic_began.is_none() => {
                quic_started = Instant::now();
                race.quic_began = Some(quic_started - start);
                if tcp_after_quic {
                    tcp_after_quic = false;
                    tcp_at = Some(quic_started + race.head_start);
                }
            }
            () = sleep_until(tcp_at) => {
                tcp_at = None;
                match &pooled {
                    Some(est) => {
                        race.tcp = Leg::Reused;
                        if quic.is_some() {
                            race.quic = Leg::Lost(start.elapsed());
                            overtaken(sh, &target, est.details.remote, quic_started);
                        }
                        race.took = start.elapsed();
                        let est = Established::new(est.version, est.details.clone(), race);
                        return Ok((None, est));
                    }
                    None => {
                        let pre = tcp_pre.clone().expect("prepared when the leg runs");
                        tcp = Some(Box::pin(connect_tcp(pre)));
                    }
                }
            }
        }
    }
}

/// Awaits `f` if there is one; never completes otherwise.
async fn opt<F: Future + Unpin>(f: &mut Option<F>) -> F::Output {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `at`; never completes for `None`. A time already come completes at once,
/// with no timer registered (which would wake the runtime's timer driver and fire on its
/// next millisecond tick).
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) if at <= Instant::now() => {}
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Records in the CIB that QUIC to `target` (at the address TLS/TCP reached, when the
/// target is that host) was overtaken: the next race skips it while the mark lasts.
fn overtaken(sh: &Shared, target: &(String, u16), tls_remote: SocketAddr, since: Instant) {
    let remote = SocketAddr::new(tls_remote.ip(), target.1);
    let record = AttemptRecord {
        stack: Stack::new(Protocol::Quic, Security::QuicTls),
        remote,
        interface: None,
        at: Instant::now(),
        result: Err(AttemptCause::Overtaken {
            silent: since.elapsed(),
        }),
    };
    sh.ctx
        .learn(&Arc::from(target.0.as_str()), std::iter::once(record));
}

/// The QUIC leg: a taps race of QUIC alone (ALPN `h3`, the certificate verified for the
/// origin's host) with `pre`, telling `began` when its first attempt starts, then
/// HTTP/3's control streams set up on the connection.
async fn connect_h3(pre: Arc<Preconnection>, began: Arc<tokio::sync::Notify>) -> LegResult {
    let mut conn = pre
        .initiate_telling(Some(&began))
        .await
        .map_err(|e| e.to_string())?;
    if conn.info().race.is_none() {
        // A stream of a QUIC connection some other flow holds: HTTP/3 needs its own.
        return Err("the QUIC connection there is in use by another flow".into());
    }
    let details = ConnectionDetails::of(&conn);
    let alpn = details.security.as_ref().and_then(|s| s.alpn.clone());
    if alpn.as_deref() != Some(b"h3") {
        return Err("the server did not agree on ALPN h3".into());
    }
    let quic = conn
        .take_quic(H3_REQUEST_CANCELLED)
        .ok_or("not a QUIC connection")?;
    drop(conn);
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(quic.conn.clone()))
        .await
        .map_err(|e| format!("HTTP/3 setup: {e}"))?;
    tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    Ok((Conn::H3(Arc::new(H3Conn { send, quic })), details))
}

/// The TLS/TCP leg: taps' connector (TLS over TCP or MPTCP, ALPN `h2`,`http/1.1`), then
/// hyper's HTTP/2 or HTTP/1.1 handshake, as ALPN said.
async fn connect_tcp(pre: Arc<Preconnection>) -> LegResult {
    let conn = pre.initiate().await.map_err(|e| e.to_string())?;
    let stream = HttpStream::new(conn);
    let details = stream.details().clone();
    if stream.negotiated_h2() {
        let (send, conn) = http2::handshake(TokioExecutor::new(), stream)
            .await
            .map_err(|e| format!("HTTP/2 setup: {e}"))?;
        tokio::spawn(conn);
        Ok((Conn::H2(send), details))
    } else {
        let (send, conn) = http1::handshake(stream)
            .await
            .map_err(|e| format!("HTTP/1.1 setup: {e}"))?;
        tokio::spawn(conn);
        let send = Arc::new(tokio::sync::Mutex::new(send));
        Ok((Conn::H1(send), details))
    }
}
