//! What an association delivers and reports: complete messages and connection progress.

use std::time::Duration;

use crate::error::Error;

/// One complete user message (reassembled from usrsctp's partial deliveries). Cloning copies
/// the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Stream the message arrived on.
    pub stream: u16,
    /// Payload protocol identifier, in host order (sent big-endian on the wire).
    pub ppid: u32,
    /// Whether it was sent unordered.
    pub unordered: bool,
    /// The payload.
    pub data: Vec<u8>,
}

/// Where an association is in its life, as published on
/// [`Connecting::progress`](super::Connecting::progress). Cloning is cheap (errors are shared).
#[derive(Debug, Clone)]
pub enum Progress {
    /// INIT sent, nothing heard yet.
    Connecting,
    /// An INIT ACK arrived `after` the attempt started: the peer is reachable (one RTT).
    Reachable {
        /// Time from `connect` to the INIT ACK.
        after: Duration,
    },
    /// COMM_UP: the association is established (two RTTs).
    Established {
        /// Inbound streams negotiated.
        inbound: u16,
        /// Outbound streams negotiated.
        outbound: u16,
    },
    /// Gracefully shut down.
    Closed,
    /// Failed or aborted.
    Failed(Error),
}
