//! A failed TLS handshake as the typed cause the race records. rustls' and webpki's
//! errors are kept as values inside the cause (a [`LayerError`]); their words come from
//! the variants (never their `Debug` output).

use rustls::{CertificateError, Error as TlsError};
use std::error::Error;
use std::fmt;
use std::io;
use taps_core::{AttemptCause, LayerError, VerifyFailure};

/// The cause of a failed handshake with `server_name`: a rejected certificate says
/// which name and why; anything else is a handshake failure holding rustls' error,
/// unless the transport itself failed (reset, timeout), which keeps its own cause.
pub(crate) fn handshake_failure(e: io::Error, server_name: &str) -> AttemptCause {
    let tls = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<TlsError>());
    match tls {
        Some(TlsError::InvalidCertificate(c)) => AttemptCause::Verification {
            server_name: server_name.into(),
            reason: verify_failure(c),
        },
        Some(other) => AttemptCause::Handshake(LayerError::new(TlsFailure::Rustls(other.clone()))),
        None => match e.kind() {
            io::ErrorKind::ConnectionReset => AttemptCause::Reset,
            io::ErrorKind::UnexpectedEof => {
                AttemptCause::Handshake(LayerError::new(TlsFailure::PeerClosed))
            }
            io::ErrorKind::TimedOut => AttemptCause::TimedOut { after: None },
            _ => AttemptCause::other(e),
        },
    }
}

/// Why a TLS handshake failed: rustls' error (its source), or the peer closing first.
#[derive(Debug)]
pub(crate) enum TlsFailure {
    /// rustls refused or could not finish the handshake.
    Rustls(TlsError),
    /// The peer closed the connection before the handshake finished.
    PeerClosed,
}

impl fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsFailure::Rustls(e) => f.write_str(&tls_words(e)),
            TlsFailure::PeerClosed => {
                f.write_str("the peer closed the connection during the handshake")
            }
        }
    }
}

impl Error for TlsFailure {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            TlsFailure::Rustls(e) => Some(e),
            TlsFailure::PeerClosed => None,
        }
    }
}

/// A rejected certificate whose reason has no [`VerifyFailure`] variant of its own:
/// rustls' `Error::InvalidCertificate` (its source), in words from the certificate
/// error's variant.
#[derive(Debug)]
struct CertificateFailure(TlsError);

impl fmt::Display for CertificateFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            TlsError::InvalidCertificate(c) => f.write_str(&certificate_words(c)),
            other => f.write_str(&tls_words(other)),
        }
    }
}

impl Error for CertificateFailure {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.0)
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

/// Why a certificate was rejected, as the typed reason; reasons without a variant of
/// their own keep rustls' error.
#[allow(deprecated)]
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
        c => VerifyFailure::Other(LayerError::new(CertificateFailure(
            TlsError::InvalidCertificate(c.clone()),
        ))),
    }
}

/// A rejected certificate's reason in words, from the variant (never its debug output), for
/// the reasons [`verify_failure`] has no variant of its own for (those it has, it names
/// itself). The deprecated unit variants are matched too: verifiers built against older
/// rustls still produce them.
#[allow(deprecated)]
fn certificate_words(c: &CertificateError) -> String {
    let words = match c {
        CertificateError::UnsupportedSignatureAlgorithm
        | CertificateError::UnsupportedSignatureAlgorithmContext { .. }
        | CertificateError::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
            "it is signed with an algorithm this build does not accept"
        }
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            "it is not valid for TLS server authentication (extended key usage)"
        }
        CertificateError::BadEncoding => "it is malformed",
        CertificateError::UnhandledCriticalExtension => {
            "it has a critical extension this build does not handle"
        }
        CertificateError::UnknownRevocationStatus => "its revocation status is unknown",
        CertificateError::ExpiredRevocationList
        | CertificateError::ExpiredRevocationListContext { .. } => {
            "the revocation list has expired"
        }
        CertificateError::Other(o) => {
            return match o.0.downcast_ref::<webpki::Error>() {
                Some(w) => webpki_words(w),
                None => o.to_string(),
            }
        }
        c => return words(&format!("{c:?}")),
    };
    words.to_string()
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
    use std::sync::Arc;

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
        let VerifyFailure::Other(kept) = verify_failure(&e) else {
            panic!("not Other")
        };
        assert!(
            matches!(
                kept.find::<TlsError>(),
                Some(TlsError::InvalidCertificate(_))
            ),
            "{kept:?}"
        );
        let why = kept.to_string();
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
