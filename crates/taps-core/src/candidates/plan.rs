//! The plan of a preconnection: which stacks the properties (after the PIB profiles)
//! allow, with which base score and why, and which they rule out. Computed once per
//! preconnection by [`Plan::new`]; gathering per DNS answer is in `gather`.

use std::collections::HashMap;
use std::sync::Arc;

use super::conflict::explain_conflict;
use super::evaluate::{evaluate_facts, evaluate_stack, Evaluation};
use super::reasons::{Reason, Unsatisfiable, Violation};
use crate::failure::Unavailable;
use crate::policy::{Pib, PropertySet};
use crate::properties::{Name, Properties, Value};
use crate::stack::Stack;
use crate::Family;

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
    pub unavailable: Option<Unavailable>,
}

/// A stack the properties rule out, and why.
#[derive(Debug, Clone)]
pub struct PrunedStack {
    /// The stack.
    pub stack: Stack,
    /// Every reason.
    pub violations: Vec<Violation>,
}

/// Which stacks the executing side can run; others are still ranked but marked.
#[derive(Debug, Clone, Default)]
pub struct Availability {
    unavailable: HashMap<Stack, Unavailable>,
}

impl Availability {
    /// Everything available (for showing what the policy ranks). Allocates nothing.
    pub fn all() -> Availability {
        Availability::default()
    }

    /// Marks `stack` as unavailable for `reason`. One map insertion.
    pub fn without(mut self, stack: Stack, reason: Unavailable) -> Availability {
        self.unavailable.insert(stack, reason);
        self
    }

    /// Why `stack` cannot run, if it cannot. One map lookup.
    pub fn reason(&self, stack: Stack) -> Option<Unavailable> {
        self.unavailable.get(&stack).copied()
    }
}

/// The allowed stacks for one property set, computed once and shared by every flow of a
/// preconnection. Holds no lock and no cache: cloning copies the planned stacks (their
/// property sets and the PIB are shared).
#[derive(Debug, Clone)]
pub struct Plan {
    pub(super) stacks: Vec<PlannedStack>,
    pruned: Vec<PrunedStack>,
    pub(super) pib: Arc<Pib>,
    pub(super) first_family_count: usize,
    only_family: Option<Family>,
}

impl Plan {
    /// Applies the PIB profiles and evaluates every stack. Fails, naming the conflicting
    /// properties, when no stack is left. Cost: every stack evaluated against every
    /// property set the profiles yield (twice when only relaxed defaults let a stack
    /// through); paid once per preconnection.
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
            for (stack, r) in evaluate_all(&set) {
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
        let only_family = only_family(&stacks, &pib);
        Ok(Plan {
            stacks,
            pruned,
            pib,
            first_family_count: 1,
            only_family,
        })
    }

    /// The one address family every candidate must have, when the properties (after
    /// profiles) require one (`ip_version` required, or the other one prohibited) and no
    /// PIB policy names `ip_version` (a policy could change it per candidate). A race
    /// then neither looks up nor waits for the other family's addresses. Free.
    pub fn only_family(&self) -> Option<Family> {
        self.only_family
    }

    /// Sets how many addresses of the first family go before interleaving (RFC 8305, 1 or
    /// 2). Free.
    pub fn with_first_family_count(mut self, n: usize) -> Plan {
        self.first_family_count = n.max(1);
        self
    }

    /// First Address Family Count in use. Free.
    pub fn first_family_count(&self) -> usize {
        self.first_family_count
    }

    /// The allowed stacks, best first. Free.
    pub fn stacks(&self) -> &[PlannedStack] {
        &self.stacks
    }

    /// The stacks ruled out, with reasons. Free.
    pub fn pruned(&self) -> &[PrunedStack] {
        &self.pruned
    }
}

/// The one family the planned stacks admit, if only one: each stack's property set
/// checked against a candidate fact of each family. `None` when a policy of `pib` reads
/// or sets `ip_version` (it could admit what the set alone does not), or when both (or
/// neither) pass.
fn only_family(stacks: &[PlannedStack], pib: &Pib) -> Option<Family> {
    let policies_decide = pib.policies().iter().any(|rule| {
        rule.matches.iter().any(|(n, _)| *n == Name::IpVersion)
            || rule
                .alternatives
                .iter()
                .any(|alt| alt.iter().any(|(n, _)| *n == Name::IpVersion))
    });
    if policies_decide {
        return None;
    }
    let admits = |family: Family| {
        let fact = [(Name::IpVersion, Value::Int(family.version()))];
        stacks.iter().any(|p| evaluate_facts(&p.set, &fact).is_ok())
    };
    match (admits(Family::V6), admits(Family::V4)) {
        (true, false) => Some(Family::V6),
        (false, true) => Some(Family::V4),
        _ => None,
    }
}

/// Every stack evaluated against `set`; when none passes, again with the defaults
/// relaxed: defaults yield to what the application asked for explicitly.
fn evaluate_all(set: &PropertySet) -> Vec<(Stack, Evaluation)> {
    let results: Vec<_> = Stack::ALL
        .iter()
        .map(|s| (*s, evaluate_stack(set, *s, false)))
        .collect();
    if results.iter().any(|(_, r)| r.is_ok()) {
        return results;
    }
    Stack::ALL
        .iter()
        .map(|s| (*s, evaluate_stack(set, *s, true)))
        .collect()
}
