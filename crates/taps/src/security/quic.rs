//! QUIC (quinn): one client UDP socket per context shared by every attempt and
//! connection, and one bidirectional stream per taps connection.
//!
//! A taps connection over QUIC is a bidirectional stream of a QUIC connection, opened by
//! the client: the first one made by the race, more by flow mapping (connections to the
//! same remote with the same properties become streams of one QUIC connection, no
//! handshake) and `Connection::clone_flow`. The QUIC connection closes when the last of
//! its streams is done. QUIC makes a stream known to the peer only when data crosses it,
//! so a listener hands out each accepted stream when the client first sends on it.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use quinn::{ConnectionError, Endpoint};
use rustls::Error as TlsError;
use rustls_pki_types::CertificateDer;
use taps_core::{AttemptCause, LayerError, VerifyFailure};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::verify::ServerVerifier;
use super::SecurityInfo;
use close::{close_words, stream_error};

mod close;

/// The UDP socket a context initiates QUIC from: created on the first QUIC attempt
/// (dual-stack `[::]:0` where the host allows, else `0.0.0.0:0`), then shared, like
/// quinn's own `Endpoint`, with its local address (asked once, not per connection).
/// Cheap to hold before use (no socket).
#[derive(Debug, Default)]
pub(crate) struct QuicClientSocket(OnceLock<(Endpoint, SocketAddr)>);

impl QuicClientSocket {
    /// The endpoint and its local address, created on first use (needs the tokio
    /// runtime).
    pub(crate) fn endpoint(&self) -> io::Result<(Endpoint, SocketAddr)> {
        if let Some(e) = self.0.get() {
            return Ok(e.clone());
        }
        let e = Endpoint::client(SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)))
            .or_else(|_| Endpoint::client(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))))?;
        let local = e.local_addr()?;
        Ok(self.0.get_or_init(|| (e, local)).clone())
    }
}

/// How long a QUIC connection (or handshake) may hear nothing before it is given up.
/// A QUIC attempt to a port where nothing listens is refused at once when its port probe
/// ran ([`PortProbe`], first contact); to a port that drops what it gets, or without the
/// probe, nothing comes back through the shared socket, so this bounds the attempt: 10 s
/// leaves a handshake three or four retransmissions on a lossy path, and a race whose
/// other attempts all failed reports in 10 s, not after the 30 s establishment timeout.
/// Established connections send a keep-alive well within it.
pub(crate) const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// The keep-alive interval of established QUIC connections (under [`IDLE_TIMEOUT`]; also
/// keeps NAT bindings open).
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(4);

/// The transport settings every taps QUIC connection uses (built once per process).
pub(crate) fn transport() -> Arc<quinn::TransportConfig> {
    static CONFIG: OnceLock<Arc<quinn::TransportConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut t = quinn::TransportConfig::default();
            t.max_idle_timeout(IDLE_TIMEOUT.try_into().ok());
            t.keep_alive_interval(Some(KEEP_ALIVE));
            Arc::new(t)
        })
        .clone()
}

/// The transport settings of a client whose properties set `connTimeout` (RFC 9622's
/// abort timeout): the connection is given up when it hears nothing from the peer for
/// that long (QUIC's idle timeout, the nearest QUIC has to TCP's user timeout: an
/// unacknowledged packet means nothing heard), with keep-alives at a third of it so an
/// idle but healthy connection stays up. `None` (or zero): the defaults. Built once per
/// preconnection.
pub(crate) fn transport_with_abort(abort: Option<Duration>) -> Arc<quinn::TransportConfig> {
    let Some(abort) = abort.filter(|t| !t.is_zero()) else {
        return transport();
    };
    let mut t = quinn::TransportConfig::default();
    t.max_idle_timeout(abort.try_into().ok());
    t.keep_alive_interval(Some((abort / 3).min(KEEP_ALIVE)));
    Arc::new(t)
}

/// A QUIC server endpoint on `addr` (UDP; an IPv6 socket takes IPv6 only, so the
/// unspecified addresses of both families can each have one).
pub(crate) fn listen(addr: SocketAddr, config: quinn::ServerConfig) -> io::Result<Endpoint> {
    Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(config),
        bind_server_socket(addr)?,
        Arc::new(quinn::TokioRuntime),
    )
}

/// A listener's UDP socket on `addr` (an IPv6 one takes IPv6 only).
pub(crate) fn bind_server_socket(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

impl QuicClientSocket {
    /// QUIC connections of this socket still open (0 before the first QUIC attempt).
    pub(crate) fn open_connections(&self) -> usize {
        self.0.get().map_or(0, |(e, _)| e.open_connections())
    }
}

/// One QUIC connection, shared by the streams (taps connections) on it: closed when
/// the last holder lets go (the client's streams; on the server also the task accepting
/// the peer's next streams).
#[derive(Debug)]
pub(crate) struct SharedQuic {
    pub(crate) conn: quinn::Connection,
    /// What its handshake agreed on.
    pub(crate) info: SecurityInfo,
    /// The local address of the endpoint's socket.
    pub(crate) local: SocketAddr,
}

impl Drop for SharedQuic {
    fn drop(&mut self) {
        self.conn.close(0u32.into(), b"");
    }
}

/// One bidirectional stream of a QUIC connection, as a byte stream.
#[derive(Debug)]
pub(crate) struct QuicStream {
    pub(crate) shared: Arc<SharedQuic>,
    /// Taken by `Drop`, which lets what is queued on it reach the peer.
    send: Option<quinn::SendStream>,
    recv: quinn::RecvStream,
}

impl QuicStream {
    /// The remote address (the path's current one).
    pub(crate) fn remote(&self) -> SocketAddr {
        // The client socket is dual-stack: an IPv4 peer shows as ::ffff:a.b.c.d there.
        let addr = self.shared.conn.remote_address();
        SocketAddr::new(addr.ip().to_canonical(), addr.port())
    }

    /// Gives this stream up (reset and stopped with `code`; nothing was sent on it, so
    /// the peer learns of it only through the reset), keeping the connection: for a
    /// protocol that opens streams of its own (HTTP/3). Cost: two frames queued.
    #[cfg(feature = "http")]
    pub(crate) fn cancel(&mut self, code: u32) {
        if let Some(mut send) = self.send.take() {
            let _ = send.reset(code.into());
        }
        let _ = self.recv.stop(code.into());
    }

    /// A new stream of the same connection, for a mapped or cloned flow: no handshake.
    /// `None` when the connection is closing or the peer allows no more streams now.
    pub(crate) async fn sibling(shared: &Arc<SharedQuic>) -> Option<QuicStream> {
        if shared.conn.close_reason().is_some() {
            return None;
        }
        // The peer's stream limit: wait briefly for credit, else race anew.
        let open =
            tokio::time::timeout(std::time::Duration::from_millis(50), shared.conn.open_bi());
        let (send, recv) = open.await.ok()?.ok()?;
        Some(QuicStream {
            shared: shared.clone(),
            send: Some(send),
            recv,
        })
    }
}

/// Connects to `remote` with `config` from `endpoint` (bound to `local`), verifying
/// `server_name` (with `verifier`, which knows the typed reason of its rejections), and
/// opens the stream. The handshake is the finish line: done when the
/// peer's certificate verified.
///
/// With `probe` (sent to `remote` before, [`PortProbe::ask`]), an ICMP port unreachable
/// for it ends the attempt at once as [`AttemptCause::Refused`].
pub(crate) async fn connect(
    (endpoint, local): (&Endpoint, SocketAddr),
    config: quinn::ClientConfig,
    remote: SocketAddr,
    (server_name, verifier): (&str, Option<&ServerVerifier>),
    probe: Option<PortProbe>,
) -> Result<(QuicStream, SecurityInfo), AttemptCause> {
    let connecting = endpoint
        .connect_with(config, remote, server_name)
        .map_err(AttemptCause::other)?;
    let handshake = async {
        connecting
            .await
            .map_err(|e| connection_failure(e, server_name, verifier))
    };
    let conn = match &probe {
        // Dropping the handshake's future closes the quinn connection.
        Some(probe) => tokio::select! {
            biased;
            conn = handshake => conn?,
            () = probe.refused() => return Err(AttemptCause::Refused),
        },
        None => handshake.await?,
    };
    drop(probe);
    let (send, recv) = conn
        .open_bi()
        .await
        .map_err(|e| connection_failure(e, server_name, verifier))?;
    let info = security_info(&conn);
    let shared = Arc::new(SharedQuic {
        conn,
        info: info.clone(),
        local,
    });
    Ok((
        QuicStream {
            shared,
            send: Some(send),
            recv,
        },
        info,
    ))
}

/// Whether anything listens on a QUIC candidate's UDP port, asked the way the kernel
/// answers: a zero-length datagram from a socket of its own, connected to the address.
/// Where nothing listens, the kernel's ICMP port unreachable comes back on that socket
/// as `ECONNREFUSED`; the context's shared QUIC socket is unconnected, and Linux reports
/// ICMP errors to an unconnected socket only through `IP_RECVERR`, whose pending error
/// would also fail the next send of any other connection on it. A QUIC server drops the
/// empty datagram (a client's first packet must fill 1,200 bytes). Cost: a socket and
/// ~7 syscalls per attempt, so the race asks for it only on first contact (no success
/// of the candidate in the CIB); best effort: without a socket, no probe.
pub(crate) struct PortProbe(tokio::net::UdpSocket);

impl PortProbe {
    /// Asks `remote`'s port before a QUIC attempt: [`AttemptCause::Refused`] when the
    /// refusal came while the probe was sent (nothing to build: no connection, and no
    /// context socket if this is its first QUIC attempt); otherwise the probe to watch
    /// beside the handshake, `None` when none could be made.
    pub(crate) fn ask(remote: SocketAddr) -> Result<Option<PortProbe>, AttemptCause> {
        match PortProbe::send(remote) {
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Err(AttemptCause::Refused),
            sent => Ok(sent.ok()),
        }
    }

    /// Sends the probe to `remote`. `ConnectionRefused` when the refusal came while it was
    /// sent (the peer is this host: the kernel answers inside the send; one `getsockopt`
    /// tells), before the socket enters the runtime; another error when no probe could be
    /// made (best effort: the attempt goes on without one).
    fn send(remote: SocketAddr) -> io::Result<PortProbe> {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(remote),
            socket2::Type::DGRAM.nonblocking(),
            Some(socket2::Protocol::UDP),
        )?;
        socket.connect(&remote.into())?;
        socket.send(&[])?;
        if let Some(e) = socket.take_error()? {
            return Err(e);
        }
        tokio::net::UdpSocket::from_std(socket.into()).map(PortProbe)
    }

    /// Completes when the probe was refused; never otherwise (an answer, another error).
    async fn refused(&self) {
        let mut buf = [0u8; 1];
        loop {
            match self.0.recv(&mut buf).await {
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return,
                Ok(_) => continue,
                Err(_) => std::future::pending::<()>().await,
            }
        }
    }
}

/// The server side of an accepted connection: its handshake.
pub(crate) async fn accept(
    incoming: quinn::Incoming,
    local: SocketAddr,
) -> Result<Arc<SharedQuic>, AttemptCause> {
    let conn = incoming
        .await
        .map_err(|e| connection_failure(e, "the client", None))?;
    let info = security_info(&conn);
    Ok(Arc::new(SharedQuic { conn, info, local }))
}

/// The next stream the client opens on an accepted connection; `None` once the
/// connection is closed.
pub(crate) async fn accept_stream(shared: &Arc<SharedQuic>) -> Option<QuicStream> {
    let (send, recv) = shared.conn.accept_bi().await.ok()?;
    Some(QuicStream {
        shared: shared.clone(),
        send: Some(send),
        recv,
    })
}

/// What the handshake agreed on (QUIC is always TLS 1.3).
fn security_info(conn: &quinn::Connection) -> SecurityInfo {
    let alpn = conn
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.protocol);
    let peer_certificates = conn
        .peer_identity()
        .and_then(|p| p.downcast::<Vec<CertificateDer<'static>>>().ok())
        .map(|c| *c)
        .unwrap_or_default();
    SecurityInfo {
        version: "TLS 1.3 (QUIC)",
        cipher_suite: "negotiated by QUIC",
        alpn,
        peer_certificates,
        resumed: false,
        early_data: false,
    }
}

/// A failed QUIC handshake or connection as the typed cause, quinn's error kept inside.
/// quinn reports a rejected certificate as a TLS alert with rustls' text only: the
/// verifier that rejected it gives the typed reason back for that text (the same as
/// TLS's); without it, the reason is read from the text.
fn connection_failure(
    e: ConnectionError,
    server_name: &str,
    verifier: Option<&ServerVerifier>,
) -> AttemptCause {
    match e {
        ConnectionError::TimedOut => AttemptCause::TimedOut { after: None },
        ConnectionError::Reset => AttemptCause::Reset,
        ConnectionError::TransportError(ref t) => {
            if let Some(c) = verifier.and_then(|v| v.rejection(&t.reason)) {
                return AttemptCause::Verification {
                    server_name: server_name.into(),
                    reason: super::failure::verify_failure(&c),
                };
            }
            match certificate_reason(&t.reason) {
                Some(reason) => AttemptCause::Verification {
                    server_name: server_name.into(),
                    reason: reason.unwrap_or_else(|| VerifyFailure::Other(QuicFailure::kept(e))),
                },
                None => AttemptCause::Handshake(QuicFailure::kept(e)),
            }
        }
        // The peer's TLS refused the handshake (RFC 9001 4.8: the alert in the code).
        ConnectionError::ConnectionClosed(ref c) if crypto_alert(c.error_code).is_some() => {
            AttemptCause::Handshake(QuicFailure::kept(e))
        }
        other => AttemptCause::Other(QuicFailure::kept(other)),
    }
}

/// A QUIC connection that failed, as quinn reported it. The words come from the
/// variant: a TLS alert by its name with the peer's reason, a rejected certificate's
/// reason in words, a peer's close with its code and reason, else quinn's words.
///
/// A TLS alert inside QUIC (RFC 9001 4.8: the crypto error 0x100 + alert) is also the
/// value TLS over TCP reports for it, and the source in its stead, so a cause reads the
/// same, and `find::<rustls::Error>()` finds the same, whichever stack failed: the
/// peer's alert is `rustls::Error::AlertReceived` (0x178 from the peer: `AlertReceived(
/// NoApplicationProtocol)`, as an OpenSSL server's alert 120 over TCP), and this side's
/// refusal of the peer's ALPN is `rustls::Error::NoApplicationProtocol` (rustls sends
/// alert 120 for nothing else).
#[derive(Debug)]
struct QuicFailure {
    error: ConnectionError,
    tls: Option<TlsError>,
}

impl QuicFailure {
    fn kept(error: ConnectionError) -> LayerError {
        let tls = match &error {
            ConnectionError::ConnectionClosed(c) => crypto_alert(c.error_code)
                .map(|a| TlsError::AlertReceived(rustls::AlertDescription::from(a))),
            ConnectionError::TransportError(t)
                if crypto_alert(t.code) == Some(NO_APPLICATION_PROTOCOL)
                    && !t.reason.starts_with(CERTIFICATE_PREFIX) =>
            {
                Some(TlsError::NoApplicationProtocol)
            }
            _ => None,
        };
        LayerError::new(QuicFailure { error, tls })
    }
}

impl fmt::Display for QuicFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let peer_reason = match &self.error {
            ConnectionError::ConnectionClosed(c) => String::from_utf8_lossy(&c.reason).into(),
            ConnectionError::TransportError(t) => t.reason.clone(),
            _ => String::new(),
        };
        if let Some(tls) = &self.tls {
            return f.write_str(&with_reason(super::failure::tls_words(tls), &peer_reason));
        }
        match &self.error {
            ConnectionError::TransportError(t) => {
                match (
                    t.reason.strip_prefix(CERTIFICATE_PREFIX),
                    crypto_alert(t.code),
                ) {
                    (Some(rest), _) => f.write_str(&super::failure::debug_free(rest)),
                    (None, Some(alert)) => {
                        f.write_str(&with_reason(super::failure::alert_words(alert), &t.reason))
                    }
                    (None, None) => t.fmt(f),
                }
            }
            other => match close_words(other, false) {
                Some(words) => f.write_str(&words),
                None => other.fmt(f),
            },
        }
    }
}

impl std::error::Error for QuicFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.tls {
            Some(tls) => Some(tls),
            None => Some(&self.error),
        }
    }
}

/// TLS's alert 120, no_application_protocol (RFC 7301): no ALPN in common.
const NO_APPLICATION_PROTOCOL: u8 = 120;

/// The TLS alert a QUIC crypto error code carries (RFC 9001 4.8: 0x0100 + the alert).
fn crypto_alert(code: quinn::TransportErrorCode) -> Option<u8> {
    let code = u64::from(code);
    (0x100..=0x1ff)
        .contains(&code)
        .then(|| (code - 0x100) as u8)
}

/// `words`, and the peer's reason phrase after it when it adds one.
fn with_reason(words: String, reason: &str) -> String {
    if reason.is_empty() || words.contains(reason) {
        words
    } else {
        format!("{words} ({reason})")
    }
}

/// How rustls' text of a rejected certificate begins.
const CERTIFICATE_PREFIX: &str = "invalid peer certificate: ";

/// The certificate failure in rustls' text of a QUIC transport error, if it is one
/// (quinn keeps rustls' error only as text): `Some(None)` for a rejection without a
/// [`VerifyFailure`] variant of its own.
fn certificate_reason(text: &str) -> Option<Option<VerifyFailure>> {
    let rest = text.strip_prefix(CERTIFICATE_PREFIX)?;
    Some(
        if rest.contains("UnknownIssuer") || rest.contains("unknown issuer") {
            Some(VerifyFailure::UnknownIssuer)
        } else if rest.contains("NotValidForName") || rest.contains("not valid for name") {
            Some(VerifyFailure::NameMismatch)
        } else if rest.contains("Expired") || rest.contains("expired") {
            Some(VerifyFailure::Expired)
        } else if rest.contains("NotValidYet") || rest.contains("not valid yet") {
            Some(VerifyFailure::NotYetValid)
        } else if rest.contains("Revoked") || rest.contains("revoked") {
            Some(VerifyFailure::Revoked)
        } else if rest.contains("BadSignature") {
            Some(VerifyFailure::BadSignature)
        } else {
            None
        },
    )
}

impl AsyncRead for QuicStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let h3 = this.is_h3();
        Pin::new(&mut this.recv)
            .poll_read(cx, buf)
            .map_err(|e| stream_error(e, h3))
    }
}

impl QuicStream {
    fn send(&mut self) -> io::Result<&mut quinn::SendStream> {
        self.send
            .as_mut()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "QUIC stream closed"))
    }

    /// Whether the connection's application is HTTP/3 (for the names of its error codes).
    fn is_h3(&self) -> bool {
        self.shared.info.alpn.as_deref() == Some(b"h3")
    }
}

impl AsyncWrite for QuicStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let h3 = this.is_h3();
        match this.send() {
            Ok(s) => AsyncWrite::poll_write(Pin::new(s), cx, data).map_err(|e| stream_error(e, h3)),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let h3 = this.is_h3();
        match this.send() {
            Ok(s) => AsyncWrite::poll_flush(Pin::new(s), cx).map_err(|e| stream_error(e, h3)),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    /// Finishes the stream (the peer reads to the end).
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let h3 = this.is_h3();
        match this.send() {
            Ok(s) => AsyncWrite::poll_shutdown(Pin::new(s), cx).map_err(|e| stream_error(e, h3)),
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

/// How long a dropped QUIC connection may linger to deliver what its stream still has
/// queued, at most.
const LINGER: std::time::Duration = std::time::Duration::from_secs(5);

impl Drop for QuicStream {
    /// Like a TCP socket closed with data still queued: the stream is finished and the
    /// connection kept (in a task) until the peer acknowledged everything, or for
    /// [`LINGER`] at most; then this stream's hold on the connection ends (the last one
    /// closes it). Closing at once would discard what was queued. When the peer has
    /// acknowledged everything already (the usual end of a request and its answer), it
    /// ends at once: no task, timer or wake-up (one look at the stream's state).
    fn drop(&mut self) {
        let Some(mut send) = self.send.take() else {
            return;
        };
        // Finished already if the application closed gracefully.
        let _ = send.finish();
        let mut stopped = std::pin::pin!(send.stopped());
        let mut look = Context::from_waker(std::task::Waker::noop());
        if stopped.as_mut().poll(&mut look).is_ready() {
            return;
        }
        let shared = self.shared.clone();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let _ = tokio::time::timeout(LINGER, send.stopped()).await;
            drop(shared);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crypto_close_names_its_alert() {
        assert_eq!(
            crypto_alert(quinn::TransportErrorCode::crypto(120)),
            Some(120)
        );
        assert_eq!(
            crypto_alert(quinn::TransportErrorCode::PROTOCOL_VIOLATION),
            None
        );
        let w = with_reason(super::super::failure::alert_words(120), "");
        assert!(w.contains("no application protocol"), "{w}");
        let w = with_reason(super::super::failure::alert_words(40), "bad");
        assert!(
            w.contains("handshake failure") && w.ends_with("(bad)"),
            "{w}"
        );
    }
}
