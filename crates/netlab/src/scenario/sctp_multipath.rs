//! SCTP multihoming over two links with real usrsctp at both ends ([`crate::sctp_mp`], one
//! peer process in each namespace): `sctp-failover` moves data to the second path when
//! asked (`set_primary`) and when the first path dies in the middle of a 10 MB transfer.

#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::checks::millis_f64;
use super::multipath::{two_equal_links, QUEUE_PACKETS};
use super::runner::{Ctx, Outcome};
use crate::lab::Lab;
use crate::links::LinkEvent;
use crate::sctp_mp::{PeerConfig, Phase};
use crate::sctp_mp_proc::{PeerLine, PeerProcess};

/// The `set_primary` phase's bytes.
const PRIMARY_BYTES: u64 = 1_000_000;
/// The failover transfer's bytes.
const TRANSFER: u64 = 10_000_000;
/// When link 0 is cut, from the start of the transfer.
const CUT_AT: Duration = Duration::from_secs(2);
/// Heartbeat interval (ms) on every path.
const HB_MS: u32 = 200;
/// Maximum RTO (ms); usrsctp's minimum and initial RTO are lowered to it.
const RTO_MAX_MS: u32 = 400;
/// Per-path `pathmaxrxt`: unreachable after this many consecutive timeouts + 1.
const PATHMAXRXT: u16 = 2;
/// Potentially-failed threshold (RFC 7829): no new data to a path after its first timeout.
const PF_THRESHOLD: u16 = 0;
/// Longest stall allowed at the receiver across the cut.
const STALL_BOUND: Duration = Duration::from_millis(2000);
/// How soon after the cut path 0 must be reported unreachable.
const DETECT_BOUND: Duration = Duration::from_millis(3000);
/// How long the whole exchange may take.
const LIMIT: Duration = Duration::from_secs(45);

fn config() -> PeerConfig {
    PeerConfig {
        listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 11)), 9911),
        sctp_port: 5001,
        extra_paths: 1,
        hb_ms: HB_MS,
        rto_max_ms: RTO_MAX_MS,
        pathmaxrxt: PATHMAXRXT,
        pf_threshold: PF_THRESHOLD,
        cmt: false,
        phases: vec![
            Phase {
                name: "primary".into(),
                primary: Some(1),
                bytes: PRIMARY_BYTES,
                msg: 16 * 1024,
            },
            Phase {
                name: "transfer".into(),
                primary: Some(0),
                bytes: TRANSFER,
                msg: 16 * 1024,
            },
        ],
        buffer: None,
        nr_sack: false,
        nr_on_arrival: false,
        send_split_only: false,
        mtu: None,
        chunk_overhead: None,
        saturate: None,
    }
}

/// Bytes client to server on links 0 and 1 so far.
fn sent(lab: &Lab) -> [u64; 2] {
    [0, 1].map(|n| lab.link_stats(n).to_server.bytes)
}

fn num(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// What the client's lines and the bridge counters said, by phase.
#[derive(Default)]
struct Seen {
    primary: [[u64; 2]; 2],
    transfer: [[u64; 2]; 2],
    transfer_start: Option<Instant>,
    /// The client's clock (ms since it started) at the transfer's start.
    transfer_start_ms: f64,
    events: Vec<(f64, Value)>,
    client_paths: Option<Value>,
}

/// Follows the client to its `done` line: samples the counters at phase boundaries and
/// cuts link 0 [`CUT_AT`] into the transfer.
fn follow(lab: &Lab, client: &mut PeerProcess, out: &mut Outcome) -> Result<Seen, String> {
    let deadline = Instant::now() + LIMIT;
    let mut seen = Seen::default();
    let mut schedule = None;
    loop {
        let PeerLine { at, value } =
            client.next(deadline.saturating_duration_since(Instant::now()))?;
        let ev = value.get("event").and_then(Value::as_str).unwrap_or("");
        let phase = value.get("phase").and_then(Value::as_str).unwrap_or("");
        match (ev, phase) {
            ("paths-up", _) => out.say(format!("  client paths up: {}", value["paths"])),
            ("phase-start", "primary") => seen.primary[0] = sent(lab),
            ("phase-end", "primary") => seen.primary[1] = sent(lab),
            ("phase-start", "transfer") => {
                seen.transfer[0] = sent(lab);
                seen.transfer_start = Some(at);
                seen.transfer_start_ms = num(&value, "t_ms");
                schedule = Some(lab.schedule_links(vec![LinkEvent::down(CUT_AT, 0)]));
            }
            ("phase-end", "transfer") => {
                seen.transfer[1] = sent(lab);
                seen.client_paths = Some(value["paths"].clone());
            }
            ("path", _) => seen.events.push((num(&value, "t_ms"), value.clone())),
            ("done", _) => break,
            _ => {}
        }
    }
    if let (Some(s), Some(t0)) = (schedule, seen.transfer_start) {
        for (_, when) in s.applied() {
            out.say(format!(
                "  link 0 cut {:.0} ms after the transfer started",
                millis_f64(when.duration_since(t0))
            ));
        }
    }
    Ok(seen)
}

/// The server's report of `phase`.
fn phase_report(lines: &[PeerLine], phase: &str) -> Result<Value, String> {
    lines
        .iter()
        .map(|l| &l.value)
        .find(|v| v.get("phase").and_then(Value::as_str) == Some(phase))
        .cloned()
        .ok_or_else(|| format!("the server reported no phase {phase:?}"))
}

/// `sctp-failover`: two 10 Mbit/s 10 ms links, one association with a path on each;
/// `set_primary` moves 1 MB to path 1; then link 0 dies 2 s into a 10 MB transfer.
pub(super) fn sctp_failover(lab: &Lab, _ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    two_equal_links(lab)?;
    let cfg = config();
    out.say(format!(
        "  links: 2, each 10 Mbit/s, 10 ms each way, queue {QUEUE_PACKETS} packets; path 0 198.51.100.2 -> 192.0.2.11:9911, path 1 198.51.100.66:9913 -> 192.0.2.201:9912; heartbeat {HB_MS} ms, RTO max (= min) {RTO_MAX_MS} ms, pathmaxrxt {PATHMAXRXT}, PF threshold {PF_THRESHOLD}, CMT off"
    ));
    let mut server = PeerProcess::start(lab, lab.server(), "server", &cfg)?;
    server.wait_for("event", "ready", Duration::from_secs(10))?;
    let mut client = PeerProcess::start(lab, lab.client(), "client", &cfg)?;
    let seen = follow(lab, &mut client, out)?;
    // The server's phase lines were printed before its acks, so they are here already.
    std::thread::sleep(Duration::from_millis(200));
    let lines = server.ready_lines();
    check_primary(out, &seen, &phase_report(&lines, "primary")?);
    check_transfer(out, &seen, &phase_report(&lines, "transfer")?);
    Ok(())
}

fn check_primary(out: &mut Outcome, seen: &Seen, rx: &Value) {
    let [b, a] = seen.primary;
    let (l0, l1) = (a[0] - b[0], a[1] - b[1]);
    out.check(
        num(rx, "bytes") as u64 == PRIMARY_BYTES && num(rx, "mismatched") == 0.0,
        format!(
            "set_primary(path 1): the server got {} of {PRIMARY_BYTES} bytes, {} wrong",
            rx["bytes"], rx["mismatched"]
        ),
    );
    out.check(
        l1 >= PRIMARY_BYTES && l0 < 50_000,
        format!("set_primary(path 1) moved the data: link 1 carried {l1} bytes to the server (bound >= {PRIMARY_BYTES}), link 0 {l0} (heartbeats and acks only; bound < 50 kB)"),
    );
}

fn check_transfer(out: &mut Outcome, seen: &Seen, rx: &Value) {
    let [b, a] = seen.transfer;
    let (l0, l1) = (a[0] - b[0], a[1] - b[1]);
    let gap = num(rx, "max_gap_ms");
    out.say(format!(
        "  transfer: {} bytes in {:.0} ms at the receiver; longest gap between reads {gap:.0} ms after {} bytes; link 0 carried {l0} bytes, link 1 {l1}",
        rx["bytes"], num(rx, "active_ms"), rx["max_gap_after"]
    ));
    for (t, e) in &seen.events {
        out.say(format!(
            "  client path event at {t:.0} ms: path {} {}",
            e["path"], e["kind"]
        ));
    }
    out.say(format!(
        "  client paths after: {}",
        seen.client_paths.clone().unwrap_or_default()
    ));
    out.check(
        num(rx, "bytes") as u64 == TRANSFER && num(rx, "mismatched") == 0.0,
        format!(
            "every byte delivered in order and intact: {} of {TRANSFER}, {} wrong",
            rx["bytes"], rx["mismatched"]
        ),
    );
    out.check(
        gap < STALL_BOUND.as_secs_f64() * 1e3,
        format!(
            "failover stall (longest gap between reads): {gap:.0} ms (bound < {} ms)",
            STALL_BOUND.as_millis()
        ),
    );
    let cut_ms = seen.transfer_start_ms + millis_f64(CUT_AT);
    let unreachable = seen
        .events
        .iter()
        .find(|(t, e)| e["path"] == 0 && e["kind"] == "Unreachable" && *t > cut_ms)
        .map(|(t, _)| t - cut_ms);
    out.check(
        unreachable.is_some_and(|t| t < millis_f64(DETECT_BOUND)),
        format!(
            "the client reported path 0 unreachable {} ms after the cut (bound < {} ms; (pathmaxrxt + 1) x RTO = {} ms from when the oldest outstanding chunk's timer started)",
            unreachable.map_or("never".into(), |t| format!("{t:.0}")),
            DETECT_BOUND.as_millis(),
            (u32::from(PATHMAXRXT) + 1) * RTO_MAX_MS
        ),
    );
    out.check(
        l1 >= TRANSFER / 2 && l0 >= 1_000_000,
        format!("link 0 carried {l0} bytes before the cut (bound >= 1 MB), link 1 {l1} after it (bound >= 5 MB)"),
    );
}
