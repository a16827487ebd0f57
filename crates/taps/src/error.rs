//! The errors of the taps API, split the way quinn splits its own: what can go wrong
//! before any I/O ([`SetupError`]: configuration, properties, usage), what can go wrong
//! while establishing a connection ([`EstablishError`]: names, candidates, the race), and
//! what can go wrong on an established connection (I/O, message size). [`Error`] holds
//! any of them, so `?` works across the API. Every cause is data; text exists only as
//! `Display`, rendered when shown.

use std::fmt;

use taps_core::candidates::{PrunedCandidate, Unsatisfiable};
use taps_core::failure::AttemptCause;
use taps_core::properties::PropertyError;
use taps_core::race::{AttemptId, RaceError};
use taps_core::{DnsFailure, Family};

/// Everything that can go wrong, each with a message that says what and why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Before any I/O: bad configuration, properties or usage.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// Establishing a connection failed: the name, the candidates or the race.
    #[error(transparent)]
    Establish(#[from] EstablishError),
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
    /// A broken invariant inside taps: a bug to report, not the network's doing nor the
    /// caller's.
    #[error("internal error (a bug in taps, please report it): {0}")]
    Internal(#[from] InternalError),
}

/// Which invariant of taps broke. Each variant names one; none is expected to happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InternalError {
    /// The race named an attempt the winner that the driver holds no connection for, or
    /// that the race's report does not show as won.
    #[error("the race named attempt {0} the winner, but no connection of it is at hand")]
    WinnerWithoutConnection(AttemptId),
}

/// An error found before any I/O: nothing was sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// Bad configuration (PIB directory, resolver settings, listener addresses, ...).
    #[error("configuration: {0}")]
    Config(String),
    /// Bad transport properties.
    #[error(transparent)]
    Properties(#[from] PropertyError),
    /// No stack satisfies the properties.
    #[error(transparent)]
    Unsatisfiable(#[from] Unsatisfiable),
    /// The call lacks what it needs (e.g. initiate without a remote endpoint).
    #[error("{0}")]
    Usage(&'static str),
    /// A certificate, key or CA file of the security parameters is missing, unreadable
    /// or unusable.
    #[error("{}: {problem}", file.display())]
    SecurityFile {
        /// The file.
        file: std::path::PathBuf,
        /// What is wrong with it.
        problem: String,
    },
}

impl SetupError {
    /// A problem with a security file.
    pub(crate) fn security_file(file: &std::path::Path, problem: impl Into<String>) -> Self {
        SetupError::SecurityFile {
            file: file.to_path_buf(),
            problem: problem.into(),
        }
    }
}

/// Establishing a connection failed. Cloning copies the race's report.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum EstablishError {
    /// The name did not resolve to any address: each family's cause.
    #[error("{host} does not resolve: {}", DnsCauses(causes))]
    Resolve {
        /// The name.
        host: String,
        /// Each family's failure.
        causes: Vec<(Family, DnsFailure)>,
    },
    /// Every candidate was ruled out for the resolved addresses: each one with why.
    #[error("no candidate left for {host}: {}", PrunedList(pruned))]
    NoCandidates {
        /// The name.
        host: String,
        /// The candidates ruled out, with their violations.
        pruned: Vec<PrunedCandidate>,
    },
    /// The race failed: every attempt with its typed cause.
    #[error(transparent)]
    Race(#[from] RaceError),
}

impl Error {
    /// A usage error (the call lacks what it needs).
    pub(crate) fn usage(what: &'static str) -> Error {
        Error::Setup(SetupError::Usage(what))
    }

    /// A configuration error.
    pub(crate) fn config(what: impl fmt::Display) -> Error {
        Error::Setup(SetupError::Config(what.to_string()))
    }

    /// The failed race, if this is one.
    pub fn race(&self) -> Option<&RaceError> {
        match self {
            Error::Establish(EstablishError::Race(e)) => Some(e),
            _ => None,
        }
    }

    /// The typed cause of every failed attempt, if this is a failed race (empty
    /// otherwise). Cost: a scan of the race's report.
    pub fn attempt_causes(&self) -> Vec<AttemptCause> {
        self.race()
            .map(|r| r.attempts().map(|a| a.cause).collect())
            .unwrap_or_default()
    }
}

impl From<PropertyError> for Error {
    fn from(e: PropertyError) -> Self {
        Error::Setup(e.into())
    }
}

impl From<Unsatisfiable> for Error {
    fn from(e: Unsatisfiable) -> Self {
        Error::Setup(e.into())
    }
}

impl From<RaceError> for Error {
    fn from(e: RaceError) -> Self {
        Error::Establish(e.into())
    }
}

/// `A: cause; AAAA: cause`, rendered when shown.
struct DnsCauses<'a>(&'a [(Family, DnsFailure)]);

impl fmt::Display for DnsCauses<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (family, cause)) in self.0.iter().enumerate() {
            let rr = if *family == Family::V4 { "A" } else { "AAAA" };
            let sep = if i == 0 { "" } else { "; " };
            write!(f, "{sep}{rr}: {cause}")?;
        }
        Ok(())
    }
}

/// `<stack> <remote>: <violation>, ...; ...`, rendered when shown.
struct PrunedList<'a>(&'a [PrunedCandidate]);

impl fmt::Display for PrunedList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { "; " };
            write!(f, "{sep}{} {}: ", p.stack, p.remote)?;
            for (j, v) in p.violations.iter().enumerate() {
                let sep = if j == 0 { "" } else { ", " };
                write!(f, "{sep}{v}")?;
            }
        }
        Ok(())
    }
}
