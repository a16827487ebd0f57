//! The spread of a metric over the repetitions, and the figures taken from trials.

#![forbid(unsafe_code)]

use serde::Serialize;

use crate::measure::{self, median};
use crate::process::Trial;

/// The spread of one metric over the repetitions.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Median.
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Every sample, in repetition order.
    pub samples: Vec<f64>,
}

impl Summary {
    /// Summarises `samples`.
    pub(crate) fn of(samples: Vec<f64>) -> Summary {
        Summary {
            median: median(&samples),
            min: if samples.is_empty() {
                0.0
            } else {
                samples.iter().copied().fold(f64::INFINITY, f64::min)
            },
            max: measure::max(&samples),
            samples,
        }
    }
}

/// The median over repetitions of `f(a, b)` on the samples of the same repetition.
pub(super) fn pairwise(a: &Summary, b: &Summary, f: impl Fn(f64, f64) -> f64) -> f64 {
    let v: Vec<f64> = a
        .samples
        .iter()
        .zip(&b.samples)
        .map(|(x, y)| f(*x, *y))
        .collect();
    median(&v)
}

/// The summary of `f` over `trials`.
pub(super) fn summarize(trials: &[Trial], f: impl Fn(&Trial) -> f64) -> Summary {
    Summary::of(trials.iter().map(f).collect())
}

/// Failed flows of `trials`, the first error, and how many trials the server timed
/// out in.
pub(super) fn failures(trials: &[Trial]) -> (usize, Option<String>, usize) {
    let failed = trials.iter().map(|t| t.client.failed).sum();
    let first = trials.iter().find_map(|t| t.client.first_error.clone());
    let timeouts = trials.iter().filter(|t| t.server_timed_out).count();
    (failed, first, timeouts)
}

/// What failed on one side of a point: failed flows and the first error.
pub(crate) trait Failures {
    /// Failed flows (all repetitions) and the first error.
    fn failures(&self) -> (usize, Option<String>);
}
