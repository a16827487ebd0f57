//! The embedded policy manager: PIB (profiles and policies, static) and CIB (interfaces
//! and learned outcomes, updated as taps runs). In NEAT this was a separate Python daemon
//! reached over a Unix socket per flow; here it is plain data in the process.

pub mod cib;
pub mod pib;

pub use cib::{AttemptRecord, Cib, CibConfig, History, OutcomeKey, PortableRecord};
pub use pib::{MergeConflict, Pib, PibError, PropertySet, Rule, RuleKind};
