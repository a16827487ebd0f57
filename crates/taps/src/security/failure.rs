//! A failed TLS handshake as the typed cause the race records. The words come from the
//! variants of rustls' and webpki's errors (never their `Debug` output); the cause stays
//! plain data, since it is recorded in the CIB and sent to the policy manager.

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
        Some(other) => AttemptCause::Handshake(Arc::from(tls_words(other))),
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

/// A TLS error (other than a rejected certificate) in words, from its variant.
pub(crate) fn tls_words(e: &TlsError) -> String {
    match e {
        TlsError::NoApplicationProtocol => {
            "no application protocol in common (ALPN, alert 120 no_application_protocol)".into()
        }
        TlsError::AlertReceived(alert) => alert_words(u8::from(*alert)),
        TlsError::PeerIncompatible(why) => format!(
            "the peer offers nothing this side accepts: {}",
            words(&format!("{why:?}"))
        ),
        TlsError::PeerMisbehaved(why) => {
            format!(
                "the peer broke the protocol: {}",
                words(&format!("{why:?}"))
            )
        }
        TlsError::InvalidMessage(why) => {
            format!("a malformed message: {}", words(&format!("{why:?}")))
        }
        TlsError::DecryptError => "a record did not decrypt".into(),
        TlsError::NoCertificatesPresented => "the peer presented no certificate".into(),
        TlsError::PeerSentOversizedRecord => "the peer sent an oversized record".into(),
        TlsError::HandshakeNotComplete => "the handshake did not complete".into(),
        // Variants that carry a string or are rare: rustls' own words.
        other => other.to_string(),
    }
}

/// A TLS alert the peer sent, in words (120, no_application_protocol, says ALPN found
/// no protocol in common).
pub(crate) fn alert_words(alert: u8) -> String {
    match rustls::AlertDescription::from(alert) {
        rustls::AlertDescription::NoApplicationProtocol => {
            "no application protocol in common (ALPN, alert 120 no_application_protocol)".into()
        }
        a => format!(
            "the peer sent the alert {} ({alert})",
            words(&format!("{a:?}"))
        ),
    }
}

/// A variant's name (`NoCipherSuitesInCommon`, `HandshakeFailure`) in lower-case words
/// (`no cipher suites in common`, `handshake failure`); a variant that carries data
/// keeps only its name.
fn words(variant: &str) -> String {
    let name = variant.split(['(', ' ', '{']).next().unwrap_or(variant);
    let mut out = String::with_capacity(name.len() + 8);
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push(' ');
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// Why a certificate was rejected, as the typed reason (with words for the rest, from
/// the variant: never the variant's debug output). The deprecated unit variants are
/// matched too: verifiers built against older rustls still produce them.
#[allow(deprecated)]
pub(super) fn verify_failure(c: &CertificateError) -> VerifyFailure {
    let other = |why: &str| VerifyFailure::Other(Arc::from(why));
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
        CertificateError::UnsupportedSignatureAlgorithm
        | CertificateError::UnsupportedSignatureAlgorithmContext { .. }
        | CertificateError::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
            other("it is signed with an algorithm this build does not accept")
        }
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            other("it is not valid for TLS server authentication (extended key usage)")
        }
        CertificateError::BadEncoding => other("it is malformed"),
        CertificateError::UnhandledCriticalExtension => {
            other("it has a critical extension this build does not handle")
        }
        CertificateError::UnknownRevocationStatus => other("its revocation status is unknown"),
        CertificateError::ExpiredRevocationList
        | CertificateError::ExpiredRevocationListContext { .. } => {
            other("the revocation list has expired")
        }
        CertificateError::Other(o) => match o.0.downcast_ref::<webpki::Error>() {
            Some(w) => other(&webpki_words(w)),
            None => other(&o.to_string()),
        },
        c => other(&words(&format!("{c:?}"))),
    }
}

/// A webpki verdict in words, from its variant (deprecated variants included, as for
/// `verify_failure`).
#[allow(deprecated)]
fn webpki_words(e: &webpki::Error) -> String {
    use webpki::Error as W;
    let words_for = match e {
        W::CaUsedAsEndEntity => "it is a CA certificate, not a server's (end-entity) certificate",
        W::EndEntityUsedAsCa => "a server's (end-entity) certificate was used as a CA",
        W::RequiredEkuNotFound | W::RequiredEkuNotFoundContext(_) => {
            "it is not valid for TLS server authentication (extended key usage)"
        }
        W::UnsupportedSignatureAlgorithm
        | W::UnsupportedSignatureAlgorithmContext(_)
        | W::UnsupportedSignatureAlgorithmForPublicKey
        | W::UnsupportedSignatureAlgorithmForPublicKeyContext(_) => {
            "it is signed with an algorithm this build does not accept"
        }
        W::PathLenConstraintViolated => "the chain is longer than a CA allows",
        W::MaximumPathDepthExceeded => "the chain is too long",
        W::NameConstraintViolation => "a name in it is outside what its CA may certify",
        W::BadDer | W::BadDerTime | W::TrailingData(_) => "it is malformed (DER)",
        W::CertDistrusted => "it is distrusted",
        W::InvalidSignatureForPublicKey => "a signature in its chain does not verify",
        _ => return words(&format!("{e:?}")),
    };
    let name = words(&format!("{e:?}"));
    format!("{words_for} ({name})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names_become_words() {
        assert_eq!(
            words("NoCipherSuitesInCommon"),
            "no cipher suites in common"
        );
        assert_eq!(words("Unknown(42)"), "unknown");
        assert_eq!(
            words("UnsupportedSignatureAlgorithmForPublicKeyContext { signature_algorithm_id: [6, 8] }"),
            "unsupported signature algorithm for public key context"
        );
    }

    #[test]
    #[allow(deprecated)]
    fn certificate_errors_never_print_debug_fields() {
        let e = CertificateError::Other(rustls::OtherError(Arc::new(
            webpki::Error::UnsupportedSignatureAlgorithmForPublicKey,
        )));
        let VerifyFailure::Other(why) = verify_failure(&e) else {
            panic!("not Other")
        };
        assert!(why.contains("signed with an algorithm"), "{why}");
        assert!(!why.contains('{') && !why.contains('['), "{why}");
        let e = CertificateError::Other(rustls::OtherError(Arc::new(
            webpki::Error::CaUsedAsEndEntity,
        )));
        assert!(verify_failure(&e).to_string().contains("CA certificate"));
    }

    #[test]
    fn tls_errors_in_words() {
        let w = tls_words(&TlsError::NoApplicationProtocol);
        assert!(w.contains("no application protocol"), "{w}");
        let w = tls_words(&TlsError::PeerIncompatible(
            rustls::PeerIncompatible::NoCipherSuitesInCommon,
        ));
        assert!(w.ends_with("no cipher suites in common"), "{w}");
    }
}
