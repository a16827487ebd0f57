//! Running one scenario: a fresh lab, the scenario's body (panics caught), the bridge's
//! counters, teardown and its check; and what a run records ([`Outcome`], [`Check`]).

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::find;
use crate::lab::{Lab, LabOptions};
use crate::taps::{Connect, ConnectReport};

/// How a scenario is run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Keep taps' CIB in this file (across runs); a fresh temporary file otherwise.
    pub cib: Option<PathBuf>,
    /// Bridge seed (loss, jitter); the lab's default if `None`.
    pub seed: Option<u64>,
    /// Print the log as it is written.
    pub echo: bool,
    /// Bytes each transfer of the loss scenarios (`loss`, `sctp-loss`) sends;
    /// [`LOSS_TRANSFER`] when `None`.
    pub loss_transfer: Option<u64>,
}

/// What each transfer of the loss scenarios sends unless [`RunOptions::loss_transfer`]
/// says otherwise: 10 MiB, the size `taps bench lab` reports its times for.
pub const LOSS_TRANSFER: u64 = 10 * 1024 * 1024;

/// One checked bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What was checked, with the measured value and the bound.
    pub what: String,
    /// Whether it held.
    pub ok: bool,
}

/// What a scenario run did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The scenario's name.
    pub scenario: String,
    /// Human-readable lines (connections, attempts, checks).
    pub log: Vec<String>,
    /// The checks, in order.
    pub checks: Vec<Check>,
    /// Why the scenario could not run to the end, if it could not.
    pub error: Option<String>,
    /// Wall-clock time of the whole run, lab setup and teardown included.
    pub elapsed: Duration,
    /// Measured figures by name (e.g. `sctp_s`), for programs that report them (`taps
    /// bench lab`); each scenario's docs name the ones it records.
    pub figures: Vec<(String, f64)>,
    /// Measured facts in words by name (e.g. the kernel's congestion control).
    pub labels: Vec<(String, String)>,
    echo: bool,
}

impl Outcome {
    /// Whether it ran to the end and every check held (and there was at least one).
    pub fn passed(&self) -> bool {
        self.error.is_none() && !self.checks.is_empty() && self.checks.iter().all(|c| c.ok)
    }

    /// Adds a log line.
    pub(super) fn say(&mut self, line: impl Into<String>) {
        let line = line.into();
        if self.echo {
            println!("{line}");
        }
        self.log.push(line);
    }

    /// Records a figure (also kept in the log lines the scenario writes).
    pub(super) fn figure(&mut self, name: &str, value: f64) {
        self.figures.push((name.to_string(), value));
    }

    /// Records a fact in words.
    pub(super) fn label(&mut self, name: &str, value: impl Into<String>) {
        self.labels.push((name.to_string(), value.into()));
    }

    /// The figure `name`, if the scenario recorded it.
    pub fn figure_of(&self, name: &str) -> Option<f64> {
        self.figures
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }

    /// The fact `name`, if the scenario recorded it.
    pub fn label_of(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Records a check and logs it.
    pub(super) fn check(&mut self, ok: bool, what: impl Into<String>) -> bool {
        let what = what.into();
        self.say(format!(
            "  check {}  {what}",
            if ok { "ok  " } else { "FAIL" }
        ));
        self.checks.push(Check { what, ok });
        ok
    }

    /// The failed checks and the error, one per line (empty if it passed).
    pub fn failures(&self) -> Vec<String> {
        let mut f: Vec<String> = self
            .checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| c.what.clone())
            .collect();
        if let Some(e) = &self.error {
            f.push(format!("error: {e}"));
        }
        if self.checks.is_empty() && self.error.is_none() {
            f.push("no check was made".into());
        }
        f
    }
}

/// What a scenario body gets besides the lab.
#[derive(Debug)]
pub(super) struct Ctx {
    /// The CIB file every `taps connect` of this run shares.
    pub(super) cib: PathBuf,
    /// Bytes each transfer of the loss scenarios sends.
    pub(super) loss_transfer: u64,
}

impl Ctx {
    /// Runs `taps connect` for `c` with this run's CIB.
    pub(super) fn connect(&self, lab: &Lab, mut c: Connect) -> Result<ConnectReport, String> {
        c.cib = Some(self.cib.clone());
        lab.taps_connect(&c)
    }
}

/// Builds a lab, runs scenario `name`, tears the lab down. `Err` only when the scenario
/// does not exist or the lab cannot be built; a scenario that fails has `passed() ==
/// false` and says why in its checks and `error`.
pub fn run(name: &str, opts: &RunOptions) -> Result<Outcome, String> {
    let scenario = find(name).ok_or_else(|| {
        let names: Vec<&str> = super::all().iter().map(|s| s.name).collect();
        format!("no scenario {name:?}; scenarios: {}", names.join(", "))
    })?;
    let started = Instant::now();
    let mut out = Outcome {
        scenario: name.to_string(),
        echo: opts.echo,
        ..Outcome::default()
    };
    out.say(format!("scenario {name}: {}", scenario.summary));
    if scenario.needs_taps {
        let taps = crate::taps::taps_binary()?;
        out.say(format!("  taps binary: {}", taps.display()));
    }
    let mut lab_opts = LabOptions::default();
    if let Some(seed) = opts.seed {
        lab_opts.seed = seed;
    }
    let lab = Lab::start(lab_opts).map_err(|e| format!("cannot build the lab: {e}"))?;
    let names = (
        lab.client().name().to_string(),
        lab.server().name().to_string(),
    );
    out.say(format!(
        "  lab: client namespace {}, server namespace {}",
        names.0, names.1
    ));
    let (cib, temporary) = match &opts.cib {
        Some(p) => (p.clone(), false),
        None => (
            std::env::temp_dir().join(format!(
                "netlab-{}-{}.cib.json",
                std::process::id(),
                names.0
            )),
            true,
        ),
    };
    let ctx = Ctx {
        cib: cib.clone(),
        loss_transfer: opts.loss_transfer.unwrap_or(LOSS_TRANSFER),
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        (scenario.body)(&lab, &ctx, &mut out)
    }));
    let stats = lab.stats();
    match result {
        Ok(Ok(())) => {}
        Ok(Err(e)) => out.error = Some(e),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            out.error = Some(format!("scenario panicked: {msg}"));
        }
    }
    if let Some(e) = &out.error {
        let e = e.clone();
        out.say(format!("  error: {e}"));
    }
    out.say(format!(
        "  bridge: to server {} packets ({} lost, {} blackholed, {} queue drops); to client {} packets ({} lost, {} blackholed)",
        stats.to_server.forwarded,
        stats.to_server.lost,
        stats.to_server.blackholed,
        stats.to_server.queue_full,
        stats.to_client.forwarded,
        stats.to_client.lost,
        stats.to_client.blackholed,
    ));
    let torn = lab.teardown();
    if temporary {
        let _ = std::fs::remove_file(&cib);
    }
    let gone = [&names.0, &names.1]
        .iter()
        .all(|n| !std::path::Path::new("/run/netns").join(n).exists());
    out.check(
        torn.is_ok() && gone,
        match torn {
            Ok(()) if gone => {
                "teardown removed both namespaces, the TUN devices and every child".to_string()
            }
            Ok(()) => "teardown: a namespace is still there".to_string(),
            Err(e) => format!("teardown: {e}"),
        },
    );
    out.elapsed = started.elapsed();
    let verdict = if out.passed() { "PASS" } else { "FAIL" };
    out.say(format!(
        "{verdict} {name} ({:.1} s)",
        out.elapsed.as_secs_f64()
    ));
    Ok(out)
}
