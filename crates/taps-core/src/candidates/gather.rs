//! Gathering candidates for one DNS answer: planned stacks × addresses × local bindings,
//! with the PIB policies applied per candidate, then the CIB history added and the race
//! order applied ([`Plan::gather`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use super::bindings::{local_bindings, LocalBinding};
use super::candidate::{Candidate, PrunedCandidate};
use super::evaluate::{evaluate_facts, evaluate_stack, Evaluation};
use super::order::order;
use super::plan::{Plan, PlannedStack, Scored};
use super::reasons::{Reason, Violation};
use crate::net::{Family, Interface};
use crate::policy::pib::PropertySet;
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

impl Plan {
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
