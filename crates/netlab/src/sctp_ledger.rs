//! Which link each SCTP DATA chunk went over first: a ledger the bridges of a lab share
//! while it is on ([`crate::lab::Lab::sctp_ledger`]), fed with every UDP-encapsulated SCTP
//! packet the sender puts on a link (before the link's rules: a chunk the link then drops
//! still went that way). A chunk seen again (same association and TSN) is a
//! retransmission, counted apart, on the link it took that time. This is what tells a
//! stream pinned to a path (its first transmissions all on that path's link) from a stream
//! whose data the sender spreads, whatever its retransmission policy does.
//!
//! With a timeline on ([`SctpLedger::start_timeline`]) it also keeps every DATA chunk
//! toward the server, every SACK toward the client and every DATA chunk a full link queue
//! dropped, with its time: enough to show why a transfer stalled (a receive window closed
//! behind a hole, a retransmission dropped, a timeout).

#![forbid(unsafe_code)]

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
    /// When the timeline started, and its events.
    timeline: Option<(Instant, Vec<SctpEvent>)>,
}

/// One event of a ledger's timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SctpEvent {
    /// Since the timeline started.
    pub at: Duration,
    /// The link it crossed (or was dropped on).
    pub link: usize,
    /// What it was.
    pub what: SctpWhat,
}

/// What an [`SctpEvent`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SctpWhat {
    /// A DATA chunk toward the server, sent for the first time or `again`.
    Data {
        /// Its TSN.
        tsn: u32,
        /// Its stream.
        stream: u16,
        /// Its user data bytes.
        bytes: u64,
        /// A retransmission (the TSN was seen before).
        again: bool,
    },
    /// A DATA chunk toward the server that the link's full queue dropped.
    Dropped {
        /// Its TSN.
        tsn: u32,
    },
    /// A SACK (or NR-SACK) toward the client.
    Sack {
        /// Cumulative TSN ack.
        cum_tsn: u32,
        /// Advertised receive window (bytes).
        a_rwnd: u32,
        /// Gap ack blocks (ranges above `cum_tsn` that arrived, holes between them).
        gap_blocks: u16,
        /// TSNs the gap blocks cover (in an NR-SACK, the renegable ones only).
        gap_acked: u32,
        /// TSNs an NR-SACK's NR gap blocks cover (the sender may free them).
        nr_acked: u32,
    },
}

/// The shared ledger. Costs, per SCTP packet recorded: a CRC32c of it, a walk of its
/// chunks and one lock and map lookup per DATA chunk; with a timeline on, also the
/// packets toward the client and those dropped, and one event kept per chunk.
#[derive(Default)]
pub struct SctpLedger {
    inner: Mutex<Inner>,
    timeline_on: AtomicBool,
}

impl SctpLedger {
    /// Records the DATA chunks of `pkt` (parsed as `info`) sent over `link` toward the
    /// server, or with a timeline on, the SACKs of `pkt` sent toward the client.
    pub(crate) fn record(&self, link: usize, to_server: bool, pkt: &[u8], info: &PacketInfo) {
        let timeline = self.timeline_on.load(Ordering::Relaxed);
        if link >= LEDGER_LINKS || !(to_server || timeline) {
            return;
        }
        let Some(chunks) = packet::sctp_chunks(pkt, info) else {
            return;
        };
        if chunks.data.is_empty() && chunks.sacks.is_empty() {
            return;
        }
        let mut guard = crate::sink::lock(&self.inner);
        let g = &mut *guard;
        let mut events = Vec::new();
        if to_server {
            for c in &chunks.data {
                let again = match g.first_link.entry((c.vtag, c.tsn)) {
                    Entry::Vacant(e) => {
                        e.insert(link);
                        false
                    }
                    Entry::Occupied(_) => true,
                };
                let sid = usize::from(c.stream);
                if sid < LEDGER_STREAMS {
                    let per = if again { &mut g.again } else { &mut g.first };
                    per[link][sid] += c.bytes;
                }
                if timeline {
                    events.push(SctpWhat::Data {
                        tsn: c.tsn,
                        stream: c.stream,
                        bytes: c.bytes,
                        again,
                    });
                }
            }
        } else {
            events.extend(chunks.sacks.iter().map(|s| SctpWhat::Sack {
                cum_tsn: s.cum_tsn,
                a_rwnd: s.a_rwnd,
                gap_blocks: s.gap_blocks,
                gap_acked: s.gap_acked,
                nr_acked: s.nr_acked,
            }));
        }
        if let Some((start, v)) = g.timeline.as_mut() {
            let at = start.elapsed();
            v.extend(events.into_iter().map(|what| SctpEvent { at, link, what }));
        }
    }

    /// With a timeline on, records the DATA chunks of `pkt` (toward the server over
    /// `link`) as dropped by the link's full queue.
    pub(crate) fn record_drop(&self, link: usize, pkt: &[u8], info: &PacketInfo) {
        if !self.timeline_on.load(Ordering::Relaxed) {
            return;
        }
        let Some(chunks) = packet::sctp_chunks(pkt, info) else {
            return;
        };
        let mut g = crate::sink::lock(&self.inner);
        if let Some((start, v)) = g.timeline.as_mut() {
            let at = start.elapsed();
            v.extend(chunks.data.iter().map(|c| SctpEvent {
                at,
                link,
                what: SctpWhat::Dropped { tsn: c.tsn },
            }));
        }
    }

    /// Starts (or restarts, empty) the timeline: from now on every event is kept, timed
    /// from now.
    pub fn start_timeline(&self) {
        crate::sink::lock(&self.inner).timeline = Some((Instant::now(), Vec::new()));
        self.timeline_on.store(true, Ordering::Relaxed);
    }

    /// The timeline's events so far, oldest first (empty if none was started).
    pub fn timeline(&self) -> Vec<SctpEvent> {
        crate::sink::lock(&self.inner)
            .timeline
            .as_ref()
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
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

/// A time in a [`SctpLedger`] timeline when no new DATA crossed any link, and what the
/// wire showed around it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stall {
    /// The last first transmission before it.
    pub from: Duration,
    /// The next first transmission.
    pub to: Duration,
    /// The last SACK before it: cumulative TSN ack, a_rwnd, gap blocks.
    pub last_sack: Option<(u32, u32, u16)>,
    /// Retransmissions during it: when, on which link, the TSN, and whether the link's
    /// full queue dropped that copy.
    pub resent: Vec<(Duration, usize, u32, bool)>,
    /// DATA chunks full queues dropped in the round trip before it (one 100 ms window).
    pub dropped_before: usize,
    /// The first SACK during it that moved the cumulative ack, and its a_rwnd.
    pub cum_moved: Option<(Duration, u32)>,
    /// The hole the last SACK before it reported (the TSN after its cumulative ack): when
    /// it was first sent, on which link, and whether a full queue dropped it.
    pub hole: Option<(u32, Duration, usize, bool)>,
    /// The hole's copies sent again before the stall (a fast retransmission): when, on
    /// which link, and whether a full queue dropped that copy.
    pub hole_resent: Vec<(Duration, usize, bool)>,
}

/// How long after a copy's DATA event its drop may be recorded and still be its own.
const DROP_MATCH: Duration = Duration::from_millis(5);

/// The stalls of `events` (a timeline, oldest first) of at least `min`.
pub fn stalls(events: &[SctpEvent], min: Duration) -> Vec<Stall> {
    let firsts: Vec<Duration> = events
        .iter()
        .filter(|e| matches!(e.what, SctpWhat::Data { again: false, .. }))
        .map(|e| e.at)
        .collect();
    let dropped: Vec<(usize, u32, Duration)> = events
        .iter()
        .filter_map(|e| match e.what {
            SctpWhat::Dropped { tsn } => Some((e.link, tsn, e.at)),
            _ => None,
        })
        .collect();
    // A drop is recorded just after the copy it drops (same link and TSN), before any
    // later copy of that TSN could cross the link (a round trip later).
    let was_dropped = |link: usize, tsn: u32, at: Duration| {
        dropped
            .iter()
            .any(|&(l, t, d)| l == link && t == tsn && d >= at && d - at < DROP_MATCH)
    };
    let mut out = Vec::new();
    for w in firsts.windows(2) {
        let (from, to) = (w[0], w[1]);
        if to - from < min {
            continue;
        }
        let last_sack = events
            .iter()
            .take_while(|e| e.at <= from)
            .filter_map(|e| match e.what {
                SctpWhat::Sack {
                    cum_tsn,
                    a_rwnd,
                    gap_blocks,
                    ..
                } => Some((cum_tsn, a_rwnd, gap_blocks)),
                _ => None,
            })
            .last();
        let during = || events.iter().filter(|e| e.at > from && e.at < to);
        let resent = during()
            .filter_map(|e| match e.what {
                SctpWhat::Data {
                    tsn, again: true, ..
                } => Some((e.at, e.link, tsn, was_dropped(e.link, tsn, e.at))),
                _ => None,
            })
            .collect();
        let dropped_before = dropped
            .iter()
            .filter(|(_, _, at)| *at <= from && from - *at <= Duration::from_millis(100))
            .count();
        let cum_before = last_sack.map(|s| s.0);
        let cum_moved = during().find_map(|e| match e.what {
            SctpWhat::Sack {
                cum_tsn, a_rwnd, ..
            } if Some(cum_tsn) != cum_before => Some((e.at, a_rwnd)),
            _ => None,
        });
        let hole = last_sack.and_then(|(cum, _, _)| {
            let tsn = cum.wrapping_add(1);
            events.iter().find_map(|e| match e.what {
                SctpWhat::Data {
                    tsn: t,
                    again: false,
                    ..
                } if t == tsn => Some((tsn, e.at, e.link, was_dropped(e.link, tsn, e.at))),
                _ => None,
            })
        });
        let hole_resent = hole.map_or_else(Vec::new, |(tsn, first, ..)| {
            events
                .iter()
                .filter(|e| e.at >= first && e.at <= from)
                .filter_map(|e| match e.what {
                    SctpWhat::Data {
                        tsn: t,
                        again: true,
                        ..
                    } if t == tsn => Some((e.at, e.link, was_dropped(e.link, tsn, e.at))),
                    _ => None,
                })
                .collect()
        });
        out.push(Stall {
            from,
            to,
            last_sack,
            resent,
            dropped_before,
            cum_moved,
            hole,
            hole_resent,
        });
    }
    out
}

impl std::fmt::Display for Stall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        write!(
            f,
            "no new DATA on any link from {:.0} to {:.0} ms ({:.0} ms)",
            ms(self.from),
            ms(self.to),
            ms(self.to - self.from)
        )?;
        if let Some((cum, rwnd, gaps)) = self.last_sack {
            write!(
                f,
                "; the last SACK before it: cumulative TSN {cum}, a_rwnd {rwnd} bytes, {gaps} gap blocks"
            )?;
        }
        if let Some((tsn, at, link, dropped)) = self.hole {
            write!(
                f,
                "; the hole, TSN {tsn}, first sent at {:.0} ms on link {link}{}",
                ms(at),
                if dropped {
                    " (dropped by the full queue)"
                } else {
                    " (not dropped by the link)"
                }
            )?;
            for (at, link, dropped) in &self.hole_resent {
                write!(
                    f,
                    ", resent at {:.0} ms on link {link}{}",
                    ms(*at),
                    if *dropped {
                        " (dropped by the full queue)"
                    } else {
                        " (not dropped by the link)"
                    }
                )?;
            }
        }
        write!(
            f,
            "; {} DATA chunks dropped by full queues in the 100 ms before",
            self.dropped_before
        )?;
        for (at, link, tsn, dropped) in &self.resent {
            write!(
                f,
                "; TSN {tsn} resent at {:.0} ms on link {link}{}",
                ms(*at),
                if *dropped {
                    " (dropped by the full queue)"
                } else {
                    ""
                }
            )?;
        }
        if let Some((at, rwnd)) = self.cum_moved {
            write!(
                f,
                "; cumulative ack moved at {:.0} ms (a_rwnd {rwnd})",
                ms(at)
            )?;
        }
        Ok(())
    }
}

/// One step of [`trace`]: what the wire showed in one interval of a timeline.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceStep {
    /// The interval's end.
    pub until: Duration,
    /// User data bytes first sent, per link (0..[`LEDGER_LINKS`]).
    pub new_bytes: [u64; LEDGER_LINKS],
    /// DATA chunks sent again.
    pub resent: u32,
    /// DATA chunks full queues dropped.
    pub dropped: u32,
    /// The last SACK's a_rwnd by the interval's end (the receiver's free buffer).
    pub a_rwnd: Option<u32>,
    /// Its gap blocks (holes above the cumulative ack).
    pub gap_blocks: u16,
    /// TSNs sent but not cumulatively acked by the interval's end (the highest TSN first
    /// sent minus the last cumulative ack): what the sender has outstanding, holes and
    /// gap-acked data included.
    pub outstanding: u32,
}

/// `events` (a timeline, oldest first) in steps of `step`: per step, what each link
/// carried and the receiver's window and holes at its end.
pub fn trace(events: &[SctpEvent], step: Duration) -> Vec<TraceStep> {
    let mut out = Vec::new();
    let mut cur = TraceStep {
        until: step,
        ..TraceStep::default()
    };
    let (mut highest, mut cum): (Option<u32>, Option<u32>) = (None, None);
    let step_end = |cur: &mut TraceStep, highest: Option<u32>, cum: Option<u32>| {
        if let (Some(h), Some(c)) = (highest, cum) {
            cur.outstanding = h.wrapping_sub(c);
        }
    };
    for e in events {
        while e.at >= cur.until {
            step_end(&mut cur, highest, cum);
            let next = TraceStep {
                until: cur.until + step,
                a_rwnd: cur.a_rwnd,
                gap_blocks: cur.gap_blocks,
                ..TraceStep::default()
            };
            out.push(std::mem::replace(&mut cur, next));
        }
        match e.what {
            SctpWhat::Data {
                tsn, bytes, again, ..
            } => {
                if again {
                    cur.resent += 1;
                } else {
                    if e.link < LEDGER_LINKS {
                        cur.new_bytes[e.link] += bytes;
                    }
                    if highest.is_none_or(|h| (tsn.wrapping_sub(h) as i32) > 0) {
                        highest = Some(tsn);
                    }
                }
            }
            SctpWhat::Dropped { .. } => cur.dropped += 1,
            SctpWhat::Sack {
                cum_tsn,
                a_rwnd,
                gap_blocks,
                ..
            } => {
                cum = Some(cum_tsn);
                cur.a_rwnd = Some(a_rwnd);
                cur.gap_blocks = gap_blocks;
            }
        }
    }
    step_end(&mut cur, highest, cum);
    out.push(cur);
    out
}

/// What the SACKs of a timeline said the sender holds, averaged over every SACK from
/// `from` on (each SACK one sample, so busy times weigh more).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Held {
    /// SACKs averaged.
    pub sacks: u32,
    /// TSNs first sent and not cumulatively acked when the SACK arrived: what the
    /// sender's buffer holds of what it sent, without NR-SACK.
    pub outstanding: f64,
    /// Of those, TSNs the SACK gap-acked, all held by the sender (in an NR-SACK only the
    /// renegable ones: at usrsctp's receiver, out of order and not yet delivered).
    pub gap_acked: f64,
    /// Of those, TSNs the SACK NR-acked: the sender may free them at once.
    pub nr_acked: f64,
    /// The receiver's advertised window, bytes.
    pub a_rwnd: f64,
}

/// [`Held`] over the SACKs of `events` (a timeline, oldest first) at or after `from`;
/// `None` if there were none.
pub fn held(events: &[SctpEvent], from: Duration) -> Option<Held> {
    let mut highest: Option<u32> = None;
    let mut sum = Held::default();
    for e in events {
        match e.what {
            SctpWhat::Data {
                tsn, again: false, ..
            } if highest.is_none_or(|h| (tsn.wrapping_sub(h) as i32) > 0) => {
                highest = Some(tsn);
            }
            SctpWhat::Sack {
                cum_tsn,
                a_rwnd,
                gap_acked,
                nr_acked,
                ..
            } if e.at >= from => {
                let Some(h) = highest else { continue };
                sum.sacks += 1;
                sum.outstanding += f64::from(h.wrapping_sub(cum_tsn).min(1 << 20));
                sum.gap_acked += f64::from(gap_acked);
                sum.nr_acked += f64::from(nr_acked);
                sum.a_rwnd += f64::from(a_rwnd);
            }
            _ => {}
        }
    }
    (sum.sacks > 0).then(|| {
        let n = f64::from(sum.sacks);
        Held {
            sacks: sum.sacks,
            outstanding: sum.outstanding / n,
            gap_acked: sum.gap_acked / n,
            nr_acked: sum.nr_acked / n,
            a_rwnd: sum.a_rwnd / n,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64, link: usize, what: SctpWhat) -> SctpEvent {
        SctpEvent {
            at: Duration::from_millis(ms),
            link,
            what,
        }
    }

    fn data(tsn: u32, again: bool) -> SctpWhat {
        SctpWhat::Data {
            tsn,
            stream: 0,
            bytes: 1000,
            again,
        }
    }

    fn sack(cum_tsn: u32, a_rwnd: u32, gap_blocks: u16) -> SctpWhat {
        SctpWhat::Sack {
            cum_tsn,
            a_rwnd,
            gap_blocks,
            gap_acked: u32::from(gap_blocks),
            nr_acked: 0,
        }
    }

    /// Two SACKs from `from` on, one before it (left out): the means of the outstanding
    /// TSNs (highest first sent minus the cumulative ack), the acked counts and a_rwnd.
    #[test]
    fn held_averages_the_sacks_of_the_window() {
        let nr = |cum_tsn, a_rwnd, gap_acked, nr_acked| SctpWhat::Sack {
            cum_tsn,
            a_rwnd,
            gap_blocks: 1,
            gap_acked,
            nr_acked,
        };
        let mut events: Vec<SctpEvent> = (1..=6)
            .map(|t| at(u64::from(t), 0, data(t, false)))
            .collect();
        events.push(at(7, 1, nr(1, 9_000, 1, 1)));
        events.push(at(20, 1, nr(2, 4_000, 2, 1)));
        events.push(at(30, 0, data(7, false)));
        events.push(at(31, 0, data(3, true)));
        events.push(at(40, 1, nr(3, 6_000, 0, 3)));
        let h = held(&events, Duration::from_millis(10)).unwrap();
        assert_eq!(h.sacks, 2);
        assert_eq!(
            (h.outstanding, h.gap_acked, h.nr_acked, h.a_rwnd),
            (4.0, 1.0, 2.0, 5_000.0)
        );
        assert_eq!(held(&events, Duration::from_millis(50)), None);
    }

    /// TSN 2 dropped by link 0's queue, fast-retransmitted onto the same queue and dropped
    /// again, TSN 3 and 4 arrive (one gap block), the window closes, TSN 2 is resent 500 ms
    /// later and the cumulative ack moves: one stall, told with the hole, its drops and its
    /// resends; a pause shorter than the minimum is none.
    #[test]
    fn a_stall_behind_a_dropped_chunk_is_explained() {
        let events = vec![
            at(0, 0, data(1, false)),
            at(10, 0, data(2, false)),
            at(10, 0, SctpWhat::Dropped { tsn: 2 }),
            at(20, 1, data(3, false)),
            at(25, 0, data(2, true)),
            at(25, 0, SctpWhat::Dropped { tsn: 2 }),
            at(30, 0, sack(1, 50_000, 0)),
            at(40, 1, data(4, false)),
            at(60, 1, sack(1, 900, 1)),
            at(560, 1, data(2, true)),
            at(580, 1, sack(4, 60_000, 0)),
            at(590, 0, data(5, false)),
            at(640, 0, data(6, false)),
        ];
        let found = stalls(&events, Duration::from_millis(100));
        assert_eq!(
            found,
            vec![Stall {
                from: Duration::from_millis(40),
                to: Duration::from_millis(590),
                last_sack: Some((1, 50_000, 0)),
                resent: vec![(Duration::from_millis(560), 1, 2, false)],
                dropped_before: 2,
                cum_moved: Some((Duration::from_millis(580), 60_000)),
                hole: Some((2, Duration::from_millis(10), 0, true)),
                hole_resent: vec![(Duration::from_millis(25), 0, true)],
            }]
        );
        let text = found[0].to_string();
        assert!(text.contains("from 40 to 590 ms (550 ms)"), "{text}");
        assert!(
            text.contains(
                "TSN 2, first sent at 10 ms on link 0 (dropped by the full queue), resent at 25 \
                 ms on link 0 (dropped by the full queue)"
            ),
            "{text}"
        );
    }
}
