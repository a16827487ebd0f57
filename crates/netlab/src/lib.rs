//! netlab: emulated networks to test Happy Eyeballs under real round-trip times, loss and
//! dead paths.
//!
//! A [`Lab`] is two network namespaces (client and server) joined by a user-space
//! [`Bridge`] between two TUN devices. The bridge applies [`Rule`]s per server-side
//! address, protocol and port: delay, jitter, loss, a rate limit, or a blackhole (drop
//! silently). The server namespace holds the test zone's addresses (IPv4 and IPv6), a
//! DNS server for the zone [`ZONE`] with a per-record-type answer delay, a TCP sink on
//! port [`SERVICE_PORT`] and an SCTP server (SCTP over UDP, RFC 6951) on the address of
//! [`lab::SCTP_HOST`]; the TLS scenarios start taps' own TLS listener in it
//! ([`tls_server`]). [`scenario`] runs `taps connect` in the client namespace
//! against it and checks the time to connect, the winner and the attempts.
//!
//! Everything is named `nl<pid>-...` and torn down on drop, on panic and (in the binary)
//! on SIGINT/SIGTERM; teardown removes only what this process recorded creating.
//!
//! ```no_run
//! use std::time::Duration;
//! use netlab::{Lab, LabOptions, Match, Rule};
//! let lab = Lab::start(LabOptions::default())?;
//! let rd6 = netlab::addresses("rd")[0].addr;
//! lab.set_rules(vec![Rule::new(Match::host(rd6)).rtt(Duration::from_millis(40))]);
//! // ... run something in lab.client() ...
//! lab.teardown().map_err(std::io::Error::other)?;
//! # Ok::<(), std::io::Error>(())
//! ```

pub mod bridge;
pub mod caddy;
pub mod dns;
pub mod lab;
pub mod links;
pub mod mptcp;
pub mod netns;
pub mod packet;
pub mod probe;
pub mod rules;
pub mod scenario;
pub mod sctp_ledger;
pub mod sctp_mp;
pub mod sctp_mp_proc;
mod sctp_mp_sat;
pub mod sctp_server;
pub mod sink;
pub mod taps;
pub mod taps_get;
pub mod tls_server;
pub mod tun;

pub use bridge::{Bridge, BridgeStats, DirStats, LinkSwitch};
pub use dns::{DnsServer, RecordType};
pub use lab::{
    addresses, fqdn, is_dead, Lab, LabOptions, ZoneRecord, BAD_CERT_HOST, QUIC_BLOCKED_HOST,
    QUIC_HOST, SCTP_HOST, SCTP_UDP_PORT, SERVICE_PORT, TLS_PORT, TLS_STUCK_HOST, ZONE,
    ZONE_RECORDS,
};
pub use links::{LinkEvent, LinkSchedule};
pub use netns::{cleanup_stale, leftovers, teardown_all, unsupported_reason, Netns, Scratch};
pub use packet::Proto;
pub use rules::{Direction, Effect, Match, Rule};
