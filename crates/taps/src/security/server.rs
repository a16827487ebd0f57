//! The server side: one rustls configuration per listener, from the identity's files.

use std::sync::Arc;

use rustls::ServerConfig;
use taps_core::AttemptCause;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::dtls::DtlsServer;
use super::{files, handshake_failure, provider, SecurityInfo, SecurityParameters};
use crate::error::{ConfigError, FileProblem, ListenFailure, SetupError};

/// What a TLS listener needs. Built once per listener (reads the certificate and key).
#[derive(Debug)]
pub(crate) struct ServerSecurity {
    config: Arc<ServerConfig>,
    /// QUIC's configuration from the same identity (TLS 1.3).
    quic: quinn::ServerConfig,
    /// DTLS's identity (the same leaf and key), or why dimpl cannot use it.
    dtls: Result<Arc<DtlsServer>, ListenFailure>,
}

impl ServerSecurity {
    /// The configuration from `params`' identity (certificate chain and key files, which
    /// must match) and ALPN list.
    pub(crate) fn new(params: &SecurityParameters) -> Result<ServerSecurity, SetupError> {
        let Some((cert_file, key_file)) = &params.identity else {
            return Err(SetupError::Config(ConfigError::NoIdentity));
        };
        let chain = files::certificates(cert_file)?;
        let key = files::private_key(key_file)?;
        let dtls = DtlsServer::new(&chain, &key)
            .map(Arc::new)
            .map_err(|problem| ListenFailure::DtlsIdentity {
                key_file: key_file.clone(),
                problem,
            });
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| SetupError::Config(ConfigError::Tls(e)))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| {
                SetupError::security_file(
                    key_file,
                    FileProblem::KeyMismatch {
                        cert: cert_file.to_path_buf(),
                        error: e,
                    },
                )
            })?;
        config.alpn_protocols = params.alpn.clone();
        let mut quic_tls = config.clone();
        if quic_tls.alpn_protocols.is_empty() {
            quic_tls.alpn_protocols = vec![super::client::DEFAULT_QUIC_ALPN.to_vec()];
        }
        quic_tls.max_early_data_size = 0;
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(quic_tls)
            .map_err(|e| SetupError::Config(ConfigError::Quic(e)))?;
        Ok(ServerSecurity {
            config: Arc::new(config),
            quic: {
                let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
                config.transport_config(super::quic::transport());
                config
            },
            dtls,
        })
    }

    /// QUIC's server configuration (the same identity and ALPN).
    pub(crate) fn quic(&self) -> quinn::ServerConfig {
        self.quic.clone()
    }

    /// DTLS's identity, or why this one cannot serve DTLS (e.g. an RSA key).
    pub(crate) fn dtls(&self) -> Result<Arc<DtlsServer>, ListenFailure> {
        self.dtls.clone()
    }

    /// Runs the server side of the handshake over an accepted stream.
    pub(crate) async fn handshake(
        &self,
        tcp: TcpStream,
    ) -> Result<(TlsStream<TcpStream>, SecurityInfo), AttemptCause> {
        let tls = TlsAcceptor::from(self.config.clone())
            .accept(tcp)
            .await
            .map_err(|e| handshake_failure(e, "the client"))?;
        let (_, conn) = tls.get_ref();
        let resumed = conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
        let info = SecurityInfo::of(conn, resumed, false);
        Ok((tls, info))
    }
}
