//! Evaluating a property set: against a protocol stack ([`evaluate_stack`], once per
//! stack when planning) and against the facts of one candidate ([`evaluate_facts`], per
//! address and local binding when gathering). Both return a score with its reasons, or
//! every violation.

use super::reasons::{Reason, Violation};
use crate::policy::pib::PropertySet;
use crate::properties::{Name, NameKind, Origin, Precedence, Preference, Protocol, Value};
use crate::stack::{Provides, Stack};

/// Weight of a satisfied Prefer when the entry gives no score.
const PREFER_WEIGHT: f64 = 1.0;
/// Weight of a matched Avoid: a tie-break between otherwise equal stacks.
const AVOID_WEIGHT: f64 = 0.1;

/// What an evaluation found: a score with its reasons, or every violation.
pub(super) type Evaluation = Result<(f64, Vec<Reason>), Vec<Violation>>;

/// port, host name) against the candidate's facts.
pub(super) fn evaluate_facts(
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
pub(super) fn evaluate_stack(
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
