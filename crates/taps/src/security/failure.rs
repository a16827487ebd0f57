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
        other => VerifyFailure::Other(Arc::from(other.to_string())),
    }
}
