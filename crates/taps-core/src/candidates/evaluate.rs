//! Evaluating a property set: against a protocol stack ([`evaluate_stack`], once per
//! stack when planning) and against the facts of one candidate ([`evaluate_facts`], per
//! address and local binding when gathering). Both return a score with its reasons, or
//! every violation.

use super::reasons::{Reason, Violation};
use crate::policy::PropertySet;
use crate::properties::{Entry, Name, NameKind, Origin, Precedence, Preference, Protocol, Value};
use crate::stack::{Provides, Stack};

/// Weight of a satisfied Prefer when the entry gives no score.
const PREFER_WEIGHT: f64 = 1.0;
/// Weight of a matched Avoid: a tie-break between otherwise equal stacks.
const AVOID_WEIGHT: f64 = 0.1;

/// What an evaluation found: a score with its reasons, or every violation.
pub(super) type Evaluation = Result<(f64, Vec<Reason>), Vec<Violation>>;

/// The running result of one evaluation.
#[derive(Default)]
struct Tally {
    score: f64,
    reasons: Vec<Reason>,
    violations: Vec<Violation>,
}

impl Tally {
    /// Adds `delta` to the score because of `pref` on `name`.
    fn prefer(&mut self, name: Name, pref: Preference, delta: f64) {
        self.score += delta;
        self.reasons.push(Reason::Preference { name, pref, delta });
    }

    fn finish(self) -> Evaluation {
        if self.violations.is_empty() {
            Ok((self.score, self.reasons))
        } else {
            Err(self.violations)
        }
    }
}

/// Evaluates the stack-level properties of `set` against `stack`. With
/// `relax_defaults`, RFC 9622 default Require/Prohibit count as Prefer/Avoid.
pub(super) fn evaluate_stack(set: &PropertySet, stack: Stack, relax_defaults: bool) -> Evaluation {
    let mut tally = Tally::default();
    for (&name, entry) in set {
        match name.kind() {
            NameKind::Service => service(&mut tally, name, entry, stack, relax_defaults),
            NameKind::Protocols => protocols(&mut tally, name, entry, stack),
            NameKind::Word(_) if name == Name::TransportType => {
                transport_type(&mut tally, name, entry, stack)
            }
            _ => {}
        }
    }
    if stack.protocol == Protocol::Mptcp {
        multipath(&mut tally, set);
    } else if let Some(e) = set
        .get(&Name::Multipath)
        .filter(|e| e.precedence == Precedence::Required && e.value.as_str() == Some("active"))
    {
        // Required active multipath rules out every single-path stack.
        tally.violations.push(Violation::NotAdmitted {
            name: Name::Multipath,
            wanted: e.value.clone(),
            fact: format!("{} (one path only)", stack.protocol.as_str()),
        });
    }
    if !matches!(stack.protocol, Protocol::Mptcp | Protocol::Sctp) {
        if let Some(e) = set.get(&Name::Multihoming).filter(|e| {
            e.precedence == Precedence::Required && matches!(e.value, Value::Bool(true))
        }) {
            // NEAT's multihoming (several local addresses for one connection) is a
            // service of SCTP and MPTCP only.
            tally.violations.push(Violation::NotAdmitted {
                name: Name::Multihoming,
                wanted: e.value.clone(),
                fact: format!("{} (one path only)", stack.protocol.as_str()),
            });
        }
    }
    tally.finish()
}

/// A selection property (Require/Prefer/Avoid/Prohibit of a service the stack provides
/// always, optionally or never).
fn service(tally: &mut Tally, name: Name, entry: &Entry, stack: Stack, relax_defaults: bool) {
    let Some(mut pref) = entry.as_preference() else {
        return;
    };
    if entry.origin == Origin::Default && name == Name::Multistreaming {
        // RFC 9622's default Prefer counts only when the application asks for it: a
        // single flow gains nothing from streams, and SCTP over UDP costs ~4x TCP's setup
        // CPU and runs bulk transfers slower (README, "Which protocol leads").
        return;
    }
    if relax_defaults && entry.origin == Origin::Default {
        pref = relax(tally, name, pref, stack);
    }
    if name == Name::Security {
        // Stacks of different security are never raced against each other: asking for
        // security (even as Prefer) means only secure stacks.
        pref = match pref {
            Preference::Require | Preference::Prefer => Preference::Require,
            _ => Preference::Prohibit,
        };
    }
    let provides = stack.provides(name);
    match pref {
        Preference::Require if !provides.can() => tally.violations.push(Violation::Lacks { name }),
        Preference::Prohibit if !provides.can_avoid() => {
            tally.violations.push(Violation::Has { name })
        }
        Preference::Prefer if provides.can() => {
            tally.prefer(name, pref, entry.score.unwrap_or(PREFER_WEIGHT))
        }
        Preference::Avoid if provides == Provides::Always => {
            tally.prefer(name, pref, -entry.score.unwrap_or(AVOID_WEIGHT))
        }
        _ => {}
    }
}

/// A default Require/Prohibit as Prefer/Avoid, noting it when `stack` could not have met
/// it.
fn relax(tally: &mut Tally, name: Name, pref: Preference, stack: Stack) -> Preference {
    let relaxed = match pref {
        Preference::Require => Preference::Prefer,
        Preference::Prohibit => Preference::Avoid,
        p => p,
    };
    if relaxed != pref && (!stack.provides(name).can() || !stack.provides(name).can_avoid()) {
        tally.reasons.push(Reason::Relaxed { name });
    }
    relaxed
}

/// A list of protocols (or `reliable`/`unreliable`), or a `Not` of one: required lists
/// admit or drop the stack, requested ones score it by its position.
fn protocols(tally: &mut Tally, name: Name, entry: &Entry, stack: Stack) {
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
        tally.violations.push(Violation::NotAdmitted {
            name,
            wanted: entry.value.clone(),
            fact: stack.protocol.as_str().into(),
        });
        return;
    }
    match (&entry.value, position) {
        (Value::Not(_), _) if !admitted => tally.prefer(
            name,
            Preference::Avoid,
            -entry.score.unwrap_or(AVOID_WEIGHT),
        ),
        (Value::Not(_), _) => {}
        (_, Some(position)) if entry.precedence > Precedence::None => {
            let of = items.len();
            let delta = entry.score.unwrap_or(PREFER_WEIGHT) * (of - position) as f64;
            tally.score += delta;
            tally.reasons.push(Reason::Listed {
                name,
                position,
                of,
                delta,
            });
        }
        _ => {}
    }
}

/// The transport type: `stream` wants a byte stream, anything else message boundaries.
fn transport_type(tally: &mut Tally, name: Name, entry: &Entry, stack: Stack) {
    let want_message = entry.value.as_str() != Some("stream");
    let ok = if want_message {
        stack.provides(Name::PreserveMsgBoundaries).can()
    } else {
        !stack.is_datagram()
    };
    if !ok && entry.precedence == Precedence::Required {
        tally.violations.push(Violation::NotAdmitted {
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
        tally.prefer(
            name,
            Preference::Prefer,
            entry.score.unwrap_or(PREFER_WEIGHT),
        );
    }
}

/// Multipath, for an MPTCP stack: used only when asked for (or accepted, for listeners).
fn multipath(tally: &mut Tally, set: &PropertySet) {
    let mode = set.get(&Name::Multipath).and_then(|e| e.value.as_str());
    let multihoming = matches!(
        set.get(&Name::Multihoming).map(|e| &e.value),
        Some(Value::Bool(true))
    );
    match (mode, multihoming) {
        (Some("active"), _) | (None | Some("disabled"), true) => {
            tally.prefer(Name::Multipath, Preference::Prefer, 2.0 * PREFER_WEIGHT)
        }
        (Some("passive"), _) => {}
        // Multipath left at its default (disabled) while the application names MPTCP in
        // `transport`: naming the protocol is asking for it, so the default yields.
        (None, false) if lists_mptcp(set) => tally.reasons.push(Reason::Implied {
            name: Name::Multipath,
            by: Name::Transport,
        }),
        _ => tally.violations.push(Violation::MultipathDisabled),
    }
}

/// Whether a `transport` entry set by the application (or a PIB rule) names MPTCP as
/// wanted (not in a `not`).
fn lists_mptcp(set: &PropertySet) -> bool {
    let Some(entry) = set.get(&Name::Transport) else {
        return false;
    };
    entry.origin != Origin::Default
        && entry.precedence > Precedence::None
        && !matches!(entry.value, Value::Not(_))
        && entry
            .value
            .items()
            .iter()
            .any(|v| v.as_str().and_then(Protocol::parse) == Some(Protocol::Mptcp))
}

/// Checks the address-level properties (family, interface, local and remote address,
/// port, host name) against the candidate's facts.
pub(super) fn evaluate_facts(set: &PropertySet, facts: &[(Name, Value)]) -> Evaluation {
    let mut tally = Tally::default();
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
        let negative = matches!(entry.value, Value::Not(_));
        // A candidate has several facts of one name (an interface's name and kind): a
        // wanted value needs one of them, an unwanted one (`not`) must match none.
        let admitted = match negative {
            false => mine.iter().any(|v| entry.value.admits(v)),
            true => mine.iter().all(|v| entry.value.admits(v)),
        };
        match (entry.precedence, admitted) {
            (Precedence::Required, false) => tally.violations.push(Violation::NotAdmitted {
                name,
                wanted: entry.value.clone(),
                fact: mine
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join("/"),
            }),
            (Precedence::Requested, true) if !negative => tally.prefer(
                name,
                Preference::Prefer,
                entry.score.unwrap_or(PREFER_WEIGHT),
            ),
            (Precedence::Requested, false) if negative => tally.prefer(
                name,
                Preference::Avoid,
                -entry.score.unwrap_or(AVOID_WEIGHT),
            ),
            _ => {}
        }
    }
    tally.finish()
}
