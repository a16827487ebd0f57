//! The Characteristics Information Base: what taps has learned about this host and the
//! paths it used. Local interfaces (set by the I/O side when the OS reports a change)
//! and a bounded cache of race outcomes with expiry, optionally saved to a file.
//!
//! Time is always passed in: `Instant` for ages, plus a wall-clock `SystemTime` only
//! when converting to or from the persisted form.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::failure::{AttemptCause, LayerError};
use crate::net::{Family, Interface};
use crate::properties::Protocol;
use crate::stack::{Security, Stack};

/// Default lifetime of a cached outcome (NEAT's 10 minutes).
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(600);
/// How long a QUIC failure keeps QUIC ranked last for that endpoint the first time
/// (Chromium's "broken alternative service": 5 minutes); each further failure in a row
/// doubles it.
pub const QUIC_BROKEN_FIRST: Duration = Duration::from_secs(300);
/// The longest a QUIC failure counts (Chromium caps its doubling at about 2 days).
pub const QUIC_BROKEN_MAX: Duration = Duration::from_secs(2 * 24 * 3600);
/// Default bound on cached outcomes.
pub const DEFAULT_MAX_ENTRIES: usize = 4096;
/// The largest CIB file (or snapshot) read back: a file of [`DEFAULT_MAX_ENTRIES`] outcomes
/// is about 1.5 MiB; anything past this is not a CIB taps wrote and is ignored unread.
pub const MAX_FILE_BYTES: u64 = 8 << 20;
const RTT_SAMPLES: usize = 8;

/// What is cached about one candidate to one remote endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OutcomeKey {
    /// The remote endpoint as the application named it (`host:port`).
    pub endpoint: Arc<str>,
    /// The stack tried.
    pub stack: Stack,
    /// The remote address tried.
    pub remote: SocketAddr,
    /// The local interface the candidate was bound to (`None`: the OS routed it), so a
    /// path that failed over one link is not held against another.
    pub interface: Option<Arc<str>>,
}

/// The last outcome and connect-time samples of one candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// When it was last updated.
    pub at: Instant,
    /// Whether the last attempt succeeded; if not, its cause.
    pub last: Result<(), AttemptCause>,
    /// Recent connect times of successful attempts, newest last.
    pub rtt_samples: Vec<Duration>,
    /// The median of `rtt_samples` (zero without samples), computed when a sample is
    /// added so that ranking, which reads it for every race, does not sort them again.
    pub rtt_median: Duration,
    /// Failures in a row since the last success (QUIC's backoff doubles with them).
    pub failures: u32,
}

impl Outcome {
    /// A successful attempt that took `connect_time`: the newest sample (the oldest
    /// dropped beyond the last 8) and the median again.
    fn succeeded(&mut self, connect_time: Duration) {
        self.last = Ok(());
        self.failures = 0;
        if self.rtt_samples.len() == RTT_SAMPLES {
            self.rtt_samples.remove(0);
        }
        self.rtt_samples.push(connect_time);
        self.rtt_median = median(&self.rtt_samples);
    }

    /// A failed attempt.
    fn failed(&mut self, cause: AttemptCause) {
        self.last = Err(cause);
        self.failures = self.failures.saturating_add(1);
    }
}

/// The history of a candidate, as ranking uses it.
#[derive(Debug, Clone, PartialEq)]
pub enum History {
    /// Nothing cached (or expired).
    Unknown,
    /// Last attempt succeeded; `rtt` is the median of recent connect times.
    Succeeded {
        /// Median connect time.
        rtt: Duration,
        /// How long ago.
        age: Duration,
    },
    /// Last attempt failed.
    Failed {
        /// Its cause.
        cause: AttemptCause,
        /// How long ago.
        age: Duration,
    },
}

impl fmt::Display for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            History::Unknown => f.write_str("no history"),
            History::Succeeded { rtt, age } => write!(
                f,
                "connected {:.0} s ago in {:.1} ms",
                age.as_secs_f64(),
                rtt.as_secs_f64() * 1e3
            ),
            History::Failed { cause, age } => {
                write!(f, "failed {:.0} s ago: {cause}", age.as_secs_f64())
            }
        }
    }
}

/// One attempt's outcome as the CIB learns it (what a finished race yields, see
/// `RaceReport::learned`).
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRecord {
    /// The stack tried.
    pub stack: Stack,
    /// The remote address tried.
    pub remote: SocketAddr,
    /// The local interface it was bound to, if any.
    pub interface: Option<Arc<str>>,
    /// When the attempt ended.
    pub at: Instant,
    /// Its connect time, or why it failed.
    pub result: Result<Duration, AttemptCause>,
}

/// Limits of the outcome cache.
#[derive(Debug, Clone, Copy)]
pub struct CibConfig {
    /// How long an outcome counts.
    pub lifetime: Duration,
    /// At most this many outcomes are kept; the oldest go first.
    pub max_entries: usize,
}

impl Default for CibConfig {
    fn default() -> Self {
        CibConfig {
            lifetime: DEFAULT_LIFETIME,
            max_entries: DEFAULT_MAX_ENTRIES,
        }
    }
}

/// The CIB. Not synchronised: the I/O side wraps it in a lock.
#[derive(Debug, Clone)]
pub struct Cib {
    config: CibConfig,
    interfaces: Arc<Vec<Interface>>,
    /// Outcomes grouped by endpoint: a race asks about one endpoint, and each endpoint
    /// has a handful of (stack, address) entries, scanned linearly. Hashed with FxHash
    /// (a few instructions per name against SipHash's ~200, several lookups per race):
    /// it is not flood-resistant, but the map never holds more than `max_entries`
    /// outcomes, so colliding names cost at most a bounded scan.
    outcomes: FxHashMap<Arc<str>, Vec<(OutcomeKey, Outcome)>>,
    /// Number of outcomes over all endpoints.
    count: usize,
}

impl Default for Cib {
    fn default() -> Self {
        Cib::new(CibConfig::default())
    }
}

impl Cib {
    /// An empty CIB with only the loopback interface known.
    pub fn new(config: CibConfig) -> Cib {
        Cib {
            config,
            interfaces: Arc::new(vec![Interface::loopback()]),
            outcomes: FxHashMap::default(),
            count: 0,
        }
    }

    /// The limits in force.
    pub fn config(&self) -> CibConfig {
        self.config
    }

    /// Replaces the interface list (the I/O side calls this when the OS reports a change).
    /// A different set of addresses means another network: QUIC failures are forgotten
    /// ([`Cib::forget_quic_failures`]).
    pub fn set_interfaces(&mut self, interfaces: Arc<Vec<Interface>>) {
        if addresses(&self.interfaces) != addresses(&interfaces) {
            self.forget_quic_failures();
        }
        self.interfaces = interfaces;
    }

    /// The current interface list (an `Arc` clone).
    pub fn interfaces(&self) -> Arc<Vec<Interface>> {
        self.interfaces.clone()
    }

    /// Number of cached outcomes (expired ones included until the next prune).
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no outcome is cached.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Records a successful attempt that took `connect_time`.
    pub fn record_success(&mut self, key: OutcomeKey, connect_time: Duration, now: Instant) {
        self.entry(key, now).succeeded(connect_time);
    }

    /// Records a failed attempt.
    pub fn record_failure(&mut self, key: OutcomeKey, cause: AttemptCause, now: Instant) {
        self.entry(key, now).failed(cause);
    }

    /// How long `o` of `key` counts: the configured lifetime, except for a QUIC failure,
    /// which counts [`QUIC_BROKEN_FIRST`] (or the configured lifetime if shorter; nothing
    /// if it is zero) doubled per further failure in a row, at most [`QUIC_BROKEN_MAX`] (QUIC blocked on a network tends to stay blocked; a wrong
    /// guess costs one attempt delay per connection, a right one saves a QUIC attempt
    /// per connection). Cost: constant.
    pub fn lifetime_of(&self, key: &OutcomeKey, o: &Outcome) -> Duration {
        outcome_lifetime(self.config.lifetime, key, o)
    }

    /// Forgets every QUIC failure: the local network changed, and what was blocked on the
    /// old one may work on the new one (as Chromium clears its marks). Cost: a scan.
    pub fn forget_quic_failures(&mut self) {
        let mut count = 0;
        self.outcomes.retain(|_, list| {
            list.retain(|(k, o)| k.stack.protocol != Protocol::Quic || o.last.is_ok());
            count += list.len();
            !list.is_empty()
        });
        self.count = count;
    }

    /// Learns what a race found out about `endpoint`: each record becomes a success or a
    /// failure of its (stack, address), stamped with the record's time. Cost: one update
    /// per record.
    pub fn learn(&mut self, endpoint: &Arc<str>, records: impl IntoIterator<Item = AttemptRecord>) {
        for r in records {
            let o = self.slot(endpoint, r.stack, r.remote, r.interface, r.at);
            match r.result {
                Ok(connect_time) => o.succeeded(connect_time),
                Err(cause) => o.failed(cause),
            }
        }
    }

    /// The outcomes cached for `endpoint` (expired ones included).
    fn of(&self, endpoint: &str) -> &[(OutcomeKey, Outcome)] {
        self.outcomes.get(endpoint).map_or(&[], Vec::as_slice)
    }

    fn entry(&mut self, key: OutcomeKey, now: Instant) -> &mut Outcome {
        let OutcomeKey {
            endpoint,
            stack,
            remote,
            interface,
        } = key;
        self.slot(&endpoint, stack, remote, interface, now)
    }

    /// The outcome of `stack` to `remote` over `interface` for `endpoint`, stamped `now`;
    /// made if new (the cache pruned, or its oldest entry evicted, when full). Cost: one
    /// lookup of the endpoint and a scan of its few entries; the endpoint's name is
    /// shared (an `Arc` clone) only by a new entry.
    fn slot(
        &mut self,
        endpoint: &Arc<str>,
        stack: Stack,
        remote: SocketAddr,
        interface: Option<Arc<str>>,
        now: Instant,
    ) -> &mut Outcome {
        let same =
            |k: &OutcomeKey| k.stack == stack && k.remote == remote && k.interface == interface;
        if let Some(i) = self.of(endpoint).iter().position(|(k, _)| same(k)) {
            let list = self.outcomes.get_mut(&**endpoint).expect("found above");
            let o = &mut list[i].1;
            o.at = now;
            return o;
        }
        if self.count >= self.config.max_entries {
            self.prune(now);
            if self.count >= self.config.max_entries {
                self.evict_oldest();
            }
        }
        let key = OutcomeKey {
            endpoint: endpoint.clone(),
            stack,
            remote,
            interface,
        };
        let list = self.outcomes.entry(key.endpoint.clone()).or_default();
        list.push((
            key,
            Outcome {
                at: now,
                last: Ok(()),
                rtt_samples: Vec::new(),
                rtt_median: Duration::ZERO,
                failures: 0,
            },
        ));
        self.count += 1;
        &mut list.last_mut().expect("just pushed").1
    }

    /// Drops the least recently updated outcome. Cost: a scan of every outcome.
    fn evict_oldest(&mut self) {
        let oldest = self
            .outcomes
            .iter()
            .flat_map(|(e, list)| list.iter().enumerate().map(move |(i, (_, o))| (o.at, e, i)))
            .min_by_key(|(at, _, _)| *at)
            .map(|(_, e, i)| (e.clone(), i));
        if let Some((endpoint, i)) = oldest {
            if let Some(list) = self.outcomes.get_mut(&endpoint) {
                list.swap_remove(i);
                self.count -= 1;
                if list.is_empty() {
                    self.outcomes.remove(&endpoint);
                }
            }
        }
    }

    /// Drops expired outcomes.
    pub fn prune(&mut self, now: Instant) {
        let mut count = 0;
        let base = self.config.lifetime;
        self.outcomes.retain(|_, list| {
            list.retain(|(k, o)| {
                now.saturating_duration_since(o.at) < outcome_lifetime(base, k, o)
            });
            count += list.len();
            !list.is_empty()
        });
        self.count = count;
    }

    /// The history of a candidate, or `Unknown` if none is cached or it expired. Cost: one
    /// hash lookup of the endpoint and a scan of its few entries; no allocation unless the
    /// last attempt failed (its cause is copied).
    pub fn history(&self, key: &OutcomeKey, now: Instant) -> History {
        let Some((_, o)) = self.of(&key.endpoint).iter().find(|(k, _)| {
            k.stack == key.stack && k.remote == key.remote && k.interface == key.interface
        }) else {
            return History::Unknown;
        };
        self.history_of(key, o, now)
    }

    fn history_of(&self, key: &OutcomeKey, o: &Outcome, now: Instant) -> History {
        let age = now.saturating_duration_since(o.at);
        if age >= self.lifetime_of(key, o) {
            return History::Unknown;
        }
        match &o.last {
            Err(cause) => History::Failed {
                cause: cause.clone(),
                age,
            },
            Ok(()) => History::Succeeded {
                rtt: o.rtt_median,
                age,
            },
        }
    }

    /// Median connect times of the unexpired successes of `endpoint`, with their addresses.
    fn successes<'a>(
        &'a self,
        endpoint: &str,
        now: Instant,
    ) -> impl Iterator<Item = (Duration, SocketAddr)> + 'a {
        let lifetime = self.config.lifetime;
        self.of(endpoint)
            .iter()
            .filter(move |(_, o)| o.last.is_ok() && now.saturating_duration_since(o.at) < lifetime)
            .map(|(k, o)| (o.rtt_median, k.remote))
    }

    /// The lowest median connect time known to any address of `endpoint` (used to derive
    /// an adaptive attempt delay). Cost: a scan of the endpoint's entries.
    pub fn best_rtt(&self, endpoint: &str, now: Instant) -> Option<Duration> {
        self.successes(endpoint, now).map(|(rtt, _)| rtt).min()
    }

    /// The family of the address of `endpoint` with the lowest median connect time, if
    /// any connected within the lifetime: the race waits for that family's DNS answer
    /// first. Cost: a scan of the endpoint's entries.
    pub fn best_family(&self, endpoint: &str, now: Instant) -> Option<Family> {
        self.successes(endpoint, now)
            .min_by_key(|(rtt, _)| *rtt)
            .map(|(_, remote)| Family::of(&remote.ip()))
    }

    /// Serialises the unexpired outcomes (pretty, for a file people may read). `now` and
    /// `wall_now` must be the same moment. Cost: one pass and one string of about 350
    /// bytes per outcome.
    pub fn to_json(&self, now: Instant, wall_now: SystemTime) -> String {
        serde_json::to_string_pretty(&self.persisted(now, wall_now)).expect("CIB serialises")
    }

    /// The same content as [`to_json`](Self::to_json) on one line (what the policy
    /// manager sends a new client); [`load_json`](Self::load_json) reads both.
    pub fn to_json_line(&self, now: Instant, wall_now: SystemTime) -> String {
        serde_json::to_string(&self.persisted(now, wall_now)).expect("CIB serialises")
    }

    fn persisted(&self, now: Instant, wall_now: SystemTime) -> PersistedFile {
        let wall_ms = |at: Instant| {
            let t = wall_now - now.saturating_duration_since(at);
            t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64
        };
        let entries = self
            .outcomes()
            .filter(|(k, o)| now.saturating_duration_since(o.at) < self.lifetime_of(k, o))
            .map(|(k, o)| Persisted {
                endpoint: k.endpoint.to_string(),
                protocol: k.stack.protocol.as_str().into(),
                secure: k.stack.security != Security::None,
                remote: k.remote,
                interface: k.interface.as_deref().map(str::to_string),
                at_unix_ms: wall_ms(o.at),
                error: o.last.as_ref().err().map(|c| c.to_string()),
                // Causes that hold a lower layer's error have no serialised form: the
                // `error` text alone stands for them (read back as `Other`), instead of
                // failing the whole file (found by fuzzing).
                cause: o.last.clone().err().filter(AttemptCause::is_portable),
                rtt_us: o.rtt_samples.iter().map(|d| d.as_micros() as u64).collect(),
                failures: o.failures,
            })
            .collect();
        PersistedFile {
            format: FORMAT.into(),
            version: 1,
            entries,
        }
    }

    /// Loads outcomes saved by [`to_json`](Self::to_json) into this CIB. Expired entries
    /// are skipped. A file that is not a taps CIB is rejected whole with the reason.
    pub fn load_json(
        &mut self,
        text: &str,
        now: Instant,
        wall_now: SystemTime,
    ) -> Result<usize, String> {
        let file: PersistedFile = serde_json::from_str(text).map_err(|e| {
            format!(
                "not a taps CIB file (line {}, column {}: {e})",
                e.line(),
                e.column()
            )
        })?;
        if file.format != FORMAT || file.version != 1 {
            return Err(format!(
                "not a taps CIB file (format '{}' version {})",
                file.format, file.version
            ));
        }
        let mut loaded = 0;
        // Oldest first: when the file holds more than the bound, eviction then drops the
        // oldest outcomes, never a newer one for an older.
        let mut entries = file.entries;
        entries.sort_by_key(|e| e.at_unix_ms);
        for e in entries {
            let Some(protocol) = Protocol::parse(&e.protocol) else {
                continue;
            };
            let at_wall = UNIX_EPOCH + Duration::from_millis(e.at_unix_ms);
            let age = wall_now.duration_since(at_wall).unwrap_or_default();
            let Some(at) = now.checked_sub(age) else {
                continue;
            };
            let key = OutcomeKey {
                endpoint: e.endpoint.into(),
                stack: stack_of(protocol, e.secure),
                remote: e.remote,
                interface: e.interface.map(Into::into),
            };
            let last = match (e.cause, e.error) {
                (Some(cause), _) => Err(cause),
                // Files written before causes were typed: the text is all there is.
                (None, Some(text)) => Err(AttemptCause::Other(LayerError::recorded(text))),
                (None, None) => Ok(()),
            };
            let probe = Outcome {
                at,
                last,
                rtt_samples: Vec::new(),
                rtt_median: Duration::ZERO,
                failures: e.failures,
            };
            if age >= outcome_lifetime(self.config.lifetime, &key, &probe) {
                continue;
            }
            let o = self.entry(key, at);
            o.last = probe.last;
            o.failures = probe.failures;
            o.rtt_samples = e
                .rtt_us
                .into_iter()
                .take(RTT_SAMPLES)
                .map(Duration::from_micros)
                .collect();
            o.rtt_median = median(&o.rtt_samples);
            loaded += 1;
        }
        Ok(loaded)
    }

    /// Every cached outcome (for inspection and tests).
    pub fn outcomes(&self) -> impl Iterator<Item = (&OutcomeKey, &Outcome)> {
        self.outcomes.values().flatten().map(|(k, o)| (k, o))
    }

    /// Whether an address is configured on any local interface.
    pub fn is_local_address(&self, addr: IpAddr) -> bool {
        self.interfaces
            .iter()
            .any(|i| i.addresses.iter().any(|a| a.addr == addr))
    }
}

/// The stack a persisted (protocol, secured) pair names.
fn stack_of(protocol: Protocol, secure: bool) -> Stack {
    let security = match (secure, protocol) {
        (false, _) => Security::None,
        (true, Protocol::Quic) => Security::QuicTls,
        (true, Protocol::Udp | Protocol::UdpLite | Protocol::Sctp) => Security::Dtls,
        (true, _) => Security::Tls,
    };
    Stack::new(protocol, security)
}

/// An [`AttemptRecord`] in a form another process can read back (the policy manager's
/// updates): the stack by name, the time as an age instead of an `Instant`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortableRecord {
    /// The protocol's name (`TCP`, `QUIC`, ...).
    #[serde(rename = "p")]
    pub protocol: String,
    /// Whether the stack was secured (TLS, DTLS or QUIC's TLS).
    #[serde(rename = "s", default)]
    pub secure: bool,
    /// The remote address tried.
    #[serde(rename = "r")]
    pub remote: SocketAddr,
    /// The local interface it was bound to, if any.
    #[serde(rename = "i", default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// How long before the sending moment the attempt ended, in microseconds.
    #[serde(rename = "a", default)]
    pub age_us: u64,
    /// Its connect time in microseconds, if it connected.
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    pub connect_us: Option<u64>,
    /// Why it failed, if it did and the cause has a serialised form.
    #[serde(rename = "e", default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<AttemptCause>,
    /// Why it failed, in words, for a cause that holds a lower layer's error (it has no
    /// serialised form): the receiver gets it back as [`AttemptCause::Other`].
    #[serde(rename = "w", default, skip_serializing_if = "Option::is_none")]
    pub words: Option<String>,
}

impl PortableRecord {
    /// The portable form of `r` as of `now`. Cost: a copy of the record.
    pub fn new(r: &AttemptRecord, now: Instant) -> PortableRecord {
        let (connect_us, cause, words) = match &r.result {
            Ok(d) => (Some(d.as_micros() as u64), None, None),
            Err(c) if c.is_portable() => (None, Some(c.clone()), None),
            Err(c) => (None, None, Some(c.to_string())),
        };
        PortableRecord {
            protocol: r.stack.protocol.as_str().into(),
            secure: r.stack.security != Security::None,
            remote: r.remote,
            interface: r.interface.as_deref().map(str::to_string),
            age_us: now.saturating_duration_since(r.at).as_micros() as u64,
            connect_us,
            cause,
            words,
        }
    }

    /// The record as of `now` in this process, or `None` for an unknown protocol or a
    /// record that says neither a connect time nor a cause.
    pub fn to_record(&self, now: Instant) -> Option<AttemptRecord> {
        let protocol = Protocol::parse(&self.protocol)?;
        let result = match (self.connect_us, &self.cause, &self.words) {
            (_, Some(cause), _) => Err(cause.clone()),
            (_, None, Some(words)) => Err(AttemptCause::Other(LayerError::recorded(words.clone()))),
            (Some(us), None, None) => Ok(Duration::from_micros(us)),
            (None, None, None) => return None,
        };
        Some(AttemptRecord {
            stack: stack_of(protocol, self.secure),
            remote: self.remote,
            interface: self.interface.as_deref().map(Into::into),
            at: now.checked_sub(Duration::from_micros(self.age_us))?,
            result,
        })
    }
}

/// How long an outcome counts: `base`, except for a QUIC failure (see
/// [`Cib::lifetime_of`]).
fn outcome_lifetime(base: Duration, key: &OutcomeKey, o: &Outcome) -> Duration {
    if key.stack.protocol != Protocol::Quic || o.last.is_ok() || base.is_zero() {
        return base;
    }
    // A CIB that keeps outcomes for less than the first backoff (or not at all) keeps a
    // QUIC failure no longer either.
    let doublings = o.failures.saturating_sub(1).min(20);
    QUIC_BROKEN_FIRST
        .min(base)
        .saturating_mul(1u32 << doublings)
        .min(QUIC_BROKEN_MAX)
}

/// The non-loopback addresses of an interface list, sorted: what identifies the network.
fn addresses(interfaces: &[Interface]) -> Vec<IpAddr> {
    let mut a: Vec<IpAddr> = interfaces
        .iter()
        .flat_map(|i| i.addresses.iter().map(|a| a.addr))
        .filter(|a| !a.is_loopback())
        .collect();
    a.sort_unstable();
    a
}

/// The median of the last [`RTT_SAMPLES`] connect times (the upper one of an even count),
/// zero when there are none. No allocation; sorted as nanosecond integers, cheaper than
/// sorting `Duration`s (two fields each): it runs once per successful connection.
fn median(samples: &[Duration]) -> Duration {
    let n = samples.len().min(RTT_SAMPLES);
    if n == 0 {
        return Duration::ZERO;
    }
    let mut s = [0u64; RTT_SAMPLES];
    for (d, x) in s.iter_mut().zip(&samples[samples.len() - n..]) {
        *d = u64::try_from(x.as_nanos()).unwrap_or(u64::MAX);
    }
    s[..n].sort_unstable();
    Duration::from_nanos(s[n / 2])
}

const FORMAT: &str = "taps-cib";

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PersistedFile {
    format: String,
    version: u32,
    entries: Vec<Persisted>,
}

#[derive(Serialize, Deserialize)]
struct Persisted {
    endpoint: String,
    protocol: String,
    secure: bool,
    remote: SocketAddr,
    /// The local interface the candidate was bound to (absent: the OS routed it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    interface: Option<String>,
    at_unix_ms: u64,
    /// The cause in words (for people reading the file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// The cause as data (read back as the typed cause).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cause: Option<AttemptCause>,
    #[serde(default)]
    rtt_us: Vec<u64>,
    /// Failures in a row (QUIC's backoff).
    #[serde(default, skip_serializing_if = "is_zero")]
    failures: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests;
