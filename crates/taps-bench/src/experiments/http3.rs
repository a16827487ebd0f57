//! The HTTP/3 experiment (beside experiment 4; `taps-bench http3`, also run by
//! `taps-bench http`): client CPU per request of taps' HTTP client (HTTP/3 only, HTTP/3
//! raced against HTTP/2, HTTP/2 only) against h3 + h3-quinn and hyper over tokio-rustls
//! used directly, in the same run, against one caddy serving HTTP/3 and HTTP/2 on one
//! port of `localhost`. Two shapes of work, alike for every variant: `requests` GETs on
//! the one connection a warm-up request opened, and `requests` GETs each on a new
//! connection (closed after it).

#![forbid(unsafe_code)]

use std::path::Path;

use serde::Serialize;
use taps_testkit::caddy::{have_caddy, Caddy, Site};
use taps_testkit::TestPki;

use super::runner::{run_client_trial, Progress};
use super::summary::{pairwise, Summary};
use super::Config;
use crate::measure::ratio;
use crate::process::{ClientTrial, Launcher};
use crate::worker::{ClientSpec, H3Client, H3Load};

/// The variable that fixes QUIC's head start in the taps race, ms (tests set it long, so
/// that a busy machine cannot make TLS/TCP win); unset: taps' default.
pub const HEAD_START_ENV: &str = "TAPS_BENCH_QUIC_HEAD_START_MS";

/// The body every response carries, bytes.
const OBJECT: usize = 1024;

/// A client variant of the HTTP/3 experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum H3Variant {
    /// h3 + h3-quinn on a plain quinn `Endpoint`.
    RawH3,
    /// `taps::http::Client`, HTTP/3 only.
    TapsH3,
    /// `taps::http::Client`, every version: QUIC raced against TLS/TCP (HTTP/3 wins).
    TapsRace,
    /// hyper's HTTP/2 client connection over tokio-rustls.
    RawH2,
    /// `taps::http::Client`, HTTP/2 and HTTP/1.1 only.
    TapsH2,
}

impl H3Variant {
    /// Every variant, in the order a repetition runs them (each baseline before the taps
    /// variants compared with it).
    pub const ALL: [H3Variant; 5] = [
        H3Variant::RawH3,
        H3Variant::TapsH3,
        H3Variant::TapsRace,
        H3Variant::RawH2,
        H3Variant::TapsH2,
    ];

    /// A short label.
    pub fn label(self) -> &'static str {
        match self {
            H3Variant::RawH3 => "h3 + h3-quinn (direct)",
            H3Variant::TapsH3 => "taps HTTP/3 only",
            H3Variant::TapsRace => "taps raced (HTTP/3 wins)",
            H3Variant::RawH2 => "hyper h2 + tokio-rustls (direct)",
            H3Variant::TapsH2 => "taps HTTP/2 only",
        }
    }

    fn client(self) -> H3Client {
        match self {
            H3Variant::RawH3 => H3Client::RawH3,
            H3Variant::TapsH3 => H3Client::TapsH3,
            H3Variant::TapsRace => H3Client::TapsRace,
            H3Variant::RawH2 => H3Client::RawH2,
            H3Variant::TapsH2 => H3Client::TapsH2,
        }
    }

    /// The baseline a taps variant is compared with: the crates used directly for the
    /// protocol its requests go over (`None` for a baseline).
    pub fn baseline(self) -> Option<H3Variant> {
        match self {
            H3Variant::TapsH3 | H3Variant::TapsRace => Some(H3Variant::RawH3),
            H3Variant::TapsH2 => Some(H3Variant::RawH2),
            H3Variant::RawH3 | H3Variant::RawH2 => None,
        }
    }

    /// Whether every response must come over HTTP/3.
    pub fn over_h3(self) -> bool {
        matches!(
            self,
            H3Variant::RawH3 | H3Variant::TapsH3 | H3Variant::TapsRace
        )
    }
}

/// One variant in one shape of work, over the repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct H3Point {
    /// The client variant.
    pub variant: H3Variant,
    /// Each request on a new connection (else all on one kept connection).
    pub new_connections: bool,
    /// Requests per trial.
    pub requests: usize,
    /// Body size of every response, bytes.
    pub object: usize,
    /// Client CPU (user + system, the whole process) per request, µs.
    pub cpu_per_request_us: Summary,
    /// Connections the client opened in the window, per trial.
    pub connections: Summary,
    /// Responses over HTTP/3, per trial.
    pub h3_responses: Summary,
    /// The variant it is compared with.
    pub baseline: Option<H3Variant>,
    /// CPU per request / the baseline's (same repetition), median; NaN for a baseline.
    pub vs_baseline: f64,
    /// Requests that failed or got other than status 200 with `object` bytes.
    pub failed: usize,
    /// The first failure.
    pub first_error: Option<String>,
    /// A trial whose work was not what every variant must do (responses, bytes,
    /// connections opened, protocol), the first one in words.
    pub work_problem: Option<String>,
}

/// What the HTTP/3 experiment measured, or why it was skipped.
#[derive(Debug, Clone, Default, Serialize)]
pub struct H3Results {
    /// Why it did not run (caddy missing), if it did not.
    pub skipped: Option<String>,
    /// `caddy version`.
    pub server: String,
    /// QUIC's head start in the race when [`HEAD_START_ENV`] fixed it, ms.
    pub head_start_ms: Option<u64>,
    /// Every variant in both shapes of work.
    pub points: Vec<H3Point>,
}

/// Requests per trial (one connection, a new connection each) and repetitions.
struct H3Matrix {
    shapes: [(bool, usize); 2],
    reps: usize,
}

fn h3_matrix(cfg: &Config) -> H3Matrix {
    if cfg.quick {
        H3Matrix {
            shapes: [(false, 20), (true, 4)],
            reps: cfg.reps(),
        }
    } else {
        H3Matrix {
            shapes: [(false, 2000), (true, 200)],
            reps: cfg.reps(),
        }
    }
}

/// The trials of the HTTP/3 experiment.
pub(super) fn http3_trials(cfg: &Config) -> usize {
    let m = h3_matrix(cfg);
    m.shapes.len() * H3Variant::ALL.len() * m.reps
}

/// caddy's version line.
fn caddy_version() -> String {
    std::process::Command::new("caddy")
        .arg("version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// caddy serving HTTP/3 and HTTP/2 on one port of `localhost`, every response
/// [`OBJECT`] bytes, with the test PKI's certificate; an error where it would not start.
fn start_caddy(pki: &TestPki) -> Result<Caddy, String> {
    let site = Site {
        h3: true,
        body: "x".repeat(OBJECT),
        ..Site::default()
    };
    let (cert, key): (&Path, &Path) = (&pki.cert, &pki.key);
    std::panic::catch_unwind(|| Caddy::start(std::slice::from_ref(&site), cert, key)).map_err(|p| {
        let why = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
        format!("caddy: {}", why.unwrap_or_else(|| "did not start".into()))
    })
}

/// The HTTP/3 experiment: caddy started on a free port; per repetition, per shape of
/// work, every variant once (interleaved), each a client process of its own. Without
/// caddy it is skipped (and its goals are not met).
pub(crate) fn run_http3(
    cfg: &Config,
    launcher: &Launcher,
    progress: &mut Progress,
) -> Result<H3Results, String> {
    let head_start_ms = match std::env::var(HEAD_START_ENV) {
        Ok(v) => Some(
            v.parse::<u64>()
                .map_err(|e| format!("{HEAD_START_ENV}={v}: {e}"))?,
        ),
        Err(_) => None,
    };
    if !have_caddy() {
        return Ok(H3Results {
            skipped: Some("skipped: caddy is not installed (scripts/deps.sh installs it)".into()),
            head_start_ms,
            ..H3Results::default()
        });
    }
    let m = h3_matrix(cfg);
    let pki = TestPki::new(&["localhost"]).map_err(|e| format!("test PKI: {e}"))?;
    let caddy = start_caddy(&pki)?;
    let mut trials: Vec<Vec<Vec<ClientTrial>>> =
        vec![vec![Vec::new(); H3Variant::ALL.len()]; m.shapes.len()];
    for rep in 0..m.reps {
        for (s, &(new_connections, requests)) in m.shapes.iter().enumerate() {
            for (i, v) in H3Variant::ALL.iter().enumerate() {
                progress.step(&format!(
                    "http3 {requests} requests {} {} rep {}/{}",
                    if new_connections {
                        "each on a new connection"
                    } else {
                        "on one connection"
                    },
                    v.label(),
                    rep + 1,
                    m.reps
                ));
                let spec = ClientSpec::H3(H3Load {
                    client: v.client(),
                    port: caddy.ports[0],
                    requests,
                    object: OBJECT,
                    new_connections,
                    ca: pki.ca.clone(),
                    head_start_ms,
                });
                trials[s][i].push(run_client_trial(progress, launcher, &spec)?);
            }
        }
    }
    let mut points = Vec::new();
    for (s, &(new_connections, requests)) in m.shapes.iter().enumerate() {
        points.extend(h3_points(new_connections, requests, &trials[s]));
    }
    drop(caddy);
    Ok(H3Results {
        skipped: None,
        server: caddy_version(),
        head_start_ms,
        points,
    })
}

/// Why trial `t` of `v` did not do the work every variant must do, if it did not: every
/// response (status 200, [`OBJECT`] bytes), the connections the shape opens (none, or
/// one per request), every response over the variant's protocol.
pub(crate) fn work_problem(
    v: H3Variant,
    new_connections: bool,
    requests: usize,
    t: &crate::worker::ClientResult,
) -> Option<String> {
    let conns = if new_connections { requests } else { 0 };
    let h3 = if v.over_h3() { requests } else { 0 };
    let want = [
        ("responses", t.ok, requests),
        ("body bytes", t.bytes as usize, requests * OBJECT),
        ("connections opened", t.attempts, conns),
        ("responses over HTTP/3", t.quic, h3),
    ];
    want.iter()
        .find(|(_, got, want)| got != want)
        .map(|(what, got, want)| format!("{}: {what} {got}, expected {want}", v.label()))
}

/// The points of one shape of work, with their ratios.
fn h3_points(new_connections: bool, requests: usize, trials: &[Vec<ClientTrial>]) -> Vec<H3Point> {
    let of = |ts: &[ClientTrial], f: &dyn Fn(&ClientTrial) -> f64| {
        Summary::of(ts.iter().map(f).collect())
    };
    let mut group: Vec<H3Point> = H3Variant::ALL
        .iter()
        .zip(trials)
        .map(|(&variant, ts)| H3Point {
            variant,
            new_connections,
            requests,
            object: OBJECT,
            cpu_per_request_us: of(ts, &|t| {
                t.client.cpu.total_us() as f64 / t.client.ok.max(1) as f64
            }),
            connections: of(ts, &|t| t.client.attempts as f64),
            h3_responses: of(ts, &|t| t.client.quic as f64),
            baseline: variant.baseline(),
            vs_baseline: f64::NAN,
            failed: ts.iter().map(|t| t.client.failed).sum(),
            first_error: ts.iter().find_map(|t| t.client.first_error.clone()),
            work_problem: ts
                .iter()
                .find_map(|t| work_problem(variant, new_connections, requests, &t.client)),
        })
        .collect();
    let snapshot = group.clone();
    for p in &mut group {
        if let Some(b) = p
            .baseline
            .and_then(|b| snapshot.iter().find(|q| q.variant == b))
        {
            p.vs_baseline = pairwise(&p.cpu_per_request_us, &b.cpu_per_request_us, ratio);
        }
    }
    group
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::ClientResult;

    #[test]
    fn a_trial_counts_only_with_the_work_of_its_shape() {
        let done = |ok: usize, conns: usize, quic: usize| ClientResult {
            ok,
            bytes: (ok * OBJECT) as u64,
            attempts: conns,
            quic,
            ..ClientResult::default()
        };
        assert_eq!(
            work_problem(H3Variant::TapsRace, false, 10, &done(10, 0, 10)),
            None
        );
        assert_eq!(
            work_problem(H3Variant::RawH2, true, 10, &done(10, 10, 0)),
            None
        );
        // A response missing, a connection opened where the shape keeps one, a race that
        // ended on HTTP/2, a short body.
        for (v, new, r) in [
            (H3Variant::TapsH3, false, done(9, 0, 9)),
            (H3Variant::RawH3, false, done(10, 1, 10)),
            (H3Variant::TapsRace, true, done(10, 10, 9)),
            (H3Variant::TapsH2, true, done(10, 9, 0)),
        ] {
            assert!(work_problem(v, new, 10, &r).is_some(), "{v:?}");
        }
        let mut short = done(10, 0, 0);
        short.bytes -= 1;
        assert!(work_problem(H3Variant::TapsH2, false, 10, &short).is_some());
    }
}
