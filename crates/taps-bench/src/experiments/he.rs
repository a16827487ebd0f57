//! Experiment 3, Happy Eyeballs cost: sequential connections per trial, races against
//! single-protocol connects at CIB hit ratios 0 … 100 %.

#![forbid(unsafe_code)]

use serde::Serialize;

use super::he_variant::{client_udp_port, server_for, start_servers, HeVariant};
use super::runner::{run_trial, Progress};
use super::summary::{faults, pairwise, summarize, Failures, Faults, Summary};
use super::Config;
use crate::measure::{median, ratio};
use crate::process::{Expect, Launcher, Trial};
use crate::worker::{self, ClientSpec, ServeMode};

/// One variant at one cache hit ratio.
#[derive(Debug, Clone, Serialize)]
pub struct HePoint {
    /// The variant.
    pub variant: HeVariant,
    /// Races that found the CIB seeded, percent (races only).
    pub hit_percent: Option<u32>,
    /// Connections per trial.
    pub connections: usize,
    /// Client CPU per connection, µs.
    pub client_cpu_per_conn_us: Summary,
    /// Server CPU per connection, µs.
    pub server_cpu_per_conn_us: Summary,
    /// Attempts started per connection.
    pub attempts_per_conn: Summary,
    /// Share of connections that ended up on SCTP (0 … 1).
    pub sctp_share: Summary,
    /// Median connect delay, µs.
    pub delay_median_us: Summary,
    /// The single-protocol taps variant the `*_vs_single` ratios refer to.
    pub single: HeVariant,
    /// Client CPU / the single-protocol taps connect (same repetition), median.
    pub client_vs_single: f64,
    /// Client CPU / the raw connect of the same protocol (same repetition), median.
    pub client_vs_raw: f64,
    /// Server CPU / the single-protocol taps connect's (same repetition), median.
    pub server_vs_single: f64,
    /// Connections that failed.
    pub failed: usize,
    /// The first failure.
    pub first_error: Option<String>,
    /// Trials in which the server did not see every connection open and close in time.
    #[serde(default)]
    pub server_timeouts: usize,
}

impl Failures for HePoint {
    fn faults(&self) -> Faults {
        Faults {
            failed: self.failed,
            first_error: self.first_error.clone(),
            server_timeouts: self.server_timeouts,
            short_transfers: 0,
        }
    }
}

/// The variants (with their hit ratios) of experiment 3, and the connections per trial.
fn he_matrix(cfg: &Config) -> (Vec<(HeVariant, Option<u32>)>, usize) {
    let mut v = vec![
        (HeVariant::RawTcp, None),
        (HeVariant::TapsSingle, None),
        (HeVariant::RawSctp, None),
        (HeVariant::TapsSctp, None),
    ];
    let hits: &[u32] = if cfg.quick {
        &[0, 80, 100]
    } else {
        &[0, 20, 40, 60, 80, 100]
    };
    for &h in hits {
        v.push((HeVariant::RaceSctpDead, Some(h)));
    }
    if cfg.quick {
        v.push((HeVariant::RaceBothAlive, Some(80)));
    } else {
        for &h in hits {
            v.push((HeVariant::RaceBothAlive, Some(h)));
        }
        // The family race of the dual-stack study, as an extra: TCP over ::1 and
        // 127.0.0.1 via `localhost`, and what its DNS lookup alone costs.
        v.push((HeVariant::ResolveOnly, None));
        v.push((HeVariant::TapsSingleName, None));
        for &h in hits {
            v.push((HeVariant::RaceV6Dead, Some(h)));
        }
    }
    (v, if cfg.quick { 100 } else { 500 })
}

/// The race variants experiment 3 measures at `hit` % cache hits.
pub(crate) fn race_variants_at(cfg: &Config, hit: u32) -> Vec<HeVariant> {
    he_matrix(cfg)
        .0
        .into_iter()
        .filter(|(_, h)| *h == Some(hit))
        .map(|(v, _)| v)
        .collect()
}

/// The trials of experiment 3.
pub(super) fn he_trials(cfg: &Config) -> usize {
    he_matrix(cfg).0.len() * cfg.reps()
}

/// Experiment 3: `count` sequential connections per trial (connect, close) for each
/// variant; hit ratio h means h% of the races use a context whose CIB was seeded by a
/// preliminary connection, the others a context whose CIB forgets at once.
pub(crate) fn run_he(
    cfg: &Config,
    launcher: &Launcher,
    progress: &mut Progress,
) -> Result<Vec<HePoint>, String> {
    let (variants, count) = he_matrix(cfg);
    let dead = worker::dead_udp_port()?;
    let mut servers = start_servers(
        launcher,
        ServeMode::Sink,
        variants.iter().map(|(v, _)| v.server()),
    )?;
    let mut trials: Vec<Vec<Trial>> = vec![Vec::new(); variants.len()];
    for rep in 0..cfg.reps() {
        for (i, (variant, hit)) in variants.iter().enumerate() {
            progress.step(&format!(
                "HE {}{} rep {}/{}",
                variant.label(),
                hit.map(|h| format!(" {h}% hits")).unwrap_or_default(),
                rep + 1,
                cfg.reps()
            ));
            let server = server_for(&mut servers, variant.server())?;
            let spec = ClientSpec::Handshakes {
                client: variant.client_kind(),
                port: server.port,
                udp_port: client_udp_port(*variant, server, dead),
                count,
                hit_percent: hit.unwrap_or(0),
            };
            // The race's seeding connection must be over before the window.
            let seeded = u64::from(variant.races());
            let setup = Expect {
                accepted: seeded,
                closed: seeded,
            };
            let connects = variant.connects();
            let t = run_trial(progress, launcher, server, &spec, setup, |r| Expect {
                accepted: if connects { r.ok as u64 } else { 0 },
                closed: if connects { r.ok as u64 } else { 0 },
            })?;
            trials[i].push(t);
        }
    }
    let per_conn = |v: u64, t: &Trial| v as f64 / t.client.ok.max(1) as f64;
    let mut points: Vec<HePoint> = variants
        .iter()
        .zip(&trials)
        .map(|((variant, hit), ts)| {
            let f = faults(ts);
            HePoint {
                variant: *variant,
                hit_percent: *hit,
                connections: count,
                client_cpu_per_conn_us: summarize(ts, |t| per_conn(t.client.cpu.total_us(), t)),
                server_cpu_per_conn_us: summarize(ts, |t| per_conn(t.server_cpu_us, t)),
                attempts_per_conn: summarize(ts, |t| per_conn(t.client.attempts as u64, t)),
                sctp_share: summarize(ts, |t| per_conn(t.client.sctp as u64, t)),
                delay_median_us: summarize(ts, |t| median(&t.client.delays_us)),
                single: variant.single_baseline(),
                client_vs_single: f64::NAN,
                client_vs_raw: f64::NAN,
                server_vs_single: f64::NAN,
                failed: f.failed,
                first_error: f.first_error,
                server_timeouts: f.server_timeouts,
            }
        })
        .collect();
    let find = |points: &[HePoint], v| points.iter().find(|p| p.variant == v).cloned();
    let snapshot = points.clone();
    for p in &mut points {
        if let Some(single) = find(&snapshot, p.variant.single_baseline()) {
            p.client_vs_single = pairwise(
                &p.client_cpu_per_conn_us,
                &single.client_cpu_per_conn_us,
                ratio,
            );
            p.server_vs_single = pairwise(
                &p.server_cpu_per_conn_us,
                &single.server_cpu_per_conn_us,
                ratio,
            );
        }
        if let Some(raw) = find(&snapshot, p.variant.raw_baseline()) {
            p.client_vs_raw = pairwise(
                &p.client_cpu_per_conn_us,
                &raw.client_cpu_per_conn_us,
                ratio,
            );
        }
    }
    Ok(points)
}
