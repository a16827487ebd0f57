//! MPTCP over two paths: the lab gets a second link, both links 10 Mbit/s with 10 ms
//! each way, and the kernel's path manager is set from RFC 9622's `multipathPolicy`
//! ([`crate::mptcp`]). `taps connect` with `multipath` active (MPTCP required) sends
//! 10 MB to the MPTCP sink; the bridges' own counters show what each path carried.

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use super::checks::{millis_f64, show_connection};
use super::runner::{Ctx, Outcome};
use crate::bridge::BridgeStats;
use crate::lab::{Lab, MPTCP_PORT};
use crate::links::LinkEvent;
use crate::mptcp::{self, Policy};
use crate::rules::{Match, Rule};
use crate::sink::Progress;
use crate::taps::Connect;

/// Each path's rate.
const RATE_BPS: u64 = 10_000_000;
/// Each path's one-way delay (RTT 20 ms).
const DELAY: Duration = Duration::from_millis(10);
/// Each path's queue, in packets (about 60 ms at 10 Mbit/s: 3 bandwidth-delay
/// products).
pub(super) const QUEUE_PACKETS: u32 = 50;
/// The client namespace's TCP congestion control (its subflows').
const CONGESTION_CONTROL: &str = "reno";
/// What each transfer sends.
const TRANSFER: u64 = 10_000_000;
/// Where it goes: rd's IPv4 address (the MPTCP sink listens on every IPv4 address);
/// an address, so no DNS is needed while a path is cut.
const SERVER: &str = "192.0.2.11";

/// The props: MPTCP required, multipath active, the policy named.
fn props(policy: Policy) -> String {
    format!(
        r#"{{"transport": {{"value": "MPTCP", "precedence": 2}}, "multipath": {{"value": "active", "precedence": 2}}, "multipathPolicy": "{}"}}"#,
        policy.as_str()
    )
}

/// Adds link 1 to the lab and gives both links [`RATE_BPS`], [`DELAY`] each way and a
/// [`QUEUE_PACKETS`] queue: the two equal paths of the MPTCP and SCTP multipath scenarios.
pub(super) fn two_equal_links(lab: &Lab) -> Result<(), String> {
    lab.add_link()
        .map_err(|e| format!("cannot add link 1: {e}"))?;
    for n in 0..2 {
        lab.set_link_rules(
            n,
            vec![Rule::new(Match::any())
                .delay(DELAY)
                .rate(RATE_BPS)
                .queue_packets(QUEUE_PACKETS)],
        );
    }
    Ok(())
}

/// Two links of 10 Mbit/s, 10 ms each way, a 50-packet queue; the path manager set for
/// `policy`.
fn two_paths(lab: &Lab, out: &mut Outcome, policy: Policy) -> Result<(), String> {
    two_equal_links(lab)?;
    mptcp::configure(lab.client(), lab.server(), policy, 2)
        .map_err(|e| format!("cannot set the MPTCP path manager: {e}"))?;
    // Loss-based congestion control keeps the bridge's queues full, so a bridge thread
    // held off the CPU (2 cores shared with other work) costs no link time; BBR keeps
    // the queues nearly empty and loses every such gap.
    set_sysctl(lab, "net/ipv4/tcp_congestion_control", CONGESTION_CONTROL)?;
    out.say(format!(
        "  links: 2 (nltun0 198.51.100.2, nltun1 198.51.100.66), each 10 Mbit/s, 10 ms each way, queue {QUEUE_PACKETS} packets; client congestion control {CONGESTION_CONTROL}; path manager: {}",
        mptcp::client_script(policy, 2).trim().replace('\n', "; ")
    ));
    Ok(())
}

/// Writes `value` to `/proc/sys/<key>` from a thread in the client namespace (a
/// per-namespace sysctl: /proc/sys/net follows the writer's namespace). No `sysctl`
/// binary needed.
fn set_sysctl(lab: &Lab, key: &str, value: &str) -> Result<(), String> {
    let path = format!("/proc/sys/{key}");
    let now = lab
        .client()
        .run(|| std::fs::write(&path, value).and_then(|()| std::fs::read_to_string(&path)))
        .and_then(|r| r)
        .map_err(|e| format!("cannot set {key} to {value} in the client namespace: {e}"))?;
    match now.trim() == value {
        true => Ok(()),
        false => Err(format!("{key} reads {now:?} after writing {value:?}")),
    }
}

/// Bytes client to server on each link between two snapshots.
fn carried(before: &[BridgeStats], after: &[BridgeStats]) -> Vec<u64> {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| a.to_server.bytes - b.to_server.bytes)
        .collect()
}

fn mbit(bytes: u64, d: Duration) -> f64 {
    bytes as f64 * 8.0 / d.as_secs_f64().max(1e-9) / 1e6
}

/// Runs one MPTCP transfer of [`TRANSFER`] bytes; returns the report's flow winner
/// check, the per-link bytes and the sink's view of the transfer.
fn transfer(
    lab: &Lab,
    ctx: &Ctx,
    out: &mut Outcome,
    policy: Policy,
) -> Result<(Vec<u64>, Progress, Duration), String> {
    lab.sink().clear();
    let before: Vec<BridgeStats> = (0..2).map(|n| lab.link_stats(n)).collect();
    let mut c = Connect::new(SERVER);
    c.port = MPTCP_PORT;
    c.props = Some(props(policy));
    c.send_bytes = Some(TRANSFER);
    c.paths = true;
    c.limit = Duration::from_secs(40);
    let started = Instant::now();
    let r = ctx.connect(lab, c)?;
    let wall = started.elapsed();
    show_connection(out, "#1", &r);
    let f = r.flow();
    for p in &f.paths {
        out.say(format!(
            "  subflow: {} -> {} {}, {} B sent, {} B received",
            p.local,
            p.remote,
            p.state,
            p.bytes_sent.map_or("?".into(), |b| b.to_string()),
            p.bytes_received.map_or("?".into(), |b| b.to_string())
        ));
    }
    let links_used = [0, 1]
        .iter()
        .filter(|&&n| {
            let ip = crate::links::client_v4(n).to_string();
            f.paths
                .iter()
                .any(|p| p.local.starts_with(&format!("{ip}:")))
        })
        .count();
    out.check(
        links_used == 2,
        format!(
            "taps lists the connection's subflows as its paths, one from each link's address ({} listed)",
            f.paths.len()
        ),
    );
    let counted: Vec<u64> = f.paths.iter().filter_map(|p| p.bytes_sent).collect();
    out.check(
        !f.paths.is_empty() && counted.len() == f.paths.len() && counted.iter().sum::<u64>() > 0,
        format!(
            "taps counts the bytes each subflow sent (tcp_info): {counted:?} when it read them"
        ),
    );
    let mptcp = f
        .winner
        .as_ref()
        .is_some_and(|w| w.stack == "MPTCP" && w.mptcp_active == Some(true));
    out.check(
        mptcp && f.error.is_none(),
        format!(
            "connected over MPTCP, MPTCP in use (no fallback), sent {} bytes (stack {:?}, MPTCP active {:?}, error {:?})",
            f.bytes_sent,
            f.winner.as_ref().map(|w| w.stack.as_str()),
            f.winner.as_ref().and_then(|w| w.mptcp_active),
            f.error
        ),
    );
    lab.sink().wait_for(1, Duration::from_secs(5));
    let after: Vec<BridgeStats> = (0..2).map(|n| lab.link_stats(n)).collect();
    let progress = lab
        .sink()
        .progress()
        .into_iter()
        .next()
        .ok_or("the MPTCP sink recorded no connection")?;
    let rec = lab.sink().records();
    let rec = rec.first().ok_or("the sink recorded no connection")?;
    out.check(
        rec.bytes == TRANSFER && rec.mismatched == 0 && rec.clean_close,
        format!(
            "every byte delivered: the sink got {} of {TRANSFER} bytes, {} wrong, closed cleanly: {}",
            rec.bytes, rec.mismatched, rec.clean_close
        ),
    );
    Ok((carried(&before, &after), progress, wall))
}

/// `mptcp-aggregate`: both paths carry one connection; at least 18 Mbit/s.
pub(super) fn mptcp_aggregate(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    two_paths(lab, out, Policy::Aggregate)?;
    let (bytes, p, wall) = transfer(lab, ctx, out, Policy::Aggregate)?;
    let secs = p.active;
    let total = mbit(p.bytes, secs);
    out.say(format!(
        "  transfer: {} bytes in {:.2} s (first to last byte at the sink; process {:.2} s): {total:.2} Mbit/s of payload",
        p.bytes,
        secs.as_secs_f64(),
        wall.as_secs_f64()
    ));
    for (n, b) in bytes.iter().enumerate() {
        out.say(format!(
            "  link {n}: {b} bytes to the server on the wire ({:.2} Mbit/s over the transfer)",
            mbit(*b, secs)
        ));
    }
    out.check(
        total >= 18.0,
        format!(
            "aggregate throughput on one connection: {total:.2} Mbit/s of payload (bound >= 18)"
        ),
    );
    for (n, b) in bytes.iter().enumerate() {
        out.check(
            *b >= TRANSFER * 35 / 100,
            format!(
                "link {n} carried a share: {b} bytes ({:.0}% of the transfer; bound >= 35%)",
                *b as f64 * 100.0 / TRANSFER as f64
            ),
        );
    }
    Ok(())
}

/// When the first path dies in `mptcp-handover`.
const CUT_AT: Duration = Duration::from_secs(2);
/// How long it stays dead before it comes back.
const RESTORE_AFTER: Duration = Duration::from_secs(3);

/// Bytes to the server on links 0 and 1 so far.
fn sent_per_link(lab: &Lab) -> [u64; 2] {
    [0, 1].map(|n| lab.link_stats(n).to_server.bytes)
}

/// `mptcp-handover`: the first path dies 2 s into a 10 MB transfer and comes back 3 s
/// later; the backup subflow on the second path takes over meanwhile: every byte
/// delivered, the longest stall under 1 s, the data back on the first path after.
pub(super) fn mptcp_handover(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    two_paths(lab, out, Policy::Handover)?;
    let restore_at = CUT_AT + RESTORE_AFTER;
    let schedule = lab.schedule_links(vec![
        LinkEvent::down(CUT_AT, 0),
        LinkEvent::up(restore_at, 0),
    ]);
    let started = Instant::now();
    let base = sent_per_link(lab);
    // Samples: just before the cut (100 ms before), at the cut and at the restore.
    let (result, samples) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            [CUT_AT - Duration::from_millis(100), CUT_AT, restore_at].map(|at| {
                std::thread::sleep(at.saturating_sub(started.elapsed()));
                let now = sent_per_link(lab);
                [now[0] - base[0], now[1] - base[1]]
            })
        });
        let r = transfer(lab, ctx, out, Policy::Handover);
        (r, sampler.join().unwrap_or([[u64::MAX; 2]; 3]))
    });
    let (bytes, p, _) = result?;
    let [before_cut, at_cut, at_restore] = samples;
    let applied = schedule.applied();
    let when = |i: usize| {
        applied
            .get(i)
            .map(|(_, at)| millis_f64(at.duration_since(started)))
    };
    out.say(format!(
        "  link 0 cut at {:.0} ms, restored at {:.0} ms (since taps connect started)",
        when(0).ok_or("the link was never cut")?,
        when(1).ok_or("the link was never restored")?,
    ));
    let (down1, after0) = (at_restore[1] - at_cut[1], bytes[0] - at_restore[0]);
    out.say(format!(
        "  bytes to the server: link 0 {} before the cut, {after0} after the restore; link 1 {} before the cut, {down1} while link 0 was down; in all link 0 {}, link 1 {}",
        at_cut[0], at_cut[1], bytes[0], bytes[1]
    ));
    out.say(format!(
        "  sink: longest stall {:.0} ms, after {} bytes; {} bytes in {:.2} s",
        millis_f64(p.max_gap),
        p.max_gap_after,
        p.bytes,
        p.active.as_secs_f64()
    ));
    out.check(
        before_cut[1] < 100_000,
        format!(
            "handover: the backup path (link 1) carried {} bytes until 100 ms before the cut (bound < 100 kB: subflow set-up and acks, no data)",
            before_cut[1]
        ),
    );
    out.check(
        at_cut[0] >= 1_000_000 && down1 >= 2_000_000,
        format!(
            "link 0 carried {} bytes before it died (bound >= 1 MB); link 1 carried {down1} while it was down (bound >= 2 MB of the 3.75 MB 3 s allow)",
            at_cut[0]
        ),
    );
    out.check(
        p.max_gap < Duration::from_secs(1),
        format!(
            "the transfer moved to link 1: longest stall {:.0} ms (bound < 1000 ms)",
            millis_f64(p.max_gap)
        ),
    );
    out.check(
        after0 >= 1_000_000,
        format!("link 0 came back and carried data again: {after0} bytes after the restore (bound >= 1 MB)"),
    );
    Ok(())
}
