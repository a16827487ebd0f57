//! The embedded policy manager: PIB (profiles and policies, static) and CIB (interfaces
//! and learned outcomes, updated as taps runs). In NEAT this was a separate Python daemon
//! reached over a Unix socket per flow; here it is plain data in the process.

mod cib;
mod pib;

pub use cib::{
    AttemptRecord, Cib, CibConfig, History, Outcome, OutcomeKey, PortableRecord, DEFAULT_LIFETIME,
    DEFAULT_MAX_ENTRIES, MAX_FILE_BYTES, QUIC_BROKEN_FIRST, QUIC_BROKEN_MAX,
};
pub use pib::{
    merge_entry, MergeConflict, Pib, PibError, PropertySet, Rule, RuleKind, MAX_ALTERNATIVES,
};
