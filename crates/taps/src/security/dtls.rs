//! DTLS over UDP (and UDP-Lite): a secure message transport, one message per record.
//!
//! # Which DTLS crate
//! [dimpl](https://crates.io/crates/dimpl) 0.9, not webrtc-dtls 0.12:
//! - **DTLS 1.3 and 1.2** (RFC 9147, RFC 6347) with one hybrid ClientHello that either
//!   server version answers; webrtc-dtls speaks DTLS 1.2 only.
//! - **Sans-IO**: it takes datagrams and the time and hands back records and timers, so
//!   taps owns the socket: a client attempt's socket lives in the attempt's future
//!   (cancelling the attempt closes it, as for every other stack) and a listener
//!   demultiplexes one UDP socket by peer address exactly as its plain UDP listener
//!   does. webrtc-dtls wants a `Conn` of its own and runs its own tasks.
//! - **Small**: pure-Rust crypto (the RustCrypto provider; no aws-lc-rs, no OpenSSL),
//!   `forbid(unsafe_code)`; webrtc-dtls brings webrtc-util, its own rcgen/ring and
//!   several async layers.
//! - **No PKI of its own**: dimpl only checks that the peer signed the handshake with
//!   the key of the certificate it sent, and hands that certificate over. taps verifies
//!   it with the verifier TLS and QUIC use (rustls' webpki verifier on the trust
//!   [`ClientSecurity`](super::ClientSecurity) builds, configured certificates pinned,
//!   the name the application asked for), before the handshake counts as done; a rejection is the same typed
//!   [`AttemptCause::Verification`] as TLS's.
//!
//! Limits of this build, all from dimpl: ECDSA certificates only (P-256, P-384; an RSA
//! identity serves TLS and QUIC but not DTLS, and the listener says why), the peer's
//! leaf certificate only (a server's chain must be signed by a trusted CA directly),
//! no SNI, no ALPN, no session resumption, and the negotiated cipher suite is not
//! reported (`"unknown"`). The client always holds a certificate (dimpl's engine needs
//! one): the identity's if it has one, else a throw-away self-signed one, sent only
//! if a server asks.

mod flow;
mod routes;

pub(crate) use flow::{DtlsFlow, MAX_MESSAGE};

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use dimpl::{Config, Dtls, DtlsCertificate, ProtocolVersion};
use rustls::client::danger::ServerCertVerifier;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use taps_core::{AttemptCause, LayerError};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use super::failure::{tls_words, verify_failure};
use super::verify::ServerVerifier;
use super::SecurityInfo;
use crate::error::{DtlsIdentityProblem, NotSupported};
use flow::{Failure, Path, Session};
use routes::{Delivery, Route, SessionHandle};

/// How long a listener gives a client to finish its handshake.
const SERVER_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Datagrams queued per peer of a DTLS listener before new ones are dropped.
const PEER_QUEUE: usize = 64;
/// DTLS record content type "handshake": only such a datagram starts a session.
const HANDSHAKE_RECORD: u8 = 22;

/// The client's configuration (the same for every connection: one per process; dimpl
/// checks its crypto provider once here).
fn client_config() -> Arc<Config> {
    static CONFIG: OnceLock<Arc<Config>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            Arc::new(
                Config::builder()
                    .build()
                    .expect("dimpl's default client configuration is valid"),
            )
        })
        .clone()
}

/// The server's: no client certificate asked for, a shorter handshake deadline.
fn server_config() -> Arc<Config> {
    static CONFIG: OnceLock<Arc<Config>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            Arc::new(
                Config::builder()
                    .require_client_certificate(false)
                    .handshake_timeout(SERVER_HANDSHAKE_TIMEOUT)
                    .build()
                    .expect("dimpl's server configuration is valid"),
            )
        })
        .clone()
}

/// `chain`'s leaf and `key` as dimpl takes them, if dimpl can sign with the key.
fn dtls_certificate(
    chain: &[CertificateDer<'_>],
    key: &PrivateKeyDer<'_>,
) -> Result<DtlsCertificate, DtlsIdentityProblem> {
    let leaf = chain.first().ok_or(DtlsIdentityProblem::NoCertificate)?;
    let key = key.secret_der();
    client_config()
        .crypto_provider()
        .key_provider
        .load_private_key(key)
        .map_err(|_| DtlsIdentityProblem::KeyType)?;
    Ok(DtlsCertificate {
        certificate: leaf.to_vec(),
        private_key: key.to_vec(),
    })
}

/// A self-signed certificate for clients without an identity (made once per process).
fn throwaway() -> Result<DtlsCertificate, AttemptCause> {
    static CERT: OnceLock<Result<DtlsCertificate, LayerError>> = OnceLock::new();
    CERT.get_or_init(|| {
        let ck = rcgen::generate_simple_self_signed(vec!["taps-dtls-client".to_string()])
            .map_err(|e| LayerError::new(DtlsFailure::ClientCertificate(e)))?;
        Ok(DtlsCertificate {
            certificate: ck.cert.der().to_vec(),
            private_key: ck.signing_key.serialize_der(),
        })
    })
    .clone()
    .map_err(AttemptCause::Other)
}

/// What a DTLS attempt needs; part of a preconnection's `ClientSecurity`.
#[derive(Debug)]
pub(crate) struct DtlsClient {
    /// The certificate verifier (TLS's and QUIC's); `None` when verification is off.
    verifier: Option<Arc<ServerVerifier>>,
    /// The client's identity, or why it cannot be used for DTLS.
    identity: Result<Option<DtlsCertificate>, DtlsIdentityProblem>,
    server_name: ServerName<'static>,
    name: Arc<str>,
}

impl DtlsClient {
    pub(crate) fn new(
        verifier: Option<Arc<ServerVerifier>>,
        identity: Option<(&[CertificateDer<'_>], &PrivateKeyDer<'_>)>,
        server_name: ServerName<'static>,
        name: Arc<str>,
    ) -> DtlsClient {
        let identity = match identity {
            Some((chain, key)) => dtls_certificate(chain, key).map(Some),
            None => Ok(None),
        };
        DtlsClient {
            verifier,
            identity,
            server_name,
            name,
        }
    }

    /// Runs the handshake over `socket` (connected to the server): done when the
    /// server's certificate verified for the name asked for and the handshake finished.
    /// `answered` is called when the first datagram comes back (the server is there).
    pub(crate) async fn connect(
        &self,
        socket: UdpSocket,
        mut answered: impl FnMut() + Send,
    ) -> Result<(DtlsFlow, SecurityInfo), AttemptCause> {
        let cert = match &self.identity {
            Ok(Some(c)) => c.clone(),
            Ok(None) => throwaway()?,
            Err(why) => {
                return Err(AttemptCause::Unsupported(LayerError::new(
                    NotSupported::DtlsIdentity(*why),
                )))
            }
        };
        let mut dtls = Dtls::new_auto(client_config(), cert, Instant::now());
        dtls.set_active(true);
        let mut s = Session::new(dtls, Path::Own(socket));
        s.flush().await.map_err(cause)?;
        let (mut reported, mut leaf) = (false, None);
        loop {
            if s.answered && !reported {
                answered();
                reported = true;
            }
            if let Some(der) = s.peer_cert.take() {
                if let Some(v) = &self.verifier {
                    self.verify(v, &der)?;
                }
                leaf = Some(CertificateDer::from(der));
                s.flush().await.map_err(cause)?;
                continue;
            }
            if s.connected {
                break;
            }
            s.step(None).await.map_err(cause)?;
        }
        let Some(leaf) = leaf else {
            return Err(AttemptCause::Handshake(LayerError::new(
                DtlsFailure::NoServerCertificate,
            )));
        };
        let info = info(&s.dtls, Some(leaf));
        let (flow, driver) = DtlsFlow::new(s).map_err(AttemptCause::other)?;
        tokio::spawn(driver);
        Ok((flow, info))
    }

    /// Checks the server's leaf certificate against the trust anchors and the name.
    fn verify(&self, verifier: &ServerVerifier, der: &[u8]) -> Result<(), AttemptCause> {
        verifier
            .verify_server_cert(
                &CertificateDer::from(der),
                &[],
                &self.server_name,
                &[],
                UnixTime::now(),
            )
            .map(drop)
            .map_err(|e| self.rejected(e))
    }

    fn rejected(&self, e: rustls::Error) -> AttemptCause {
        match e {
            rustls::Error::InvalidCertificate(c) => AttemptCause::Verification {
                server_name: self.name.clone(),
                reason: verify_failure(&c),
            },
            other => AttemptCause::Handshake(LayerError::new(DtlsFailure::Verifier(other))),
        }
    }
}

/// What the handshake agreed on.
fn info(dtls: &Dtls, peer: Option<CertificateDer<'static>>) -> SecurityInfo {
    SecurityInfo {
        version: match dtls.protocol_version() {
            Some(ProtocolVersion::DTLS1_3) => "DTLS 1.3",
            Some(ProtocolVersion::DTLS1_2) => "DTLS 1.2",
            _ => "DTLS",
        },
        cipher_suite: "unknown",
        alpn: None,
        peer_certificates: peer.into_iter().collect(),
        resumed: false,
        early_data: false,
    }
}

/// A failed session as the attempt's typed cause.
fn cause(f: Failure) -> AttemptCause {
    match f {
        Failure::Io(e) => match e.raw_os_error() {
            Some(libc::ECONNREFUSED) => AttemptCause::Refused,
            Some(libc::ECONNRESET) => AttemptCause::Reset,
            Some(libc::ENETUNREACH | libc::EHOSTUNREACH) => AttemptCause::Unreachable,
            _ => AttemptCause::other(e),
        },
        Failure::Dtls(dimpl::Error::Timeout(_)) => AttemptCause::TimedOut { after: None },
        Failure::Dtls(e) => AttemptCause::Handshake(LayerError::new(DtlsFailure::Engine(e))),
        Failure::Gone => AttemptCause::Other(LayerError::new(DtlsFailure::ListenerStopped)),
    }
}

/// Why a DTLS handshake failed, the library's error (dimpl's, rustls' or rcgen's) kept
/// as its source.
#[derive(Debug, thiserror::Error)]
enum DtlsFailure {
    /// dimpl gave up: a rejected handshake, an alert.
    #[error("DTLS: {0}")]
    Engine(#[source] dimpl::Error),
    /// The certificate verifier failed for a reason other than the certificate.
    #[error("DTLS: {}", tls_words(.0))]
    Verifier(#[source] rustls::Error),
    /// The server finished its part without a certificate.
    #[error("the DTLS server sent no certificate")]
    NoServerCertificate,
    /// The listener stopped before the handshake finished.
    #[error("the listener stopped")]
    ListenerStopped,
    /// No throwaway client certificate could be made.
    #[error("DTLS client certificate: {0}")]
    ClientCertificate(#[source] rcgen::Error),
}

/// What a DTLS listener needs: its identity as dimpl takes it.
#[derive(Debug)]
pub(crate) struct DtlsServer {
    certificate: DtlsCertificate,
}

impl DtlsServer {
    /// The identity's leaf and key; an error if dimpl cannot use the key.
    pub(crate) fn new(
        chain: &[CertificateDer<'_>],
        key: &PrivateKeyDer<'_>,
    ) -> Result<DtlsServer, DtlsIdentityProblem> {
        Ok(DtlsServer {
            certificate: dtls_certificate(chain, key)?,
        })
    }
}

/// An accepted session: its flow and what its handshake agreed on.
pub(crate) type Accepted = (DtlsFlow, SecurityInfo);

/// Where a DTLS listener's datagrams come from.
pub(crate) enum Inbound {
    /// It reads its socket itself.
    Socket,
    /// Another reader of the socket hands them on (QUIC on the same port,
    /// [`super::shared_port`]).
    Queue(mpsc::Receiver<super::shared_port::Datagram>),
}

/// Serves DTLS on `socket`: datagrams are demultiplexed by peer address; a handshake
/// record from a new peer starts a session (a task of its own), handed to `accepted`
/// once its handshake is done; a failed handshake is logged and forgotten. A new
/// ClientHello from a peer whose session is established starts a second session that
/// replaces the first once its handshake is done (see [`routes`]). Runs until aborted
/// (every session still in its handshake then ends; established ones end when they
/// next wait for a datagram).
pub(crate) async fn serve(
    socket: Arc<UdpSocket>,
    mut inbound: Inbound,
    server: Arc<DtlsServer>,
    accepted: mpsc::Sender<Accepted>,
) {
    let mut peers: HashMap<SocketAddr, Route> = HashMap::new();
    let mut buf = match inbound {
        Inbound::Socket => vec![0u8; 65536],
        Inbound::Queue(_) => Vec::new(),
    };
    let mut prune_at = 64;
    loop {
        let (mut datagram, peer) = match &mut inbound {
            Inbound::Socket => match socket.recv_from(&mut buf).await {
                Ok((n, peer)) => (buf[..n].to_vec(), peer),
                Err(_) => continue, // ICMP errors from earlier sends; keep serving
            },
            Inbound::Queue(rx) => match rx.recv().await {
                Some(d) => d,
                None => return, // the QUIC endpoint reading the socket is gone
            },
        };
        if let Some(route) = peers.get_mut(&peer) {
            match route.deliver(datagram) {
                Delivery::Queued => continue,
                Delivery::NewHandshake(hello) => {
                    let next = start_session(&socket, peer, hello, &server, &accepted);
                    route.set_next(next);
                    continue;
                }
                // Its sessions ended: this may be the peer's next one.
                Delivery::Ended(d) => {
                    peers.remove(&peer);
                    datagram = d;
                }
            }
        }
        if datagram.first() != Some(&HANDSHAKE_RECORD) {
            continue;
        }
        if peers.len() >= prune_at {
            peers.retain(|_, r| !r.is_closed());
            prune_at = (peers.len() * 2).max(64);
        }
        let session = start_session(&socket, peer, datagram, &server, &accepted);
        peers.insert(peer, Route::new(session));
    }
}

/// Starts a session (a task running its handshake, see [`accept_one`]) for `peer`, with
/// `first` as its first datagram.
fn start_session(
    socket: &Arc<UdpSocket>,
    peer: SocketAddr,
    first: Vec<u8>,
    server: &Arc<DtlsServer>,
    accepted: &mpsc::Sender<Accepted>,
) -> SessionHandle {
    let (tx, rx) = mpsc::channel(PEER_QUEUE);
    let _ = tx.try_send(first);
    let done = Arc::new(AtomicBool::new(false));
    let path = Path::Shared {
        socket: socket.clone(),
        peer,
        rx,
    };
    let task = accept_one(server.clone(), path, peer, accepted.clone(), done.clone());
    tokio::spawn(task);
    SessionHandle { tx, done }
}

/// Runs one client's handshake, says so in `done`, hands the session on and then runs it.
async fn accept_one(
    server: Arc<DtlsServer>,
    path: Path,
    peer: SocketAddr,
    accepted: mpsc::Sender<Accepted>,
    done: Arc<AtomicBool>,
) {
    let dtls = Dtls::new_auto(server_config(), server.certificate.clone(), Instant::now());
    let mut s = Session::new(dtls, path);
    let mut client_cert = None;
    let mut finished = s.flush().await;
    while finished.is_ok() && !s.connected {
        finished = match s.peer_cert.take() {
            // A client certificate (never asked for, so never verified): noted only.
            Some(der) => {
                client_cert = Some(CertificateDer::from(der));
                s.flush().await
            }
            None => s.step(None).await.map(drop),
        };
    }
    if let Err(f) = finished {
        tracing::debug!(%peer, cause = %cause(f), "DTLS handshake with a client failed");
        return;
    }
    done.store(true, Ordering::Release);
    let info = info(&s.dtls, client_cert);
    let (flow, driver) = match DtlsFlow::new(s) {
        Ok(x) => x,
        Err(e) => {
            tracing::debug!(%peer, %e, "DTLS session could not start");
            return;
        }
    };
    if accepted.send((flow, info)).await.is_ok() {
        driver.await;
    }
}
