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

/// The median over repetitions of `f(a, b)` on the samples of the same repetition: the
/// one way every ratio of the report is computed. NaN (no figure, never a 0 that could
/// pass a goal) when there are no samples, the two sides have different numbers of
/// them, or any repetition's figure is not a finite number (e.g. a zero baseline, see
/// [`measure::ratio`]).
pub(crate) fn pairwise(a: &Summary, b: &Summary, f: impl Fn(f64, f64) -> f64) -> f64 {
    if a.samples.is_empty() || a.samples.len() != b.samples.len() {
        return f64::NAN;
    }
    let v: Vec<f64> = a
        .samples
        .iter()
        .zip(&b.samples)
        .map(|(x, y)| f(*x, *y))
        .collect();
    if v.iter().any(|x| !x.is_finite()) {
        return f64::NAN;
    }
    median(&v)
}

/// The summary of `f` over `trials`.
pub(super) fn summarize(trials: &[Trial], f: impl Fn(&Trial) -> f64) -> Summary {
    Summary::of(trials.iter().map(f).collect())
}

/// What went wrong on one side of a point over every repetition: any of it makes the
/// point unusable for a goal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Faults {
    /// Flows or connections that failed.
    pub failed: usize,
    /// The first failure.
    pub first_error: Option<String>,
    /// Trials in which the server did not see what the client reported within its wait
    /// (before or after the window).
    pub server_timeouts: usize,
    /// Trials in which the server received other than flows × bytes.
    pub short_transfers: usize,
}

impl Faults {
    /// Why the side cannot count, in words; `None` when nothing went wrong.
    pub fn problem(&self) -> Option<String> {
        let mut why = Vec::new();
        if self.failed > 0 {
            why.push(format!(
                "{} failed flow(s)/connection(s) (first: {})",
                self.failed,
                self.first_error.as_deref().unwrap_or("?")
            ));
        }
        if self.server_timeouts > 0 {
            why.push(format!(
                "the server did not see every connection in time in {} trial(s)",
                self.server_timeouts
            ));
        }
        if self.short_transfers > 0 {
            why.push(format!(
                "the server did not receive flows × bytes in {} trial(s)",
                self.short_transfers
            ));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }
}

/// Failed flows of `trials`, the first error, and how many trials the server timed
/// out in (byte counts are checked by the experiments that send bytes).
pub(super) fn faults(trials: &[Trial]) -> Faults {
    Faults {
        failed: trials.iter().map(|t| t.client.failed).sum(),
        first_error: trials.iter().find_map(|t| t.client.first_error.clone()),
        server_timeouts: trials.iter().filter(|t| t.server_timed_out).count(),
        short_transfers: 0,
    }
}

/// What failed on one side of a point.
pub(crate) trait Failures {
    /// Failed flows, server timeouts and short transfers (all repetitions).
    fn faults(&self) -> Faults;
}
