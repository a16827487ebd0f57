//! Candidate gathering and ranking.
//!
//! Two stages, so that the costly part is paid once per preconnection, not per flow:
//!
//! 1. [`Plan::new`] applies the PIB profiles to the properties and evaluates every
//!    protocol stack against them: which stacks are allowed, with which score and why.
//!    An unsatisfiable property set fails here, naming the conflicting properties.
//! 2. [`Plan::gather`] crosses the planned stacks with remote addresses (as DNS answers
//!    arrive) and local bindings, applies the PIB policies and the CIB history, and
//!    returns candidates in race order ([`order`]).
//!
//! Ranking: candidates whose last attempt failed (per the CIB) go last; the rest are
//! ordered by score (Prefer adds, Avoid subtracts a tenth, explicit NEAT scores and
//! list positions add), then by stack, then by address: recently successful addresses
//! first (fastest first), then unknown ones in RFC 6724 order, each class interleaving
//! families (First Address Family Count).

mod rfc6724;

pub use crate::stack::{Provides, Security, Stack};

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::net::{Family, Interface, InterfaceKind};
use crate::policy::pib::PropertySet;
use crate::policy::{Cib, History, MergeConflict, OutcomeKey, Pib};
use crate::properties::{
    Entry, Name, NameKind, Origin, Precedence, Preference, Properties, Protocol, Value,
};

/// Weight of a satisfied Prefer when the entry gives no score.
const PREFER_WEIGHT: f64 = 1.0;
/// Weight of a matched Avoid: a tie-break between otherwise equal stacks.
const AVOID_WEIGHT: f64 = 0.1;

/// Why a candidate got (part of) its score.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// A Prefer the stack satisfies, or an Avoid it matches (negative delta).
    Preference {
        /// Property.
        name: Name,
        /// Level asked for.
        pref: Preference,
        /// Score change.
        delta: f64,
    },
    /// Listed at `position` (0-based) of `of` in a list-valued property.
    Listed {
        /// Property.
        name: Name,
        /// Position in the list.
        position: usize,
        /// List length.
        of: usize,
        /// Score change.
        delta: f64,
    },
    /// A PIB rule applied to this candidate.
    Rule {
        /// Its uid.
        uid: Arc<str>,
    },
    /// A default requirement that no stack could meet together with the application's
    /// properties, and was relaxed to a preference.
    Relaxed {
        /// Property.
        name: Name,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Preference { name, pref, delta } => {
                write!(f, "{delta:+} {name} ({pref})")
            }
            Reason::Listed {
                name,
                position,
                of,
                delta,
            } => write!(f, "{delta:+} {name}: listed {} of {of}", position + 1),
            Reason::Rule { uid } => write!(f, "PIB rule '{uid}' applied"),
            Reason::Relaxed { name } => {
                write!(
                    f,
                    "default {name} relaxed: no stack meets it with the request"
                )
            }
        }
    }
}

/// Why a candidate was dropped.
#[derive(Debug, Clone, PartialEq)]
pub enum Violation {
    /// A Require the stack cannot meet.
    Lacks {
        /// Property.
        name: Name,
    },
    /// A Prohibit the stack cannot avoid.
    Has {
        /// Property.
        name: Name,
    },
    /// A required list-valued property does not admit the candidate's `fact`.
    NotAdmitted {
        /// Property.
        name: Name,
        /// What was required.
        wanted: Value,
        /// What the candidate is.
        fact: String,
    },
    /// Multipath is disabled, so MPTCP is not used.
    MultipathDisabled,
    /// No local interface has an address of this family that can reach the remote.
    NoLocalAddress {
        /// The family.
        family: Family,
    },
    /// A PIB merge conflict.
    Conflict(MergeConflict),
    /// A violation that exists only because PIB policies changed the properties.
    ByPolicy {
        /// The policies applied to this candidate, in order.
        uids: Vec<Arc<str>>,
        /// What the changed properties rule out.
        violation: Box<Violation>,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Lacks { name } => write!(f, "requires {name}, which it does not provide"),
            Violation::Has { name } => write!(f, "prohibits {name}, which it always provides"),
            Violation::NotAdmitted { name, wanted, fact } => {
                write!(f, "{name} requires {wanted}, candidate is {fact}")
            }
            Violation::MultipathDisabled => f.write_str("multipath is disabled"),
            Violation::NoLocalAddress { family } => {
                write!(f, "no local {family} address can reach it")
            }
            Violation::Conflict(c) => c.fmt(f),
            Violation::ByPolicy { uids, violation } => {
                let uids: Vec<&str> = uids.iter().map(|u| &**u).collect();
                write!(f, "policy {}: {violation}", uids.join(", "))
            }
        }
    }
}

/// A stack allowed by the properties, with its base score.
#[derive(Debug, Clone)]
pub struct PlannedStack {
    /// The stack.
    pub stack: Stack,
    /// The property set after profiles (shared by every candidate of this stack).
    pub set: Arc<PropertySet>,
    /// Score from the properties.
    pub score: f64,
    /// Why.
    pub reasons: Vec<Reason>,
    /// Why this build cannot run it, if it cannot (the race skips it).
    pub unavailable: Option<&'static str>,
}

/// A stack the properties rule out, and why.
#[derive(Debug, Clone)]
pub struct PrunedStack {
    /// The stack.
    pub stack: Stack,
    /// Every reason.
    pub violations: Vec<Violation>,
}

/// The local side of a candidate: an interface and address to bind, when the
/// properties ask for one (otherwise the OS routes).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LocalBinding {
    /// Interface name.
    pub interface: Arc<str>,
    /// Interface kind.
    pub kind: InterfaceKind,
    /// Address to bind.
    pub addr: IpAddr,
}

/// One way to reach the remote endpoint, ready to be raced.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Protocol stack.
    pub stack: Stack,
    /// Remote address and port.
    pub remote: SocketAddr,
    /// Local binding, if any.
    pub local: Option<LocalBinding>,
    /// Score (higher first).
    pub score: f64,
    /// What the CIB knows about it.
    pub history: History,
    /// Why it has its score.
    pub reasons: Arc<[Reason]>,
    /// Why it cannot be attempted by this build, if so.
    pub unavailable: Option<&'static str>,
}

impl Candidate {
    /// The address family of the remote.
    pub fn family(&self) -> Family {
        Family::of(&self.remote.ip())
    }

    /// The CIB key of this candidate for `endpoint`.
    pub fn outcome_key(&self, endpoint: &Arc<str>) -> OutcomeKey {
        OutcomeKey {
            endpoint: endpoint.clone(),
            stack: self.stack,
            remote: self.remote,
        }
    }
}

impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.stack, self.remote)?;
        if let Some(l) = &self.local {
            write!(f, " from {} ({})", l.addr, l.interface)?;
        }
        Ok(())
    }
}

/// A candidate dropped at gathering time.
#[derive(Debug, Clone)]
pub struct PrunedCandidate {
    /// Stack.
    pub stack: Stack,
    /// Remote address.
    pub remote: SocketAddr,
    /// Local binding, if any.
    pub local: Option<LocalBinding>,
    /// Why.
    pub violations: Vec<Violation>,
}

/// No stack satisfies the properties.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("unsatisfiable properties: {} conflict; {detail}", properties.join(" and "))]
pub struct Unsatisfiable {
    /// The conflicting properties, as `name=value (level)`.
    pub properties: Vec<String>,
    /// What each stack lacks.
    pub detail: String,
}

/// Which stacks the executing side can run; others are still ranked but marked.
#[derive(Debug, Clone, Default)]
pub struct Availability {
    unavailable: HashMap<Stack, &'static str>,
}

impl Availability {
    /// Everything available (for showing what the policy ranks).
    pub fn all() -> Availability {
        Availability::default()
    }

    /// Marks `stack` as unavailable for `reason`.
    pub fn without(mut self, stack: Stack, reason: &'static str) -> Availability {
        self.unavailable.insert(stack, reason);
        self
    }

    /// Why `stack` cannot run, if it cannot.
    pub fn reason(&self, stack: Stack) -> Option<&'static str> {
        self.unavailable.get(&stack).copied()
    }
}

/// The allowed stacks for one property set, computed once and shared by every flow of a
/// preconnection.
#[derive(Debug, Clone)]
pub struct Plan {
    stacks: Vec<PlannedStack>,
    pruned: Vec<PrunedStack>,
    pib: Arc<Pib>,
    first_family_count: usize,
    scored: ScoredCache,
}

/// The candidates of one DNS answer before the CIB's history is added: everything
/// [`Plan::gather`] computes that depends only on the plan, the endpoint, the addresses
/// and the interfaces.
#[derive(Debug)]
struct Scored {
    endpoint: Arc<str>,
    port: u16,
    addrs: Vec<IpAddr>,
    interfaces: Arc<Vec<Interface>>,
    candidates: Vec<Candidate>,
    pruned: Vec<PrunedCandidate>,
}

/// The last [`Scored`] result of a plan, so flows to the same endpoint score its
/// candidates once. A clone of the plan starts empty.
#[derive(Debug, Default)]
struct ScoredCache(Mutex<Option<Arc<Scored>>>);

impl Clone for ScoredCache {
    fn clone(&self) -> Self {
        ScoredCache::default()
    }
}

impl Plan {
    /// Applies the PIB profiles and evaluates every stack. Fails, naming the conflicting
    /// properties, when no stack is left.
    pub fn new(
        props: &Properties,
        pib: Arc<Pib>,
        availability: &Availability,
    ) -> Result<Plan, Unsatisfiable> {
        let (sets, conflicts) = pib.apply_profiles(props.entries());
        let mut best: HashMap<Stack, PlannedStack> = HashMap::new();
        let mut pruned: HashMap<Stack, Vec<Violation>> = HashMap::new();
        for set in sets {
            let set = Arc::new(set);
            let mut results: Vec<_> = Stack::ALL
                .iter()
                .map(|s| (*s, evaluate_stack(&set, *s, false)))
                .collect();
            if results.iter().all(|(_, r)| r.is_err()) {
                // Defaults yield to what the application asked for explicitly.
                results = Stack::ALL
                    .iter()
                    .map(|s| (*s, evaluate_stack(&set, *s, true)))
                    .collect();
            }
            for (stack, r) in results {
                match r {
                    Ok((score, reasons)) => {
                        let better = best.get(&stack).is_none_or(|b| score > b.score);
                        if better {
                            best.insert(
                                stack,
                                PlannedStack {
                                    stack,
                                    set: set.clone(),
                                    score,
                                    reasons,
                                    unavailable: availability.reason(stack),
                                },
                            );
                        }
                    }
                    Err(v) => pruned.entry(stack).or_default().extend(v),
                }
            }
        }
        if best.is_empty() {
            return Err(explain_conflict(props.entries(), &conflicts));
        }
        let mut stacks: Vec<PlannedStack> = best.into_values().collect();
        stacks.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(a.stack.index().cmp(&b.stack.index()))
        });
        let mut pruned: Vec<PrunedStack> = pruned
            .into_iter()
            .filter(|(s, _)| !stacks.iter().any(|p| p.stack == *s))
            .map(|(stack, mut violations)| {
                violations.dedup();
                PrunedStack { stack, violations }
            })
            .collect();
        pruned.sort_by_key(|p| p.stack.index());
        Ok(Plan {
            stacks,
            pruned,
            pib,
            first_family_count: 1,
            scored: ScoredCache::default(),
        })
    }

    /// Sets how many addresses of the first family go before interleaving (RFC 8305, 1 or 2).
    pub fn with_first_family_count(mut self, n: usize) -> Plan {
        self.first_family_count = n.max(1);
        self.scored = ScoredCache::default();
        self
    }

    /// First Address Family Count in use.
    pub fn first_family_count(&self) -> usize {
        self.first_family_count
    }

    /// The allowed stacks, best first.
    pub fn stacks(&self) -> &[PlannedStack] {
        &self.stacks
    }

    /// The stacks ruled out, with reasons.
    pub fn pruned(&self) -> &[PrunedStack] {
        &self.pruned
    }

    /// Candidates for `addrs` of `endpoint` (named `host:port`), in race order, each with
    /// its CIB history. Cost: the first call for an endpoint, address list and interface
    /// list evaluates stacks × addresses × local bindings (policies matched per candidate,
    /// a stack re-evaluated only when a policy applied) and keeps the result; repeated
    /// calls with the same inputs (every flow of a preconnection to one endpoint) clone
    /// it and only look up the histories and sort.
    pub fn gather(
        &self,
        endpoint: &Arc<str>,
        port: u16,
        addrs: &[IpAddr],
        cib: &Cib,
        now: Instant,
    ) -> Gathered {
        let scored = self.scored(endpoint, port, addrs, cib.interfaces());
        let mut out = Gathered {
            candidates: scored.candidates.clone(),
            pruned: scored.pruned.clone(),
        };
        for c in &mut out.candidates {
            c.history = cib.history(&c.outcome_key(endpoint), now);
        }
        order(&mut out.candidates, self.first_family_count);
        out
    }

    /// The scored candidates for this answer: the cached ones when the last call was for
    /// the same endpoint, addresses and interface list, else computed and cached.
    fn scored(
        &self,
        endpoint: &Arc<str>,
        port: u16,
        addrs: &[IpAddr],
        interfaces: Arc<Vec<Interface>>,
    ) -> Arc<Scored> {
        let cached = self
            .scored
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(hit) = cached.filter(|s| {
            s.port == port
                && *s.endpoint == **endpoint
                && s.addrs == addrs
                && Arc::ptr_eq(&s.interfaces, &interfaces)
        }) {
            return hit;
        }
        let scored = Arc::new(self.score(endpoint, port, addrs, interfaces));
        *self.scored.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(scored.clone());
        scored
    }

    /// Evaluates every stack × address × local binding (history left unknown).
    fn score(
        &self,
        endpoint: &Arc<str>,
        port: u16,
        addrs: &[IpAddr],
        interfaces: Arc<Vec<Interface>>,
    ) -> Scored {
        let host = endpoint.rsplit_once(':').map_or(&**endpoint, |(h, _)| h);
        let mut candidates = Vec::new();
        let mut pruned = Vec::new();
        for planned in &self.stacks {
            for &ip in addrs {
                let remote = SocketAddr::new(ip, port);
                let bindings = match local_bindings(&planned.set, ip, &interfaces) {
                    Ok(b) => b,
                    Err(v) => {
                        pruned.push(PrunedCandidate {
                            stack: planned.stack,
                            remote,
                            local: None,
                            violations: vec![v],
                        });
                        continue;
                    }
                };
                for local in bindings {
                    match self.candidate(planned, remote, local.clone(), host) {
                        Ok((score, reasons)) => candidates.push(Candidate {
                            stack: planned.stack,
                            remote,
                            local,
                            score,
                            history: History::Unknown,
                            reasons: reasons.into(),
                            unavailable: planned.unavailable,
                        }),
                        Err(violations) => pruned.push(PrunedCandidate {
                            stack: planned.stack,
                            remote,
                            local,
                            violations,
                        }),
                    }
                }
            }
        }
        Scored {
            endpoint: endpoint.clone(),
            port,
            addrs: addrs.to_vec(),
            interfaces,
            candidates,
            pruned,
        }
    }

    fn candidate(
        &self,
        planned: &PlannedStack,
        remote: SocketAddr,
        local: Option<LocalBinding>,
        host: &str,
    ) -> Result<(f64, Vec<Reason>), Vec<Violation>> {
        let facts = facts(planned.stack, remote, local.as_ref(), host);
        let mut set: Option<PropertySet> = None;
        let mut reasons = Vec::new();
        for rule in self.pib.policies() {
            let current = set.as_ref().unwrap_or(&planned.set);
            if !rule.applies(current, &facts) {
                continue;
            }
            // A policy's alternatives are merged in turn; the first that fits is used.
            let mut applied = None;
            let mut conflict = None;
            for r in rule.apply(current) {
                match r {
                    Ok(s) => {
                        applied = Some(s);
                        break;
                    }
                    Err(c) => conflict = Some(c),
                }
            }
            match (applied, conflict) {
                (Some(s), _) => {
                    set = Some(s);
                    reasons.push(Reason::Rule {
                        uid: rule.uid.clone(),
                    });
                }
                (None, Some(c)) => return Err(vec![Violation::Conflict(c)]),
                (None, None) => {}
            }
        }
        let (mut score, mut base_reasons) = match &set {
            None => (planned.score, planned.reasons.clone()),
            Some(s) => {
                evaluate_stack(s, planned.stack, true).map_err(|v| blame_policies(v, &reasons))?
            }
        };
        let (delta, mut more) = evaluate_facts(set.as_ref().unwrap_or(&planned.set), &facts)
            .map_err(|v| blame_policies(v, &reasons))?;
        base_reasons.append(&mut reasons);
        score += delta;
        base_reasons.append(&mut more);
        Ok((score, base_reasons))
    }
}

/// Names the applied policies (from `reasons`) in violations that follow from them.
fn blame_policies(violations: Vec<Violation>, reasons: &[Reason]) -> Vec<Violation> {
    let uids: Vec<Arc<str>> = reasons
        .iter()
        .filter_map(|r| match r {
            Reason::Rule { uid } => Some(uid.clone()),
            _ => None,
        })
        .collect();
    if uids.is_empty() {
        return violations;
    }
    violations
        .into_iter()
        .map(|v| Violation::ByPolicy {
            uids: uids.clone(),
            violation: Box::new(v),
        })
        .collect()
}

/// What [`Plan::gather`] returns.
#[derive(Debug, Clone, Default)]
pub struct Gathered {
    /// Kept candidates, in race order.
    pub candidates: Vec<Candidate>,
    /// Dropped candidates, with reasons.
    pub pruned: Vec<PrunedCandidate>,
}

/// Facts about a candidate that policies can match and properties can require.
fn facts(
    stack: Stack,
    remote: SocketAddr,
    local: Option<&LocalBinding>,
    host: &str,
) -> Vec<(Name, Value)> {
    let mut f = vec![
        (Name::Transport, Value::Str(stack.protocol.as_str().into())),
        (
            Name::IpVersion,
            Value::Int(if Family::of(&remote.ip()) == Family::V4 {
                4
            } else {
                6
            }),
        ),
        (Name::RemoteIp, Value::Str(remote.ip().to_string())),
        (Name::Port, Value::Int(remote.port().into())),
        (Name::DomainName, Value::Str(host.into())),
        (
            Name::Security,
            Value::Bool(stack.security != Security::None),
        ),
    ];
    if let Some(l) = local {
        f.push((Name::Interface, Value::Str(l.interface.to_string())));
        f.push((Name::Interface, Value::Str(l.kind.as_str().into())));
        f.push((Name::LocalIps, Value::Str(l.addr.to_string())));
    }
    f
}

/// Checks the address-level properties (family, interface, local and remote address,
/// port, host name) against the candidate's facts.
fn evaluate_facts(
    set: &PropertySet,
    facts: &[(Name, Value)],
) -> Result<(f64, Vec<Reason>), Vec<Violation>> {
    let mut score = 0.0;
    let mut reasons = Vec::new();
    let mut violations = Vec::new();
    for name in [
        Name::IpVersion,
        Name::Interface,
        Name::LocalIps,
        Name::RemoteIp,
        Name::Port,
        Name::DomainName,
    ] {
        let Some(entry) = set.get(&name) else {
            continue;
        };
        let mine: Vec<&Value> = facts
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| v)
            .collect();
        if mine.is_empty() {
            // No local binding: interface and local address are the OS's choice.
            continue;
        }
        let admitted = mine.iter().any(|v| entry.value.admits(v));
        let negative = matches!(entry.value, Value::Not(_));
        match (entry.precedence, admitted) {
            (Precedence::Required, false) => violations.push(Violation::NotAdmitted {
                name,
                wanted: entry.value.clone(),
                fact: mine
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join("/"),
            }),
            (Precedence::Requested, true) if !negative => {
                let delta = entry.score.unwrap_or(PREFER_WEIGHT);
                score += delta;
                reasons.push(Reason::Preference {
                    name,
                    pref: Preference::Prefer,
                    delta,
                });
            }
            (Precedence::Requested, false) if negative => {
                let delta = -entry.score.unwrap_or(AVOID_WEIGHT);
                score += delta;
                reasons.push(Reason::Preference {
                    name,
                    pref: Preference::Avoid,
                    delta,
                });
            }
            _ => {}
        }
    }
    if violations.is_empty() {
        Ok((score, reasons))
    } else {
        Err(violations)
    }
}

/// Evaluates the stack-level properties of `set` against `stack`. With
/// `relax_defaults`, RFC 9622 default Require/Prohibit count as Prefer/Avoid.
fn evaluate_stack(
    set: &PropertySet,
    stack: Stack,
    relax_defaults: bool,
) -> Result<(f64, Vec<Reason>), Vec<Violation>> {
    let mut score = 0.0;
    let mut reasons = Vec::new();
    let mut violations = Vec::new();
    for (&name, entry) in set {
        match name.kind() {
            NameKind::Service => {
                let Some(mut pref) = entry.as_preference() else {
                    continue;
                };
                if relax_defaults && entry.origin == Origin::Default {
                    let relaxed = match pref {
                        Preference::Require => Preference::Prefer,
                        Preference::Prohibit => Preference::Avoid,
                        p => p,
                    };
                    if relaxed != pref {
                        pref = relaxed;
                        if !stack.provides(name).can() || !stack.provides(name).can_avoid() {
                            reasons.push(Reason::Relaxed { name });
                        }
                    }
                }
                let provides = if name == Name::Security {
                    // Stacks of different security are never raced against each other:
                    // asking for security (even as Prefer) means only secure stacks.
                    match pref {
                        Preference::Require | Preference::Prefer => {
                            pref = Preference::Require;
                            stack.provides(name)
                        }
                        _ => {
                            pref = Preference::Prohibit;
                            stack.provides(name)
                        }
                    }
                } else {
                    stack.provides(name)
                };
                let weight = entry.score;
                match pref {
                    Preference::Require if !provides.can() => {
                        violations.push(Violation::Lacks { name })
                    }
                    Preference::Prohibit if !provides.can_avoid() => {
                        violations.push(Violation::Has { name })
                    }
                    Preference::Prefer if provides.can() => {
                        let delta = weight.unwrap_or(PREFER_WEIGHT);
                        score += delta;
                        reasons.push(Reason::Preference { name, pref, delta });
                    }
                    Preference::Avoid if provides == Provides::Always => {
                        let delta = -weight.unwrap_or(AVOID_WEIGHT);
                        score += delta;
                        reasons.push(Reason::Preference { name, pref, delta });
                    }
                    _ => {}
                }
            }
            NameKind::Protocols => {
                let fact = Value::Str(stack.protocol.as_str().into());
                let items = entry.value.items();
                let position = items.iter().position(|v| match v.as_str() {
                    Some("reliable") => stack.provides(Name::Reliability) == Provides::Always,
                    Some("unreliable") => stack.provides(Name::Reliability) == Provides::Never,
                    Some(s) => Protocol::parse(s) == Some(stack.protocol),
                    None => false,
                });
                let admitted = match &entry.value {
                    Value::Not(_) => entry.value.admits(&fact),
                    _ => position.is_some(),
                };
                if !admitted && entry.precedence == Precedence::Required {
                    violations.push(Violation::NotAdmitted {
                        name,
                        wanted: entry.value.clone(),
                        fact: stack.protocol.as_str().into(),
                    });
                    continue;
                }
                match (&entry.value, position) {
                    (Value::Not(_), _) if !admitted => {
                        let delta = -entry.score.unwrap_or(AVOID_WEIGHT);
                        score += delta;
                        reasons.push(Reason::Preference {
                            name,
                            pref: Preference::Avoid,
                            delta,
                        });
                    }
                    (Value::Not(_), _) => {}
                    (_, Some(position)) if entry.precedence > Precedence::None => {
                        let of = items.len();
                        let delta = entry.score.unwrap_or(PREFER_WEIGHT) * (of - position) as f64;
                        score += delta;
                        reasons.push(Reason::Listed {
                            name,
                            position,
                            of,
                            delta,
                        });
                    }
                    _ => {}
                }
            }
            NameKind::Word(_) if name == Name::TransportType => {
                let want_message = entry.value.as_str() != Some("stream");
                let ok = if want_message {
                    stack.provides(Name::PreserveMsgBoundaries).can()
                } else {
                    !stack.is_datagram()
                };
                if !ok && entry.precedence == Precedence::Required {
                    violations.push(Violation::NotAdmitted {
                        name,
                        wanted: entry.value.clone(),
                        fact: if stack.is_datagram() {
                            "a datagram service"
                        } else {
                            "a byte stream"
                        }
                        .to_string(),
                    });
                } else if ok && entry.precedence == Precedence::Requested {
                    let delta = entry.score.unwrap_or(PREFER_WEIGHT);
                    score += delta;
                    reasons.push(Reason::Preference {
                        name,
                        pref: Preference::Prefer,
                        delta,
                    });
                }
            }
            _ => {}
        }
    }
    // Multipath: MPTCP only when asked for (or accepted, for listeners).
    if stack.protocol == Protocol::Mptcp {
        let mode = set.get(&Name::Multipath).and_then(|e| e.value.as_str());
        let multihoming = matches!(
            set.get(&Name::Multihoming).map(|e| &e.value),
            Some(Value::Bool(true))
        );
        match (mode, multihoming) {
            (Some("active"), _) | (None | Some("disabled"), true) => {
                let delta = 2.0 * PREFER_WEIGHT;
                score += delta;
                reasons.push(Reason::Preference {
                    name: Name::Multipath,
                    pref: Preference::Prefer,
                    delta,
                });
            }
            (Some("passive"), _) => {}
            _ => violations.push(Violation::MultipathDisabled),
        }
    }
    if violations.is_empty() {
        Ok((score, reasons))
    } else {
        Err(violations)
    }
}

/// Local bindings for a remote address: one per matching interface when the properties
/// name interfaces or local addresses, else `None` (the OS routes) after checking that
/// some interface can reach the address's family.
fn local_bindings(
    set: &PropertySet,
    remote: IpAddr,
    interfaces: &[Interface],
) -> Result<Vec<Option<LocalBinding>>, Violation> {
    let family = Family::of(&remote);
    let usable = |i: &Interface, a: &IpAddr| {
        i.up && if remote.is_loopback() {
            i.kind == InterfaceKind::Loopback
        } else {
            let link_local = match a {
                IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
                IpAddr::V4(v4) => v4.is_link_local(),
            };
            i.kind != InterfaceKind::Loopback && !link_local || *a == remote
        }
    };
    let explicit = [Name::Interface, Name::LocalIps].iter().any(|n| {
        set.get(n)
            .is_some_and(|e| e.precedence > Precedence::None && !matches!(e.value, Value::Not(_)))
    });
    let mut out = Vec::new();
    for i in interfaces {
        for a in i.addresses_of(family) {
            if !usable(i, &a) {
                continue;
            }
            if !explicit {
                return Ok(vec![None]);
            }
            out.push(Some(LocalBinding {
                interface: i.name.as_str().into(),
                kind: i.kind,
                addr: a,
            }));
            if set.get(&Name::LocalIps).is_none() {
                break; // one address per interface unless addresses were named
            }
        }
    }
    if out.is_empty() {
        // A remote that is one of our own addresses is reached over loopback.
        if !explicit
            && interfaces
                .iter()
                .any(|i| i.addresses.iter().any(|a| a.addr == remote))
        {
            return Ok(vec![None]);
        }
        return Err(Violation::NoLocalAddress { family });
    }
    Ok(out)
}

/// Puts candidates in race order (see the module docs). Pure: the race calls it again
/// when new DNS answers add candidates.
pub fn order(cands: &mut [Candidate], first_family_count: usize) {
    let class = |c: &Candidate| match c.history {
        History::Succeeded { .. } => 0u8,
        History::Unknown => 1,
        History::Failed { .. } => 2,
    };
    let rtt = |c: &Candidate| match c.history {
        History::Succeeded { rtt, .. } => rtt,
        _ => Default::default(),
    };
    cands.sort_by(|a, b| {
        (class(a) == 2)
            .cmp(&(class(b) == 2))
            .then(b.score.total_cmp(&a.score))
            .then(a.stack.index().cmp(&b.stack.index()))
            .then(
                a.local
                    .as_ref()
                    .map(|l| &l.interface)
                    .cmp(&b.local.as_ref().map(|l| &l.interface)),
            )
            .then(class(a).cmp(&class(b)))
            .then(rtt(a).cmp(&rtt(b)))
            .then(rfc6724::sort_key(&a.remote.ip()).cmp(&rfc6724::sort_key(&b.remote.ip())))
    });
    // Interleave families within each run of equal group and class.
    let same_run = |a: &Candidate, b: &Candidate| {
        (class(a) == 2) == (class(b) == 2)
            && a.score == b.score
            && a.stack == b.stack
            && a.local.as_ref().map(|l| &l.interface) == b.local.as_ref().map(|l| &l.interface)
            && class(a) == class(b)
    };
    let mut start = 0;
    while start < cands.len() {
        let mut end = start + 1;
        while end < cands.len() && same_run(&cands[start], &cands[end]) {
            end += 1;
        }
        interleave(&mut cands[start..end], first_family_count);
        start = end;
    }
}

/// RFC 8305 section 4: `first_family_count` of the first family, then alternate.
fn interleave(run: &mut [Candidate], first_family_count: usize) {
    if run.len() < 3 {
        return;
    }
    let first = run[0].family();
    let (a, b): (Vec<Candidate>, Vec<Candidate>) =
        run.iter().cloned().partition(|c| c.family() == first);
    let mut out = Vec::with_capacity(run.len());
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    out.extend(a.by_ref().take(first_family_count));
    loop {
        let (y, x) = (b.next(), a.next());
        if x.is_none() && y.is_none() {
            break;
        }
        out.extend(y);
        out.extend(x);
    }
    for (slot, c) in run.iter_mut().zip(out) {
        *slot = c;
    }
}

/// Finds which explicit properties make the set unsatisfiable: a single one no stack
/// meets, else the first pair no stack meets together, else all hard ones.
fn explain_conflict(entries: &PropertySet, conflicts: &[MergeConflict]) -> Unsatisfiable {
    if let Some(c) = conflicts.first() {
        return Unsatisfiable {
            properties: vec![c.name.to_string()],
            detail: c.to_string(),
        };
    }
    let hard: Vec<(Name, &Entry)> = entries
        .iter()
        .filter(|(_, e)| e.origin != Origin::Default && e.precedence == Precedence::Required)
        .map(|(n, e)| (*n, e))
        .collect();
    let describe = |(n, e): &(Name, &Entry)| match e.as_preference() {
        Some(p) => format!("{n} ({p})"),
        None => format!("{n}={} (required)", e.value),
    };
    let meets = |subset: &[(Name, &Entry)]| {
        let set: PropertySet = subset.iter().map(|(n, e)| (*n, (*e).clone())).collect();
        Stack::ALL
            .iter()
            .any(|s| evaluate_stack(&set, *s, true).is_ok())
    };
    let why = |subset: &[(Name, &Entry)]| {
        let set: PropertySet = subset.iter().map(|(n, e)| (*n, (*e).clone())).collect();
        Stack::ALL
            .iter()
            .filter(|s| s.security == Security::None)
            .filter_map(|s| evaluate_stack(&set, *s, true).err().map(|v| (s, v)))
            .map(|(s, v)| {
                format!(
                    "{s}: {}",
                    v.iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    for h in &hard {
        if !meets(std::slice::from_ref(h)) {
            return Unsatisfiable {
                properties: vec![describe(h)],
                detail: why(std::slice::from_ref(h)),
            };
        }
    }
    for i in 0..hard.len() {
        for j in i + 1..hard.len() {
            let pair = [hard[i], hard[j]];
            if !meets(&pair) {
                return Unsatisfiable {
                    properties: pair.iter().map(describe).collect(),
                    detail: why(&pair),
                };
            }
        }
    }
    Unsatisfiable {
        properties: hard.iter().map(describe).collect(),
        detail: why(&hard),
    }
}

#[cfg(test)]
mod tests;
