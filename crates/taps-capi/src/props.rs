//! NEAT's JSON properties as taps properties, with NEAT's meaning where the two differ.
//!
//! - `transport` lists the stacks the flow may use, whatever its precedence: NEAT
//!   enabled exactly the listed stacks (`nt_find_enabled_stacks` reads the names and
//!   ignores the precedence), so `{"transport": {"value": "UDP", "precedence": 1}}`
//!   listens and connects over UDP. The list becomes a required set (its order the
//!   preference), which also relaxes RFC 9622's defaults that would rule those stacks
//!   out. Names taps does not know are dropped with a warning, as NEAT dropped them; a
//!   list with no known name fails the flow (NEAT: `NEAT_ERROR_UNABLE`).
//! - Any other property taps cannot take fails the flow when it is required
//!   (precedence 2) and is ignored with a warning otherwise (NEAT ignored properties it
//!   did not know, such as `flow_size_bytes`).
//!
//! A property text is parsed and checked once per context ([`PropSet`], cached by its
//! text); a flow's sets are compiled once per distinct combination, with the
//! preconnection they make (see `flows.rs`).

use serde_json::{json, Value};

/// NEAT's precedence for a required property.
const REQUIRED: i64 = 2;

/// Whether a property entry (object form, or NEAT's list of objects) is required.
fn required(v: &Value) -> bool {
    let prec = |o: &Value| o.get("precedence").and_then(Value::as_i64) == Some(REQUIRED);
    match v {
        Value::Array(items) => items.iter().any(prec),
        other => prec(other),
    }
}

/// The stack names a `transport` entry lists, in order: `"TCP"`, `{"value": "TCP"}`,
/// `{"value": ["SCTP", "TCP"]}` or `[{"value": "SCTP"}, {"value": "TCP"}]`.
fn transport_names(v: &Value) -> Vec<String> {
    fn names(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(items) => items.iter().for_each(|i| names(i, out)),
            Value::Object(o) => {
                if let Some(inner) = o.get("value") {
                    names(inner, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    names(v, &mut out);
    out
}

/// Whether taps knows `name` as a transport.
fn known_transport(name: &str) -> bool {
    let one = json!({"transport": {"value": name, "precedence": REQUIRED}}).to_string();
    taps::TransportProperties::new()
        .merge_neat_json(&one)
        .is_ok()
}

/// What one property contributes.
#[derive(Debug)]
pub(crate) struct Translated {
    /// NEAT-format JSON taps merges, if the property is used.
    pub(crate) merge: Option<String>,
    /// Something the program should hear about (a name dropped, a property ignored).
    pub(crate) warning: Option<String>,
}

/// One property in taps' terms, or why the flow cannot be honoured. Cost: one parse of
/// the property (per listed name for `transport`).
pub(crate) fn entry(key: &str, v: &Value) -> Result<Translated, String> {
    if key == "transport" {
        let names = transport_names(v);
        let (known, unknown): (Vec<String>, Vec<String>) =
            names.iter().cloned().partition(|n| known_transport(n));
        if known.is_empty() {
            return Err(format!(
                "transport {names:?}: no stack taps knows (known: TCP, MPTCP, SCTP, SCTP/UDP, QUIC, UDP, UDP-Lite)"
            ));
        }
        return Ok(Translated {
            merge: Some(json!({"transport": {"value": known, "precedence": REQUIRED}}).to_string()),
            warning: (!unknown.is_empty())
                .then(|| format!("unknown transport {unknown:?} ignored")),
        });
    }
    let one = json!({ key: v }).to_string();
    match taps::TransportProperties::new().merge_neat_json(&one) {
        Ok(_) => Ok(Translated {
            merge: Some(one),
            warning: None,
        }),
        Err(e) if required(v) => Err(format!("required property {key}: {e}")),
        Err(e) => Ok(Translated {
            merge: None,
            warning: Some(format!("ignoring property {key}: {e}")),
        }),
    }
}

/// One `neat_set_property` text, parsed and checked once.
#[derive(Debug)]
pub(crate) struct PropSet {
    /// The text as the program gave it (the cache key).
    pub(crate) text: Box<str>,
    /// Its properties in order.
    pub(crate) entries: Vec<(String, Value)>,
    /// What each property contributes, or why the flow cannot be honoured.
    merges: Result<Vec<String>, String>,
}

impl PropSet {
    /// Parses `text` (a JSON object); `Err` when it is not one. Warnings and errors of
    /// single properties go to `log`, once per distinct text.
    pub(crate) fn parse(text: &str, mut log: impl FnMut(bool, String)) -> Result<PropSet, String> {
        let map = match serde_json::from_str(text) {
            Ok(Value::Object(m)) => m,
            _ => return Err(format!("properties are not a JSON object: {text}")),
        };
        let mut merges = Ok(Vec::new());
        let entries: Vec<(String, Value)> = map.into_iter().collect();
        for (k, v) in &entries {
            match entry(k, v) {
                Ok(t) => {
                    if let Some(w) = t.warning {
                        log(false, w);
                    }
                    if let (Ok(m), Some(one)) = (&mut merges, t.merge) {
                        m.push(one);
                    }
                }
                Err(e) => {
                    log(
                        true,
                        format!("{e}: the flow will fail when it opens or listens"),
                    );
                    if merges.is_ok() {
                        merges = Err(e);
                    }
                }
            }
        }
        Ok(PropSet {
            text: text.into(),
            entries,
            merges,
        })
    }
}

/// The flow's properties (its sets in the order given, a later property replacing an
/// earlier one of the same name) over `base`, or why the flow cannot be honoured.
pub(crate) fn compile(
    sets: &[std::sync::Arc<PropSet>],
    base: taps::TransportProperties,
) -> Result<taps::Properties, String> {
    let mut p = base;
    for set in sets {
        for m in set.merges.as_ref().map_err(Clone::clone)? {
            p = p.merge_neat_json(m).map_err(|e| e.to_string())?;
        }
    }
    p.compile().map_err(|e| e.to_string())
}

/// The properties of `sets` as one list (a later property replaces an earlier one of
/// the same name), for the statistics.
pub(crate) fn merged(sets: &[std::sync::Arc<PropSet>]) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = Vec::new();
    for (k, v) in sets.iter().flat_map(|s| &s.entries) {
        out.retain(|(name, _)| name != k);
        out.push((k.clone(), v.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stacks(entries: &[(&str, Value)]) -> Result<Vec<String>, String> {
        let text = Value::Object(
            entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
        .to_string();
        let set = PropSet::parse(&text, |_, _| {})?;
        let props = compile(
            &[std::sync::Arc::new(set)],
            taps::TransportProperties::new(),
        )?;
        let rt = crate::runtime::runtime();
        let _g = rt.enter();
        let ctx = taps::Context::builder()
            .policy_manager(taps::pm::PolicyManager::Off)
            .build()
            .map_err(|e| e.to_string())?;
        let plan = taps::Preconnection::new(&ctx, props)
            .plan()
            .map_err(|e| e.to_string())?;
        Ok(plan
            .stacks()
            .iter()
            .filter(|s| s.unavailable.is_none())
            .map(|s| s.stack.to_string())
            .collect())
    }

    #[test]
    fn a_listed_transport_is_used_whatever_its_precedence() {
        let udp = json!({"value": "UDP", "precedence": 1});
        assert_eq!(stacks(&[("transport", udp)]).unwrap(), ["UDP"]);
        let datagram = json!({"value": ["UDP", "UDP-Lite"], "precedence": 1});
        assert_eq!(
            stacks(&[("transport", datagram)]).unwrap(),
            ["UDP", "UDP-Lite"]
        );
        let tcp = json!({"value": "TCP", "precedence": 1});
        assert_eq!(stacks(&[("transport", tcp)]).unwrap(), ["TCP"]);
    }

    #[test]
    fn udp_with_security_is_dtls() {
        let s = stacks(&[
            ("transport", json!({"value": "UDP", "precedence": 1})),
            ("security", json!({"value": true, "precedence": 2})),
        ])
        .unwrap();
        assert_eq!(s, ["DTLS/UDP"]);
    }

    #[test]
    fn unknown_transports_are_dropped_and_none_known_fails() {
        let some = json!({"value": ["FOO", "TCP"], "precedence": 2});
        assert_eq!(stacks(&[("transport", some.clone())]).unwrap(), ["TCP"]);
        assert!(entry("transport", &some)
            .unwrap()
            .warning
            .unwrap()
            .contains("FOO"));
        let none = json!({"value": "FOO", "precedence": 2});
        let e = stacks(&[("transport", none)]).unwrap_err();
        assert!(e.contains("FOO"), "{e}");
    }

    #[test]
    fn a_required_property_taps_cannot_take_fails_an_optional_one_is_ignored() {
        let bad = json!({"value": "sometimes", "precedence": 2});
        assert!(stacks(&[("reliability", bad)])
            .unwrap_err()
            .contains("reliability"));
        let optional = json!({"value": "sometimes", "precedence": 1});
        let t = entry("reliability", &optional).unwrap();
        assert!(t.merge.is_none() && t.warning.unwrap().contains("reliability"));
        // A name taps does not know is ignored, as NEAT did, unless required.
        assert!(entry("flow_size_bytes", &json!(1000))
            .unwrap()
            .merge
            .is_none());
        let unknown_required = json!({"value": 1, "precedence": 2});
        assert!(entry("no_such_property", &unknown_required).is_err());
    }
}
