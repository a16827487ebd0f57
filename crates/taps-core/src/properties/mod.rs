//! Transport properties: what the application asks of a connection.
//!
//! One model serves three front ends: the RFC 9622 builder ([`TransportProperties`]),
//! NEAT's JSON format ([`TransportProperties::merge_neat_json`]) and the policy files of
//! the PIB. A property is an [`Entry`]: a [`Value`], a precedence (2 = required,
//! 1 = requested, 0 = no preference, as in NEAT) and a score. For the service
//! properties of RFC 9622 (reliability, ordering, ...) a boolean value with a precedence
//! is exactly one of the five [`Preference`] levels: `true`+2 = Require, `true`+1 =
//! Prefer, 0 = No Preference, `false`+1 = Avoid, `false`+2 = Prohibit.
//!
//! [`TransportProperties::compile`] checks every value once and freezes the set into
//! [`Properties`], an `Arc` that later flows share: reusing it costs a reference-count
//! bump, never a re-parse.

mod names;
mod neat_json;
mod value;

pub use names::{Name, NameKind};
pub(crate) use neat_json::parse_object;
pub use value::{Precedence, Value};

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::net::Family;

/// RFC 9622 preference levels for selection properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Preference {
    /// Only stacks that provide the property are used.
    Require,
    /// Stacks that provide the property rank higher.
    Prefer,
    /// The property does not influence selection.
    NoPreference,
    /// Stacks that provide the property rank lower (tie-break).
    Avoid,
    /// Stacks that provide the property are never used.
    Prohibit,
}

impl Preference {
    /// The NEAT encoding of this level: (value, precedence).
    pub fn to_neat(self) -> (bool, Precedence) {
        match self {
            Preference::Require => (true, Precedence::Required),
            Preference::Prefer => (true, Precedence::Requested),
            Preference::NoPreference => (true, Precedence::None),
            Preference::Avoid => (false, Precedence::Requested),
            Preference::Prohibit => (false, Precedence::Required),
        }
    }

    /// The level a NEAT boolean property with `precedence` stands for.
    pub fn from_neat(value: bool, precedence: Precedence) -> Preference {
        match (value, precedence) {
            (_, Precedence::None) => Preference::NoPreference,
            (true, Precedence::Requested) => Preference::Prefer,
            (true, Precedence::Required) => Preference::Require,
            (false, Precedence::Requested) => Preference::Avoid,
            (false, Precedence::Required) => Preference::Prohibit,
        }
    }

    /// Parses `require`, `prefer`, `noPreference` (or `no_preference`, `ignore`),
    /// `avoid`, `prohibit`, case-insensitively.
    pub fn parse(s: &str) -> Option<Preference> {
        Some(
            match s.to_ascii_lowercase().replace(['_', '-', ' '], "").as_str() {
                "require" | "required" => Preference::Require,
                "prefer" => Preference::Prefer,
                "nopreference" | "ignore" => Preference::NoPreference,
                "avoid" => Preference::Avoid,
                "prohibit" | "prohibited" => Preference::Prohibit,
                _ => return None,
            },
        )
    }
}

impl fmt::Display for Preference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Preference::Require => "require",
            Preference::Prefer => "prefer",
            Preference::NoPreference => "no preference",
            Preference::Avoid => "avoid",
            Preference::Prohibit => "prohibit",
        })
    }
}

/// Transport protocols taps knows how to rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// Multipath TCP (RFC 8684).
    Mptcp,
    /// SCTP (kernel where the OS has it, else user space over UDP, RFC 6951).
    Sctp,
    /// QUIC (always secured by TLS 1.3).
    Quic,
    /// UDP.
    Udp,
    /// UDP-Lite (RFC 3828), with partial checksum coverage.
    UdpLite,
}

impl Protocol {
    /// Every protocol, in the order used to break ties.
    pub const ALL: [Protocol; 6] = [
        Protocol::Sctp,
        Protocol::Tcp,
        Protocol::Mptcp,
        Protocol::Quic,
        Protocol::Udp,
        Protocol::UdpLite,
    ];

    /// Canonical name (NEAT spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Mptcp => "MPTCP",
            Protocol::Sctp => "SCTP",
            Protocol::Quic => "QUIC",
            Protocol::Udp => "UDP",
            Protocol::UdpLite => "UDP-Lite",
        }
    }

    /// Parses NEAT's names (`TCP`, `MPTCP`, `SCTP`, `SCTP/UDP`, `UDP`, `UDP-Lite`, `QUIC`),
    /// case-insensitively.
    pub fn parse(s: &str) -> Option<Protocol> {
        Some(match s.to_ascii_uppercase().replace('_', "-").as_str() {
            "TCP" => Protocol::Tcp,
            "MPTCP" => Protocol::Mptcp,
            "SCTP" | "SCTP/UDP" | "SCTP-UDP" => Protocol::Sctp,
            "QUIC" => Protocol::Quic,
            "UDP" => Protocol::Udp,
            "UDP-LITE" | "UDPLITE" => Protocol::UdpLite,
            _ => return None,
        })
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// RFC 9622 `multipath` selection property.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Multipath {
    /// Do not use multipath protocols.
    Disabled,
    /// Use multipath when available (MPTCP is then preferred).
    Active,
    /// Accept multipath if the peer asks (default for listeners).
    Passive,
}

/// RFC 9622 `multipathPolicy` (section 6.2.15): how a multipath connection uses its
/// paths. Linux sets it per network namespace (the MPTCP path manager's endpoints: backup
/// subflows for handover), not per socket; see docs/netlab.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MultipathPolicy {
    /// Extra paths only when the first one fails (RFC 9622's default).
    Handover,
    /// Several paths, latency first.
    Interactive,
    /// Every path at once, throughput first.
    Aggregate,
}

/// RFC 9622 `connCapacityProfile`, mapped to DSCP by the I/O side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapacityProfile {
    /// Best effort (DSCP 0).
    Default,
    /// Less than best effort (DSCP LE, 1).
    Scavenger,
    /// Interactive low latency (DSCP EF, 46).
    LowLatencyInteractive,
    /// Non-interactive low latency (DSCP AF42, 36).
    LowLatencyNonInteractive,
    /// Constant-rate streaming (DSCP AF32, 28).
    ConstantRateStreaming,
    /// Capacity seeking (DSCP AF11, 10).
    CapacitySeeking,
}

impl CapacityProfile {
    /// Parses RFC 9622 and NEAT spellings (`default`, `scavenger`, `low-latency/interactive`, ...).
    pub fn parse(s: &str) -> Option<CapacityProfile> {
        Some(
            match s
                .to_ascii_lowercase()
                .replace(['_', '-', ' ', '/'], "")
                .as_str()
            {
                "default" | "besteffort" => CapacityProfile::Default,
                "scavenger" => CapacityProfile::Scavenger,
                "lowlatencyinteractive" | "lowlatency" => CapacityProfile::LowLatencyInteractive,
                "lowlatencynoninteractive" => CapacityProfile::LowLatencyNonInteractive,
                "constantratestreaming" | "constantrate" => CapacityProfile::ConstantRateStreaming,
                "capacityseeking" => CapacityProfile::CapacitySeeking,
                _ => return None,
            },
        )
    }

    /// The DSCP code point this profile is marked with (RFC 9622 section 8.1.6).
    pub fn dscp(self) -> u8 {
        match self {
            CapacityProfile::Default => 0,
            CapacityProfile::Scavenger => 1,
            CapacityProfile::LowLatencyInteractive => 46,
            CapacityProfile::LowLatencyNonInteractive => 36,
            CapacityProfile::ConstantRateStreaming => 28,
            CapacityProfile::CapacitySeeking => 10,
        }
    }
}

/// Where a property entry came from; application entries outrank defaults.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Origin {
    /// RFC 9622 default.
    Default,
    /// Set by the application (builder or JSON).
    Application,
    /// Added by the PIB profile or policy with this uid.
    Pib(Arc<str>),
    /// A fact about the candidate (its protocol, family, interface).
    Candidate,
}

/// One property: value, precedence and score, as in NEAT's JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The value (a boolean for service properties).
    pub value: Value,
    /// Required, requested or no preference.
    pub precedence: Precedence,
    /// Weight added to a candidate's score when the entry is satisfied.
    pub score: Option<f64>,
    /// Who set it.
    pub origin: Origin,
}

impl Entry {
    /// An application entry.
    pub fn new(value: Value, precedence: Precedence) -> Entry {
        Entry {
            value,
            precedence,
            score: None,
            origin: Origin::Application,
        }
    }

    /// A service property at preference level `pref`.
    pub fn preference(pref: Preference) -> Entry {
        let (v, p) = pref.to_neat();
        Entry::new(Value::Bool(v), p)
    }

    /// The preference level, for boolean entries.
    pub fn as_preference(&self) -> Option<Preference> {
        match self.value {
            Value::Bool(b) => Some(Preference::from_neat(b, self.precedence)),
            _ => None,
        }
    }
}

/// Errors in a property set: bad names, bad values, malformed JSON.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PropertyError {
    /// The JSON text is not well-formed.
    #[error("malformed JSON at line {line}, column {column}: {message}")]
    Json {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the parser says.
        message: String,
    },
    /// A property name taps does not know.
    #[error("unknown property '{0}'")]
    Unknown(String),
    /// A known property with a value of the wrong shape.
    #[error("property '{name}': {reason}")]
    Invalid {
        /// Canonical property name.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// A mutable set of transport properties, starting from the RFC 9622 defaults.
///
/// Build it, then [`compile`](Self::compile) it once; share the result between flows.
#[derive(Debug, Clone, PartialEq)]
pub struct TransportProperties {
    entries: BTreeMap<Name, Entry>,
}

impl Default for TransportProperties {
    fn default() -> Self {
        Self::new()
    }
}

impl TransportProperties {
    /// The RFC 9622 defaults for a connection that will be initiated.
    pub fn new() -> Self {
        let mut entries = BTreeMap::new();
        let mut def = |name: Name, pref: Preference| {
            let mut e = Entry::preference(pref);
            e.origin = Origin::Default;
            entries.insert(name, e);
        };
        def(Name::Reliability, Preference::Require);
        def(Name::PreserveMsgBoundaries, Preference::NoPreference);
        def(Name::PerMsgReliability, Preference::NoPreference);
        def(Name::PreserveOrder, Preference::Require);
        def(Name::ZeroRttMsg, Preference::NoPreference);
        def(Name::Multistreaming, Preference::Prefer);
        def(Name::FullChecksumSend, Preference::Require);
        def(Name::FullChecksumRecv, Preference::Require);
        def(Name::CongestionControl, Preference::Require);
        def(Name::KeepAlive, Preference::NoPreference);
        def(Name::UseTemporaryLocalAddress, Preference::Prefer);
        def(Name::Security, Preference::NoPreference);
        TransportProperties { entries }
    }

    /// The RFC 9622 defaults for a listener (temporary addresses avoided, multipath passive).
    pub fn for_listener() -> Self {
        let mut p = Self::new();
        p.entries.insert(Name::UseTemporaryLocalAddress, {
            let mut e = Entry::preference(Preference::Avoid);
            e.origin = Origin::Default;
            e
        });
        p.set_entry(
            Name::Multipath,
            Entry {
                origin: Origin::Default,
                ..Entry::new(Value::Str("passive".into()), Precedence::Requested)
            },
        );
        p
    }

    /// Sets service property `name` (one of [`NameKind::Service`]) to `pref`.
    ///
    /// # Panics
    /// If `name` is not a boolean service property (a programming error).
    pub fn set(mut self, name: Name, pref: Preference) -> Self {
        assert_eq!(
            name.kind(),
            NameKind::Service,
            "{name} is not a service property"
        );
        self.entries.insert(name, Entry::preference(pref));
        self
    }

    /// Shorthand for `set(name, Require)`.
    pub fn require(self, name: Name) -> Self {
        self.set(name, Preference::Require)
    }
    /// Shorthand for `set(name, Prefer)`.
    pub fn prefer(self, name: Name) -> Self {
        self.set(name, Preference::Prefer)
    }
    /// Shorthand for `set(name, NoPreference)`.
    pub fn ignore(self, name: Name) -> Self {
        self.set(name, Preference::NoPreference)
    }
    /// Shorthand for `set(name, Avoid)`.
    pub fn avoid(self, name: Name) -> Self {
        self.set(name, Preference::Avoid)
    }
    /// Shorthand for `set(name, Prohibit)`.
    pub fn prohibit(self, name: Name) -> Self {
        self.set(name, Preference::Prohibit)
    }

    /// Restricts (`Require`), favours (`Prefer`, earlier first), disfavours (`Avoid`) or
    /// excludes (`Prohibit`) transport protocols, like NEAT's `transport` property.
    pub fn protocols(mut self, pref: Preference, list: impl IntoIterator<Item = Protocol>) -> Self {
        let (positive, precedence) = pref.to_neat();
        let list = Value::List(
            list.into_iter()
                .map(|p| Value::Str(p.as_str().into()))
                .collect(),
        );
        let value = if positive {
            list
        } else {
            Value::Not(Box::new(list))
        };
        self.entries
            .insert(Name::Transport, Entry::new(value, precedence));
        self
    }

    /// Requires, prefers, avoids or prohibits an address family.
    pub fn ip_version(mut self, pref: Preference, family: Family) -> Self {
        let (positive, precedence) = pref.to_neat();
        let v = Value::Int(family.version());
        let value = if positive { v } else { Value::Not(Box::new(v)) };
        self.entries
            .insert(Name::IpVersion, Entry::new(value, precedence));
        self
    }

    /// Requires, prefers, avoids or prohibits a local interface, by name (`eth0`) or kind
    /// (`loopback`, `ethernet`, `wireless`, `tunnel`).
    pub fn interface(mut self, pref: Preference, name_or_kind: &str) -> Self {
        let (positive, precedence) = pref.to_neat();
        let v = Value::Str(name_or_kind.into());
        let value = if positive { v } else { Value::Not(Box::new(v)) };
        self.entries
            .insert(Name::Interface, Entry::new(value, precedence));
        self
    }

    /// Sets the multipath mode.
    pub fn multipath(mut self, mode: Multipath) -> Self {
        let s = match mode {
            Multipath::Disabled => "disabled",
            Multipath::Active => "active",
            Multipath::Passive => "passive",
        };
        self.entries.insert(
            Name::Multipath,
            Entry::new(Value::Str(s.into()), Precedence::Requested),
        );
        self
    }

    /// Sets the capacity profile (maps to DSCP).
    pub fn capacity_profile(mut self, profile: CapacityProfile) -> Self {
        let s = format!("{profile:?}");
        self.entries.insert(
            Name::CapacityProfile,
            Entry::new(Value::Str(s), Precedence::Requested),
        );
        self
    }

    /// Sets the connection priority (RFC 9622 `connPriority`, lower is more important).
    pub fn priority(mut self, priority: u32) -> Self {
        self.entries.insert(
            Name::ConnPriority,
            Entry::new(Value::Int(priority.into()), Precedence::Requested),
        );
        self
    }

    /// Sets the establishment timeout (RFC 9622 Initiate's timeout; property
    /// `establishmentTimeout`): the race fails when nothing connected within it.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.entries.insert(
            Name::EstablishmentTimeout,
            Entry::new(Value::Float(timeout.as_secs_f64()), Precedence::Requested),
        );
        self
    }

    /// Sets the timeout for aborting the connection (RFC 9622 `connTimeout`): once
    /// connected, sent data unacknowledged for this long ends the connection with an
    /// error (TCP `TCP_USER_TIMEOUT`; SCTP a retransmission limit and maximum RTO that
    /// give up within it). Free: applied with the socket's other options.
    pub fn abort_timeout(mut self, timeout: Duration) -> Self {
        self.entries.insert(
            Name::ConnTimeout,
            Entry::new(Value::Float(timeout.as_secs_f64()), Precedence::Requested),
        );
        self
    }

    /// Sets the keep-alive interval (RFC 9622 `keepAliveTimeout`) and asks for
    /// keep-alive: TCP keep-alive idle time, SCTP heartbeat interval. An idle connection
    /// whose path died then fails within about this plus the abort timeout.
    pub fn keep_alive_timeout(mut self, interval: Duration) -> Self {
        self.entries.insert(
            Name::KeepAliveTimeout,
            Entry::new(Value::Float(interval.as_secs_f64()), Precedence::Requested),
        );
        self
    }

    /// Sets the stagger between candidate attempts (NEAT's `__he_delay`), 10 ms to 2 s.
    pub fn attempt_delay(mut self, delay: Duration) -> Self {
        self.entries.insert(
            Name::HeDelay,
            Entry::new(Value::Int(delay.as_millis() as i64), Precedence::Requested),
        );
        self
    }

    /// Sets one entry directly (used by the JSON parser and the PIB).
    pub fn set_entry(&mut self, name: Name, entry: Entry) {
        self.entries.insert(name, entry);
    }

    /// The entry for `name`, if set.
    pub fn get(&self, name: Name) -> Option<&Entry> {
        self.entries.get(&name)
    }

    /// Merges NEAT-format JSON (`{"name":{"value":V,"precedence":1|2,"score":f}}`) over
    /// these properties. Also accepts RFC 9622 names and preference words as values
    /// (`{"preserveMsgBoundaries":"require"}`).
    pub fn merge_neat_json(mut self, json: &str) -> Result<Self, PropertyError> {
        for (name, entry) in neat_json::parse(json)? {
            self.entries.insert(name, entry);
        }
        Ok(self)
    }

    /// Parses NEAT-format JSON over the RFC 9622 defaults.
    pub fn from_neat_json(json: &str) -> Result<Self, PropertyError> {
        Self::new().merge_neat_json(json)
    }

    /// Validates every value once and freezes the set for sharing between flows.
    pub fn compile(self) -> Result<Properties, PropertyError> {
        let compiled = Compiled::from_entries(&self.entries)?;
        Ok(Properties(Arc::new(Inner {
            entries: self.entries,
            compiled,
        })))
    }
}

/// Compiled, immutable transport properties. Cloning is a reference-count bump.
#[derive(Debug, Clone)]
pub struct Properties(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    entries: BTreeMap<Name, Entry>,
    compiled: Compiled,
}

/// Typed view of the connection properties, computed once at compile time.
#[derive(Debug, Clone, PartialEq)]
pub struct Compiled {
    /// Multipath mode.
    pub multipath: Multipath,
    /// Multipath policy (RFC 9622 default: handover).
    pub multipath_policy: MultipathPolicy,
    /// Capacity profile.
    pub capacity_profile: CapacityProfile,
    /// Explicit DSCP (NEAT `dscp_value`), overriding the profile's.
    pub dscp: Option<u8>,
    /// Connection priority.
    pub priority: u32,
    /// Establishment timeout (`establishmentTimeout`), if set.
    pub timeout: Option<Duration>,
    /// Timeout for aborting the connection (RFC 9622 `connTimeout`), if set.
    pub abort_timeout: Option<Duration>,
    /// Keep-alive interval (RFC 9622 `keepAliveTimeout`), if set.
    pub keep_alive_timeout: Option<Duration>,
    /// Stagger between attempts, if set (clamped to 10 ms..=2 s).
    pub attempt_delay: Option<Duration>,
}

impl Compiled {
    fn from_entries(entries: &BTreeMap<Name, Entry>) -> Result<Compiled, PropertyError> {
        for (name, entry) in entries {
            name.validate(&entry.value)?;
        }
        let invalid = |name: Name, reason: &str| PropertyError::Invalid {
            name: name.as_str().into(),
            reason: reason.into(),
        };
        let str_of = |n: Name| entries.get(&n).and_then(|e| e.value.as_str());
        let multipath = match str_of(Name::Multipath) {
            None | Some("disabled") => Multipath::Disabled,
            Some("active") => Multipath::Active,
            Some("passive") => Multipath::Passive,
            Some(_) => unreachable!("validated"),
        };
        let multipath = match entries.get(&Name::Multihoming).map(|e| &e.value) {
            Some(Value::Bool(true)) if multipath == Multipath::Disabled => Multipath::Active,
            _ => multipath,
        };
        let multipath_policy = match str_of(Name::MultipathPolicy) {
            None | Some("handover") => MultipathPolicy::Handover,
            Some("interactive") => MultipathPolicy::Interactive,
            Some("aggregate") => MultipathPolicy::Aggregate,
            Some(_) => unreachable!("validated"),
        };
        let mut capacity_profile = match str_of(Name::CapacityProfile) {
            Some(s) => CapacityProfile::parse(s)
                .ok_or_else(|| invalid(Name::CapacityProfile, "unknown capacity profile"))?,
            None => CapacityProfile::Default,
        };
        if let Some(Value::Bool(true)) = entries.get(&Name::LowLatency).map(|e| &e.value) {
            if capacity_profile == CapacityProfile::Default {
                capacity_profile = CapacityProfile::LowLatencyInteractive;
            }
        }
        let int_of = |n: Name| entries.get(&n).and_then(|e| e.value.as_f64());
        let dscp = match int_of(Name::DscpValue) {
            Some(v) if (0.0..=63.0).contains(&v) => Some(v as u8),
            Some(v) => {
                return Err(invalid(
                    Name::DscpValue,
                    &format!("DSCP is 0..=63, got {v}"),
                ))
            }
            None => None,
        };
        let priority = match int_of(Name::ConnPriority) {
            None => 100,
            Some(v) if (0.0..=u32::MAX as f64).contains(&v) => v as u32,
            Some(v) => {
                return Err(invalid(
                    Name::ConnPriority,
                    &format!("expected 0 or more (lower is more important), got {v}"),
                ))
            }
        };
        let secs_of = |n: Name| match int_of(n) {
            Some(secs) => Duration::try_from_secs_f64(secs).map(Some).map_err(|_| {
                invalid(
                    n,
                    &format!("expected a non-negative number of seconds, got {secs}"),
                )
            }),
            None => Ok(None),
        };
        let timeout = secs_of(Name::EstablishmentTimeout)?;
        let abort_timeout = secs_of(Name::ConnTimeout)?;
        let keep_alive_timeout = secs_of(Name::KeepAliveTimeout)?;
        let attempt_delay = int_of(Name::HeDelay).map(|ms| {
            Duration::from_millis(ms as u64)
                .clamp(Duration::from_millis(10), Duration::from_secs(2))
        });
        Ok(Compiled {
            multipath,
            multipath_policy,
            capacity_profile,
            dscp,
            priority,
            timeout,
            abort_timeout,
            keep_alive_timeout,
            attempt_delay,
        })
    }
}

impl Properties {
    /// The RFC 9622 defaults, compiled.
    pub fn defaults() -> Properties {
        TransportProperties::new()
            .compile()
            .expect("defaults are valid")
    }

    /// Every entry, by name.
    pub fn entries(&self) -> &BTreeMap<Name, Entry> {
        &self.0.entries
    }

    /// The entry for `name`, if set.
    pub fn get(&self, name: Name) -> Option<&Entry> {
        self.0.entries.get(&name)
    }

    /// An identity for this compiled set: equal for clones, different for separately
    /// compiled sets (even with equal entries). Cost: a pointer read.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// The typed connection properties.
    pub fn compiled(&self) -> &Compiled {
        &self.0.compiled
    }

    /// A mutable copy, to derive a changed set (costs a copy of the entries).
    pub fn to_builder(&self) -> TransportProperties {
        TransportProperties {
            entries: self.0.entries.clone(),
        }
    }

    /// Whether two handles share one compiled set (no copy was made).
    pub fn ptr_eq(&self, other: &Properties) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

#[cfg(test)]
mod tests;
