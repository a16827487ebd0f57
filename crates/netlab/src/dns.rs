//! The lab's DNS server: [`taps_testkit::DnsServer`] (an authoritative hickory-server
//! instance serving a small in-memory zone) started on sockets bound in the server
//! namespace, with a per-record-type answer delay (to emulate a slow AAAA).
//!
//! Semantics: a name with records of the asked type answers them; a name that exists
//! otherwise (other types, the apex, or names below it) answers `NOERROR` with the SOA;
//! any other name answers `NXDOMAIN`. Each request is handled in its own task, so a
//! delayed AAAA answer does not hold back the A answer.

#![forbid(unsafe_code)]

pub use taps_testkit::{DnsServer, QueryType, RecordType};

/// TTL of every record of the lab's zone, in seconds (short: scenarios change nothing,
/// but keep it low).
pub const TTL: u32 = 5;
