//! Which link each SCTP DATA chunk went over first: a ledger the bridges of a lab share
//! while it is on ([`crate::lab::Lab::sctp_ledger`]), fed with every UDP-encapsulated SCTP
//! packet the sender puts on a link (before the link's rules: a chunk the link then drops
//! still went that way). A chunk seen again (same association and TSN) is a
//! retransmission, counted apart, on the link it took that time. This is what tells a
//! stream pinned to a path (its first transmissions all on that path's link) from a stream
//! whose data the sender spreads, whatever its retransmission policy does.

#![forbid(unsafe_code)]

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Mutex;

use crate::packet::{self, PacketInfo};

/// Links the ledger keeps figures for (a lab has at most three).
pub const LEDGER_LINKS: usize = 3;

/// Streams the ledger keeps figures for (ids 0 to this minus one).
pub const LEDGER_STREAMS: usize = 8;

/// Bytes per link and stream.
pub type PerLink = [[u64; LEDGER_STREAMS]; LEDGER_LINKS];

#[derive(Default)]
struct Inner {
    /// The link each (verification tag, TSN) was first seen on.
    first_link: HashMap<(u32, u32), usize>,
    /// User data bytes of first transmissions, per link and stream.
    first: PerLink,
    /// User data bytes of retransmissions, per link and stream.
    again: PerLink,
}

/// The shared ledger. Costs, per SCTP packet recorded: a CRC32c of it, a walk of its
/// chunks and one lock and map lookup per DATA chunk.
#[derive(Default)]
pub struct SctpLedger {
    inner: Mutex<Inner>,
}

impl SctpLedger {
    /// Records the DATA chunks of `pkt` (parsed as `info`) sent over `link`.
    pub(crate) fn record(&self, link: usize, pkt: &[u8], info: &PacketInfo) {
        let Some(chunks) = packet::sctp_data(pkt, info) else {
            return;
        };
        if chunks.is_empty() || link >= LEDGER_LINKS {
            return;
        }
        let mut g = crate::sink::lock(&self.inner);
        for c in chunks {
            let sid = usize::from(c.stream);
            if sid >= LEDGER_STREAMS {
                continue;
            }
            if let Entry::Vacant(e) = g.first_link.entry((c.vtag, c.tsn)) {
                e.insert(link);
                g.first[link][sid] += c.bytes;
            } else {
                g.again[link][sid] += c.bytes;
            }
        }
    }

    /// User data bytes of first transmissions, per link and stream.
    pub fn first_sent(&self) -> PerLink {
        crate::sink::lock(&self.inner).first
    }

    /// User data bytes of retransmissions, per link and stream.
    pub fn sent_again(&self) -> PerLink {
        crate::sink::lock(&self.inner).again
    }
}
