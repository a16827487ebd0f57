//! `taps-bench multipath`: the CMT-SCTP scheduling paper's three experiments (the seed
//! cmt-sctp-scheduling) on netlab with real usrsctp at both ends (`netlab sctp-mp-peer`,
//! one process per namespace): CMT on, round robin (no pinning) against Fixed (each stream
//! pinned to one path with `send_on_path`), over links with the paper's rates, delays and
//! 100-packet queues. (1) two 10 Mbit/s paths, path B 10/50/75 ms, buffers 64-288 KiB:
//! throughput and per-stream message delay; (2) path B 25/50 Mbit/s, the application
//! filling streams in turn or by their unsent bytes; (3) three paths (10, 10, 1 Mbit/s;
//! 10, 10, 50 ms), seven streams, NR-SACK on and off.
//!
//! Each point is one association: a warm-up, then a measurement window at the receiver
//! ([`Timing`]), repeated ten times where the paper's claims rest and three times
//! elsewhere (the grid: `plan`), in rounds over the grid (so a slow drift of the machine
//! spreads over every point). Needs root (netlab) and the `netlab` binary beside `taps-bench` (or `NETLAB_BIN`).

#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use netlab::sctp_ledger::{PerLink, LEDGER_LINKS, LEDGER_STREAMS};
use netlab::sctp_mp::{PeerConfig, Saturate};
use netlab::sctp_mp_proc::PeerProcess;
use netlab::{Lab, LabOptions, Match, Rule};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod plan;

use plan::{plan, Plan};
pub(crate) use plan::{PATH_A, SEND_SPLIT_ONLY};

/// The paper's message size is 1,452 B at MTU 1,500 (IP 20 + SCTP 12 + DATA 16); ours is
/// 1,444 B at a path MTU of 1,472 (1,500 minus IPv4 and UDP headers, the UDP
/// encapsulation), so every message is one full packet.
pub(super) const MESSAGE: usize = 1444;
/// The path MTU set on every path (PMTU discovery off).
pub(super) const PATH_MTU: u32 = 1472;
/// Bottleneck queue of every link, packets (the paper's).
pub(super) const QUEUE_PACKETS: u32 = 100;

/// Environment variable: instead of running, re-read this `multipath.json` and write the
/// report again (after a change to the report's text or plots). Further files after
/// commas are later runs of other points ([`MultipathResults::add_later`]), added to it.
pub const REPLOT_ENV: &str = "TAPS_BENCH_MULTIPATH_REPLOT";

/// Reads a `multipath.json` written by an earlier run.
pub fn read_multipath(path: &std::path::Path) -> Result<MultipathResults, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Environment variable: run only the points whose `exp N SERIES σ=S` contains its value
/// (or one of its `|`-separated values).
pub const FILTER_ENV: &str = "TAPS_BENCH_MULTIPATH_ONLY";

/// A point's label, `exp N SERIES σ=S`: what [`FILTER_ENV`] selects by and what
/// [`LaterRun::points`] lists.
fn point_label(experiment: u8, series: &str, sigma_kib: u32) -> String {
    format!("exp {experiment} {series} σ={sigma_kib}")
}

/// How long each point runs.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Timing {
    /// Settling time before the window (the paper: 19 s).
    pub warmup_ms: u64,
    /// The window (the paper: 300 s).
    pub measure_ms: u64,
}

/// One link: rate and one-way delay.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct LinkSpec {
    /// Rate, Mbit/s.
    pub mbit: f64,
    /// One-way delay, ms.
    pub delay_ms: u64,
}

/// One run of one point (the report groups the runs of a point).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MultipathPoint {
    /// Which run of its point this is, from 0.
    #[serde(default)]
    pub run: u32,
    /// Experiment 1, 2 or 3.
    pub experiment: u8,
    /// The curve it belongs to (e.g. `Fixed, δB=75 ms`).
    pub series: String,
    /// Send and receive buffer σ, KiB.
    pub buffer_kib: u32,
    /// The links (path A, B, C).
    pub links: Vec<LinkSpec>,
    /// Fixed (pinned) or round robin.
    pub fixed: bool,
    /// The application fills streams by their unsent bytes.
    pub fill_by_queue: bool,
    /// NR-SACK offered by both ends.
    pub nr_sack: bool,
    /// The receiver NR-acks every chunk on arrival (usrsctp's sysctl `sctp_do_drain=0`,
    /// as the paper's simulator does), not once it is delivered.
    #[serde(default)]
    pub nr_on_arrival: bool,
    /// Only the send buffer is split among the paths (usrsctp's sysctl
    /// `sctp_buffer_splitting=1`, INET's `senderOnly`), not the peer's receive window too.
    #[serde(default)]
    pub send_split_only: bool,
    /// Payload throughput of the association, Mbit/s.
    #[serde(deserialize_with = "nan_if_null")]
    pub mbit: f64,
    /// Mean message delay over all streams, ms.
    #[serde(deserialize_with = "nan_if_null")]
    pub delay_ms: f64,
    /// Per stream: (Mbit/s, mean delay ms).
    #[serde(deserialize_with = "nan_pairs_if_null")]
    pub streams: Vec<(f64, f64)>,
    /// Messages that arrived out of order within their stream (must be 0).
    pub out_of_order: u64,
    /// Per link: packets the bottleneck queue dropped (client to server) during the point.
    pub queue_drops: Vec<u64>,
    /// Per path at the end, as the client saw it: state, cwnd, srtt, RTO.
    pub paths: Value,
    /// Per link, per stream: user data bytes (first sent, resent) over it toward the
    /// server during the run, counted by netlab's SCTP ledger from the DATA chunks.
    #[serde(default)]
    pub wire: Vec<Vec<[u64; 2]>>,
    /// Fixed runs: how well each stream kept to its path, from `wire`.
    #[serde(default)]
    pub pinning: Option<Pinning>,
    /// Times of 200 ms or more when no new DATA crossed any link, each told from the wire
    /// (netlab's SCTP ledger timeline: the last SACK before, the hole, its drop, its resend).
    #[serde(default)]
    pub stalls: Vec<String>,
    /// What the receiver's SACKs said the sender held, averaged over the measured window.
    #[serde(default)]
    pub held: Option<netlab::sctp_ledger::Held>,
    /// Why the point failed, if it did.
    pub error: Option<String>,
}

/// Where a Fixed run's data went, from the wire (CMT on).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pinning {
    /// User data bytes first sent, all streams.
    pub new_bytes: u64,
    /// Of those, bytes first sent over a link that is not their stream's path (must be 0).
    pub crossed: u64,
    /// User data bytes resent, all streams.
    pub resent: u64,
    /// Of those, bytes resent over another link than their stream's path (usrsctp's CMT
    /// sends retransmissions to the path with the largest ssthresh).
    pub resent_elsewhere: u64,
}

/// Per link and stream, the (first sent, resent) user data bytes the ledger counted
/// between two readings of its totals (`before` and `after`: first sent, resent), for
/// `links` links and `streams` streams.
fn wire_bytes(
    before: (PerLink, PerLink),
    after: (PerLink, PerLink),
    links: usize,
    streams: usize,
) -> Vec<Vec<[u64; 2]>> {
    (0..links.min(LEDGER_LINKS))
        .map(|l| {
            (0..streams.min(LEDGER_STREAMS))
                .map(|s| {
                    [
                        after.0[l][s] - before.0[l][s],
                        after.1[l][s] - before.1[l][s],
                    ]
                })
                .collect()
        })
        .collect()
}

/// How the streams kept to the paths `map` pins them to (stream s on path `map[s]`).
fn pinning(wire: &[Vec<[u64; 2]>], map: &[usize]) -> Pinning {
    let mut p = Pinning::default();
    for (link, per_stream) in wire.iter().enumerate() {
        for (s, [first, again]) in per_stream.iter().enumerate() {
            let own = map.get(s) == Some(&link);
            p.new_bytes += first;
            p.resent += again;
            if !own {
                p.crossed += first;
                p.resent_elsewhere += again;
            }
        }
    }
    p
}

/// JSON writes a NaN (not measured) as null: read it back as NaN.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// [`nan_if_null`] for the per-stream pairs.
fn nan_pairs_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<(f64, f64)>, D::Error> {
    let v = Vec::<(Option<f64>, Option<f64>)>::deserialize(d)?;
    Ok(v.into_iter()
        .map(|(a, b)| (a.unwrap_or(f64::NAN), b.unwrap_or(f64::NAN)))
        .collect())
}

/// What a run of the experiment produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MultipathResults {
    /// Every point, in the order run.
    pub points: Vec<MultipathPoint>,
    /// How long each point ran.
    pub timing: Timing,
    /// The sysctls and options set, as text for the report.
    pub knobs: Vec<String>,
    /// Wall-clock time of the whole experiment, s.
    pub duration_s: f64,
    /// Points added afterwards by runs of their own ([`MultipathResults::add_later`]).
    #[serde(default)]
    pub later: Vec<LaterRun>,
}

/// A run of some points of the grid alone (with [`FILTER_ENV`]), added to a whole run's
/// results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LaterRun {
    /// The points it ran, as `exp N series σ=S` labels.
    pub points: Vec<String>,
    /// Of those, the points the whole run had too: their earlier runs were dropped.
    #[serde(default)]
    pub replaced: Vec<String>,
    /// Its wall-clock time, s.
    pub duration_s: f64,
}

impl MultipathResults {
    /// Adds the points of `later`, a run with the same timing (runs of different lengths
    /// would be averaged as if alike: refused). A point both runs have is taken from
    /// `later` alone (its earlier runs are dropped, and the report says so), so that no
    /// figure mixes two runs.
    pub fn add_later(&mut self, later: MultipathResults) -> Result<(), String> {
        if later.timing.warmup_ms != self.timing.warmup_ms
            || later.timing.measure_ms != self.timing.measure_ms
        {
            return Err("the later run's warm-up or window differs from the whole run's".into());
        }
        let label = |p: &MultipathPoint| point_label(p.experiment, &p.series, p.buffer_kib);
        let mut points: Vec<String> = later.points.iter().map(label).collect();
        points.sort();
        points.dedup();
        let mut replaced: Vec<String> = self
            .points
            .iter()
            .map(label)
            .filter(|l| points.contains(l))
            .collect();
        replaced.sort();
        replaced.dedup();
        self.points.retain(|p| !replaced.contains(&label(p)));
        self.points.extend(later.points);
        self.later.push(LaterRun {
            points,
            replaced,
            duration_s: later.duration_s,
        });
        Ok(())
    }
}

fn config(p: &Plan, t: Timing) -> PeerConfig {
    PeerConfig {
        listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 11)), 9911),
        sctp_port: 5001,
        extra_paths: p.links.len() - 1,
        hb_ms: 1000,
        rto_max_ms: 0,
        pathmaxrxt: 5,
        pf_threshold: 5,
        cmt: true,
        phases: Vec::new(),
        buffer: Some(p.buffer_kib * 1024),
        nr_sack: p.nr_sack,
        nr_on_arrival: p.nr_on_arrival,
        send_split_only: p.send_split_only,
        mtu: Some(PATH_MTU),
        chunk_overhead: Some(0),
        saturate: Some(Saturate {
            streams: p.streams,
            msg: MESSAGE,
            map: p.map.clone(),
            fill_by_queue: p.fill_by_queue,
            warmup_ms: t.warmup_ms,
            measure_ms: t.measure_ms,
        }),
    }
}

/// The options every point sets, for the report.
fn knobs() -> Vec<String> {
    vec![
        "CMT base (sysctl sctp_cmt_on_off=1 and SCTP_CMT_ON_OFF=1 on both sockets) for RR and Fixed".into(),
        "DAC on (sctp_cmt_use_dac=1); buffer splitting for send and receive (sctp_buffer_splitting=3), except the curves of experiment 3 named \"send split only\" (1)".into(),
        format!("path MTU {PATH_MTU} on every path (PMTU discovery off), messages {MESSAGE} B, ordered"),
        "sctp_peer_chunk_oh=0 (usrsctp charges 256 B per chunk in flight against the peer's window by default; the simulation charges nothing)".into(),
        "SO_SNDBUF = SO_RCVBUF = σ on both ends, taps' receive budget = σ".into(),
        "NR-SACK offered by both ends in experiments 1 and 2 (as in the paper), on and off in 3".into(),
        format!("links: user-space bridge per path, rate and one-way delay as given, {QUEUE_PACKETS}-packet FIFO"),
        "Max.Burst 4 counted per send (sysctl sctp_use_cwnd_based_maxburst=0): usrsctp's default cuts a path's cwnd to its flight + 4 packets whenever it sends short of its window, which kept Fixed's paths at 5-9 packets of window for whole runs (docs/sctp.md, \"Multihoming\")".into(),
        "usrsctp defaults kept: RFC 4960 congestion control, delayed SACK 200 ms / every 2nd packet, RTO min 1 s, heartbeat 1 s".into(),
    ]
}

fn run_point(lab: &Lab, p: &Plan, t: Timing) -> Result<(Value, Value), String> {
    for (n, l) in p.links.iter().enumerate() {
        lab.set_link_rules(
            n,
            vec![Rule::new(Match::any())
                .delay(Duration::from_millis(l.delay_ms))
                .rate((l.mbit * 1e6) as u64)
                .queue_packets(QUEUE_PACKETS)],
        );
    }
    let cfg = config(p, t);
    let mut server = PeerProcess::start(lab, lab.server(), "server", &cfg)?;
    server.wait_for("event", "ready", Duration::from_secs(10))?;
    let mut client = PeerProcess::start(lab, lab.client(), "client", &cfg)?;
    let limit = Duration::from_millis(t.warmup_ms + t.measure_ms) + Duration::from_secs(40);
    let (line, _) = server.wait_for("event", "result", limit)?;
    let paths = client
        .wait_for("event", "done", Duration::from_secs(10))
        .map(|(l, _)| l.value["paths"].clone())
        .unwrap_or(Value::Null);
    Ok((line.value, paths))
}

fn point(
    p: &Plan,
    run: u32,
    r: Result<(Value, Value), String>,
    queue_drops: Vec<u64>,
) -> MultipathPoint {
    let mut m = MultipathPoint {
        run,
        experiment: p.experiment,
        series: p.series.clone(),
        buffer_kib: p.buffer_kib,
        links: p.links.clone(),
        fixed: p.map.is_some(),
        fill_by_queue: p.fill_by_queue,
        nr_sack: p.nr_sack,
        nr_on_arrival: p.nr_on_arrival,
        send_split_only: p.send_split_only,
        mbit: f64::NAN,
        delay_ms: f64::NAN,
        streams: Vec::new(),
        out_of_order: 0,
        queue_drops,
        paths: Value::Null,
        wire: Vec::new(),
        pinning: None,
        stalls: Vec::new(),
        held: None,
        error: None,
    };
    match r {
        Ok((v, paths)) => {
            m.paths = paths;
            let f = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
            m.mbit = f(&v, "mbit");
            m.delay_ms = f(&v, "delay_ms");
            for s in v["streams"].as_array().into_iter().flatten() {
                m.streams.push((f(s, "mbit"), f(s, "delay_ms")));
                m.out_of_order += s["out_of_order"].as_u64().unwrap_or(0);
            }
        }
        Err(e) => m.error = Some(e),
    }
    m
}

/// Set: each point's wire trace (netlab's SCTP ledger timeline in steps of
/// [`TRACE_STEP`]) goes to stderr.
pub(crate) const TRACE_ENV: &str = "TAPS_BENCH_MULTIPATH_TRACE";
/// The step of a point's trace.
const TRACE_STEP: Duration = Duration::from_millis(250);

/// Prints a point's wire trace to stderr: per step, Mbit/s of new data per link, chunks
/// resent and dropped, the receiver's window and holes, the sender's outstanding TSNs.
fn print_trace(timeline: &[netlab::sctp_ledger::SctpEvent]) {
    eprintln!("    t ms | new Mbit/s per link | resent | dropped | a_rwnd | gap blocks | outstanding TSNs");
    let per_s = 1.0 / TRACE_STEP.as_secs_f64();
    for s in netlab::sctp_ledger::trace(timeline, TRACE_STEP) {
        eprintln!(
            "    {:5} | {} | {} | {} | {} | {} | {}",
            s.until.as_millis(),
            s.new_bytes
                .iter()
                .map(|b| format!("{:5.2}", *b as f64 * 8.0 * per_s / 1e6))
                .collect::<Vec<_>>()
                .join(" "),
            s.resent,
            s.dropped,
            s.a_rwnd.map_or("-".into(), |r| r.to_string()),
            s.gap_blocks,
            s.outstanding
        );
    }
}

/// Stalls this long or longer are kept with a point.
const SHOWN_STALL: Duration = Duration::from_millis(200);

/// Runs the experiment: one lab with three links, every planned point in turn, in rounds
/// until each point has had its runs. After each round the results so far are written to
/// `checkpoint` (if given), so a run cut short can still be reported (`REPLOT_ENV`).
pub fn run_multipath(
    quick: bool,
    progress: bool,
    checkpoint: Option<&std::path::Path>,
) -> Result<MultipathResults, String> {
    if let Some(why) = netlab::unsupported_reason() {
        return Err(format!("netlab cannot run here: {why}"));
    }
    usrsctp::multihome_available().map_err(|e| e.to_string())?;
    let started = Instant::now();
    let timing = if quick {
        Timing {
            warmup_ms: 1500,
            measure_ms: 2000,
        }
    } else {
        Timing {
            warmup_ms: 2000,
            measure_ms: 4000,
        }
    };
    let lab = Lab::start(LabOptions::default()).map_err(|e| format!("lab: {e}"))?;
    for _ in 0..2 {
        lab.add_link()
            .map_err(|e| format!("lab: add a link: {e}"))?;
    }
    // Only the points whose "exp N SERIES σ=S" contains this text (for debugging a curve).
    let only = std::env::var(FILTER_ENV).unwrap_or_default();
    let plans: Vec<Plan> = plan(quick)
        .into_iter()
        .filter(|p| {
            let label = point_label(p.experiment, &p.series, p.buffer_kib);
            only.split('|').any(|o| label.contains(o))
        })
        .collect();
    let total: u32 = plans.iter().map(|p| p.runs).sum();
    let rounds = plans.iter().map(|p| p.runs).max().unwrap_or(0);
    let mut results = MultipathResults {
        points: Vec::new(),
        timing,
        knobs: knobs(),
        duration_s: 0.0,
        later: Vec::new(),
    };
    for round in 0..rounds {
        for p in plans.iter().filter(|p| p.runs > round) {
            let m = run_once(&lab, p, round, timing);
            if progress {
                print_progress(&m, results.points.len() + 1, total);
            }
            results.points.push(m);
        }
        results.duration_s = started.elapsed().as_secs_f64();
        if let Some(path) = checkpoint {
            let json = serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?;
            std::fs::write(path, json).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    lab.teardown()?;
    Ok(results)
}

/// One run of one point, with its queue drops and the stalls its wire timeline shows.
fn run_once(lab: &Lab, p: &Plan, round: u32, timing: Timing) -> MultipathPoint {
    let drops = |lab: &Lab| -> Vec<u64> {
        (0..p.links.len())
            .map(|n| lab.link_stats(n).to_server.queue_full)
            .collect()
    };
    let before = drops(lab);
    let ledger = lab.sctp_ledger();
    let sent_before = (ledger.first_sent(), ledger.sent_again());
    ledger.start_timeline();
    let r = run_point(lab, p, timing);
    let after = drops(lab);
    let mut m = point(
        p,
        round,
        r,
        after.iter().zip(&before).map(|(a, b)| a - b).collect(),
    );
    let timeline = ledger.timeline();
    if std::env::var_os(TRACE_ENV).is_some() {
        print_trace(&timeline);
    }
    let sent_after = (ledger.first_sent(), ledger.sent_again());
    m.wire = wire_bytes(
        sent_before,
        sent_after,
        p.links.len(),
        usize::from(p.streams),
    );
    m.pinning = p.map.as_deref().map(|map| pinning(&m.wire, map));
    // The timeline starts before the peers do, so this window also takes in the last
    // few hundred ms of the warm-up.
    m.held = netlab::sctp_ledger::held(&timeline, Duration::from_millis(timing.warmup_ms));
    m.stalls = netlab::sctp_ledger::stalls(&timeline, SHOWN_STALL)
        .iter()
        .map(ToString::to_string)
        .collect();
    m
}

/// One line per run on stderr (and its stalls).
fn print_progress(m: &MultipathPoint, n: usize, total: u32) {
    eprintln!(
        "multipath {n}/{total}: exp {} {} σ={} KiB run {}: {:.2} Mbit/s, {:.0} ms, per stream {:?}, queue drops {:?}{}",
        m.experiment,
        m.series,
        m.buffer_kib,
        m.run + 1,
        m.mbit,
        m.delay_ms,
        m.streams
            .iter()
            .map(|(r, d)| format!("{r:.1}/{d:.0}"))
            .collect::<Vec<_>>(),
        m.queue_drops,
        m.error
            .as_deref()
            .map_or(String::new(), |e| format!(" ERROR {e}"))
    );
    if let Some(pin) = m.pinning {
        eprintln!(
            "    pinning: {} of {} new bytes off their path; {} of {} resent bytes elsewhere",
            pin.crossed, pin.new_bytes, pin.resent_elsewhere, pin.resent
        );
    }
    for stall in &m.stalls {
        eprintln!("    stall: {stall}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_bytes_and_pinning() {
        let (mut first, mut again) = (PerLink::default(), PerLink::default());
        first[0][0] = 50;
        let before = (first, again);
        // Link 0 stream 0: 100 new; link 1 stream 1: 200 new; link 1 stream 0: 100
        // resent; link 0 stream 1: 7 new; a third link is not asked for.
        first[0][0] += 100;
        first[1][1] += 200;
        again[1][0] += 100;
        first[0][1] += 7;
        first[2][1] += 5;
        let wire = wire_bytes(before, (first, again), 2, 2);
        assert_eq!(wire, vec![vec![[100, 0], [7, 0]], vec![[0, 100], [200, 0]]]);
        assert_eq!(
            pinning(&wire, &[0, 1]),
            Pinning {
                new_bytes: 307,
                crossed: 7,
                resent: 100,
                resent_elsewhere: 100,
            }
        );
    }
}
