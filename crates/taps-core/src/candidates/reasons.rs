//! Why candidates are scored, dropped, or not found at all: [`Reason`], [`Violation`]
//! and [`Unsatisfiable`], with the text the CLI and errors show.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use crate::net::Family;
use crate::policy::MergeConflict;
use crate::properties::{Name, Preference, Value};

/// Why a candidate got (part of) its score.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// A Prefer the stack satisfies, or an Avoid it matches (negative delta).
    Preference {
        /// Property.
        name: Name,
        /// Level asked for.
        pref: Preference,
        /// Score change.
        delta: f64,
    },
    /// Listed at `position` (0-based) of `of` in a list-valued property.
    Listed {
        /// Property.
        name: Name,
        /// Position in the list.
        position: usize,
        /// List length.
        of: usize,
        /// Score change.
        delta: f64,
    },
    /// A PIB rule applied to this candidate.
    Rule {
        /// Its uid.
        uid: Arc<str>,
    },
    /// A default requirement that no stack could meet together with the application's
    /// properties, and was relaxed to a preference.
    Relaxed {
        /// Property.
        name: Name,
    },
    /// A default that yields because another property the application set implies the
    /// opposite (MPTCP named in `transport` implies multipath).
    Implied {
        /// The property whose default yields.
        name: Name,
        /// The property that implies it.
        by: Name,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Preference { name, pref, delta } => {
                write!(f, "{delta:+} {name} ({pref})")
            }
            Reason::Listed {
                name,
                position,
                of,
                delta,
            } => write!(f, "{delta:+} {name}: listed {} of {of}", position + 1),
            Reason::Rule { uid } => write!(f, "PIB rule '{uid}' applied"),
            Reason::Implied { name, by } => {
                write!(f, "default {name} yields: implied by {by}")
            }
            Reason::Relaxed { name } => {
                write!(
                    f,
                    "default {name} relaxed: no stack meets it with the request"
                )
            }
        }
    }
}

/// Why a candidate was dropped.
#[derive(Debug, Clone, PartialEq)]
pub enum Violation {
    /// A Require the stack cannot meet.
    Lacks {
        /// Property.
        name: Name,
    },
    /// A Prohibit the stack cannot avoid.
    Has {
        /// Property.
        name: Name,
    },
    /// A required list-valued property does not admit the candidate's `fact`.
    NotAdmitted {
        /// Property.
        name: Name,
        /// What was required.
        wanted: Value,
        /// What the candidate is.
        fact: String,
    },
    /// Multipath is disabled, so MPTCP is not used.
    MultipathDisabled,
    /// No local interface has an address of this family that can reach the remote.
    NoLocalAddress {
        /// The family.
        family: Family,
    },
    /// A required `local_ips` entry that is no address of this host's interfaces.
    NotLocal {
        /// The address.
        addr: IpAddr,
    },
    /// A PIB merge conflict.
    Conflict(MergeConflict),
    /// A violation that exists only because PIB policies changed the properties.
    ByPolicy {
        /// The policies applied to this candidate, in order.
        uids: Vec<Arc<str>>,
        /// What the changed properties rule out.
        violation: Box<Violation>,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Lacks { name } => write!(f, "requires {name}, which it does not provide"),
            Violation::Has { name } => write!(f, "prohibits {name}, which it always provides"),
            Violation::NotAdmitted { name, wanted, fact } => {
                write!(f, "{name} requires {wanted}, candidate is {fact}")
            }
            Violation::MultipathDisabled => f.write_str("multipath is disabled"),
            Violation::NoLocalAddress { family } => {
                write!(f, "no local {family} address can reach it")
            }
            Violation::NotLocal { addr } => {
                write!(
                    f,
                    "local_ips names {addr}, which is not an address of this host"
                )
            }
            Violation::Conflict(c) => c.fmt(f),
            Violation::ByPolicy { uids, violation } => {
                let uids: Vec<&str> = uids.iter().map(|u| &**u).collect();
                write!(f, "policy {}: {violation}", uids.join(", "))
            }
        }
    }
}

/// No stack satisfies the properties.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("unsatisfiable properties: {} conflict; {detail}", properties.join(" and "))]
pub struct Unsatisfiable {
    /// The conflicting properties, as `name=value (level)`.
    pub properties: Vec<String>,
    /// What each stack lacks.
    pub detail: String,
}
