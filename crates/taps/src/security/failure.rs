//! A failed TLS handshake as the typed cause the race records. rustls' and webpki's
//! errors are kept as values inside the cause (a [`LayerError`]); their words come from
//! the variants (never their `Debug` output).

use rustls::{CertificateError, Error as TlsError};
use std::error::Error;
use std::fmt;
use std::io;
use taps_core::{AttemptCause, LayerError, VerifyFailure};

use super::algorithm::algorithm_words;

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

/// rustls' text of a rejected certificate (what quinn keeps of it) without the debug
/// output rustls writes for some reasons (`UnsupportedSignatureAlgorithmContext {
/// signature_algorithm_id: [6, 8, ...], .. }`, `Other(OtherError(CaUsedAsEndEntity))`):
/// text written as words is kept, a variant's debug output becomes its name in words.
pub(super) fn debug_free(text: &str) -> String {
    // Debug output begins with a variant's name: `Name`, `Name { .. }`, `Name(..)`.
    let end = text.find([' ', '{', '(']).unwrap_or(text.len());
    let (name, rest) = text.split_at(end);
    let debug = name.starts_with(|c: char| c.is_ascii_uppercase())
        && name.chars().all(|c| c.is_ascii_alphanumeric())
        && (rest.is_empty() || rest.starts_with(" {") || rest.starts_with('('));
    if !debug {
        return text.to_string();
    }
    // `Other(OtherError(Name))`: the innermost name is the reason.
    let inner = text
        .trim_end_matches(')')
        .rsplit('(')
        .next()
        .filter(|_| text.starts_with("Other("))
        .unwrap_or(text);
    words(inner)
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

/// A rejected certificate's reason in words, from the variant and its fields (never its
/// debug output; algorithm identifiers as names and OIDs), for the reasons
/// [`verify_failure`] has no variant of its own for (the others are worded here too, for
/// a verifier that reports them otherwise). The deprecated unit variants are matched
/// too: verifiers built against older rustls still produce them.
#[allow(deprecated)]
fn certificate_words(c: &CertificateError) -> String {
    use CertificateError as C;
    let words = match c {
        C::UnsupportedSignatureAlgorithmForPublicKeyContext {
            signature_algorithm_id,
            public_key_algorithm_id,
        } => return signature_mismatch(signature_algorithm_id, public_key_algorithm_id),
        C::UnsupportedSignatureAlgorithmContext {
            signature_algorithm_id,
            ..
        } => {
            return format!(
                "it is signed with {}, an algorithm this build does not accept",
                algorithm_words(signature_algorithm_id)
            )
        }
        C::UnsupportedSignatureAlgorithm => {
            "it is signed with an algorithm this build does not accept"
        }
        C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
            "it is not valid for TLS server authentication (extended key usage)"
        }
        C::BadEncoding => "it is malformed",
        C::UnhandledCriticalExtension => "it has a critical extension this build does not handle",
        C::UnknownRevocationStatus => "its revocation status is unknown",
        C::ExpiredRevocationList | C::ExpiredRevocationListContext { .. } => {
            "the revocation list has expired"
        }
        C::InvalidOcspResponse => "the server's OCSP response (its revocation status) is invalid",
        C::ApplicationVerificationFailure => "the application refused it",
        C::Expired | C::ExpiredContext { .. } => "it has expired",
        C::NotValidYet | C::NotValidYetContext { .. } => "it is not valid yet",
        C::NotValidForName | C::NotValidForNameContext { .. } => "it is not for the name asked for",
        C::UnknownIssuer => "no trusted certificate authority issued it",
        C::Revoked => "it has been revoked",
        C::BadSignature => "a signature in its chain does not verify",
        C::Other(o) => {
            return match o.0.downcast_ref::<webpki::Error>() {
                Some(w) => webpki_words(w),
                None => o.to_string(),
            }
        }
        // A reason of a later rustls: its variant's name in words.
        c => return words(&format!("{c:?}")),
    };
    words.to_string()
}

/// A signature whose algorithm does not fit the key it was checked with, in words.
fn signature_mismatch(signature: &[u8], key: &[u8]) -> String {
    format!(
        "the certificate's signature algorithm, {}, does not fit its issuer's key, {} (is \
         another certificate with its issuer's name, with another kind of key, trusted?)",
        algorithm_words(signature),
        algorithm_words(key)
    )
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
        W::UnsupportedSignatureAlgorithmForPublicKeyContext(cx) => {
            return signature_mismatch(&cx.signature_algorithm_id, &cx.public_key_algorithm_id)
        }
        W::UnsupportedSignatureAlgorithmContext(cx) => {
            return format!(
                "it is signed with {}, an algorithm this build does not accept",
                algorithm_words(&cx.signature_algorithm_id)
            )
        }
        W::UnsupportedSignatureAlgorithm | W::UnsupportedSignatureAlgorithmForPublicKey => {
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

    /// Every reason that carries fields reads as words: an algorithm by its name and
    /// OID, never rustls' debug output (`[6, 8, 42, ...]`).
    #[test]
    fn certificate_reasons_with_fields_read_as_words() {
        let ecdsa_sha256 = vec![6, 8, 42, 134, 72, 206, 61, 4, 3, 2];
        let rsa = vec![6, 9, 42, 134, 72, 134, 247, 13, 1, 1, 1, 5, 0];
        let mismatch = CertificateError::UnsupportedSignatureAlgorithmForPublicKeyContext {
            signature_algorithm_id: ecdsa_sha256.clone(),
            public_key_algorithm_id: rsa,
        };
        let why = verify_failure(&mismatch).to_string();
        assert!(
            why.contains("ecdsa-with-SHA256 (OID 1.2.840.10045.4.3.2)")
                && why.contains("RSA (OID 1.2.840.113549.1.1.1)")
                && why.contains("does not fit its issuer's key"),
            "{why}"
        );
        let unsupported = CertificateError::UnsupportedSignatureAlgorithmContext {
            signature_algorithm_id: ecdsa_sha256,
            supported_algorithms: Vec::new(),
        };
        for c in [
            mismatch,
            unsupported,
            CertificateError::InvalidPurposeContext {
                required: rustls::ExtendedKeyPurpose::ServerAuth,
                presented: vec![rustls::ExtendedKeyPurpose::ClientAuth],
            },
            CertificateError::InvalidOcspResponse,
            CertificateError::ApplicationVerificationFailure,
        ] {
            let why = verify_failure(&c).to_string();
            assert!(
                !why.contains(['{', '[']) && !why.contains("Context"),
                "{c:?}: {why}"
            );
        }
        assert_eq!(
            debug_free("Other(OtherError(CaUsedAsEndEntity))"),
            "ca used as end entity"
        );
        assert_eq!(
            debug_free("UnsupportedSignatureAlgorithmContext { signature_algorithm_id: [6] }"),
            "unsupported signature algorithm context"
        );
        let worded = "certificate not valid for name \"a\"; certificate is not valid for \
                      any names (according to its subjectAltName extension)";
        assert_eq!(debug_free(worded), worded);
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
