//! The HTTP/3 experiment's goals (issue 37): client CPU per request of taps' HTTP/3 and
//! raced clients against h3 + h3-quinn used directly, and of taps' HTTP/2 client against
//! hyper over tokio-rustls, ≤ 1.1 × each, in both shapes of work. Fail-closed: an
//! experiment that was skipped (no caddy) or not measured, a failed request, a trial that
//! did other work than its baseline's, or a missing figure is a goal not met.

#![forbid(unsafe_code)]

use crate::experiments::{H3Point, H3Results, H3Variant};
use crate::goals::Goal;

/// The limit of every ratio.
const LIMIT: f64 = 1.1;

/// Why a point cannot count, if it cannot.
fn unusable(p: Option<&H3Point>) -> Option<String> {
    match p {
        None => Some("not measured".into()),
        Some(p) if p.failed > 0 => Some(format!(
            "{}: {} failed request(s): {}",
            p.variant.label(),
            p.failed,
            p.first_error.as_deref().unwrap_or("?")
        )),
        Some(p) if p.work_problem.is_some() => p.work_problem.clone(),
        Some(p) if p.cpu_per_request_us.samples.iter().any(|s| *s <= 0.0) => {
            Some(format!("{}: no CPU figure", p.variant.label()))
        }
        _ => None,
    }
}

/// One goal: `taps` against its baseline in the shape `new_connections`.
fn goal(r: Option<&H3Results>, taps: H3Variant, new_connections: bool) -> Goal {
    let base = taps.baseline().unwrap_or(H3Variant::RawH3);
    let shape = if new_connections {
        "a new connection per request"
    } else {
        "requests on one connection"
    };
    let name = format!("HTTP client CPU per request, {}, {shape}", taps.label());
    let target = format!("≤ {LIMIT} × {}", base.label());
    let find = |v: H3Variant| {
        r.and_then(|r| {
            r.points
                .iter()
                .find(|p| p.variant == v && p.new_connections == new_connections)
        })
    };
    let (p, b) = (find(taps), find(base));
    let why = match r {
        None => Some("not measured".into()),
        Some(H3Results {
            skipped: Some(s), ..
        }) => Some(s.clone()),
        Some(_) => unusable(p).or_else(|| unusable(b).map(|w| format!("baseline: {w}"))),
    };
    let figure = match (p, b, why) {
        (Some(p), Some(b), None) => {
            let v = p.vs_baseline;
            Ok((
                v,
                format!(
                    "{v:.3} × ({:.1} µs vs {:.1} µs per request; ratios {:.3}–{:.3} over {} reps)",
                    p.cpu_per_request_us.median,
                    b.cpu_per_request_us.median,
                    min_ratio(p, b),
                    max_ratio(p, b),
                    p.cpu_per_request_us.samples.len()
                ),
            ))
        }
        (_, _, why) => Err(why.unwrap_or_else(|| "not measured".into())),
    };
    Goal::at_most(name, target, LIMIT, figure)
}

/// The per-repetition ratios of `p` to `b`.
fn ratios(p: &H3Point, b: &H3Point) -> Vec<f64> {
    p.cpu_per_request_us
        .samples
        .iter()
        .zip(&b.cpu_per_request_us.samples)
        .map(|(x, y)| x / y)
        .collect()
}

fn min_ratio(p: &H3Point, b: &H3Point) -> f64 {
    ratios(p, b).into_iter().fold(f64::INFINITY, f64::min)
}

fn max_ratio(p: &H3Point, b: &H3Point) -> f64 {
    ratios(p, b).into_iter().fold(f64::NEG_INFINITY, f64::max)
}

/// The goals of a run that planned the HTTP/3 experiment (`r`: what it measured, `None`
/// when the phase failed).
pub(crate) fn http3_goals(r: Option<&H3Results>, g: &mut Vec<Goal>) {
    for new_connections in [false, true] {
        for taps in [H3Variant::TapsH3, H3Variant::TapsRace, H3Variant::TapsH2] {
            g.push(goal(r, taps, new_connections));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::Summary;

    fn point(v: H3Variant, cpu: &[f64], vs: f64) -> H3Point {
        H3Point {
            variant: v,
            new_connections: false,
            requests: 10,
            object: 1024,
            cpu_per_request_us: Summary::of(cpu.to_vec()),
            connections: Summary::of(vec![0.0; cpu.len()]),
            h3_responses: Summary::of(vec![10.0; cpu.len()]),
            baseline: v.baseline(),
            vs_baseline: vs,
            failed: 0,
            first_error: None,
            work_problem: None,
        }
    }

    fn results(points: Vec<H3Point>) -> H3Results {
        H3Results {
            points,
            ..H3Results::default()
        }
    }

    #[test]
    fn goals_fail_closed() {
        // Not measured, skipped: six goals, none met.
        for r in [None, Some(H3Results::default())] {
            let mut g = Vec::new();
            http3_goals(r.as_ref(), &mut g);
            assert_eq!(g.len(), 6);
            assert!(g.iter().all(|g| !g.met && g.problem.is_some()));
        }
        let skipped = H3Results {
            skipped: Some("skipped: no caddy".into()),
            ..H3Results::default()
        };
        let mut g = Vec::new();
        http3_goals(Some(&skipped), &mut g);
        assert!(g.iter().all(|g| !g.met && g.measured.contains("skipped")));
        // Within the limit: met; a failed request, other work or a zero sample: not.
        let base = point(H3Variant::RawH3, &[100.0, 100.0], f64::NAN);
        let taps = point(H3Variant::TapsH3, &[105.0, 108.0], 1.065);
        let ok = goal(
            Some(&results(vec![base.clone(), taps.clone()])),
            H3Variant::TapsH3,
            false,
        );
        assert!(ok.met, "{ok:?}");
        let over = point(H3Variant::TapsH3, &[120.0, 125.0], 1.225);
        let g = goal(
            Some(&results(vec![base.clone(), over])),
            H3Variant::TapsH3,
            false,
        );
        assert!(!g.met && g.problem.is_none());
        let mut failed = taps.clone();
        failed.failed = 1;
        let mut other = base.clone();
        other.work_problem = Some("responses 9, expected 10".into());
        let zero = point(H3Variant::TapsH3, &[0.0, 105.0], 1.05);
        for pts in [
            vec![base.clone(), failed],
            vec![other, taps.clone()],
            vec![base.clone(), zero],
            vec![taps],
        ] {
            let g = goal(Some(&results(pts)), H3Variant::TapsH3, false);
            assert!(!g.met && g.problem.is_some(), "{g:?}");
        }
    }
}
