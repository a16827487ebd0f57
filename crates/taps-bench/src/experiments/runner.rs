//! Running the trials of an experiment: the progress bar, and retrying a trial whose
//! worker died (recorded as a [`Crash`]).

#![forbid(unsafe_code)]

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use serde::Serialize;

use crate::process::{
    client_trial, trial, ClientTrial, Expect, Launcher, Server, Trial, WorkerError,
};
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

/// Progress on stderr (an `indicatif` bar: `[###   ] done/total elapsed label`, redrawn
/// in place), and the log of worker crashes seen so far. The bar is drawn only when
/// progress is enabled and stderr is a terminal: piped or in CI, nothing is drawn (crash
/// lines are still printed unless progress is off).
pub(crate) struct Progress {
    /// Crash lines on stderr.
    enabled: bool,
    /// The bar, when one is drawn.
    bar: Option<ProgressBar>,
    label: String,
    /// Workers that died.
    pub(crate) crashes: Vec<Crash>,
}

/// The bar's look: 24 columns of `#`, the count, the elapsed time and the trial.
const BAR_TEMPLATE: &str = "[{bar:24}] {pos:>4}/{len:<4} {elapsed:>4}  {wide_msg}";

impl Progress {
    /// A progress line for `total` trials (a bar only when `enabled` and stderr is a
    /// terminal). Costs a redraw thread ticking once a second while the bar is shown.
    pub(crate) fn new(enabled: bool, total: usize) -> Progress {
        let terminal = enabled && std::io::stderr().is_terminal();
        Progress::with_target(enabled, total, terminal.then(ProgressDrawTarget::stderr))
    }

    /// [`Progress::new`] drawing on `target` (`None`: no bar).
    fn with_target(enabled: bool, total: usize, target: Option<ProgressDrawTarget>) -> Progress {
        let bar = target.filter(|_| enabled).map(|target| {
            let style = ProgressStyle::with_template(BAR_TEMPLATE)
                .map(|s| s.progress_chars("## "))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
            let bar = ProgressBar::with_draw_target(Some(total as u64), target).with_style(style);
            bar.enable_steady_tick(Duration::from_secs(1));
            bar
        });
        Progress {
            enabled,
            bar,
            label: String::new(),
            crashes: Vec::new(),
        }
    }

    /// Counts a trial as started, labelled `label`.
    pub(super) fn step(&mut self, label: &str) {
        self.label = label.to_string();
        if let Some(bar) = &self.bar {
            bar.set_message(label.to_string());
            bar.inc(1);
        }
    }

    /// Ends the line (the bar stays on screen as last drawn).
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }

    /// Records a crash of the current trial.
    fn crash(&mut self, error: String, outcome: &str) {
        if self.enabled {
            let line = format!("worker crash in {}: {error} ({outcome})", self.label);
            match &self.bar {
                Some(bar) => bar.suspend(|| eprintln!("{line}")),
                None => eprintln!("{line}"),
            }
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
    retried(
        progress,
        server,
        |server| trial(launcher, server, spec, setup, &expect),
        |t| t.teardown_error.as_ref(),
        Server::resync,
    )
}

/// One client trial with no server worker (see [`client_trial`]), retried as
/// [`run_trial`]'s.
pub(super) fn run_client_trial(
    progress: &mut Progress,
    launcher: &Launcher,
    spec: &ClientSpec,
) -> Result<ClientTrial, String> {
    retried(
        progress,
        &mut (),
        |()| client_trial(launcher, spec),
        |t| t.teardown_error.as_ref(),
        |()| Ok::<(), String>(()),
    )
}

/// Runs `attempt` on `state` until it gives a result: a client that dies is recorded as
/// a [`Crash`] and tried again (at most [`CRASH_RETRIES`] times, `resync` first); an
/// error at the client's teardown is recorded and the result kept. Any other error
/// names the trial.
fn retried<S, T, E: Into<String>>(
    progress: &mut Progress,
    state: &mut S,
    mut attempt: impl FnMut(&mut S) -> Result<T, WorkerError>,
    teardown_error: impl Fn(&T) -> Option<&String>,
    mut resync: impl FnMut(&mut S) -> Result<(), E>,
) -> Result<T, String> {
    let mut tries = 0;
    loop {
        match attempt(state) {
            Ok(t) => {
                if let Some(e) = teardown_error(&t) {
                    progress.crash(e.clone(), "kept");
                }
                return Ok(t);
            }
            Err(WorkerError::Died(e)) if tries < CRASH_RETRIES => {
                tries += 1;
                progress.crash(e, "retried");
                resync(state).map_err(Into::into)?;
            }
            Err(WorkerError::Died(e)) => {
                progress.crash(e.clone(), "gave up");
                return Err(format!("{}: {e}", progress.label));
            }
            Err(WorkerError::Other(e)) => return Err(format!("{}: {e}", progress.label)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_bar_without_a_terminal_or_when_disabled() {
        for (enabled, target) in [(true, None), (false, Some(ProgressDrawTarget::hidden()))] {
            let mut p = Progress::with_target(enabled, 3, target);
            assert!(p.bar.is_none());
            p.step("a");
            p.crash("died".into(), "retried");
            p.finish();
            assert_eq!(p.label, "a");
            assert_eq!(p.crashes.len(), 1);
        }
    }

    #[test]
    fn the_bar_counts_trials_and_shows_the_current_one() {
        let mut p = Progress::with_target(true, 3, Some(ProgressDrawTarget::hidden()));
        p.step("connect TCP 1 flow rep 1");
        p.step("connect TCP 2 flows rep 1");
        p.crash("exit status 1".into(), "kept");
        let bar = p.bar.as_ref().expect("a bar");
        assert_eq!((bar.position(), bar.length()), (2, Some(3)));
        assert_eq!(bar.message(), "connect TCP 2 flows rep 1");
        p.finish();
        assert!(p.bar.as_ref().is_some_and(|b| b.is_finished()));
        assert_eq!(p.crashes[0].trial, "connect TCP 2 flows rep 1");
    }
}
