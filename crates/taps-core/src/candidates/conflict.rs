//! Explaining an unsatisfiable property set: which explicit properties conflict.

use super::evaluate::evaluate_stack;
use super::reasons::Unsatisfiable;
use crate::policy::MergeConflict;
use crate::policy::PropertySet;
use crate::properties::{Entry, Name, Origin, Precedence, Preference};
use crate::stack::{Security, Stack};

/// Finds which explicit properties make the set unsatisfiable: a single one no stack
/// meets, else the first pair no stack meets together, else all hard ones.
pub(super) fn explain_conflict(
    entries: &PropertySet,
    conflicts: &[MergeConflict],
) -> Unsatisfiable {
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
    if let Some(u) = security_not_requested(entries, &hard) {
        return u;
    }
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

/// An explicit property, as the error names it.
fn describe((n, e): &(Name, &Entry)) -> String {
    match e.as_preference() {
        Some(p) => format!("{n} ({p})"),
        None => format!("{n}={} (required)", e.value),
    }
}

/// The property set of `subset` alone.
fn set_of(subset: &[(Name, &Entry)]) -> PropertySet {
    subset.iter().map(|(n, e)| (*n, (*e).clone())).collect()
}

/// Whether some stack meets every property of `subset`.
fn meets(subset: &[(Name, &Entry)]) -> bool {
    let set = set_of(subset);
    Stack::ALL
        .iter()
        .any(|s| evaluate_stack(&set, *s, true).is_ok())
}

/// What each unsecured stack lacks for `subset`.
fn why(subset: &[(Name, &Entry)]) -> String {
    let set = set_of(subset);
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
}

/// Every explicit property can be met, but only by a secure stack, and security was not
/// asked for: without it only unsecured stacks run (stacks of different security are
/// never raced), so say that, not which plain stack lacks what.
fn security_not_requested(entries: &PropertySet, hard: &[(Name, &Entry)]) -> Option<Unsatisfiable> {
    let security_asked = entries
        .get(&Name::Security)
        .and_then(Entry::as_preference)
        .is_some_and(|p| matches!(p, Preference::Require | Preference::Prefer));
    if security_asked || hard.is_empty() {
        return None;
    }
    let set = set_of(hard);
    let meeting: Vec<&Stack> = Stack::ALL
        .iter()
        .filter(|s| evaluate_stack(&set, **s, true).is_ok())
        .collect();
    if meeting.is_empty() || meeting.iter().any(|s| s.security == Security::None) {
        return None;
    }
    let names: Vec<String> = meeting.iter().map(|s| s.to_string()).collect();
    let one = names.len() == 1;
    Some(Unsatisfiable {
        properties: hard
            .iter()
            .map(describe)
            .chain(["security (not requested)".to_string()])
            .collect(),
        detail: format!(
            "only {} can meet them, and {} always secured: require (or prefer) security to use {}; {}",
            names.join(", "),
            if one { "it is" } else { "they are" },
            if one { "it" } else { "them" },
            why(hard)
        ),
    })
}
