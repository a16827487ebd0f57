//! Named instants a worker records while it runs (the measured window opening and
//! closing, a taps context being built), returned with its result so that the
//! orchestrator and the tests can check what a measured window covers: e.g. that the
//! taps client of experiment 1 pays its context inside the window, as the raw client
//! pays its first socket there.

#![forbid(unsafe_code)]

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// The measured window opened.
pub(crate) const WINDOW_OPEN: &str = "window-open";
/// The measured window closed.
pub(crate) const WINDOW_CLOSE: &str = "window-close";
/// A taps context started being built.
pub(crate) const CONTEXT_START: &str = "context-start";
/// A taps context was built.
pub(crate) const CONTEXT_END: &str = "context-end";

/// One recorded instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PhaseMark {
    /// What happened (one of the constants of this module).
    pub(crate) name: String,
    /// When, nanoseconds since the worker's first mark.
    pub(crate) at_ns: u64,
}

static ORIGIN: OnceLock<Instant> = OnceLock::new();
static MARKS: Mutex<Vec<(&'static str, Instant)>> = Mutex::new(Vec::new());

/// Records `name` now (a clock read and a push under a lock: well under a microsecond;
/// a handful per trial).
pub(crate) fn mark(name: &'static str) {
    let now = Instant::now();
    ORIGIN.get_or_init(|| now);
    MARKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((name, now));
}

/// The marks recorded so far, in order (they stay recorded).
pub(crate) fn recorded() -> Vec<PhaseMark> {
    let origin = *ORIGIN.get_or_init(Instant::now);
    MARKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(name, at)| PhaseMark {
            name: (*name).to_string(),
            at_ns: at.saturating_duration_since(origin).as_nanos() as u64,
        })
        .collect()
}

/// Checks that the window (the last [`WINDOW_OPEN`] … [`WINDOW_CLOSE`]) covers the
/// phase `start` … `end` (its first occurrence); the error says what is outside.
pub(crate) fn window_covers(marks: &[PhaseMark], start: &str, end: &str) -> Result<(), String> {
    let last = |name: &str| marks.iter().rev().find(|m| m.name == name).map(|m| m.at_ns);
    let first = |name: &str| marks.iter().find(|m| m.name == name).map(|m| m.at_ns);
    let (Some(open), Some(close)) = (last(WINDOW_OPEN), last(WINDOW_CLOSE)) else {
        return Err("the client recorded no measured window".into());
    };
    let (Some(s), Some(e)) = (first(start), first(end)) else {
        return Err(format!("the client recorded no `{start}` … `{end}` phase"));
    };
    if s < open || e > close {
        return Err(format!(
            "the measured window ({open} … {close} ns) does not cover `{start}` … `{end}` \
             ({s} … {e} ns): the comparison would not be fair"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(names: &[(&str, u64)]) -> Vec<PhaseMark> {
        names
            .iter()
            .map(|(n, t)| PhaseMark {
                name: n.to_string(),
                at_ns: *t,
            })
            .collect()
    }

    #[test]
    fn a_window_around_the_context_covers_it() {
        let m = marks(&[
            (WINDOW_OPEN, 10),
            (CONTEXT_START, 11),
            (CONTEXT_END, 20),
            (WINDOW_CLOSE, 30),
        ]);
        assert!(window_covers(&m, CONTEXT_START, CONTEXT_END).is_ok());
    }

    #[test]
    fn a_context_built_before_the_window_is_caught() {
        let m = marks(&[
            (CONTEXT_START, 1),
            (CONTEXT_END, 9),
            (WINDOW_OPEN, 10),
            (WINDOW_CLOSE, 30),
        ]);
        let e = window_covers(&m, CONTEXT_START, CONTEXT_END).unwrap_err();
        assert!(e.contains("not be fair"), "{e}");
        assert!(window_covers(&m[2..], CONTEXT_START, CONTEXT_END).is_err());
        assert!(window_covers(&m[..2], CONTEXT_START, CONTEXT_END).is_err());
    }

    #[test]
    fn marks_are_recorded_in_order() {
        mark(WINDOW_OPEN);
        mark(WINDOW_CLOSE);
        let r = recorded();
        let open = r.iter().rposition(|m| m.name == WINDOW_OPEN).unwrap();
        assert!(r[open..].iter().any(|m| m.name == WINDOW_CLOSE));
    }
}
