//! The security setup of the secure experiment, one place for both sides: what taps is
//! given (its [`SecurityParameters`]) and the rustls / quinn configurations of the raw
//! baselines (tokio-rustls and quinn used directly), built from the same files and the
//! same choices, so both do the same work:
//!
//! - verification: the certificate chain against the test CA only (no system roots, no
//!   Mozilla roots: [`SecurityParameters::without_system_roots`]), for the name
//!   [`SERVER_NAME`] (sent as SNI), with *ring*'s verification algorithms (the provider
//!   taps uses);
//! - TLS 1.3 and 1.2 offered (rustls' safe defaults), every *ring* cipher suite and key
//!   exchange group;
//! - ALPN [`ALPN`] offered and accepted, over TLS/TCP and QUIC alike;
//! - session resumption **on** ([`RESUMPTION`], taps' default): a client keeps up to
//!   [`SESSIONS`] sessions in memory (taps: per context; raw: per configuration), the
//!   server rustls' default stateful session cache; no early data (0-RTT) either way;
//! - no client certificate.
//!
//! `tests` below guard it: a taps client and a raw client against the same server agree
//! on version, cipher suite, ALPN and resumption, and both reject a certificate for
//! another name.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::{ClientSessionMemoryCache, Resumption};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};
use taps::SecurityParameters;

/// The name the clients ask for and verify (the test certificate is for it).
pub(crate) const SERVER_NAME: &str = "localhost";
/// The one application protocol offered and accepted.
pub(crate) const ALPN: &[u8] = b"taps-bench";
/// Session resumption (taps' default).
pub(crate) const RESUMPTION: bool = true;
/// Client sessions kept for resumption: taps' per-context store size (rustls' default).
pub(crate) const SESSIONS: usize = 256;

/// The test PKI's files: the CA a client trusts, and the server's leaf and key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Pki {
    /// The CA certificate (PEM).
    pub(crate) ca: PathBuf,
    /// The server's certificate (PEM; for [`SERVER_NAME`]).
    pub(crate) cert: PathBuf,
    /// The server's private key (PEM).
    pub(crate) key: PathBuf,
}

/// What a taps client is given.
pub(crate) fn taps_client(pki: &Pki) -> SecurityParameters {
    SecurityParameters::new()
        .ca_file(&pki.ca)
        .without_system_roots()
        .server_name(SERVER_NAME)
        .alpn([ALPN])
        .resumption(RESUMPTION)
}

/// What a taps listener is given.
pub(crate) fn taps_server(pki: &Pki) -> SecurityParameters {
    SecurityParameters::new()
        .identity(&pki.cert, &pki.key)
        .alpn([ALPN])
}

/// The crypto provider taps uses (*ring*, every default suite and group).
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e:?}", path.display()))
}

/// The raw TLS client's configuration (also the base of the raw QUIC client's).
pub(crate) fn raw_client(pki: &Pki) -> Result<ClientConfig, String> {
    client_config(&pki.ca, &[ALPN])
}

/// A client configuration with the choices above: `ca` the only trust anchor, `alpn`
/// offered. Also what the HTTP/3 experiment's baselines use (ALPN `h3`, or `h2` and
/// `http/1.1`, as taps' HTTP client offers).
pub(crate) fn client_config(ca: &Path, alpn: &[&[u8]]) -> Result<ClientConfig, String> {
    let mut roots = RootCertStore::empty();
    for c in certificates(ca)? {
        roots.add(c).map_err(|e| format!("CA: {e}"))?;
    }
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    config.resumption = if RESUMPTION {
        Resumption::store(Arc::new(ClientSessionMemoryCache::new(SESSIONS)))
    } else {
        Resumption::disabled()
    };
    Ok(config)
}

/// The raw QUIC client's configuration: the TLS one, no early data (as taps).
pub(crate) fn raw_quic_client(pki: &Pki) -> Result<quinn::ClientConfig, String> {
    quic_client(raw_client(pki)?)
}

/// A quinn client configuration on `tls`, no early data (as taps).
pub(crate) fn quic_client(mut tls: ClientConfig) -> Result<quinn::ClientConfig, String> {
    tls.enable_early_data = false;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|e| format!("QUIC client: {e}"))?;
    Ok(quinn::ClientConfig::new(Arc::new(crypto)))
}

/// The raw TLS server's configuration.
pub(crate) fn raw_server(pki: &Pki) -> Result<ServerConfig, String> {
    let key = PrivateKeyDer::from_pem_file(&pki.key)
        .map_err(|e| format!("{}: {e:?}", pki.key.display()))?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certificates(&pki.cert)?, key)
        .map_err(|e| format!("server identity: {e}"))?;
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(config)
}

/// The raw QUIC server's configuration: the TLS one, no early data (as taps).
pub(crate) fn raw_quic_server(pki: &Pki) -> Result<quinn::ServerConfig, String> {
    let mut tls = raw_server(pki)?;
    tls.max_early_data_size = 0;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| format!("QUIC server: {e}"))?;
    Ok(quinn::ServerConfig::with_crypto(Arc::new(crypto)))
}

#[cfg(test)]
mod tests;
