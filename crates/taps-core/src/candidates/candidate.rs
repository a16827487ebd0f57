//! The gathered candidates: [`Candidate`] (kept, to be raced) and [`PrunedCandidate`]
//! (dropped, with why).

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use super::bindings::LocalBinding;
use super::reasons::{Reason, Violation};
use crate::failure::Unavailable;
use crate::net::Family;
use crate::policy::{History, OutcomeKey};
use crate::stack::Stack;

/// One way to reach the remote endpoint, ready to be raced. Cheap to clone: the
/// reasons are shared.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Protocol stack.
    pub stack: Stack,
    /// Remote address and port.
    pub remote: SocketAddr,
    /// Local binding, if any.
    pub local: Option<LocalBinding>,
    /// Score (higher first).
    pub score: f64,
    /// What the CIB knows about it.
    pub history: History,
    /// Why it has its score.
    pub reasons: Arc<[Reason]>,
    /// Why it cannot be attempted by this build, if so.
    pub unavailable: Option<Unavailable>,
}

impl Candidate {
    /// The address family of the remote. Free.
    pub fn family(&self) -> Family {
        Family::of(&self.remote.ip())
    }

    /// The CIB key of this candidate for `endpoint`. Clones the `Arc`.
    pub fn outcome_key(&self, endpoint: &Arc<str>) -> OutcomeKey {
        OutcomeKey {
            endpoint: endpoint.clone(),
            stack: self.stack,
            remote: self.remote,
            interface: self.local.as_ref().map(|l| l.interface.clone()),
        }
    }
}

impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.stack, self.remote)?;
        if let Some(l) = &self.local {
            write!(f, " from {} ({})", l.addr, l.interface)?;
        }
        Ok(())
    }
}

/// A candidate dropped at gathering time.
#[derive(Debug, Clone)]
pub struct PrunedCandidate {
    /// Stack.
    pub stack: Stack,
    /// Remote address.
    pub remote: SocketAddr,
    /// Local binding, if any.
    pub local: Option<LocalBinding>,
    /// Why.
    pub violations: Vec<Violation>,
}
