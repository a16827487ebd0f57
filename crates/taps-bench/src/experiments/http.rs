//! Experiment 4, an HTTP server under load: taps listening on TCP and SCTP (or raw TCP)
//! under Poisson load; server CPU load per rate, object size and client variant.

#![forbid(unsafe_code)]

use serde::Serialize;

use super::he_variant::{client_udp_port, server_for, start_servers, HeServer, HeVariant};
use super::runner::{run_trial, Progress};
use super::summary::{faults, pairwise, summarize, Failures, Faults, Summary};
use super::{human_bytes, Config};
use crate::measure::{median, ratio};
use crate::process::{Expect, Launcher, Trial};
use crate::worker::{self, ClientSpec, ServeMode};

/// One client variant at one rate and object size.
#[derive(Debug, Clone, Serialize)]
pub struct HttpPoint {
    /// The client variant (the server is raw TCP for raw clients, taps on TCP and SCTP
    /// otherwise).
    pub variant: HeVariant,
    /// Races that found the CIB seeded, percent (races only).
    pub hit_percent: Option<u32>,
    /// Object size, bytes.
    pub object: usize,
    /// Offered request rate, requests/s.
    pub rate: f64,
    /// Server CPU load: server CPU time / wall time, percent of one core.
    pub server_load_pct: Summary,
    /// Load generator CPU load, percent of one core.
    pub client_load_pct: Summary,
    /// Requests answered per second.
    pub achieved_rate: Summary,
    /// Median connect delay, µs.
    pub delay_median_us: Summary,
    /// Share of connections that ended up on SCTP (0 … 1).
    pub sctp_share: Summary,
    /// Server load / raw server load (same repetition), median.
    pub server_vs_raw: f64,
    /// Server load / taps server with TCP-only clients (same repetition), median.
    pub server_vs_single: f64,
    /// Connections that failed.
    pub failed: usize,
    /// The first failure.
    pub first_error: Option<String>,
    /// Trials in which the server did not see every connection open and close in time.
    #[serde(default)]
    pub server_timeouts: usize,
}

impl Failures for HttpPoint {
    fn faults(&self) -> Faults {
        Faults {
            failed: self.failed,
            first_error: self.first_error.clone(),
            server_timeouts: self.server_timeouts,
            short_transfers: 0,
        }
    }
}

struct HttpMatrix {
    rates: Vec<f64>,
    objects: Vec<usize>,
    variants: Vec<(HeVariant, Option<u32>)>,
    duration_ms: u64,
    reps: usize,
}

fn http_matrix(cfg: &Config) -> HttpMatrix {
    if cfg.quick {
        HttpMatrix {
            rates: vec![200.0],
            objects: vec![1024],
            variants: vec![
                (HeVariant::RawTcp, None),
                (HeVariant::TapsSingle, None),
                (HeVariant::TapsSctp, None),
                (HeVariant::RaceSctpDead, Some(0)),
                (HeVariant::RaceBothAlive, Some(0)),
            ],
            duration_ms: 1000,
            reps: 1,
        }
    } else {
        HttpMatrix {
            rates: vec![100.0, 400.0, 700.0, 1000.0],
            objects: vec![1024, 35 * 1024],
            variants: vec![
                (HeVariant::RawTcp, None),
                (HeVariant::TapsSingle, None),
                (HeVariant::TapsSctp, None),
                (HeVariant::RaceSctpDead, Some(0)),
                (HeVariant::RaceSctpDead, Some(80)),
                (HeVariant::RaceSctpDead, Some(100)),
                (HeVariant::RaceBothAlive, Some(0)),
                (HeVariant::RaceBothAlive, Some(100)),
            ],
            duration_ms: 2000,
            reps: cfg.reps().min(3),
        }
    }
}

/// The trials of experiment 4.
pub(super) fn http_trials(cfg: &Config) -> usize {
    let m = http_matrix(cfg);
    m.rates.len() * m.objects.len() * m.variants.len() * m.reps
}

/// Experiment 4: HTTP/1.0 keep-alive server (taps listening on TCP and SCTP, or raw TCP
/// for the raw client) under Poisson load; server CPU load per rate, object size and
/// client variant. "SCTP dead" clients send SCTP to a UDP port nobody listens on.
pub(crate) fn run_http(
    cfg: &Config,
    launcher: &Launcher,
    progress: &mut Progress,
) -> Result<Vec<HttpPoint>, String> {
    let m = http_matrix(cfg);
    let dead = worker::dead_udp_port()?;
    let mut servers = start_servers(
        launcher,
        ServeMode::Http,
        m.variants.iter().map(|(v, _)| http_server(*v)),
    )?;
    let mut points = Vec::new();
    let mut seed = 1u64;
    for &object in &m.objects {
        for &rate in &m.rates {
            let mut trials: Vec<Vec<Trial>> = vec![Vec::new(); m.variants.len()];
            for rep in 0..m.reps {
                seed += 1;
                for (i, (variant, hit)) in m.variants.iter().enumerate() {
                    progress.step(&format!(
                        "HTTP {} {rate}/s {}{} rep {}/{}",
                        human_bytes(object as u64),
                        variant.label(),
                        hit.map(|h| format!(" {h}%")).unwrap_or_default(),
                        rep + 1,
                        m.reps
                    ));
                    let server = server_for(&mut servers, http_server(*variant))?;
                    let spec = ClientSpec::Http {
                        client: variant.client_kind(),
                        port: server.port,
                        udp_port: client_udp_port(*variant, server, dead),
                        rate,
                        duration_ms: m.duration_ms,
                        object,
                        calls_per_conn: 1,
                        hit_percent: hit.unwrap_or(0),
                        seed,
                    };
                    let seeded = u64::from(variant.races());
                    let setup = Expect {
                        accepted: seeded,
                        closed: seeded,
                    };
                    let t = run_trial(progress, launcher, server, &spec, setup, |r| Expect {
                        accepted: r.ok as u64,
                        closed: r.ok as u64,
                    })?;
                    trials[i].push(t);
                }
            }
            points.extend(http_points(&m.variants, object, rate, &trials));
        }
    }
    Ok(points)
}

/// The server a client variant of experiment 4 talks to: raw TCP for the raw client,
/// taps on TCP and SCTP otherwise.
fn http_server(v: HeVariant) -> HeServer {
    if v == HeVariant::RawTcp {
        HeServer::RawTcp
    } else {
        HeServer::TapsBoth
    }
}

/// The points of one object size and rate: every variant's trials summarised, and its
/// server load compared with the raw server's and the TCP-only taps clients'.
fn http_points(
    variants: &[(HeVariant, Option<u32>)],
    object: usize,
    rate: f64,
    trials: &[Vec<Trial>],
) -> Vec<HttpPoint> {
    let load = |cpu: u64, t: &Trial| 100.0 * cpu as f64 / t.client.elapsed_us.max(1) as f64;
    let mut group: Vec<HttpPoint> = variants
        .iter()
        .zip(trials)
        .map(|((variant, hit), ts)| {
            let f = faults(ts);
            HttpPoint {
                variant: *variant,
                hit_percent: *hit,
                object,
                rate,
                server_load_pct: summarize(ts, |t| load(t.server_cpu_us, t)),
                client_load_pct: summarize(ts, |t| load(t.client.cpu.total_us(), t)),
                achieved_rate: summarize(ts, |t| {
                    t.client.requests as f64 * 1e6 / t.client.elapsed_us.max(1) as f64
                }),
                delay_median_us: summarize(ts, |t| median(&t.client.delays_us)),
                sctp_share: summarize(ts, |t| t.client.sctp as f64 / t.client.ok.max(1) as f64),
                server_vs_raw: f64::NAN,
                server_vs_single: f64::NAN,
                failed: f.failed,
                first_error: f.first_error,
                server_timeouts: f.server_timeouts,
            }
        })
        .collect();
    let load_of = |v: HeVariant| {
        group
            .iter()
            .find(|p| p.variant == v)
            .map(|p| p.server_load_pct.clone())
            .unwrap_or_default()
    };
    let (raw_load, single_load) = (load_of(HeVariant::RawTcp), load_of(HeVariant::TapsSingle));
    for p in &mut group {
        p.server_vs_raw = pairwise(&p.server_load_pct, &raw_load, ratio);
        p.server_vs_single = pairwise(&p.server_load_pct, &single_load, ratio);
    }
    group
}
