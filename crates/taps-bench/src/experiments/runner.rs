//! Running the trials of an experiment: the progress line, and retrying a trial whose
//! worker died (recorded as a [`Crash`]).

#![forbid(unsafe_code)]

use std::time::Instant;

use serde::Serialize;

use crate::process::{trial, Expect, Launcher, Server, Trial, WorkerError};
use crate::worker::{ClientResult, ClientSpec};

/// A worker that died or hung during a trial: recorded in the results and the report (a
/// bug somewhere under the benchmark, never an expected outcome).
#[derive(Debug, Clone, Serialize)]
pub struct Crash {
    /// The trial (experiment, point, variant, repetition).
    pub trial: String,
    /// Exit status and the worker's last stderr lines.
    pub error: String,
    /// What happened to the trial: `retried` (the point's samples come from the retry),
    /// `kept` (the client died after reporting its result: the measurement stands) or
    /// `gave up` (the phase is reported as not measured).
    pub outcome: String,
}

/// How often a trial whose client died is run again before the phase gives up.
const CRASH_RETRIES: usize = 2;

/// Progress on stderr (`[done/total] label`, rewritten in place), and the log of worker
/// crashes seen so far.
pub(crate) struct Progress {
    enabled: bool,
    done: usize,
    total: usize,
    started: Instant,
    label: String,
    /// Workers that died.
    pub(crate) crashes: Vec<Crash>,
}

impl Progress {
    /// A progress line for `total` trials.
    pub(crate) fn new(enabled: bool, total: usize) -> Progress {
        Progress {
            enabled,
            done: 0,
            total,
            started: Instant::now(),
            label: String::new(),
            crashes: Vec::new(),
        }
    }

    /// Counts a trial as started, labelled `label`.
    pub(super) fn step(&mut self, label: &str) {
        self.label = label.to_string();
        self.done += 1;
        if self.enabled {
            let width = 24;
            let filled = width * self.done.min(self.total) / self.total.max(1);
            eprint!(
                "\r[{}{}] {:>4}/{:<4} {:>5.0}s  {:<52}",
                "#".repeat(filled),
                " ".repeat(width - filled),
                self.done,
                self.total,
                self.started.elapsed().as_secs_f64(),
                label.chars().take(52).collect::<String>()
            );
        }
    }

    /// Ends the line.
    pub(crate) fn finish(&self) {
        if self.enabled {
            eprintln!();
        }
    }

    /// Records a crash of the current trial.
    fn crash(&mut self, error: String, outcome: &str) {
        if self.enabled {
            eprintln!("\nworker crash in {}: {error} ({outcome})", self.label);
        }
        self.crashes.push(Crash {
            trial: self.label.clone(),
            error,
            outcome: outcome.to_string(),
        });
    }
}

/// One trial (see [`trial`]) with the current progress label; a client that dies or
/// hangs is recorded as a [`Crash`] and the trial run again (at most [`CRASH_RETRIES`]
/// times). Any other error names the trial.
pub(super) fn run_trial(
    progress: &mut Progress,
    launcher: &Launcher,
    server: &mut Server,
    spec: &ClientSpec,
    setup: Expect,
    expect: impl Fn(&ClientResult) -> Expect,
) -> Result<Trial, String> {
    let mut tries = 0;
    loop {
        match trial(launcher, server, spec, setup, &expect) {
            Ok(t) => {
                if let Some(e) = &t.teardown_error {
                    progress.crash(e.clone(), "kept");
                }
                return Ok(t);
            }
            Err(WorkerError::Died(e)) if tries < CRASH_RETRIES => {
                tries += 1;
                progress.crash(e, "retried");
                server.resync()?;
            }
            Err(WorkerError::Died(e)) => {
                progress.crash(e.clone(), "gave up");
                return Err(format!("{}: {e}", progress.label));
            }
            Err(WorkerError::Other(e)) => return Err(format!("{}: {e}", progress.label)),
        }
    }
}
