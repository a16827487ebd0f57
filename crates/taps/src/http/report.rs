//! What [`Client`](super::Client) tells about a request: the protocol race
//! ([`ProtocolRace`], each [`Leg`]), the connection ([`Established`]), the exchange
//! ([`Exchange`]) and its failures ([`ClientError`]).

use std::fmt;
use std::time::Duration;

use super::ConnectionDetails;
use crate::Error;

/// What happened to one leg of the protocol race.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leg {
    /// Not tried, and why (not allowed, or marked broken in the CIB).
    Skipped(String),
    /// Never started: the other leg connected first.
    NotStarted,
    /// Connected first, this long after the race began.
    Won(Duration),
    /// Failed this long after the race began, with the error in words.
    Failed {
        /// When, from the race's start.
        after: Duration,
        /// Why.
        error: String,
    },
    /// Still connecting when the other leg won, this long after the race began (given
    /// up; a QUIC leg is recorded in the CIB as overtaken).
    Lost(Duration),
    /// The connection already pooled for the origin stood in (HTTP/2 or HTTP/1.1 while
    /// an `Alt-Svc` alternative was tried).
    Reused,
}

impl fmt::Display for Leg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Leg::Skipped(why) => write!(f, "skipped: {why}"),
            Leg::NotStarted => f.write_str("not started (the other won first)"),
            Leg::Won(t) => write!(f, "won in {:.1} ms", ms(*t)),
            Leg::Failed { after, error } => write!(f, "failed after {:.1} ms: {error}", ms(*after)),
            Leg::Lost(t) => write!(f, "still connecting at {:.1} ms, given up", ms(*t)),
            Leg::Reused => f.write_str("the pooled connection, reused"),
        }
    }
}

fn ms(t: Duration) -> f64 {
    t.as_secs_f64() * 1e3
}

/// Why a connection carries the protocol it does: the two legs of the race that made it.
/// Cost: two short strings and a few words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolRace {
    /// Where QUIC was (or would have been) tried: host and UDP port.
    pub quic_target: (String, u16),
    /// Whether that target came from an `Alt-Svc` header (else it is the origin).
    pub from_alt_svc: bool,
    /// The head start QUIC had before TLS/TCP started (zero when QUIC was skipped),
    /// counted from QUIC's first attempt.
    pub head_start: Duration,
    /// When QUIC's first attempt started (after its lookups), from the race's start;
    /// `None`: it started none.
    pub quic_began: Option<Duration>,
    /// HTTP/3 over QUIC.
    pub quic: Leg,
    /// HTTP/2 or HTTP/1.1 over TLS/TCP.
    pub tcp: Leg,
    /// How long the race took.
    pub took: Duration,
}

impl fmt::Display for ProtocolRace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (host, port) = &self.quic_target;
        let via = if self.from_alt_svc {
            ", from Alt-Svc"
        } else {
            ""
        };
        write!(f, "QUIC (h3) to {host}:{port}{via}: {}", self.quic)?;
        if !matches!(self.quic, Leg::Skipped(_)) {
            write!(f, " (head start {:.0} ms)", ms(self.head_start))?;
        }
        if let Some(t) = self.quic_began {
            write!(f, " [first attempt at {:.1} ms]", ms(t))?;
        }
        write!(f, "; TLS/TCP (h2, http/1.1): {}", self.tcp)
    }
}

/// Which HTTP versions a [`Client`](super::Client) may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocols {
    /// HTTP/3 raced against HTTP/2 and HTTP/1.1 (the default).
    #[default]
    Any,
    /// HTTP/3 only: QUIC alone, no TLS/TCP.
    Http3,
    /// HTTP/2 or HTTP/1.1 only: TLS/TCP alone, no QUIC.
    Http2,
}

/// The connection a response came over: its HTTP version, what taps established
/// (stack, addresses, the address race, TLS) and the protocol race that chose it.
#[derive(Debug, Clone)]
pub struct Established {
    /// HTTP/3, HTTP/2 or HTTP/1.1.
    pub version: http::Version,
    /// The taps connection's information (for HTTP/3, that of the QUIC connection).
    pub details: ConnectionDetails,
    /// Why this protocol: the race of QUIC against TLS/TCP.
    pub race: ProtocolRace,
}

impl Established {
    pub(crate) fn new(
        version: http::Version,
        details: ConnectionDetails,
        race: ProtocolRace,
    ) -> Established {
        Established {
            version,
            details,
            race,
        }
    }
}

/// What one request went through, in the extensions of every response
/// ([`Client::request`](super::Client::request)): `response.extensions().get::<Exchange>()`.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The connection, and the race that made it (or chose it).
    pub connection: Established,
    /// Whether the request went over a pooled connection without a race.
    pub reused: bool,
    /// The time to a new connection, when this request made one (preconnections built
    /// on first use, then the race); `None`: a pooled connection.
    pub connect: Option<Duration>,
    /// From the call to the response's head.
    pub first_byte: Duration,
    /// From the call to the body's end.
    pub total: Duration,
}

/// A failed request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The URI, the properties or a security file (before any connection).
    #[error(transparent)]
    Setup(#[from] Error),
    /// No connection: both legs of the race failed or were skipped.
    #[error("no connection to {origin}: {race}")]
    Connect {
        /// `host:port`.
        origin: String,
        /// Each leg's outcome.
        race: Box<ProtocolRace>,
    },
    /// The connection broke during the exchange, or the peer refused it.
    #[error("{version:?} exchange with {origin} failed: {message}")]
    Exchange {
        /// `host:port`.
        origin: String,
        /// The HTTP version spoken.
        version: http::Version,
        /// What failed.
        message: String,
    },
}
