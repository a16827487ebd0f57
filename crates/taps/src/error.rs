//! The one error type of the taps API.

use taps_core::candidates::Unsatisfiable;
use taps_core::properties::PropertyError;
use taps_core::Family;

use crate::resolver::DnsError;

/// Everything that can go wrong, each with a message that says what and why.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad configuration (PIB directory, resolver settings, ...).
    #[error("configuration: {0}")]
    Config(String),
    /// Bad transport properties.
    #[error(transparent)]
    Properties(#[from] PropertyError),
    /// No stack satisfies the properties.
    #[error(transparent)]
    Unsatisfiable(#[from] Unsatisfiable),
    /// The name did not resolve to any address.
    #[error("{host} does not resolve: {}", causes.iter().map(|(f, e)| format!("{} {e}", if *f == Family::V4 { "A:" } else { "AAAA:" })).collect::<Vec<_>>().join("; "))]
    Resolve {
        /// The name.
        host: String,
        /// Each family's answer.
        causes: Vec<(Family, DnsError)>,
    },
    /// Every candidate was pruned for the resolved addresses.
    #[error("no candidate left for {host}: {reasons}")]
    NoCandidates {
        /// The name.
        host: String,
        /// Why each was dropped.
        reasons: String,
    },
    /// The race failed: every attempt's cause.
    #[error(transparent)]
    Race(#[from] taps_core::race::RaceError),
    /// The preconnection lacks what the call needs.
    #[error("{0}")]
    Usage(&'static str),
    /// A socket error after establishment.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A message over the size the connection can carry.
    #[error("message of {size} bytes exceeds the maximum of {max}")]
    MessageTooBig {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
}
