//! `taps-bench lab` (issue 14 §3 and §4), in network namespaces (root): SCTP against TCP
//! over a 1500-byte path (throughput and CPU per byte), 10 MiB at 2 % loss and 100 ms RTT
//! over SCTP, TCP CUBIC and the kernel's default TCP (netlab's `sctp-loss`), and first
//! contact at 50 ms RTT against curl (netlab's `rx-first`, and `rd-first` for the healthy
//! network). The netlab scenarios run in this process as the `netlab` command runs them
//! (their checks, seed 1); their figures come from [`netlab::scenario::Outcome`].

#![forbid(unsafe_code)]

use serde::Serialize;

use super::runner::Progress;
use super::sctp_speed::{speed_on, SpeedPoint};
use super::Config;
use crate::process::Launcher;

/// [`SpeedPoint::path`] of the 1500-byte path.
pub const PATH_1500: &str = "1500-byte path";

/// The MTU of that path.
const MTU: &str = "1500";

/// The netlab scenarios run, in order (the quick matrix leaves out `sctp-loss`, about
/// three minutes of transfers at 2 % loss; netlab's own tests run it).
const SCENARIOS: [&str; 3] = ["rx-first", "rd-first", "sctp-loss"];

/// The scenarios `cfg` runs.
fn scenarios(cfg: &Config) -> &'static [&'static str] {
    if cfg.quick {
        &SCENARIOS[..2]
    } else {
        &SCENARIOS
    }
}

/// What the netlab scenarios measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LabResults {
    /// `sctp-loss`: 10 MiB at 2 % loss each way, 100 ms RTT.
    pub loss: Option<LossTimes>,
    /// `rx-first`: first contact, dead IPv6, RTT 50 ms to the hosts and the DNS server.
    pub rx_first: Option<FirstContact>,
    /// `rd-first`: first contact, both families work (IPv6 RTT 40 ms), DNS RTT 50 ms.
    pub rd_first: Option<FirstContact>,
}

/// The three transfer times of `sctp-loss`.
#[derive(Debug, Clone, Serialize)]
pub struct LossTimes {
    /// Over SCTP (usrsctp's default congestion control), seconds.
    pub sctp_s: f64,
    /// Over TCP with CUBIC on the client's routes, seconds.
    pub tcp_cubic_s: f64,
    /// Over TCP with the client namespace's default congestion control, seconds.
    pub tcp_default_s: f64,
    /// That default's name.
    pub default_cc: String,
    /// The scenario's failed checks (empty when it passed).
    pub failed: Vec<String>,
}

/// One first-contact scenario.
#[derive(Debug, Clone, Serialize)]
pub struct FirstContact {
    /// The first DNS answer, ms since the race began.
    pub answer_ms: f64,
    /// Connected, ms after that answer.
    pub after_answer_ms: f64,
    /// Attempts started.
    pub attempts: f64,
    /// curl's `time_connect` in the same lab, ms (`rx-first` only).
    pub curl_ms: Option<f64>,
    /// Which curl (`curl 7.88.1`; `rx-first` only).
    #[serde(default)]
    pub curl_version: Option<String>,
    /// Whether IPv6 won (`None` when nothing connected).
    pub ipv6_won: Option<bool>,
    /// The scenario's failed checks (empty when it passed).
    pub failed: Vec<String>,
}

/// The trials of this experiment (the transfers, and one step per scenario).
pub(super) fn lab_trials(cfg: &Config) -> usize {
    cfg.reps() * 2 + scenarios(cfg).len()
}

/// SCTP against TCP on a 1500-byte path: the workers run in a namespace of their own
/// (nothing else in it) whose loopback has MTU 1500, so SCTP sends 1,500-byte IP packets (1,444 bytes of data
/// each, built by usrsctp), while TCP keeps its segmentation offload (64 KiB through the
/// stack at both ends, as on a veth pair; a NIC's receiver would still see 1,500-byte
/// frames, so this path flatters TCP).
pub(crate) fn run_path_speed(
    cfg: &Config,
    launcher: &Launcher,
    progress: &mut Progress,
) -> Result<SpeedPoint, String> {
    let scratch = netlab::Scratch::new().map_err(|e| format!("namespace: {e}"))?;
    let ns = scratch.netns();
    ns.ip(&["link", "set", "lo", "mtu", MTU])
        .map_err(|e| format!("setting the loopback MTU: {e}"))?;
    let mut args = vec![
        "netns".to_string(),
        "exec".to_string(),
        ns.name().to_string(),
        launcher.program.display().to_string(),
    ];
    args.extend(launcher.args.iter().cloned());
    let inside = Launcher {
        program: "ip".into(),
        args,
    };
    let point = speed_on(cfg, &inside, progress, PATH_1500);
    // The transfer's own error first; a namespace that would not go away fails the phase
    // even when the transfer worked.
    let torn_down = scratch.teardown();
    let point = point?;
    torn_down.map_err(|e| format!("namespace teardown: {e}"))?;
    Ok(point)
}

/// Runs the netlab scenarios; a scenario that did not record its figures leaves its
/// field `None` and says why in the returned errors (one whose checks failed keeps its
/// figures and lists the failures in `failed`).
pub(crate) fn run_scenarios(cfg: &Config, progress: &mut Progress) -> (LabResults, Vec<String>) {
    let mut r = LabResults::default();
    let mut errors = Vec::new();
    for &name in scenarios(cfg) {
        progress.step(&format!("lab {name}"));
        let opts = netlab::scenario::RunOptions {
            seed: Some(1),
            ..Default::default()
        };
        let out = match netlab::scenario::run(name, &opts) {
            Ok(out) => out,
            Err(e) => {
                errors.push(format!("{name}: {e}"));
                continue;
            }
        };
        let measured = match name {
            "sctp-loss" => {
                r.loss = loss_times(&out);
                r.loss.is_some()
            }
            "rx-first" => {
                r.rx_first = first_contact(&out);
                r.rx_first.is_some()
            }
            _ => {
                r.rd_first = first_contact(&out);
                r.rd_first.is_some()
            }
        };
        if !measured {
            errors.push(format!("{name}: {}", out.failures().join("; ")));
        }
    }
    (r, errors)
}

/// `sctp-loss`'s times, if it recorded all three.
fn loss_times(out: &netlab::scenario::Outcome) -> Option<LossTimes> {
    let fig = |n: &str| out.figure_of(n);
    Some(LossTimes {
        sctp_s: fig("sctp_s")?,
        tcp_cubic_s: fig("tcp_cubic_s")?,
        tcp_default_s: fig("tcp_default_s")?,
        default_cc: out.label_of("default_cc").unwrap_or("?").to_string(),
        failed: out.failures(),
    })
}

/// A first-contact scenario's figures, if it recorded them.
fn first_contact(out: &netlab::scenario::Outcome) -> Option<FirstContact> {
    let fig = |n: &str| out.figure_of(n);
    Some(FirstContact {
        answer_ms: fig("answer_ms")?,
        after_answer_ms: fig("after_answer_ms")?,
        attempts: fig("attempts")?,
        curl_ms: fig("curl_ms"),
        curl_version: out.label_of("curl_version").map(str::to_string),
        ipv6_won: fig("ipv6_won").filter(|v| v.is_finite()).map(|v| v > 0.5),
        failed: out.failures(),
    })
}
