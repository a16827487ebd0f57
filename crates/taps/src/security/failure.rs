//! A failed TLS handshake as the typed cause the race records.

use std::io;
use std::sync::Arc;

use rustls::{CertificateError, Error as TlsError};
use taps_core::{AttemptCause, VerifyFailure};

/// The cause of a failed handshake with `server_name`: a rejected certificate says
/// which name and why; anything else is a handshake failure in words, unless the
/// transport itself failed (reset, timeout), which keeps its own cause.
pub(crate) fn handshake_failure(e: io::Error, server_name: &str) -> AttemptCause {
    let tls = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<TlsError>());
    match tls {
        Some(TlsError::InvalidCertificate(c)) => AttemptCause::Verification {
            server_name: server_name.into(),
            reason: verify_failure(c),
        },
        Some(other) => AttemptCause::Handshake(Arc::from(other.to_string())),
        None => match e.kind() {
            io::ErrorKind::ConnectionReset => AttemptCause::Reset,
            io::ErrorKind::UnexpectedEof => AttemptCause::Handshake(
                "the peer closed the connection during the handshake".into(),
            ),
            io::ErrorKind::TimedOut => AttemptCause::TimedOut { after: None },
            _ => AttemptCause::other(e),
        },
    }
}

/// Why a certificate was rejected, as the typed reason.
pub(super) fn verify_failure(c: &CertificateError) -> VerifyFailure {
    match c {
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            VerifyFailure::Expired
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            VerifyFailure::NotYetValid
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            VerifyFailure::NameMismatch
        }
        CertificateError::UnknownIssuer => VerifyFailure::UnknownIssuer,
        CertificateError::Revoked => VerifyFailure::Revoked,
        CertificateError::BadSignature => VerifyFailure::BadSignature,
        CertificateError::Other(o) => {
            VerifyFailure::Other(Arc::from(webpki_reason(&o.0.to_string())))
        }
        other => VerifyFailure::Other(Arc::from(other.to_string())),
    }
}

/// Words for the webpki errors a verifier reports as "other" (their text is the variant's
/// name); anything else as it came.
fn webpki_reason(name: &str) -> String {
    let words = match name {
        "CaUsedAsEndEntity" => "it is a CA certificate, not a server's (end-entity) certificate",
        "EndEntityUsedAsCa" => "a server's (end-entity) certificate was used as a CA",
        "RequiredEkuNotFound" | "RequiredEkuNotFoundContext" => {
            "it is not valid for TLS server authentication (extended key usage)"
        }
        "UnsupportedSignatureAlgorithm" | "UnsupportedSignatureAlgorithmForPublicKey" => {
            "it is signed with an algorithm this build does not accept"
        }
        "PathLenConstraintViolated" => "the chain is longer than a CA allows",
        "MaximumPathDepthExceeded" => "the chain is too long",
        _ => return name.to_string(),
    };
    format!("{words} ({name})")
}
