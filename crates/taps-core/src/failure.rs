//! Why something did not connect, as data: the typed causes that travel from the I/O
//! side through the race, its report, the CIB and the errors an application sees.
//!
//! A leaf module (it depends on nothing else of the crate), so the race, the policy
//! manager and the candidates can all speak of causes without depending on each other.
//! Text exists only as `Display`, rendered when shown.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Why one attempt (or skipped candidate) did not connect. Cheap to clone: no variant
/// owns more than an `Arc<str>`.
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
    /// The security handshake (TLS) failed for another reason: no shared protocol
    /// version, cipher suite or ALPN, an alert from the peer, a malformed message, ...
    Handshake(Arc<str>),
    /// This build or host cannot run the candidate's stack (never started).
    Unavailable(Unavailable),
    /// The host cannot run what the attempt needs (protocol missing from the kernel,
    /// unknown congestion control, a socket option it refuses, ...).
    Unsupported(Arc<str>),
    /// Any other error, in words.
    Other(Arc<str>),
}

impl AttemptCause {
    /// An [`AttemptCause::Other`] with this text. Cost: one allocation.
    pub fn other(message: impl fmt::Display) -> AttemptCause {
        AttemptCause::Other(message.to_string().into())
    }

    /// Whether the attempt got no answer in time (cut off by the race, the OS timeout,
    /// or overtaken while silent).
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            AttemptCause::TimedOut { .. } | AttemptCause::Overtaken { .. }
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
            AttemptCause::Overtaken { silent } => {
                write!(f, "no answer in {} (overtaken)", Ms(*silent))
            }
            AttemptCause::Verification {
                server_name,
                reason,
            } => write!(f, "certificate of {server_name} rejected: {reason}"),
            AttemptCause::Handshake(why) => write!(f, "TLS handshake failed: {why}"),
            AttemptCause::Unavailable(why) => write!(f, "skipped: {why}"),
            AttemptCause::Unsupported(why) | AttemptCause::Other(why) => f.write_str(why),
        }
    }
}

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
    /// Anything else, in words.
    Other(Arc<str>),
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
            VerifyFailure::Other(why) => f.write_str(why),
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
    /// Anything else: server failure, refusal, unreachable servers, invalid name, ...
    Other(Arc<str>),
}

impl fmt::Display for DnsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DnsFailure::NoRecords => f.write_str("no record of that type"),
            DnsFailure::NxDomain => f.write_str("name does not exist"),
            DnsFailure::Timeout => f.write_str("timed out"),
            DnsFailure::Other(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for DnsFailure {}

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
