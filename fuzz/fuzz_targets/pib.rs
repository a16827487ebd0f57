//! PIB profile and policy files: a file's JSON (one rule or an array of rules) read as
//! profiles or policies (the first byte chooses), added to the built-in PIB and applied to
//! the default properties. Bad rules are errors, never panics; profile expansion stays
//! within its bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use taps_core::policy::MAX_ALTERNATIVES;
use taps_core::policy::{Pib, Rule, RuleKind};
use taps_core::properties::Properties;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let kind = match first & 1 {
        0 => RuleKind::Profile,
        _ => RuleKind::Policy,
    };
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(rest) else {
        return;
    };
    let items: Vec<&serde_json::Value> = match &json {
        serde_json::Value::Array(items) => items.iter().collect(),
        j => vec![j],
    };
    let mut pib = Pib::builtin();
    let set = Properties::defaults().entries().clone();
    for (i, item) in items.into_iter().enumerate().take(64) {
        if let Ok(rule) = Rule::from_json(item, kind, &format!("fuzz#{i}")) {
            let _ = rule.applies(&set, &[]);
            let _ = rule.apply(&set);
            pib.add(rule);
        }
    }
    let (sets, _conflicts) = pib.apply_profiles(&set);
    assert!(
        sets.len() <= MAX_ALTERNATIVES,
        "{} alternatives",
        sets.len()
    );
});
