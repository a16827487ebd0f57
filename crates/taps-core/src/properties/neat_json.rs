//! NEAT's JSON property format, parsed onto the taps model.
//!
//! `{"name": {"value": V, "precedence": 1|2, "score": f}}` where V is a value, a list of
//! values, a range `{"start": a, "end": b}` or `null` (any). Shorthands accepted as well:
//! `"name": V` (requested), and for service properties a preference word as the value
//! (`"reliability": "require"`). `{"not": V}` stores an Avoid/Prohibit of V.
//!
//! This runs once per property set: the result is compiled and shared afterwards.

use serde_json::Value as Json;

use super::names::NameKind;
use super::{Entry, Name, Origin, Precedence, Preference, PropertyError, Value};

/// Parses a whole property object.
pub(crate) fn parse(text: &str) -> Result<Vec<(Name, Entry)>, PropertyError> {
    let json: Json = serde_json::from_str(text).map_err(|e| PropertyError::Json {
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    })?;
    parse_object(&json)
}

/// Parses an already-decoded JSON property object (PIB files use this).
pub(crate) fn parse_object(json: &Json) -> Result<Vec<(Name, Entry)>, PropertyError> {
    let Json::Object(map) = json else {
        return Err(PropertyError::Invalid {
            name: "(top level)".into(),
            reason: format!("expected an object of properties, got {}", kind_of(json)),
        });
    };
    map.iter()
        .map(|(k, v)| Ok((lookup(k)?, parse_entry(lookup(k)?, v)?)))
        .collect()
}

/// Finds a property by name, with a clear error for unknown ones.
pub(crate) fn lookup(key: &str) -> Result<Name, PropertyError> {
    if key.starts_with("so/") {
        return Err(PropertyError::Invalid {
            name: key.into(),
            reason: "raw socket options (so/<level>/<optname>) are not supported; use a transport property".into(),
        });
    }
    Name::parse(key).ok_or_else(|| PropertyError::Unknown(key.into()))
}

/// Parses one property's JSON (full form or shorthand).
pub(crate) fn parse_entry(name: Name, json: &Json) -> Result<Entry, PropertyError> {
    let invalid = |reason: String| PropertyError::Invalid {
        name: name.as_str().into(),
        reason,
    };
    // NEAT's list form: `[{"value": "SCTP", ...}, {"value": "TCP", ...}]` means any of
    // these, earlier (or higher-scored) first.
    if let Json::Array(items) = json {
        if !items.is_empty() && items.iter().all(|i| i.get("value").is_some()) {
            let mut parts = items
                .iter()
                .map(|i| parse_entry(name, i))
                .collect::<Result<Vec<_>, _>>()?;
            if parts.iter().all(|p| p.score.is_some()) {
                parts.sort_by(|a, b| b.score.unwrap_or(0.0).total_cmp(&a.score.unwrap_or(0.0)));
            }
            let precedence = parts
                .iter()
                .map(|p| p.precedence)
                .max()
                .unwrap_or(Precedence::Requested);
            let value = Value::List(
                parts
                    .into_iter()
                    .flat_map(|p| p.value.items().to_vec())
                    .collect(),
            );
            name.validate(&value)?;
            return Ok(Entry::new(value, precedence));
        }
    }
    let (raw_value, precedence, score) = match json {
        Json::Object(obj) if obj.contains_key("value") || obj.contains_key("precedence") => {
            for key in obj.keys() {
                if !matches!(
                    key.as_str(),
                    "value" | "precedence" | "score" | "description" | "evaluated" | "banned"
                ) {
                    return Err(invalid(format!(
                        "unexpected key '{key}' (expected value, precedence, score)"
                    )));
                }
            }
            let precedence = match obj.get("precedence") {
                None => Precedence::Requested,
                Some(Json::Number(n)) if n.as_u64().is_some_and(|n| n <= 2) => {
                    Precedence::from_number(n.as_u64().unwrap_or(1))
                }
                Some(other) => {
                    return Err(invalid(format!(
                        "precedence must be 0, 1 or 2, got {other}"
                    )))
                }
            };
            let score = match obj.get("score") {
                None | Some(Json::Null) => None,
                Some(Json::Number(n)) => n.as_f64(),
                Some(other) => return Err(invalid(format!("score must be a number, got {other}"))),
            };
            (obj.get("value").unwrap_or(&Json::Null), precedence, score)
        }
        other => (other, Precedence::Requested, None),
    };
    let (value, precedence) = match (name.kind(), raw_value) {
        // A preference word stands for value + precedence on service properties.
        // `"true"`/`"false"` written as text (from a shell or a config template) mean
        // the booleans.
        (NameKind::Service | NameKind::Flag, Json::String(s))
            if s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("false") =>
        {
            (Value::Bool(s.eq_ignore_ascii_case("true")), precedence)
        }
        (NameKind::Service, Json::String(s)) => match Preference::parse(s) {
            Some(pref) => {
                let (v, p) = pref.to_neat();
                (Value::Bool(v), p)
            }
            None => {
                return Err(invalid(format!(
                    "expected true, false or a preference (require, prefer, noPreference, avoid, prohibit), got \"{s}\""
                )))
            }
        },
        // `"multipath": true` reads as "use multipath" (active), false as disabled.
        (NameKind::Word(_), Json::Bool(b)) if name == Name::Multipath => {
            let mode = if *b { "active" } else { "disabled" };
            (Value::Str(mode.into()), precedence)
        }
        (NameKind::Word(words), v) => (normalize_words(to_value(v).map_err(invalid)?, words), precedence),
        (NameKind::IpVersion, v) => (ip_versions(to_value(v).map_err(invalid)?), precedence),
        (_, v) => (to_value(v).map_err(invalid)?, precedence),
    };
    name.validate(&value)?;
    Ok(Entry {
        value,
        precedence,
        score,
        origin: Origin::Application,
    })
}

/// A word written in another case or with `_` for `-` (`"Active"`, `"round_robin"`) as
/// the word it stands for; anything else unchanged (validation reports it).
fn normalize_words(value: Value, words: &[&str]) -> Value {
    value.map_leaves(&|leaf| match leaf {
        Value::Str(s) => {
            let canon = s.to_ascii_lowercase().replace('_', "-");
            match words.contains(&canon.as_str()) {
                true => Value::Str(canon),
                false => Value::Str(s),
            }
        }
        other => other,
    })
}

/// `"4"`, `"IPv6"`, `"v4"` (text) as the numbers 4 and 6 the IP version takes; anything
/// else unchanged (validation reports it).
fn ip_versions(value: Value) -> Value {
    value.map_leaves(&|leaf| match leaf {
        Value::Str(s) => match s
            .to_ascii_lowercase()
            .trim_start_matches("ip")
            .trim_start_matches('v')
        {
            "4" => Value::Int(4),
            "6" => Value::Int(6),
            _ => Value::Str(s),
        },
        other => other,
    })
}

fn to_value(json: &Json) -> Result<Value, String> {
    Ok(match json {
        Json::Null => Value::Any,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        Json::String(s) => Value::Str(s.clone()),
        Json::Array(items) => {
            let items = items.iter().map(to_value).collect::<Result<Vec<_>, _>>()?;
            if items.iter().any(|v| matches!(v, Value::List(_))) {
                return Err("nested lists are not a property value".into());
            }
            Value::List(items)
        }
        Json::Object(obj) => {
            if let (Some(a), Some(b)) = (obj.get("start"), obj.get("end")) {
                match (a.as_f64(), b.as_f64()) {
                    (Some(a), Some(b)) if a <= b && obj.len() == 2 => Value::Range(a, b),
                    _ => return Err(format!("a range needs numeric start <= end, got {json}")),
                }
            } else if let (Some(v), 1) = (obj.get("not"), obj.len()) {
                Value::Not(Box::new(to_value(v)?))
            } else {
                return Err(format!(
                    "expected a value, a list, {{\"start\",\"end\"}} or {{\"not\"}}, got {json}"
                ));
            }
        }
    })
}

fn kind_of(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "an object",
    }
}

/// serde_json appends " at line L column C"; we report those separately.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}
