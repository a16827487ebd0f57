//! The race's settings: RFC 8305's delays and bounds, and how the CIB's history moves
//! the stagger.

use std::time::Duration;

use crate::candidates::Candidate;
use crate::net::Family;
use crate::policy::History;
use crate::properties::Protocol;

/// RFC 8305 default Connection Attempt Delay.
pub const DEFAULT_ATTEMPT_DELAY: Duration = Duration::from_millis(250);
/// Smallest attempt delay accepted (RFC 8305: never below 10 ms).
pub const MIN_ATTEMPT_DELAY: Duration = Duration::from_millis(10);
/// Largest attempt delay accepted (RFC 8305: at most 2 s).
pub const MAX_ATTEMPT_DELAY: Duration = Duration::from_secs(2);
/// RFC 8305 default Resolution Delay.
pub const DEFAULT_RESOLUTION_DELAY: Duration = Duration::from_millis(50);
/// The stagger after a QUIC candidate the CIB knows nothing about (on this network, for
/// this endpoint): QUIC gets no long head start before its worth is known. 100 ms is
/// HEv3's recommended minimum attempt delay and curl's "no UDP reply yet" point; a QUIC
/// handshake on a path under 100 ms RTT still wins without a TLS/TCP attempt.
pub const UNPROVEN_QUIC_DELAY: Duration = Duration::from_millis(100);
/// The smallest stagger an RTT estimate for a first contact may give (HEv3's
/// recommended minimum Connection Attempt Delay): the estimate is a guess about a path
/// no attempt has measured yet, so it shortens the default 250 ms only this far.
pub const FIRST_CONTACT_MIN_DELAY: Duration = Duration::from_millis(100);
/// A DNS answer faster than this came from a cache on this host or on its LAN (a few
/// ms, more on a busy host): its time says nothing about the network's round-trip time
/// and sets no estimate.
pub const DNS_RTT_MIN: Duration = Duration::from_millis(20);
/// Default establishment timeout: see [`RaceConfig::timeout`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default bound on alive attempts: see [`RaceConfig::max_alive`].
pub const DEFAULT_MAX_ALIVE: usize = 8;

/// Race settings. `Default` gives the RFC 8305 values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaceConfig {
    /// Connection Attempt Delay: the stagger between starts. Default 250 ms; clamped to
    /// 10 ms..=2 s by [`Race::new`](super::Race::new).
    pub attempt_delay: Duration,
    /// Resolution Delay: how long an A answer waits for an outstanding AAAA. Default
    /// 50 ms; clamped to at most 2 s.
    pub resolution_delay: Duration,
    /// First Address Family Count: how many of the preferred family go before the
    /// families interleave. Default 1; at least 1.
    pub first_family_count: usize,
    /// Establishment timeout, counted from [`Race::new`](super::Race::new). Default 30 s:
    /// well under the OS connect timeouts that made the dual-stack study's clients hang
    /// for 21 s to 226 s, yet long enough for several SYN retransmissions (1 + 2 + 4 +
    /// 8 s) on a lossy high-RTT path and for ~100 staggered starts.
    pub timeout: Duration,
    /// At most this many attempts alive at once; the rest wait in the queue. Default 8:
    /// at the default delay that is 2 s of staggered starts, so the oldest attempt has
    /// had its first SYN retransmission (1 s initial RTO) before it blocks new starts,
    /// while a race with many candidates (or many flows racing) holds a bounded number
    /// of sockets (curl keeps at most 6). At least 1.
    pub max_alive: usize,
    /// Derive the stagger after a candidate with a known connect time from that time
    /// (`clamp(2 × rtt + 10 ms, 10 ms, attempt_delay)`). Default true.
    pub adaptive_delay: bool,
    /// The family whose DNS answer an early answer of the other family waits for (up to
    /// the Resolution Delay). Default IPv6 (RFC 8305); the caller sets IPv4 for a race
    /// when the CIB knows the endpoint connected fastest over IPv4.
    pub awaited_family: Family,
    /// Whether an HTTPS/SVCB lookup runs beside A and AAAA: the race then waits for its
    /// answer (or failure) too, up to the Resolution Delay after the first addresses
    /// (HEv3), and reads it with [`Race::on_service`](super::Race::on_service). Default
    /// false.
    pub await_service: bool,
    /// What the caller knows of this network's round-trip time before the race (other
    /// connections on the interface, the CIB's other hosts), if anything. With
    /// `adaptive_delay`, a candidate the CIB knows nothing about is followed after
    /// `clamp(2 × rtt + 10 ms, 100 ms, attempt_delay)` instead of `attempt_delay`.
    /// Default none.
    pub path_rtt: Option<Duration>,
    /// Whether the race may take its first address answer's time (since the race began:
    /// the lookup's round trip) as `path_rtt` when none is set and the answer took at
    /// least [`DNS_RTT_MIN`]. Default true; off when the application set the attempt
    /// delay itself.
    pub rtt_from_dns: bool,
    /// Whether the report keeps a timeline of the race's events
    /// ([`RaceReport::timeline`](super::RaceReport::timeline), what
    /// [`RaceReport::trace`](super::RaceReport::trace) prints). Default true. Off, each
    /// event costs nothing and the timeline stays empty (no allocation); the attempts,
    /// DNS answers, winner and total are kept either way. (The taps library turns it off
    /// unless the application asks for it.)
    pub timeline: bool,
}

impl Default for RaceConfig {
    fn default() -> Self {
        RaceConfig {
            attempt_delay: DEFAULT_ATTEMPT_DELAY,
            resolution_delay: DEFAULT_RESOLUTION_DELAY,
            first_family_count: 1,
            timeout: DEFAULT_TIMEOUT,
            max_alive: DEFAULT_MAX_ALIVE,
            adaptive_delay: true,
            awaited_family: Family::V6,
            await_service: false,
            path_rtt: None,
            rtt_from_dns: true,
            timeline: true,
        }
    }
}

impl RaceConfig {
    /// The same settings with every value brought within its bounds (what
    /// [`Race::new`](super::Race::new) uses). Cost: a few comparisons.
    pub fn clamped(mut self) -> RaceConfig {
        self.attempt_delay = self
            .attempt_delay
            .clamp(MIN_ATTEMPT_DELAY, MAX_ATTEMPT_DELAY);
        self.resolution_delay = self.resolution_delay.min(MAX_ATTEMPT_DELAY);
        self.first_family_count = self.first_family_count.max(1);
        self.max_alive = self.max_alive.max(1);
        self
    }

    /// How long to wait after starting `candidate` before the next staggered start:
    /// `clamp(2 × rtt + 10 ms, 10 ms, attempt_delay)` when adaptive and the CIB knows a
    /// connect time `rtt` for it (a QUIC that worked here gets that head start over
    /// TLS/TCP, as Chromium's 1.5 × RTT); at most [`UNPROVEN_QUIC_DELAY`] after a QUIC
    /// candidate with no history; `clamp(2 × path_rtt + 10 ms, 100 ms, attempt_delay)`
    /// after any other candidate with no history when the network's RTT is estimated;
    /// else `attempt_delay`. Cost: constant.
    pub fn delay_after(&self, candidate: &Candidate) -> Duration {
        match candidate.history {
            History::Succeeded { rtt, .. } if self.adaptive_delay => {
                let floor = MIN_ATTEMPT_DELAY.min(self.attempt_delay);
                (rtt.saturating_mul(2) + MIN_ATTEMPT_DELAY).clamp(floor, self.attempt_delay)
            }
            History::Unknown
                if self.adaptive_delay && candidate.stack.protocol == Protocol::Quic =>
            {
                self.attempt_delay.min(UNPROVEN_QUIC_DELAY)
            }
            History::Unknown if self.adaptive_delay => match self.path_rtt {
                Some(rtt) => first_contact_delay(rtt, self.attempt_delay),
                None => self.attempt_delay,
            },
            _ => self.attempt_delay,
        }
    }
}

/// The stagger after a first contact on a network whose round-trip time is about `rtt`:
/// `clamp(2 × rtt + 10 ms, 100 ms, attempt_delay)` (never above the configured delay).
pub fn first_contact_delay(rtt: Duration, attempt_delay: Duration) -> Duration {
    let floor = FIRST_CONTACT_MIN_DELAY.min(attempt_delay);
    (rtt.saturating_mul(2) + MIN_ATTEMPT_DELAY).clamp(floor, attempt_delay)
}
