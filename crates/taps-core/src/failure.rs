//! Why something did not connect, as data: the typed causes that travel from the I/O
//! side through the race, its report, the CIB and the errors an application sees.
//!
//! A leaf module (it depends on nothing else of the crate), so the race, the policy
//! manager and the candidates can all speak of causes without depending on each other.
//! Text exists only as `Display`, rendered when shown; a failure found by a library
//! below taps (rustls, quinn, the operating system, ...) is kept as that library's own
//! value in a [`LayerError`].

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Why one attempt (or skipped candidate) did not connect. Cheap to clone: no variant
/// owns more than an `Arc`. Causes with a [`LayerError`] have no serialised form (the CIB
/// keeps their words only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "cause")]
#[non_exhaustive]
pub enum AttemptCause {
    /// The peer answered with a reset or an abort (`ECONNREFUSED`, SCTP ABORT): nothing
    /// listens there.
    Refused,
    /// The connection was reset during its handshake (`ECONNRESET`).
    Reset,
    /// No route to the network or host (`ENETUNREACH`, `EHOSTUNREACH`, ICMP unreachable).
    Unreachable,
    /// No answer in time: `after` is how long the attempt ran when the race's
    /// establishment timeout cut it off; `None` when the operating system gave up on
    /// its own (`ETIMEDOUT`: SYN retries, `TCP_USER_TIMEOUT`).
    TimedOut {
        /// How long the attempt ran, when the race cut it off.
        after: Option<Duration>,
    },
    /// The transport connected (TCP up; for DTLS, the server's first answer) but the
    /// security handshake over it had not finished when the race's establishment timeout
    /// cut the attempt off: something accepts connections there that does not finish a
    /// TLS (DTLS) handshake, or does so too slowly. The race's error names the transport,
    /// the security protocol and the address (it knows the candidate).
    SecurityTimedOut {
        /// How long after the attempt started the transport came up.
        transport_up: Duration,
        /// How long the attempt ran when the race cut it off.
        after: Duration,
    },
    /// Started before the winner and still silent when the winner connected, for this
    /// long: the path is dead or slower than the winner's by more than its head start.
    /// Recorded in the CIB, never returned by a race.
    Overtaken {
        /// How long it had gone unanswered.
        silent: Duration,
    },
    /// The peer's certificate did not verify for the name the application asked for:
    /// the attempt failed; it never falls back to an insecure stack.
    Verification {
        /// The name the certificate was checked against.
        server_name: Arc<str>,
        /// Why it was rejected.
        reason: VerifyFailure,
    },
    /// The security handshake (TLS, DTLS, QUIC's TLS) failed for another reason: no
    /// shared protocol version, cipher suite or ALPN, an alert from the peer, a malformed
    /// message, ... The security layer's own error (e.g. `rustls::Error`) is inside.
    #[serde(skip)]
    Handshake(LayerError),
    /// This build or host cannot run the candidate's stack (never started).
    Unavailable(Unavailable),
    /// The host cannot run what the attempt needs (protocol missing from the kernel,
    /// unknown congestion control, a socket option it refuses, ...): the transport
    /// layer's typed reason is inside.
    #[serde(skip)]
    Unsupported(LayerError),
    /// Any other error, kept as the value that reported it (an `io::Error`, a
    /// `quinn::ConnectionError`, ...).
    #[serde(skip)]
    Other(LayerError),
}

impl AttemptCause {
    /// An [`AttemptCause::Other`] holding `error`. Cost: one allocation.
    pub fn other(error: impl Error + Send + Sync + 'static) -> AttemptCause {
        AttemptCause::Other(LayerError::new(error))
    }

    /// Whether the cause has a serialised form (the CIB file, the policy manager's
    /// records): every cause but those holding a [`LayerError`], which keep the lower
    /// layer's value in memory only and travel as their words.
    pub fn is_portable(&self) -> bool {
        !matches!(
            self,
            AttemptCause::Handshake(_)
                | AttemptCause::Unsupported(_)
                | AttemptCause::Other(_)
                | AttemptCause::Verification {
                    reason: VerifyFailure::Other(_),
                    ..
                }
        )
    }

    /// Whether the attempt got no answer in time (cut off by the race, the OS timeout,
    /// or overtaken while silent).
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            AttemptCause::TimedOut { .. }
                | AttemptCause::SecurityTimedOut { .. }
                | AttemptCause::Overtaken { .. }
        )
    }
}

impl fmt::Display for AttemptCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttemptCause::Refused => f.write_str("connection refused"),
            AttemptCause::Reset => f.write_str("connection reset"),
            AttemptCause::Unreachable => f.write_str("network or host unreachable"),
            AttemptCause::TimedOut { after: Some(d) } => write!(f, "timed out after {}", Ms(*d)),
            AttemptCause::TimedOut { after: None } => f.write_str("timed out"),
            AttemptCause::SecurityTimedOut {
                transport_up,
                after,
            } => write!(
                f,
                "the transport connected in {}, then the security handshake did not finish \
                 within {}",
                Ms(*transport_up),
                Ms(after.saturating_sub(*transport_up))
            ),
            AttemptCause::Overtaken { silent } => {
                write!(f, "no answer in {} (overtaken)", Ms(*silent))
            }
            AttemptCause::Verification {
                server_name,
                reason,
            } => write!(f, "certificate of {server_name} rejected: {reason}"),
            AttemptCause::Handshake(why) => write!(f, "TLS handshake failed: {why}"),
            AttemptCause::Unavailable(why) => write!(f, "skipped: {why}"),
            AttemptCause::Unsupported(why) | AttemptCause::Other(why) => why.fmt(f),
        }
    }
}

impl Error for AttemptCause {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            AttemptCause::Handshake(e) | AttemptCause::Unsupported(e) | AttemptCause::Other(e) => {
                Some(e.get())
            }
            AttemptCause::Verification {
                reason: VerifyFailure::Other(e),
                ..
            } => Some(e.get()),
            _ => None,
        }
    }
}

/// A failure as the value of the layer below taps that reported it (a `rustls::Error`, a
/// `quinn::ConnectionError`, an `io::Error`, one of taps' own typed transport reasons),
/// kept whole so a caller can inspect it: [`find`](Self::find) walks it and its sources
/// for a type. `Display` is the reporting layer's words, written by taps from the value's
/// variants. Cheap to clone (an `Arc`). Two are equal when they are the same value or
/// read the same.
#[derive(Clone)]
pub struct LayerError(Arc<dyn Error + Send + Sync + 'static>);

impl LayerError {
    /// Keeps `error`. Cost: one allocation.
    pub fn new(error: impl Error + Send + Sync + 'static) -> LayerError {
        LayerError(Arc::new(error))
    }

    /// The error value as reported.
    pub fn get(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.0
    }

    /// The first error of type `T` in this value and its chain of sources: e.g.
    /// `cause.find::<rustls::Error>()` on a TLS handshake failure. Costs a walk of the
    /// chain.
    pub fn find<T: Error + 'static>(&self) -> Option<&T> {
        let mut next: Option<&(dyn Error + 'static)> = Some(self.get());
        while let Some(e) = next {
            if let Some(t) = e.downcast_ref::<T>() {
                return Some(t);
            }
            next = e.source();
        }
        None
    }

    /// A failure known only by its words, as read back from a CIB file.
    pub(crate) fn recorded(words: String) -> LayerError {
        LayerError::new(Recorded(words))
    }
}

impl fmt::Debug for LayerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for LayerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for LayerError {
    fn eq(&self, other: &LayerError) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.to_string() == other.to_string()
    }
}

impl Eq for LayerError {}

/// A failure read back from a file that kept only its words.
#[derive(Debug)]
struct Recorded(String);

impl fmt::Display for Recorded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Recorded {}

/// Why this build or host cannot run a stack: the candidate is ranked and reported, never
/// started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Unavailable {
    /// QUIC with a security other than its own TLS 1.3.
    QuicIsTls,
    /// TLS over a protocol that is not a byte stream (TLS runs over TCP and MPTCP).
    TlsNeedsStream,
    /// DTLS over SCTP, which taps does not implement.
    DtlsOverSctp,
    /// libusrsctp, which runs SCTP, cannot be loaded.
    SctpLibraryMissing,
    /// The executing side has no implementation of the stack (what a tool or test says
    /// of a build it models).
    NotBuilt,
}

impl Unavailable {
    /// Whether no host could ever run the stack with this build (a combination that does
    /// not exist, or one the build does not implement), as opposed to what this host
    /// lacks (libusrsctp): such a candidate was never a possible attempt, and a failed
    /// race's message leaves it out when anything else was tried.
    pub fn is_build_limit(self) -> bool {
        match self {
            Unavailable::QuicIsTls
            | Unavailable::TlsNeedsStream
            | Unavailable::DtlsOverSctp
            | Unavailable::NotBuilt => true,
            Unavailable::SctpLibraryMissing => false,
        }
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unavailable::QuicIsTls => "QUIC is always secured by TLS 1.3",
            Unavailable::TlsNeedsStream => "TLS runs over TCP and MPTCP only",
            Unavailable::DtlsOverSctp => "DTLS over SCTP is not implemented in this build yet",
            Unavailable::SctpLibraryMissing => {
                "libusrsctp cannot be loaded (install libusrsctp2, or name the library in \
                 TAPS_USRSCTP_LIB)"
            }
            Unavailable::NotBuilt => "not supported by this build",
        })
    }
}

/// Why a peer's certificate was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum VerifyFailure {
    /// It expired.
    Expired,
    /// It is not valid yet.
    NotYetValid,
    /// It is not for the name asked for.
    NameMismatch,
    /// No trusted certificate authority issued it (self-signed, or an unknown CA).
    UnknownIssuer,
    /// Its issuer revoked it.
    Revoked,
    /// A signature in its chain does not verify.
    BadSignature,
    /// Anything else: the verifier's own error (e.g. `rustls::CertificateError`).
    #[serde(skip)]
    Other(LayerError),
}

impl fmt::Display for VerifyFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyFailure::Expired => f.write_str("certificate expired"),
            VerifyFailure::NotYetValid => f.write_str("certificate not valid yet"),
            VerifyFailure::NameMismatch => f.write_str("certificate is for another name"),
            VerifyFailure::UnknownIssuer => {
                f.write_str("issued by an unknown certificate authority")
            }
            VerifyFailure::Revoked => f.write_str("certificate revoked"),
            VerifyFailure::BadSignature => f.write_str("bad signature in the certificate chain"),
            VerifyFailure::Other(why) => why.fmt(f),
        }
    }
}

/// Why a DNS lookup of one family gave no address.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DnsFailure {
    /// The name exists but has no record of the asked type (NOERROR, empty answer).
    NoRecords,
    /// The name does not exist (NXDOMAIN).
    NxDomain,
    /// No server answered in time, after every attempt.
    Timeout,
    /// Anything else (server failure, refusal, unreachable servers, invalid name, ...):
    /// the resolver's own error.
    Other(LayerError),
}

impl fmt::Display for DnsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DnsFailure::NoRecords => f.write_str("no record of that type"),
            DnsFailure::NxDomain => f.write_str("name does not exist"),
            DnsFailure::Timeout => f.write_str("timed out"),
            DnsFailure::Other(why) => why.fmt(f),
        }
    }
}

impl Error for DnsFailure {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            DnsFailure::Other(e) => Some(e.get()),
            _ => None,
        }
    }
}

/// Displays a duration as milliseconds: whole numbers without decimals ("250 ms"), else
/// one decimal ("40.5 ms"). Formats only when displayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ms(pub(crate) Duration);

impl fmt::Display for Ms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.subsec_nanos() == d.subsec_millis() * 1_000_000 {
            write!(f, "{} ms", d.as_millis())
        } else {
            write!(f, "{:.1} ms", d.as_secs_f64() * 1e3)
        }
    }
}
