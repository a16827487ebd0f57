//! Gathering candidates for one DNS answer: planned stacks × addresses × local bindings,
//! with the PIB policies applied per candidate ([`Plan::score_answer`]), then the CIB
//! history added and the race order applied ([`Plan::gather_scored`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use super::bindings::{foreign_local_ip, local_bindings, LocalBinding};
use super::candidate::{Candidate, PrunedCandidate};
use super::evaluate::{evaluate_facts, evaluate_stack, Evaluation};
use super::order::order;
use super::plan::{Plan, PlannedStack};
use super::reasons::{Reason, Violation};
use crate::net::{Family, Interface};
use crate::policy::PropertySet;
use crate::policy::{Cib, History};
use crate::properties::{Name, Value};
use crate::stack::{Security, Stack};

/// What [`Plan::gather`] returns.
#[derive(Debug, Clone, Default)]
pub struct Gathered {
    /// Kept candidates, in race order.
    pub candidates: Vec<Candidate>,
    /// Dropped candidates, with reasons.
    pub pruned: Vec<PrunedCandidate>,
}

/// The candidates of one DNS answer before the CIB's history is added: everything
/// [`Plan::gather`] computes that depends only on the plan, the endpoint, the port, the
/// addresses and the interfaces, with those inputs kept to recognise the same answer.
///
/// Scoring is the costly part of gathering and is the same for every flow of a
/// preconnection to one endpoint. Callers that gather the same answer many times keep
/// the last `ScoredAnswer` (one per plan: it is only valid for the plan that made it),
/// reuse it with [`Plan::gather_scored`] while [`ScoredAnswer::matches`] holds, and
/// score again with [`Plan::score_answer`] when it does not. The core keeps no such
/// cache itself. Cloning copies the candidate lists (their reasons are shared).
#[derive(Debug, Clone)]
pub struct ScoredAnswer {
    endpoint: Arc<str>,
    port: u16,
    addrs: Vec<IpAddr>,
    interfaces: Arc<Vec<Interface>>,
    candidates: Vec<Candidate>,
    pruned: Vec<PrunedCandidate>,
}

impl ScoredAnswer {
    /// Whether this was scored for `endpoint`, `port`, `addrs` (in this order) and this
    /// very interface list (the same `Arc`: the CIB replaces the list when interfaces
    /// change). Cost: compares the strings and the address lists.
    pub fn matches(
        &self,
        endpoint: &str,
        port: u16,
        addrs: &[IpAddr],
        interfaces: &Arc<Vec<Interface>>,
    ) -> bool {
        self.port == port
            && *self.endpoint == *endpoint
            && self.addrs == addrs
            && Arc::ptr_eq(&self.interfaces, interfaces)
    }

    /// The kept candidates, history unknown, in no particular order. Free.
    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }

    /// The dropped candidates, with reasons. Free.
    pub fn pruned(&self) -> &[PrunedCandidate] {
        &self.pruned
    }
}

impl Plan {
    /// Candidates for `addrs` of `endpoint` (named `host:port`), in race order, each with
    /// its CIB history. Cost: [`Plan::score_answer`] then [`Plan::gather_scored`] on
    /// every call; callers gathering the same answer repeatedly keep a [`ScoredAnswer`]
    /// instead.
    pub fn gather(
        &self,
        endpoint: &Arc<str>,
        port: u16,
        addrs: &[IpAddr],
        cib: &Cib,
        now: Instant,
    ) -> Gathered {
        let scored = self.score_answer(endpoint, port, addrs, cib.interfaces());
        self.gather_scored(&scored, endpoint, cib, now)
    }

    /// The candidates of `scored` (made by this plan for `endpoint`) in race order, each
    /// with its CIB history. Cost: clones the candidates, one CIB lookup each, a sort.
    pub fn gather_scored(
        &self,
        scored: &ScoredAnswer,
        endpoint: &Arc<str>,
        cib: &Cib,
        now: Instant,
    ) -> Gathered {
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

    /// Scores one DNS answer: every planned stack × address × local binding on
    /// `interfaces`, history left unknown. Cost: the PIB policies matched per candidate,
    /// a stack re-evaluated only when a policy applied, the address-level properties
    /// checked per candidate.
    pub fn score_answer(
        &self,
        endpoint: &Arc<str>,
        port: u16,
        addrs: &[IpAddr],
        interfaces: Arc<Vec<Interface>>,
    ) -> ScoredAnswer {
        let host = endpoint.rsplit_once(':').map_or(&**endpoint, |(h, _)| h);
        let mut candidates = Vec::new();
        let mut pruned = Vec::new();
        for planned in &self.stacks {
            let foreign = foreign_local_ip(&planned.set, &interfaces);
            for &ip in addrs {
                let remote = SocketAddr::new(ip, port);
                let bound = match foreign {
                    Some(addr) => Err(Violation::NotLocal { addr }),
                    None => local_bindings(&planned.set, ip, &interfaces),
                };
                let bindings = match bound {
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
        ScoredAnswer {
            endpoint: endpoint.clone(),
            port,
            addrs: addrs.to_vec(),
            interfaces,
            candidates,
            pruned,
        }
    }

    /// Scores one candidate: applies the PIB policies that match its facts, then
    /// evaluates the (possibly changed) property set against its stack and facts.
    fn candidate(
        &self,
        planned: &PlannedStack,
        remote: SocketAddr,
        local: Option<LocalBinding>,
        host: &str,
    ) -> Evaluation {
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
            Value::Int(Family::of(&remote.ip()).version()),
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
