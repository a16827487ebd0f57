//! Security: the RFC 9622 security parameters, the TLS configurations built from them
//! once per preconnection (client) or listener (server), and QUIC (always secured, so it
//! lives here: quinn, one client socket per context).
//!
//! Secure by default: a client verifies the peer's certificate chain against the system's
//! trust store plus the Mozilla roots (webpki-roots), and the name the application asked
//! for, never the resolved address. Turning that off takes a call whose name says what it
//! does ([`SecurityParameters::danger_accept_any_certificate`]). A verification failure is
//! a failed attempt with a typed cause ([`taps_core::AttemptCause::Verification`]); stacks
//! of different security are never raced, so nothing falls back to plain text.
//!
//! DTLS (over UDP and UDP-Lite) runs on dimpl, verified with the same trust and the
//! same rustls verifier as TLS: see [`dtls`] for why dimpl and not webrtc-dtls.
//!
//! Crypto provider: *ring*, for rustls and (later) quinn alike. It builds with the C
//! compiler alone, in about half the time of aws-lc-rs; aws-lc-rs would be needed for
//! the client side of Encrypted Client Hello (its HPKE), which this build does not do.

mod algorithm;
mod client;
pub(crate) mod dtls;
mod failure;
mod files;
pub(crate) mod quic;
mod server;
pub(crate) mod shared_port;
mod verify;

pub(crate) use client::ClientSecurity;
pub(crate) use dtls::DtlsFlow;
pub(crate) use failure::handshake_failure;
pub(crate) use quic::QuicStream;
pub(crate) use server::ServerSecurity;

use std::path::PathBuf;
use std::sync::Arc;

use rustls_pki_types::CertificateDer;

/// How a connection is secured and whom it trusts (RFC 9622 section 6.3). Set on a
/// [`Preconnection`](crate::Preconnection); used only by secure stacks (TLS, QUIC and
/// DTLS). Cheap to clone; the TLS configuration is built from it once
/// per preconnection or listener.
#[derive(Debug, Clone)]
pub struct SecurityParameters {
    pub(crate) ca_files: Vec<PathBuf>,
    pub(crate) system_roots: bool,
    pub(crate) server_name: Option<String>,
    pub(crate) alpn: Vec<Vec<u8>>,
    pub(crate) identity: Option<(PathBuf, PathBuf)>,
    pub(crate) verify: bool,
    pub(crate) resumption: bool,
}

impl Default for SecurityParameters {
    fn default() -> Self {
        SecurityParameters {
            ca_files: Vec::new(),
            system_roots: true,
            server_name: None,
            alpn: Vec::new(),
            identity: None,
            verify: true,
            resumption: true,
        }
    }
}

impl SecurityParameters {
    /// The defaults: verify against the system's trust store and the Mozilla roots, the
    /// name from the remote endpoint, no ALPN, session resumption on.
    pub fn new() -> SecurityParameters {
        SecurityParameters::default()
    }

    /// Also trusts the certificate authorities in this PEM file (read when the
    /// configuration is built; a file that cannot be read or holds no certificate is an
    /// error naming it).
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> SecurityParameters {
        self.ca_files.push(path.into());
        self
    }

    /// Trusts only the CA files given, not the system's store nor the Mozilla roots.
    pub fn without_system_roots(mut self) -> SecurityParameters {
        self.system_roots = false;
        self
    }

    /// The name to send (SNI) and to verify the certificate against, instead of the
    /// remote endpoint's host.
    pub fn server_name(mut self, name: impl Into<String>) -> SecurityParameters {
        self.server_name = Some(name.into());
        self
    }

    /// Application protocols to offer (client) or accept (server), most preferred first
    /// (ALPN, RFC 7301), e.g. `["h2", "http/1.1"]`.
    pub fn alpn<I, P>(mut self, protocols: I) -> SecurityParameters
    where
        I: IntoIterator<Item = P>,
        P: AsRef<[u8]>,
    {
        self.alpn = protocols.into_iter().map(|p| p.as_ref().to_vec()).collect();
        self
    }

    /// This side's certificate chain and private key (PEM files): required to listen;
    /// on a client, a client certificate.
    pub fn identity(
        mut self,
        cert_file: impl Into<PathBuf>,
        key_file: impl Into<PathBuf>,
    ) -> SecurityParameters {
        self.identity = Some((cert_file.into(), key_file.into()));
        self
    }

    /// Accepts any certificate the peer presents, for any name: the connection is
    /// encrypted but not authenticated, so anyone on the path can read and change it.
    /// For tests against peers with throw-away certificates only.
    pub fn danger_accept_any_certificate(mut self) -> SecurityParameters {
        self.verify = false;
        self
    }

    /// Turns TLS session resumption on or off (on by default: a later connection to the
    /// same server saves a round trip of certificate exchange and verification).
    pub fn resumption(mut self, on: bool) -> SecurityParameters {
        self.resumption = on;
        self
    }

    /// Parses an ALPN list written `h2,http/1.1` (what `--alpn` takes): each protocol
    /// 1-255 bytes of printable ASCII without spaces or commas.
    pub fn parse_alpn(list: &str) -> Result<Vec<Vec<u8>>, String> {
        list.split(',')
            .map(|p| {
                let ok = !p.is_empty()
                    && p.len() <= 255
                    && p.bytes().all(|b| b.is_ascii_graphic() && b != b',');
                if ok {
                    Ok(p.as_bytes().to_vec())
                } else {
                    Err(format!(
                        "ALPN list {list:?}: {p:?} is not a protocol name \
                         (1-255 printable characters, comma-separated, e.g. h2,http/1.1)"
                    ))
                }
            })
            .collect()
    }
}

/// What the security handshake of a connection established.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SecurityInfo {
    /// The protocol version, e.g. `TLSv1.3`.
    pub version: &'static str,
    /// The cipher suite, e.g. `TLS13_AES_128_GCM_SHA256`.
    pub cipher_suite: &'static str,
    /// The application protocol agreed on (ALPN), if any.
    pub alpn: Option<Vec<u8>>,
    /// The peer's certificate chain, leaf first (DER); empty when the peer sent none.
    pub peer_certificates: Vec<CertificateDer<'static>>,
    /// Whether the session was resumed (no full certificate exchange).
    pub resumed: bool,
    /// Whether early data (0-RTT) was accepted.
    pub early_data: bool,
}

impl SecurityInfo {
    /// Reads what a finished handshake agreed on. Cost: a copy of the peer's chain.
    pub(crate) fn of(conn: &rustls::CommonState, resumed: bool, early_data: bool) -> Self {
        SecurityInfo {
            version: match conn.protocol_version() {
                Some(rustls::ProtocolVersion::TLSv1_3) => "TLS 1.3",
                Some(rustls::ProtocolVersion::TLSv1_2) => "TLS 1.2",
                Some(v) => v.as_str().unwrap_or("unknown"),
                None => "unknown",
            },
            cipher_suite: conn
                .negotiated_cipher_suite()
                .and_then(|s| s.suite().as_str())
                .unwrap_or("unknown"),
            alpn: conn.alpn_protocol().map(<[u8]>::to_vec),
            peer_certificates: conn
                .peer_certificates()
                .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
                .unwrap_or_default(),
            resumed,
            early_data,
        }
    }
}

/// Whether `plan` has a secure stack this build can run (then a preconnection builds a
/// TLS configuration, a listener an identity, and a race looks up HTTPS records). Cost:
/// a scan of the plan's few stacks.
pub(crate) fn runs_secure(plan: &taps_core::candidates::Plan) -> bool {
    plan.stacks()
        .iter()
        .any(|s| s.unavailable.is_none() && s.stack.security != taps_core::Security::None)
}

/// The process-wide crypto provider (ring), shared by every configuration.
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    static PROVIDER: std::sync::OnceLock<Arc<rustls::crypto::CryptoProvider>> =
        std::sync::OnceLock::new();
    PROVIDER
        .get_or_init(|| Arc::new(rustls::crypto::ring::default_provider()))
        .clone()
}
