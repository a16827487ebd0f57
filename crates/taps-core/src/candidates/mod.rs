//! Candidate gathering and ranking.
//!
//! Two stages, so that the costly part is paid once per preconnection, not per flow:
//!
//! 1. [`Plan::new`] applies the PIB profiles to the properties and evaluates every
//!    protocol stack against them: which stacks are allowed, with which score and why.
//!    An unsatisfiable property set fails here, naming the conflicting properties.
//! 2. [`Plan::score_answer`] crosses the planned stacks with the remote addresses of a
//!    DNS answer and the local bindings, and applies the PIB policies: a
//!    [`ScoredAnswer`] that the caller keeps and reuses for every flow to that answer.
//!    [`Plan::gather_scored`] then adds the CIB history and returns candidates in race
//!    order ([`order`]); [`Plan::gather`] does both steps at once.
//!
//! Ranking: candidates whose last attempt failed (per the CIB) go last; the rest are
//! ordered by score (Prefer adds, Avoid subtracts a tenth, explicit NEAT scores and
//! list positions add), then by stack, then by address: recently successful addresses
//! first (fastest first), then unknown ones in RFC 6724 order, each class interleaving
//! families (First Address Family Count).
//!
//! The files hold, one way only (each uses only those listed before it): `reasons`
//! (why scored, dropped, unsatisfiable), `bindings` (local bindings), `candidate`,
//! `rfc6724` and `order` (race order), `evaluate` (a property set against a stack and
//! against a candidate's facts), `conflict` (explaining an unsatisfiable set), `plan`
//! ([`Plan::new`]) and `gather` (scoring per DNS answer, [`ScoredAnswer`], and adding the
//! CIB history).

mod bindings;
mod candidate;
mod conflict;
mod evaluate;
mod gather;
mod order;
mod plan;
mod reasons;
mod rfc6724;

pub use bindings::LocalBinding;
pub use candidate::{Candidate, PrunedCandidate};
pub use gather::{Gathered, ScoredAnswer};
pub use order::order;
pub use plan::{Availability, Plan, PlannedStack, PrunedStack};
pub use reasons::{Reason, Unsatisfiable, Violation};

#[cfg(test)]
mod input_tests;
#[cfg(test)]
mod tests;
