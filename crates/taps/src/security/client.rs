//! The client side: one rustls configuration per preconnection, verified by default.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientSessionMemoryCache, Resumption};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use taps_core::{AttemptCause, LayerError};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::dtls::{DtlsClient, DtlsFlow};
use super::quic::{self, QuicClientSocket, QuicStream};
use super::verify::ServerVerifier;
use super::{files, handshake_failure, provider, SecurityInfo, SecurityParameters};
use crate::error::{ConfigError, FileProblem, NotSupported, SetupError};

/// The application protocol QUIC offers when the application named none (QUIC needs
/// one; taps listeners accept it).
pub(crate) const DEFAULT_QUIC_ALPN: &[u8] = b"taps";

/// What a TLS attempt needs: the configuration and the name to verify. Built once per
/// preconnection (reading CA files, and the system's trust store once per process).
#[derive(Debug)]
pub(crate) struct ClientSecurity {
    config: Arc<ClientConfig>,
    /// The certificate verifier of every secure stack; `None` when verification is off.
    verifier: Option<Arc<ServerVerifier>>,
    /// QUIC's configuration (the same trust, TLS 1.3) and the context's socket, when the
    /// plan can run QUIC.
    quic: Option<(quinn::ClientConfig, Arc<QuicClientSocket>)>,
    /// DTLS's: the same trust, verified with rustls' webpki verifier.
    dtls: DtlsClient,
    server_name: ServerName<'static>,
    /// The same name, for causes and traces.
    name: Arc<str>,
}

impl ClientSecurity {
    /// The configuration for connecting to `host` (or the parameters' server name), with
    /// `sessions` as the resumption store (shared by a context's preconnections) and QUIC
    /// given up after `abort_timeout` without hearing from the peer (`connTimeout`).
    pub(crate) fn new(
        params: &SecurityParameters,
        host: &str,
        sessions: &Arc<ClientSessionMemoryCache>,
        quic_socket: Option<Arc<QuicClientSocket>>,
        abort_timeout: Option<std::time::Duration>,
    ) -> Result<ClientSecurity, SetupError> {
        let name = params
            .server_name
            .clone()
            .unwrap_or_else(|| host.trim_matches(['[', ']']).to_string());
        let server_name = ServerName::try_from(name.clone())
            .map_err(|_| SetupError::Config(ConfigError::ServerName(name.to_string())))?;
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| SetupError::Config(ConfigError::Tls(e)))?;
        let verifier = if params.verify {
            Some(verifier(params)?)
        } else {
            None
        };
        let builder = match &verifier {
            Some(v) => builder
                .dangerous()
                .with_custom_certificate_verifier(v.clone()),
            None => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider()))),
        };
        let identity = match &params.identity {
            Some((cert, key)) => Some((files::certificates(cert)?, files::private_key(key)?)),
            None => None,
        };
        let name: Arc<str> = name.into();
        let dtls = DtlsClient::new(
            verifier.clone(),
            identity.as_ref().map(|(c, k)| (&c[..], k)),
            server_name.clone(),
            name.clone(),
        );
        let mut config = match (identity, &params.identity) {
            (Some((chain, pkey)), Some((cert, key))) => {
                builder.with_client_auth_cert(chain, pkey).map_err(|e| {
                    SetupError::security_file(
                        key,
                        FileProblem::KeyMismatch {
                            cert: cert.clone(),
                            error: e,
                        },
                    )
                })?
            }
            _ => builder.with_no_client_auth(),
        };
        config.alpn_protocols = params.alpn.clone();
        config.resumption = if params.resumption {
            Resumption::store(sessions.clone())
        } else {
            Resumption::disabled()
        };
        let quic = match quic_socket {
            Some(socket) => {
                let mut quic_tls = config.clone();
                if quic_tls.alpn_protocols.is_empty() {
                    quic_tls.alpn_protocols = vec![DEFAULT_QUIC_ALPN.to_vec()];
                }
                quic_tls.enable_early_data = false;
                let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(quic_tls)
                    .map_err(|e| SetupError::Config(ConfigError::Quic(e)))?;
                let mut config = quinn::ClientConfig::new(Arc::new(crypto));
                config.transport_config(quic::transport_with_abort(abort_timeout));
                Some((config, socket))
            }
            None => None,
        };
        Ok(ClientSecurity {
            config: Arc::new(config),
            verifier,
            quic,
            dtls,
            server_name,
            name,
        })
    }

    /// Runs the TLS handshake over a connected stream: done when the server's certificate
    /// is verified and the handshake finished. A failure is the typed cause (which name
    /// and why for a rejected certificate).
    pub(crate) async fn handshake(
        &self,
        tcp: TcpStream,
    ) -> Result<(TlsStream<TcpStream>, SecurityInfo), AttemptCause> {
        let tls = TlsConnector::from(self.config.clone())
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|e| handshake_failure(e, &self.name))?;
        let (_, conn) = tls.get_ref();
        let resumed = conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
        let info = SecurityInfo::of(conn, resumed, conn.is_early_data_accepted());
        Ok((tls, info))
    }
}

impl ClientSecurity {
    /// Connects over QUIC from the context's socket: done when the handshake finished
    /// and the peer's certificate verified; then opens the connection's stream.
    ///
    /// `probe`: also ask whether anything listens on `remote`'s UDP port, to fail at once
    /// where nothing does ([`quic::PortProbe`]; for candidates with no success on record).
    pub(crate) async fn quic_connect(
        &self,
        remote: std::net::SocketAddr,
        probe: bool,
    ) -> Result<(QuicStream, SecurityInfo), AttemptCause> {
        let Some((config, socket)) = &self.quic else {
            return Err(AttemptCause::Unsupported(LayerError::new(
                NotSupported::QuicNotSetUp,
            )));
        };
        let probe = if probe {
            quic::PortProbe::ask(remote)?
        } else {
            None
        };
        let (endpoint, local) = socket.endpoint().map_err(AttemptCause::other)?;
        quic::connect(
            (&endpoint, local),
            config.clone(),
            remote,
            (&self.name, self.verifier.as_deref()),
            probe,
        )
        .await
    }
}

impl ClientSecurity {
    /// Runs the DTLS handshake over a UDP socket connected to the server: done when the
    /// server's certificate verified for the name and the handshake finished;
    /// `answered` is called when the server first answers.
    pub(crate) async fn dtls_connect(
        &self,
        socket: tokio::net::UdpSocket,
        answered: impl FnMut() + Send,
    ) -> Result<(DtlsFlow, SecurityInfo), AttemptCause> {
        self.dtls.connect(socket, answered).await
    }
}

/// The verifier of `params`: webpki's on the trust anchors (the system's store and the
/// Mozilla roots unless turned off, plus the CA files), pinning the CA files'
/// certificates.
fn verifier(params: &SecurityParameters) -> Result<Arc<ServerVerifier>, SetupError> {
    let (roots, pinned) = roots(params)?;
    Ok(Arc::new(ServerVerifier::new(roots, provider(), pinned)))
}

/// The trust anchors: the system's store and the Mozilla roots (unless turned off), plus
/// the CA files of `params`; and the CA files' certificates as given.
fn roots(
    params: &SecurityParameters,
) -> Result<(Arc<RootCertStore>, Vec<CertificateDer<'static>>), SetupError> {
    if params.ca_files.is_empty() && params.system_roots {
        return Ok((system_roots(), Vec::new()));
    }
    let mut store = if params.system_roots {
        (*system_roots()).clone()
    } else {
        RootCertStore::empty()
    };
    let mut given = Vec::new();
    for file in &params.ca_files {
        for cert in files::certificates(file)? {
            store
                .add(cert.clone())
                .map_err(|e| SetupError::security_file(file, FileProblem::UnusableCa(e)))?;
            given.push(cert);
        }
    }
    Ok((Arc::new(store), given))
}

/// The system's trust store (read once per process) plus the Mozilla roots.
fn system_roots() -> Arc<RootCertStore> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let mut store = RootCertStore::empty();
            store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            let native = rustls_native_certs::load_native_certs();
            let (added, ignored) = store.add_parsable_certificates(native.certs);
            tracing::debug!(added, ignored, "system trust store read");
            Arc::new(store)
        })
        .clone()
}

/// The verifier of [`SecurityParameters::danger_accept_any_certificate`]: checks the
/// handshake signatures (so the peer holds the key of the certificate it sent) but
/// trusts any certificate for any name.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
