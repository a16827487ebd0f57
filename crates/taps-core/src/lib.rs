//! Sans-IO core of taps.
//!
//! Everything here is pure computation: no sockets, no tokio, no clock of its own.
//! Inputs are values and timestamps supplied by the caller; outputs are values and
//! actions for the caller to execute. The `taps` crate is the I/O side that drives it.
//!
//! - [`properties`]: transport properties (RFC 9622) and NEAT's JSON property format,
//!   compiled once into an immutable, shareable [`properties::Properties`].
//! - [`policy`]: the embedded policy manager: PIB (profiles and policies) and CIB
//!   (local interfaces and a cache of race outcomes).
//! - [`candidates`]: turns properties, remote addresses, interfaces, PIB and CIB into a
//!   ranked list of candidate stacks, with the reasons for each decision.
//! - [`race`]: the Happy Eyeballs state machine that races the candidates.

#![forbid(unsafe_code)]

pub mod candidates;
mod failure;
mod net;
pub mod policy;
pub mod properties;
pub mod race;
mod service;
mod stack;

pub use failure::{AttemptCause, DnsFailure, LayerError, Unavailable, VerifyFailure};
pub use net::{Family, Interface, InterfaceAddress, InterfaceKind};
pub use service::{ServiceInfo, ServiceRecord};
pub use stack::{Provides, Security, Stack};
