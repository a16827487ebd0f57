//! The Policy Information Base: profiles (applied to the request before candidates are
//! gathered) and policies (applied to each candidate after the CIB lookup), in NEAT's
//! JSON format.
//!
//! A PIB file is one object (or a list of them):
//! `{"uid": "...", "priority": N, "replace_matched": bool, "match": {props},
//!   "properties": P}` where P is an object (one set of properties), a list of objects
//! (alternatives: each becomes its own candidate) or a list of lists (one alternative
//! from each inner list, all combinations).
//!
//! Merge rules (NEAT's): values that intersect combine and their scores add; on conflict
//! the higher precedence wins (the PIB's entry on a tie); two conflicting required values
//! drop the candidate.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;

use crate::properties::{Entry, Name, Origin, Precedence, PropertyError, Value};

/// A property set as the PIB sees it: one entry per name.
pub type PropertySet = BTreeMap<Name, Entry>;

/// Profile or policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// Applied to the application's request, before the CIB lookup.
    Profile,
    /// Applied to each candidate, after the CIB lookup.
    Policy,
}

/// One PIB entry.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Unique id (file name when the file has none).
    pub uid: Arc<str>,
    /// Profile or policy.
    pub kind: RuleKind,
    /// Lower priorities are applied first, so higher ones override them.
    pub priority: i64,
    /// Remove the matched properties before merging.
    pub replace_matched: bool,
    /// Every entry must be present (with an intersecting value) for the rule to apply.
    /// An empty match applies to everything.
    pub matches: Vec<(Name, Value)>,
    /// Alternatives: each is merged on its own, giving one result each.
    pub alternatives: Vec<Vec<(Name, Entry)>>,
    /// Where it was loaded from, for messages.
    pub source: Option<PathBuf>,
}

/// A candidate dropped by a merge: two required values conflicted.
#[derive(Debug, Clone, PartialEq)]
pub struct MergeConflict {
    /// The rule whose entry conflicted.
    pub uid: Arc<str>,
    /// Property name.
    pub name: Name,
    /// The value already required.
    pub have: Value,
    /// The value the rule required.
    pub wanted: Value,
}

impl fmt::Display for MergeConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PIB rule '{}' requires {}={} but {} is required",
            self.uid, self.name, self.wanted, self.have
        )
    }
}

/// Errors loading PIB files.
#[derive(Debug, thiserror::Error)]
pub enum PibError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file is not a valid PIB entry.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// Merges `incoming` into `set` by NEAT's rules. Returns the conflict when two required
/// values disagree (the candidate is then dropped).
pub fn merge_entry(
    set: &mut PropertySet,
    name: Name,
    incoming: &Entry,
    uid: &Arc<str>,
) -> Result<(), MergeConflict> {
    let Some(have) = set.get_mut(&name) else {
        set.insert(name, incoming.clone());
        return Ok(());
    };
    let add = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
    };
    // Defaults never conflict: the PIB replaces them.
    if have.origin == Origin::Default {
        *have = incoming.clone();
        return Ok(());
    }
    match have.value.intersect(&incoming.value) {
        Some(value) => {
            have.value = value;
            have.precedence = have.precedence.max(incoming.precedence);
            have.score = add(have.score, incoming.score);
            Ok(())
        }
        None if have.precedence == Precedence::Required
            && incoming.precedence == Precedence::Required =>
        {
            Err(MergeConflict {
                uid: uid.clone(),
                name,
                have: have.value.clone(),
                wanted: incoming.value.clone(),
            })
        }
        None if have.precedence > incoming.precedence => Ok(()),
        None => {
            *have = incoming.clone();
            Ok(())
        }
    }
}

impl Rule {
    /// Whether every `match` entry is present in `set` or in `facts` with an
    /// intersecting value.
    pub fn applies(&self, set: &PropertySet, facts: &[(Name, Value)]) -> bool {
        self.matches.iter().all(|(name, want)| {
            // A fact about the candidate (its protocol, family, ...) decides alone.
            let mut from_facts = facts.iter().filter(|(n, _)| n == name).peekable();
            if from_facts.peek().is_some() {
                return from_facts.any(|(_, v)| want.intersect(v).is_some());
            }
            set.get(name)
                .is_some_and(|e| want.intersect(&e.value).is_some())
        })
    }

    /// Applies the rule to `set`: one result per alternative (conflicting ones are
    /// returned as errors).
    pub fn apply(&self, set: &PropertySet) -> Vec<Result<PropertySet, MergeConflict>> {
        let mut base = set.clone();
        if self.replace_matched {
            for (name, _) in &self.matches {
                base.remove(name);
            }
        }
        self.alternatives
            .iter()
            .map(|alt| {
                let mut out = base.clone();
                for (name, entry) in alt {
                    merge_entry(&mut out, *name, entry, &self.uid)?;
                }
                Ok(out)
            })
            .collect()
    }

    /// Parses one PIB rule from JSON; `kind` applies when the JSON does not say.
    pub fn from_json(json: &Json, kind: RuleKind, default_uid: &str) -> Result<Rule, String> {
        let Json::Object(obj) = json else {
            return Err("a PIB entry must be a JSON object".into());
        };
        let uid: Arc<str> = match obj.get("uid") {
            Some(Json::String(s)) => s.as_str().into(),
            None => default_uid.into(),
            Some(other) => return Err(format!("uid must be a string, got {other}")),
        };
        let kind = match obj.get("type").and_then(Json::as_str) {
            Some("profile") => RuleKind::Profile,
            Some("policy") => RuleKind::Policy,
            Some(other) => return Err(format!("type must be profile or policy, got {other}")),
            None => kind,
        };
        let priority = match obj.get("priority") {
            None => 0,
            Some(v) => v
                .as_f64()
                .ok_or_else(|| format!("priority must be a number, got {v}"))?
                as i64,
        };
        let replace_matched = match obj.get("replace_matched") {
            None => false,
            Some(Json::Bool(b)) => *b,
            Some(v) => return Err(format!("replace_matched must be true or false, got {v}")),
        };
        let origin = Origin::Pib(uid.clone());
        let prop_err = |e: PropertyError| e.to_string();
        let matches = match obj.get("match") {
            None | Some(Json::Null) => Vec::new(),
            Some(m @ Json::Object(_)) => crate::properties::parse_object(m)
                .map_err(|e| format!("match: {}", prop_err(e)))?
                .into_iter()
                .map(|(n, e)| (n, e.value))
                .collect(),
            Some(v) => return Err(format!("match must be an object, got {v}")),
        };
        let parse_set = |j: &Json| -> Result<Vec<(Name, Entry)>, String> {
            Ok(crate::properties::parse_object(j)
                .map_err(|e| format!("properties: {}", prop_err(e)))?
                .into_iter()
                .map(|(n, mut e)| {
                    e.origin = origin.clone();
                    (n, e)
                })
                .collect())
        };
        let alternatives: Vec<Vec<(Name, Entry)>> = match obj.get("properties") {
            None | Some(Json::Null) => vec![Vec::new()],
            Some(o @ Json::Object(_)) => vec![parse_set(o)?],
            Some(Json::Array(items)) if items.iter().all(Json::is_object) => {
                items.iter().map(parse_set).collect::<Result<_, _>>()?
            }
            Some(Json::Array(groups)) if groups.iter().all(Json::is_array) => {
                // One alternative from each group, every combination.
                let mut combos: Vec<Vec<(Name, Entry)>> = vec![Vec::new()];
                for group in groups {
                    let Json::Array(alts) = group else {
                        unreachable!()
                    };
                    let alts = alts.iter().map(parse_set).collect::<Result<Vec<_>, _>>()?;
                    let mut next = Vec::new();
                    for c in &combos {
                        for a in &alts {
                            next.push(c.iter().chain(a.iter()).cloned().collect());
                        }
                    }
                    combos = next;
                    if combos.len() > MAX_ALTERNATIVES {
                        return Err(format!(
                            "properties expand to more than {MAX_ALTERNATIVES} alternatives"
                        ));
                    }
                }
                combos
            }
            Some(v) => {
                return Err(format!(
                    "properties must be an object, a list of objects or a list of lists, got {v}"
                ))
            }
        };
        Ok(Rule {
            uid,
            kind,
            priority,
            replace_matched,
            matches,
            alternatives,
            source: None,
        })
    }
}

/// Upper bound on the alternatives one rule, or one request, may expand into.
pub const MAX_ALTERNATIVES: usize = 64;

/// The Policy Information Base: profiles and policies, sorted by priority.
#[derive(Debug, Clone, Default)]
pub struct Pib {
    profiles: Vec<Rule>,
    policies: Vec<Rule>,
}

impl Pib {
    /// An empty PIB.
    pub fn empty() -> Pib {
        Pib::default()
    }

    /// The built-in PIB, parsed once per process and shared (an `Arc` clone after the
    /// first call): what contexts without their own PIB use.
    pub fn shared_builtin() -> Arc<Pib> {
        static BUILTIN_PIB: std::sync::OnceLock<Arc<Pib>> = std::sync::OnceLock::new();
        BUILTIN_PIB.get_or_init(|| Arc::new(Pib::builtin())).clone()
    }

    /// The PIB taps uses when none is configured: NEAT's low-latency and scavenger
    /// profiles. Nothing has to be configured for taps to work. Parses the embedded JSON
    /// on every call; [`Pib::shared_builtin`] parses it once.
    pub fn builtin() -> Pib {
        let mut pib = Pib::empty();
        for (uid, text) in BUILTIN {
            let json: Json = serde_json::from_str(text).expect("built-in PIB is valid JSON");
            pib.add(Rule::from_json(&json, RuleKind::Profile, uid).expect("built-in PIB is valid"));
        }
        pib
    }

    /// Adds a rule, keeping priority order.
    pub fn add(&mut self, rule: Rule) {
        let list = match rule.kind {
            RuleKind::Profile => &mut self.profiles,
            RuleKind::Policy => &mut self.policies,
        };
        list.retain(|r| r.uid != rule.uid);
        list.push(rule);
        list.sort_by_key(|r| r.priority);
    }

    /// Profiles, lowest priority first.
    pub fn profiles(&self) -> &[Rule] {
        &self.profiles
    }

    /// Policies, lowest priority first.
    pub fn policies(&self) -> &[Rule] {
        &self.policies
    }

    /// Loads a directory in NEAT's layout: `*.profile` and `*.policy` files in it and in
    /// its `profiles/` and `policies/` subdirectories, plus `*.json` files in those two
    /// subdirectories. Rules are added on top of `self` (a uid replaces an earlier one).
    pub fn load_dir(mut self, dir: &Path) -> Result<Pib, PibError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| PibError::Io { path, source }
        };
        let mut files = Vec::new();
        for (sub, json_kind) in [
            ("", None),
            ("profiles", Some(RuleKind::Profile)),
            ("policies", Some(RuleKind::Policy)),
        ] {
            let d = dir.join(sub);
            if !sub.is_empty() && !d.is_dir() {
                continue;
            }
            for entry in std::fs::read_dir(&d).map_err(io(&d))? {
                let path = entry.map_err(io(&d))?.path();
                let kind = match path.extension().and_then(|e| e.to_str()) {
                    Some("profile") => RuleKind::Profile,
                    Some("policy") => RuleKind::Policy,
                    Some("json") => match json_kind {
                        Some(k) => k,
                        None => continue,
                    },
                    _ => continue,
                };
                files.push((path, kind));
            }
        }
        files.sort_by(|a, b| a.0.cmp(&b.0));
        for (path, kind) in files {
            let text = std::fs::read_to_string(&path).map_err(io(&path))?;
            let json: Json = serde_json::from_str(&text).map_err(|e| PibError::Invalid {
                path: path.clone(),
                reason: format!("malformed JSON at line {}, column {}", e.line(), e.column()),
            })?;
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("rule")
                .to_string();
            let items = match &json {
                Json::Array(items) => items.iter().collect(),
                j => vec![j],
            };
            for (i, item) in items.into_iter().enumerate() {
                let uid = if i == 0 {
                    stem.clone()
                } else {
                    format!("{stem}#{i}")
                };
                let mut rule =
                    Rule::from_json(item, kind, &uid).map_err(|reason| PibError::Invalid {
                        path: path.clone(),
                        reason,
                    })?;
                rule.source = Some(path.clone());
                self.add(rule);
            }
        }
        Ok(self)
    }

    /// Applies every matching profile to `set`, in priority order. Alternatives
    /// multiply; conflicting ones are dropped and reported. At most
    /// [`MAX_ALTERNATIVES`] results are kept.
    pub fn apply_profiles(&self, set: &PropertySet) -> (Vec<PropertySet>, Vec<MergeConflict>) {
        let mut current = vec![set.clone()];
        let mut conflicts = Vec::new();
        for rule in &self.profiles {
            let mut next = Vec::new();
            for s in current {
                if rule.applies(&s, &[]) {
                    for r in rule.apply(&s) {
                        match r {
                            Ok(s) => next.push(s),
                            Err(c) => conflicts.push(c),
                        }
                    }
                } else {
                    next.push(s);
                }
            }
            next.truncate(MAX_ALTERNATIVES);
            current = next;
        }
        (current, conflicts)
    }
}

const BUILTIN: [(&str, &str); 2] = [
    (
        "low_latency",
        r#"{"uid": "low_latency", "description": "NEAT low_latency: interactive capacity profile",
            "match": {"low_latency": {"value": true}},
            "properties": {"connCapacityProfile": {"value": "low-latency/interactive", "precedence": 1}}}"#,
    ),
    (
        "scavenger",
        r#"{"uid": "scavenger", "description": "scavenger traffic avoids multistreaming setups",
            "match": {"connCapacityProfile": {"value": "scavenger"}},
            "properties": {"multistreaming": {"value": false, "precedence": 1}}}"#,
    ),
];
