//! The secure experiment, the TLS variant of the Happy Eyeballs cost experiment (after
//! the ANRW'16 paper's TLS case): QUIC raced against TLS/TCP (taps) against a single
//! secure protocol (taps TLS/TCP only, taps QUIC only) at CIB hit ratios 0 … 100 %, and
//! taps' TLS and QUIC against tokio-rustls and quinn used directly; every connection
//! fetches one object (1 KiB or 35 KiB) and is closed.

#![forbid(unsafe_code)]

use serde::Serialize;
use taps_testkit::TestPki;

use super::runner::{run_trial, Progress};
use super::summary::{faults, pairwise, summarize, Summary};
use super::{human_bytes, Config};
use crate::measure::{median, ratio};
use crate::process::{Expect, Launcher, Server, Trial};
use crate::worker::{
    ClientSpec, Impl, Listen, Pki, SecureClient, SecureListen, SecureServe, ServeMode, ServerSpec,
};

/// A client variant of the secure experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SecureVariant {
    /// tokio-rustls over tokio TCP, against a tokio-rustls server (no taps).
    RawTls,
    /// quinn's `Endpoint`, against a quinn server (no taps).
    RawQuic,
    /// taps requiring security and TCP (TLS/TCP, one candidate), against a taps TLS/TCP
    /// listener.
    TapsTls,
    /// taps requiring security and QUIC (one candidate), against a taps listener serving
    /// TLS/TCP and QUIC.
    TapsQuic,
    /// taps requiring security: QUIC (ranked first) raced against TLS/TCP; the listener
    /// serves both, QUIC wins.
    RaceBothAlive,
    /// The same race against a listener serving TLS/TCP only: nothing answers QUIC, so
    /// TLS/TCP wins after the attempt delay (a miss) or goes first alone (a hit).
    RaceQuicDead,
}

impl SecureVariant {
    /// A short label.
    pub fn label(self) -> &'static str {
        match self {
            SecureVariant::RawTls => "raw TLS/TCP (tokio-rustls)",
            SecureVariant::RawQuic => "raw QUIC (quinn)",
            SecureVariant::TapsTls => "taps TLS/TCP only",
            SecureVariant::TapsQuic => "taps QUIC only",
            SecureVariant::RaceBothAlive => "taps race QUIC/TLS, both alive",
            SecureVariant::RaceQuicDead => "taps race QUIC/TLS, QUIC dead",
        }
    }

    fn client(self) -> SecureClient {
        match self {
            SecureVariant::RawTls => SecureClient::RawTls,
            SecureVariant::RawQuic => SecureClient::RawQuic,
            SecureVariant::TapsTls => SecureClient::TapsTls,
            SecureVariant::TapsQuic => SecureClient::TapsQuic,
            SecureVariant::RaceBothAlive | SecureVariant::RaceQuicDead => SecureClient::TapsRace,
        }
    }

    /// Whether it races (and so has a cache hit ratio).
    pub fn races(self) -> bool {
        matches!(
            self,
            SecureVariant::RaceBothAlive | SecureVariant::RaceQuicDead
        )
    }

    /// The single-protocol taps connect it is compared with: the protocol the
    /// connections end up on.
    pub fn single_baseline(self) -> SecureVariant {
        match self {
            SecureVariant::RawQuic | SecureVariant::TapsQuic | SecureVariant::RaceBothAlive => {
                SecureVariant::TapsQuic
            }
            _ => SecureVariant::TapsTls,
        }
    }

    /// The raw connect of the same protocol.
    pub fn raw_baseline(self) -> SecureVariant {
        match self.single_baseline() {
            SecureVariant::TapsQuic => SecureVariant::RawQuic,
            _ => SecureVariant::RawTls,
        }
    }

    /// Its server: (implementation, stacks).
    fn server(self) -> (Impl, SecureListen) {
        match self {
            SecureVariant::RawTls => (Impl::Raw, SecureListen::Tls),
            SecureVariant::RawQuic => (Impl::Raw, SecureListen::Quic),
            SecureVariant::TapsTls | SecureVariant::RaceQuicDead => (Impl::Taps, SecureListen::Tls),
            SecureVariant::TapsQuic | SecureVariant::RaceBothAlive => {
                (Impl::Taps, SecureListen::Both)
            }
        }
    }
}

/// One variant at one object size (and hit ratio, for races).
#[derive(Debug, Clone, Serialize)]
pub struct SecurePoint {
    /// The client variant.
    pub variant: SecureVariant,
    /// Races that found the CIB seeded, percent (races only).
    pub hit_percent: Option<u32>,
    /// Object fetched per connection, bytes.
    pub object: usize,
    /// Connections per trial.
    pub connections: usize,
    /// Connections started per second.
    pub rate: f64,
    /// Client CPU per connection (connect, fetch, close), µs.
    pub client_cpu_per_conn_us: Summary,
    /// Server CPU per connection, µs.
    pub server_cpu_per_conn_us: Summary,
    /// Connection attempts per connection.
    pub attempts_per_conn: Summary,
    /// Share of connections that ended up on QUIC (0 … 1).
    pub quic_share: Summary,
    /// Median time from connect call to the object fetched, µs.
    pub delay_median_us: Summary,
    /// The single-protocol taps variant it is compared with.
    pub single: SecureVariant,
    /// Client CPU / single-protocol client CPU (same repetition), median.
    pub client_vs_single: f64,
    /// Server CPU / single-protocol server CPU (same repetition), median.
    pub server_vs_single: f64,
    /// Client CPU / raw client CPU of the same protocol (same repetition), median.
    pub client_vs_raw: f64,
    /// Server CPU / raw server CPU of the same protocol (same repetition), median.
    pub server_vs_raw: f64,
    /// Connections that failed (all repetitions).
    pub failed: usize,
    /// The first failure.
    pub first_error: Option<String>,
    /// Trials in which the server did not see every connection closed in time.
    pub server_timeouts: usize,
}

struct SecureMatrix {
    objects: Vec<usize>,
    variants: Vec<(SecureVariant, Option<u32>)>,
    count: usize,
    reps: usize,
}

/// Connections started per second in a trial (open loop, as the paper's request rate):
/// every variant's window is as long and the server sees the same arrivals, whether a
/// race waits 250 ms for a dead QUIC or not.
const RATE: f64 = 500.0;

fn secure_matrix(cfg: &Config) -> SecureMatrix {
    let (objects, hits, count, reps): (Vec<usize>, &[u32], usize, usize) = if cfg.quick {
        (vec![1024], &[0, 80, 100], 10, 1)
    } else {
        (
            vec![1024, 35 * 1024],
            &[0, 50, 80, 100],
            400,
            cfg.reps().min(5),
        )
    };
    // Each protocol's raw and single connects next to the races that end on it, so the
    // trials a ratio pairs are close in time (the machine's load drifts).
    let mut variants = Vec::new();
    for (raw, single, race) in [
        (
            SecureVariant::RawTls,
            SecureVariant::TapsTls,
            SecureVariant::RaceQuicDead,
        ),
        (
            SecureVariant::RawQuic,
            SecureVariant::TapsQuic,
            SecureVariant::RaceBothAlive,
        ),
    ] {
        variants.push((raw, None));
        variants.push((single, None));
        variants.extend(hits.iter().map(|&h| (race, Some(h))));
    }
    SecureMatrix {
        objects,
        variants,
        count,
        reps,
    }
}

/// The trials of the secure experiment.
pub(super) fn secure_trials(cfg: &Config) -> usize {
    let m = secure_matrix(cfg);
    m.objects.len() * m.variants.len() * m.reps
}

/// The secure experiment: for each object size, every variant once per repetition
/// (interleaved), `count` sequential connections per trial, each fetching the object.
pub(crate) fn run_secure(
    cfg: &Config,
    launcher: &Launcher,
    progress: &mut Progress,
) -> Result<Vec<SecurePoint>, String> {
    let m = secure_matrix(cfg);
    let test_pki =
        TestPki::new(&[crate::worker::SERVER_NAME]).map_err(|e| format!("test PKI: {e}"))?;
    let pki = Pki {
        ca: test_pki.ca.clone(),
        cert: test_pki.cert.clone(),
        key: test_pki.key.clone(),
    };
    let mut servers: Vec<((Impl, SecureListen), Server)> = Vec::new();
    for (v, _) in &m.variants {
        if !servers.iter().any(|(k, _)| *k == v.server()) {
            let (imp, listen) = v.server();
            let spec = ServerSpec {
                imp,
                mode: ServeMode::Http,
                dual: false,
                listen: Listen::Tcp,
                secure: Some(SecureServe {
                    listen,
                    pki: pki.clone(),
                }),
            };
            servers.push((v.server(), Server::start(launcher, spec)?));
        }
    }
    let mut points = Vec::new();
    for &object in &m.objects {
        let mut trials: Vec<Vec<Trial>> = vec![Vec::new(); m.variants.len()];
        for rep in 0..m.reps {
            for (i, (variant, hit)) in m.variants.iter().enumerate() {
                progress.step(&format!(
                    "secure {} {}{} rep {}/{}",
                    human_bytes(object as u64),
                    variant.label(),
                    hit.map(|h| format!(" {h}%")).unwrap_or_default(),
                    rep + 1,
                    m.reps
                ));
                let server = servers
                    .iter_mut()
                    .find(|(k, _)| *k == variant.server())
                    .map(|(_, s)| s)
                    .ok_or("no server")?;
                let spec = ClientSpec::Secure {
                    client: variant.client(),
                    port: server.port,
                    count: m.count,
                    rate: RATE,
                    object,
                    hit_percent: hit.unwrap_or(0),
                    pki: pki.clone(),
                };
                // The warm-up connections (one per context) are over before the window.
                let warm = if variant.races() { 2 } else { 1 };
                let setup = Expect {
                    accepted: warm,
                    closed: warm,
                };
                let t = run_trial(progress, launcher, server, &spec, setup, |r| Expect {
                    accepted: r.ok as u64,
                    closed: r.ok as u64,
                })?;
                trials[i].push(t);
            }
        }
        points.extend(secure_points(&m, object, &trials));
    }
    drop(test_pki);
    Ok(points)
}

/// The points of one object size, with their ratios.
fn secure_points(m: &SecureMatrix, object: usize, trials: &[Vec<Trial>]) -> Vec<SecurePoint> {
    let per_conn = |v: u64, t: &Trial| v as f64 / t.client.ok.max(1) as f64;
    let mut group: Vec<SecurePoint> = m
        .variants
        .iter()
        .zip(trials)
        .map(|((variant, hit), ts)| {
            let f = faults(ts);
            SecurePoint {
                variant: *variant,
                hit_percent: *hit,
                object,
                connections: m.count,
                rate: RATE,
                client_cpu_per_conn_us: summarize(ts, |t| per_conn(t.client.cpu.total_us(), t)),
                server_cpu_per_conn_us: summarize(ts, |t| per_conn(t.server_cpu_us, t)),
                attempts_per_conn: summarize(ts, |t| per_conn(t.client.attempts as u64, t)),
                quic_share: summarize(ts, |t| per_conn(t.client.quic as u64, t)),
                delay_median_us: summarize(ts, |t| median(&t.client.delays_us)),
                single: variant.single_baseline(),
                client_vs_single: f64::NAN,
                server_vs_single: f64::NAN,
                client_vs_raw: f64::NAN,
                server_vs_raw: f64::NAN,
                failed: f.failed,
                first_error: f.first_error,
                server_timeouts: f.server_timeouts,
            }
        })
        .collect();
    let snapshot = group.clone();
    let find = |v: SecureVariant| snapshot.iter().find(|p| p.variant == v);
    for p in &mut group {
        if let Some(s) = find(p.variant.single_baseline()) {
            p.client_vs_single =
                pairwise(&p.client_cpu_per_conn_us, &s.client_cpu_per_conn_us, ratio);
            p.server_vs_single =
                pairwise(&p.server_cpu_per_conn_us, &s.server_cpu_per_conn_us, ratio);
        }
        if let Some(r) = find(p.variant.raw_baseline()) {
            p.client_vs_raw = pairwise(&p.client_cpu_per_conn_us, &r.client_cpu_per_conn_us, ratio);
            p.server_vs_raw = pairwise(&p.server_cpu_per_conn_us, &r.server_cpu_per_conn_us, ratio);
        }
    }
    group
}
