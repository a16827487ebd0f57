//! The verifier of a server's certificate, one per preconnection, shared by TLS, QUIC and
//! DTLS: rustls' webpki verifier against the trust anchors, plus two things it lacks.
//!
//! - **Pinning a configured certificate**: a certificate given as trusted (a CA file) that
//!   the server presents as its own is trusted, as curl and OpenSSL do, even when it is
//!   marked as a CA (`openssl req -x509` makes self-signed certificates with `CA:TRUE`,
//!   which webpki refuses as a server's own: `CaUsedAsEndEntity`). The presented
//!   certificate must equal the configured one byte for byte; its validity period, its
//!   extended key usage (server authentication, when it names any) and the name asked for
//!   are still checked. A CA certificate that is not one of the configured ones is still
//!   refused.
//! - **The typed reason for QUIC**: quinn keeps only rustls' text of a rejection; the
//!   verifier remembers its last few rejections by that text, so a QUIC failure recovers
//!   the same typed reason (and words) a TLS one has.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{
    verify_tls12_signature, verify_tls13_signature, CryptoProvider, WebPkiSupportedAlgorithms,
};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{
    CertificateError, DigitallySignedStruct, Error as TlsError, RootCertStore, SignatureScheme,
};
use x509_cert::der::Decode;
use x509_cert::ext::pkix::ExtendedKeyUsage;

/// How many rejections the verifier remembers for QUIC's failures (the attempts of one
/// race, a few races).
const REMEMBERED: usize = 16;

/// The server-certificate verifier of a preconnection's secure stacks.
#[derive(Debug)]
pub(crate) struct ServerVerifier {
    /// webpki's verifier; `None` without any trust anchor (then every certificate is
    /// refused as of an unknown issuer).
    webpki: Option<Arc<WebPkiServerVerifier>>,
    /// The signature algorithms handshake signatures are checked with.
    algorithms: WebPkiSupportedAlgorithms,
    /// The certificates of the CA files, as given: one presented as the server's own is
    /// trusted (pinned).
    pinned: Vec<CertificateDer<'static>>,
    /// The latest rejections, by rustls' text of them (what quinn keeps).
    rejected: Mutex<VecDeque<(String, CertificateError)>>,
}

impl ServerVerifier {
    /// Verifies against `roots` with `provider`'s algorithms, pinning `pinned`.
    pub(crate) fn new(
        roots: Arc<RootCertStore>,
        provider: Arc<CryptoProvider>,
        pinned: Vec<CertificateDer<'static>>,
    ) -> ServerVerifier {
        let algorithms = provider.signature_verification_algorithms;
        ServerVerifier {
            webpki: WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .ok(),
            algorithms,
            pinned,
            rejected: Mutex::new(VecDeque::with_capacity(REMEMBERED)),
        }
    }

    /// The typed reason of a rejection this verifier made, from rustls' text of it (the
    /// reason of a QUIC transport error). Cost: a lock and a scan of a few strings.
    pub(crate) fn rejection(&self, text: &str) -> Option<CertificateError> {
        let rejected = self.rejected.lock().unwrap_or_else(|e| e.into_inner());
        rejected
            .iter()
            .rev()
            .find(|(t, _)| t == text)
            .map(|(_, c)| c.clone())
    }

    fn remember(&self, e: &TlsError) {
        let TlsError::InvalidCertificate(c) = e else {
            return;
        };
        let mut rejected = self.rejected.lock().unwrap_or_else(|e| e.into_inner());
        if rejected.len() == REMEMBERED {
            rejected.pop_front();
        }
        rejected.push_back((e.to_string(), c.clone()));
    }

    /// Whether `end_entity` is one of the configured certificates, presented as the
    /// server's own, where webpki refused it only for being a CA (it checks the validity
    /// period before that): then its validity, purpose and name are checked here.
    fn pinned(
        &self,
        end_entity: &CertificateDer<'_>,
        refused: &TlsError,
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> Option<Result<(), TlsError>> {
        let ca_as_end_entity = matches!(
            refused,
            TlsError::InvalidCertificate(CertificateError::Other(o))
                if matches!(o.0.downcast_ref::<webpki::Error>(), Some(webpki::Error::CaUsedAsEndEntity))
        );
        if !ca_as_end_entity || !self.pinned.iter().any(|p| p[..] == end_entity[..]) {
            return None;
        }
        Some(check_pinned(end_entity, server_name, now))
    }
}

/// What webpki would have checked of a pinned certificate had it not been a CA: the
/// validity period at `now`, the extended key usage (server authentication, when the
/// certificate restricts it) and the name.
fn check_pinned(
    der: &CertificateDer<'_>,
    server_name: &ServerName<'_>,
    now: UnixTime,
) -> Result<(), TlsError> {
    let bad = || TlsError::InvalidCertificate(CertificateError::BadEncoding);
    let cert = x509_cert::Certificate::from_der(der).map_err(|_| bad())?;
    let tbs = cert.tbs_certificate();
    let validity = tbs.validity();
    let (not_before, not_after) = (
        validity.not_before.to_unix_duration().as_secs(),
        validity.not_after.to_unix_duration().as_secs(),
    );
    if now.as_secs() < not_before {
        return Err(CertificateError::NotValidYetContext {
            time: now,
            not_before: UnixTime::since_unix_epoch(std::time::Duration::from_secs(not_before)),
        }
        .into());
    }
    if now.as_secs() > not_after {
        return Err(CertificateError::ExpiredContext {
            time: now,
            not_after: UnixTime::since_unix_epoch(std::time::Duration::from_secs(not_after)),
        }
        .into());
    }
    if let Some((_, eku)) = tbs.get_extension::<ExtendedKeyUsage>().map_err(|_| bad())? {
        const SERVER_AUTH: &str = "1.3.6.1.5.5.7.3.1";
        const ANY: &str = "2.5.29.37.0";
        if !eku
            .0
            .iter()
            .any(|o| [SERVER_AUTH, ANY].contains(&o.to_string().as_str()))
        {
            return Err(CertificateError::InvalidPurpose.into());
        }
    }
    rustls::client::verify_server_name(&ParsedCertificate::try_from(der)?, server_name)
}

impl ServerCertVerifier for ServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let Some(webpki) = &self.webpki else {
            let unknown = TlsError::InvalidCertificate(CertificateError::UnknownIssuer);
            self.remember(&unknown);
            return Err(unknown);
        };
        let verdict = webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            .or_else(
                |refused| match self.pinned(end_entity, &refused, server_name, now) {
                    Some(pinned) => pinned.map(|()| ServerCertVerified::assertion()),
                    None => Err(refused),
                },
            );
        if let Err(e) = &verdict {
            self.remember(e);
        }
        verdict
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
