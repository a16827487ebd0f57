//! SCTP multihoming through taps at both ends, with nothing set up out of band: a taps
//! listener (`netlab serve-sctp --also`) asks for `multihoming` on the server's link-0 and
//! link-1 addresses, `taps connect` asks for it on the client's two; each side learns the
//! other's second address from the handshake (usrsctp's IP mode: INIT and INIT-ACK list
//! them), or (`sctp-taps-asconf`) the client starts on its link-0 address alone and adds
//! its link-1 address once connected, which the server learns from the client's ASCONF;
//! in `sctp-taps-late-path` link 1 is cut while the association comes up and restored
//! before link 0 is cut.
//! Link 0, the primary path's, is cut mid-transfer: the data moves to link 1 within the
//! bound `connTimeout` sets, and every byte arrives once and in order.

#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::checks::{millis_f64, show_connection};
use super::multipath::two_equal_links;
use super::runner::{Ctx, Outcome};
use crate::lab::{Lab, DNS_V4, SCTP_UDP_PORT, SERVICE_PORT};
use crate::links::{client_v4, server_addr_v4, LinkEvent};
use crate::sctp_ledger;
use crate::sctp_server::SctpServer;
use crate::sink::{self, SinkRecord};
use crate::taps::{Connect, PathReport};

/// The server's link-0 address (rd's IPv4 address, the first on its link-0 device, so
/// the one routing picks as the source of replies over link 0).
const SERVER0: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 11));
/// The multihomed server's UDP tunnelling port (the lab's own SCTP server has
/// [`SCTP_UDP_PORT`] on another address of the namespace).
const UDP_PORT: u16 = SCTP_UDP_PORT + 1;
/// What the client sends in `sctp-taps-failover`.
const TRANSFER: u64 = 6_000_000;
/// What each transfer of `sctp-taps-aggregate` sends (the handshake and shutdown that its
/// rate includes then weigh under 5 %).
const AGGREGATE_TRANSFER: u64 = 12_000_000;
/// Transfers with each policy in `sctp-taps-aggregate`.
const AGGREGATE_ROUNDS: u64 = 3;
/// `connTimeout` of `sctp-taps-aggregate`: an RTO of at most 200 ms. A chunk a full queue
/// drops is now and then left to the retransmission timeout (usrsctp's CMT does not
/// fast-retransmit it); the data after it fills the receive window and both paths wait
/// for the timeout (docs/sctp.md, "Multihoming"), so the RTO bounds that stall.
const AGGREGATE_CONN_TIMEOUT: Duration = Duration::from_secs(1);
/// Stalls (no new DATA on any link) this long or longer are shown, with what the wire
/// showed around them.
const SHOWN_STALL: Duration = Duration::from_millis(100);
/// When link 0 is cut, from the start of `taps connect`.
const CUT_AT: Duration = Duration::from_secs(2);
/// `sctp-taps-late-path`: link 1 is cut until then, and link 0 at [`LATE_CUT_AT`].
const LINK1_UP_AT: Duration = Duration::from_secs(1);
/// `sctp-taps-late-path`, `sctp-taps-asconf`: when link 0 is cut. The paths over link 1
/// are confirmed well before: taps gives multihomed associations a heartbeat interval of
/// 1 s, so both ends probe their paths over link 1 again within about 1.5 s of its return.
const LATE_CUT_AT: Duration = Duration::from_secs(5);
/// What the client sends in `sctp-taps-late-path` and `sctp-taps-asconf`: about 10 s on
/// one link, so the transfer is still running when link 0 is cut.
const LATE_TRANSFER: u64 = 12_000_000;
/// `connTimeout`: taps gives SCTP a maximum RTO of a fifth of it and 4 retransmissions per
/// path, so a dead path is given up within this long (and data retransmitted on the other
/// path meanwhile).
const CONN_TIMEOUT: Duration = Duration::from_millis(2500);
/// Bytes link 1 must carry after the cut before the transfer counts as moved there (far
/// more than its heartbeats would in the whole run: about 100 bytes a second).
const MOVED_BYTES: u64 = 64 * 1024;
/// How often the links' counters are sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);

/// The client's properties: SCTP, multihoming over its two link addresses, RFC 9622's
/// `multipathPolicy` `policy`.
fn props(policy: &str) -> String {
    props_with(policy, CONN_TIMEOUT)
}

/// [`props`] with `connTimeout` `conn_timeout`.
fn props_with(policy: &str, conn_timeout: Duration) -> String {
    props_on(&[client_v4(0), client_v4(1)], policy, conn_timeout)
}

/// [`props_with`] on the client addresses `locals`.
fn props_on(locals: &[Ipv4Addr], policy: &str, conn_timeout: Duration) -> String {
    let locals: Vec<String> = locals.iter().map(Ipv4Addr::to_string).collect();
    serde_json::json!({
        "transport": {"value": "SCTP", "precedence": 2},
        "multihoming": {"value": true, "precedence": 2},
        "local_ips": {"value": locals, "precedence": 2},
        "connTimeout": {"value": conn_timeout.as_secs_f64(), "precedence": 2},
        "multipathPolicy": policy,
    })
    .to_string()
}

/// What the multihomed server recorded, one record per connection.
type Records = Arc<Mutex<Vec<SinkRecord>>>;

/// Two equal links and the multihomed taps server on both; its records and process.
fn setup(lab: &Lab) -> Result<(Records, SctpServer), String> {
    two_equal_links(lab)?;
    let records: Records = Arc::default();
    let server = SctpServer::start(
        lab.id(),
        lab.server(),
        &[SERVER0, IpAddr::V4(server_addr_v4(1))],
        SERVICE_PORT,
        UDP_PORT,
        SocketAddr::new(IpAddr::V4(DNS_V4), 53),
        records.clone(),
    )
    .map_err(|e| format!("cannot start the multihomed SCTP server: {e}"))?;
    Ok((records, server))
}

/// The `n`-th record of the server (waits up to 10 s for it).
fn nth_record(records: &Mutex<Vec<SinkRecord>>, n: usize) -> Result<SinkRecord, String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(r) = sink::lock(records).get(n).cloned() {
            return Ok(r);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the multihomed SCTP server recorded no connection #{}",
                n + 1
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `sctp-taps-failover`.
pub(super) fn sctp_taps_failover(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    failover(lab, ctx, out, Start::BothPaths)
}

/// `sctp-taps-late-path`.
pub(super) fn sctp_taps_late_path(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    failover(lab, ctx, out, Start::SecondLinkLate)
}

/// `sctp-taps-asconf`.
pub(super) fn sctp_taps_asconf(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    failover(lab, ctx, out, Start::SecondAddressAdded)
}

/// How the failover scenarios' association starts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    /// The client multihomed on both of its addresses, both links up.
    BothPaths,
    /// The same while link 1 is cut; it comes back before link 0 is cut.
    SecondLinkLate,
    /// The client multihomed on its link-0 address alone, adding its link-1 address once
    /// connected (the server learns it through ASCONF alone), both links up.
    SecondAddressAdded,
}

/// A transfer whose primary link is cut mid-way, the association started as `start` says.
/// With [`Start::SecondLinkLate`] a path whose first heartbeat is lost must still be
/// confirmed once its link is back. With [`Start::SecondAddressAdded`] the client's first
/// heartbeat to the server's link-1 address goes out as the association comes up, before
/// the client's link-1 address is added: it must leave from the link-0 address usrsctp
/// chose (the output hook's IP_PKTINFO), not from the link-1 address routing would pick,
/// or the server, never told of that address, would answer with an ABORT.
fn failover(lab: &Lab, ctx: &Ctx, out: &mut Outcome, start: Start) -> Result<(), String> {
    let (records, _server) = setup(lab)?;
    let server1 = IpAddr::V4(server_addr_v4(1));
    let client1 = IpAddr::V4(client_v4(1));
    // The added address needs its ASCONF and the server's heartbeat before link 0 goes:
    // the longer transfer, cut at the later time.
    let long = start != Start::BothPaths;
    let bytes = if long { LATE_TRANSFER } else { TRANSFER };
    out.say(format!(
        "  server: taps listener, multihoming on {SERVER0} (link 0) and {server1} (link 1), UDP {UDP_PORT}; client: multihoming on {}{}, connTimeout {} ms{}",
        client_v4(0),
        if start == Start::SecondAddressAdded {
            format!(", then {client1} added once connected (taps connect --add-local)")
        } else {
            format!(" and {client1}")
        },
        CONN_TIMEOUT.as_millis(),
        match start {
            Start::SecondLinkLate => format!(
                "; link 1 cut until {} ms, link 0 cut at {} ms",
                LINK1_UP_AT.as_millis(),
                LATE_CUT_AT.as_millis()
            ),
            Start::SecondAddressAdded => format!(
                "; both links up, link 0 cut at {} ms",
                LATE_CUT_AT.as_millis()
            ),
            Start::BothPaths => String::new(),
        }
    ));
    let mut c = Connect::new(SERVER0.to_string());
    if start == Start::SecondAddressAdded {
        c.props = Some(props_on(&[client_v4(0)], "handover", CONN_TIMEOUT));
        c.add_local = vec![client1];
    } else {
        c.props = Some(props("handover"));
    }
    c.send_bytes = Some(bytes);
    c.sctp_udp_port = UDP_PORT;
    c.paths = true;
    c.limit = Duration::from_secs(60);
    let events = match start {
        Start::SecondLinkLate => vec![
            LinkEvent::down(Duration::ZERO, 1),
            LinkEvent::up(LINK1_UP_AT, 1),
            LinkEvent::down(LATE_CUT_AT, 0),
        ],
        Start::SecondAddressAdded => vec![LinkEvent::down(LATE_CUT_AT, 0)],
        Start::BothPaths => vec![LinkEvent::down(CUT_AT, 0)],
    };
    let schedule = lab.schedule_links(events);
    let started = Instant::now();
    let (report, samples) = connect_sampled(lab, ctx, c, started);
    let r = report?;
    show_connection(out, "#1", &r);
    let f = r.flow();
    out.check(
        f.winner.as_ref().is_some_and(|w| w.stack == "SCTP") && f.error.is_none(),
        format!(
            "connected over SCTP and sent {} bytes (error {:?})",
            f.bytes_sent, f.error
        ),
    );
    for (at, remote, change) in &f.path_changes {
        out.say(format!(
            "  client path change at {at:.0} ms: {remote} {change}"
        ));
    }
    check_ends(
        out,
        &f.paths,
        server1,
        &records,
        start == Start::SecondAddressAdded,
        bytes,
    )?;
    let down = f
        .path_changes
        .iter()
        .any(|(_, r, c)| c == "down" && r.starts_with(&format!("{SERVER0}:")));
    out.check(
        down,
        format!("the client was told that the path to {SERVER0} went down (taps' path changes)"),
    );
    let cut = schedule
        .applied()
        .iter()
        .find(|(e, _)| e.link == 0 && !e.up)
        .map(|(_, at)| at.duration_since(started))
        .ok_or("link 0 was never cut")?;
    check_recovery(out, &samples, cut);
    Ok(())
}

/// Bytes each link carried to the server, sampled every [`SAMPLE_EVERY`], with the time
/// since the run started.
type LinkSamples = Vec<(Duration, [u64; 2])>;

/// Runs `c` while sampling what each link carried to the server ([`LinkSamples`], times
/// from `started`).
fn connect_sampled(
    lab: &Lab,
    ctx: &Ctx,
    c: Connect,
    started: Instant,
) -> (Result<crate::taps::ConnectReport, String>, LinkSamples) {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut v = Vec::new();
            while !done.load(Ordering::SeqCst) {
                v.push((
                    started.elapsed(),
                    [0, 1].map(|n| lab.link_stats(n).to_server.bytes),
                ));
                std::thread::sleep(SAMPLE_EVERY);
            }
            v
        });
        let r = ctx.connect(lab, c);
        done.store(true, Ordering::SeqCst);
        (r, sampler.join().unwrap_or_default())
    })
}

/// Checks that both ends list both of the other's addresses (with `asconf`: the server
/// one of the client's at first, both at the end), that every byte arrived, and that the
/// client counted bytes on each path: both carried data (before and after the cut).
fn check_ends(
    out: &mut Outcome,
    paths: &[PathReport],
    server1: IpAddr,
    records: &Mutex<Vec<SinkRecord>>,
    asconf: bool,
    bytes: u64,
) -> Result<(), String> {
    let shown = |b: Option<u64>| b.map_or("?".into(), |b| b.to_string());
    for p in paths {
        out.say(format!(
            "  client path: {} -> {} {}, {} B sent, {} B received",
            p.local,
            p.remote,
            p.state,
            shown(p.bytes_sent),
            shown(p.bytes_received)
        ));
    }
    let sent: Vec<u64> = paths.iter().filter_map(|p| p.bytes_sent).collect();
    out.check(
        sent.len() == 2 && sent.iter().all(|&b| b > 0),
        format!(
            "the client counted what each path carried, both carried data ({} B in all when it read them, for {bytes} B of messages)",
            sent.iter().sum::<u64>()
        ),
    );
    let remotes: Vec<IpAddr> = paths
        .iter()
        .filter_map(|p| p.remote.parse::<SocketAddr>().ok().map(|a| a.ip()))
        .collect();
    out.check(
        remotes.len() == 2 && remotes.contains(&SERVER0) && remotes.contains(&server1),
        format!("the client's association lists both server addresses, learnt from the INIT-ACK: {remotes:?}"),
    );
    let record = nth_record(records, 0)?;
    if asconf {
        out.check(
            record.peer_paths == 1 && record.peer_paths_at_end == 2,
            format!(
                "the server's association listed one client address when accepted and both at the end, the second learnt from the client's ASCONF: {} then {} paths",
                record.peer_paths, record.peer_paths_at_end
            ),
        );
    } else {
        out.check(
            record.peer_paths == 2,
            format!(
                "the server's association lists both client addresses, learnt from the INIT: {} paths",
                record.peer_paths
            ),
        );
    }
    out.check(
        record.bytes == bytes && record.mismatched == 0 && record.clean_close,
        format!(
            "every byte delivered once and in order: {} of {bytes} bytes, {} wrong, closed cleanly: {}",
            record.bytes, record.mismatched, record.clean_close
        ),
    );
    Ok(())
}

/// Reports the links' bytes around the cut at `cut` and checks that link 1 took over the
/// transfer within the bound.
fn check_recovery(out: &mut Outcome, samples: &[(Duration, [u64; 2])], cut: Duration) {
    let at_cut = samples
        .iter()
        .take_while(|(t, _)| *t <= cut)
        .last()
        .map_or([0, 0], |(_, b)| *b);
    let moved = samples
        .iter()
        .find(|(t, b)| *t > cut && b[1] >= at_cut[1] + MOVED_BYTES)
        .map(|(t, _)| *t - cut);
    let last = samples.last().map_or([0, 0], |(_, b)| *b);
    out.say(format!(
        "  link 0 cut at {:.0} ms; bytes to the server before the cut: link 0 {}, link 1 {}; in all: link 0 {}, link 1 {}",
        millis_f64(cut),
        at_cut[0],
        at_cut[1],
        last[0],
        last[1]
    ));
    // The path is given up after at most connTimeout (5 timeouts of at most a fifth of it);
    // the bound doubles that for a loaded machine (timers fire late, the bridge threads
    // wait for a CPU).
    let bound = CONN_TIMEOUT * 2;
    out.check(
        moved.is_some_and(|m| m <= bound),
        format!(
            "the transfer moved to link 1 {} after the cut (time to recover; bound: 2 x connTimeout = {} ms)",
            moved.map_or("never".into(), |m| format!("{:.0} ms", millis_f64(m))),
            bound.as_millis()
        ),
    );
}

/// One transfer of [`TRANSFER`] bytes with `policy`: the server's record and what each link
/// carried to the server meanwhile.
fn transfer(
    lab: &Lab,
    ctx: &Ctx,
    out: &mut Outcome,
    records: &Mutex<Vec<SinkRecord>>,
    policy: &str,
    bytes: u64,
) -> Result<(SinkRecord, [u64; 2]), String> {
    let n = sink::lock(records).len();
    let before = [0, 1].map(|l| lab.link_stats(l).to_server.bytes);
    let drops_before = [0, 1].map(|l| lab.link_stats(l).to_server.queue_full);
    let mut c = Connect::new(SERVER0.to_string());
    c.props = Some(props_with(policy, AGGREGATE_CONN_TIMEOUT));
    c.send_bytes = Some(bytes);
    c.sctp_udp_port = UDP_PORT;
    c.limit = Duration::from_secs(60);
    let ledger = lab.sctp_ledger();
    ledger.start_timeline();
    let r = ctx.connect(lab, c)?;
    for stall in sctp_ledger::stalls(&ledger.timeline(), SHOWN_STALL) {
        out.say(format!("  {policy}: stall: {stall}"));
    }
    show_connection(out, policy, &r);
    let record = nth_record(records, n)?;
    let after = [0, 1].map(|l| lab.link_stats(l).to_server.bytes);
    let drops = [0, 1].map(|l| lab.link_stats(l).to_server.queue_full - drops_before[l]);
    out.say(format!(
        "  {policy}: {:.2} Mbit/s; packets the full bridge queues dropped: link 0 {}, link 1 {}",
        rate(&record),
        drops[0],
        drops[1]
    ));
    out.check(
        record.bytes == bytes && record.mismatched == 0 && record.clean_close,
        format!(
            "{policy}: every byte delivered once and in order: {} of {bytes} bytes, {} wrong, closed cleanly: {}",
            record.bytes, record.mismatched, record.clean_close
        ),
    );
    Ok((record, [after[0] - before[0], after[1] - before[1]]))
}

/// Payload rate of a record, Mbit/s (accept to close at the server).
fn rate(r: &SinkRecord) -> f64 {
    r.bytes as f64 * 8.0 / r.duration.as_secs_f64().max(1e-9) / 1e6
}

/// `sctp-taps-aggregate`: the same transfer with `multipathPolicy` handover (one path at a
/// time) and then aggregate (CMT), same links, same server, [`AGGREGATE_ROUNDS`] times in
/// turn; each policy's rate is its bytes over its time summed over the rounds.
pub(super) fn sctp_taps_aggregate(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let (records, _server) = setup(lab)?;
    out.say(format!(
        "  {AGGREGATE_ROUNDS} rounds of {AGGREGATE_TRANSFER} bytes with each policy, in turn; connTimeout {} ms (RTO at most {} ms)",
        AGGREGATE_CONN_TIMEOUT.as_millis(),
        AGGREGATE_CONN_TIMEOUT.as_millis() / 5
    ));
    let (mut one, mut cmt) = ((0u64, Duration::ZERO), (0u64, Duration::ZERO));
    let mut links = [0u64; 2];
    for _ in 0..AGGREGATE_ROUNDS {
        let (r, _) = transfer(lab, ctx, out, &records, "handover", AGGREGATE_TRANSFER)?;
        one = (one.0 + r.bytes, one.1 + r.duration);
        let (r, l) = transfer(lab, ctx, out, &records, "aggregate", AGGREGATE_TRANSFER)?;
        cmt = (cmt.0 + r.bytes, cmt.1 + r.duration);
        links = [links[0] + l[0], links[1] + l[1]];
    }
    let mbps =
        |(bytes, time): (u64, Duration)| bytes as f64 * 8.0 / time.as_secs_f64().max(1e-9) / 1e6;
    let (r1, r2) = (mbps(one), mbps(cmt));
    out.say(format!(
        "  over {AGGREGATE_ROUNDS} rounds: handover {r1:.2} Mbit/s; aggregate {r2:.2} Mbit/s ({:.2}x); aggregate's bytes to the server: link 0 {}, link 1 {}",
        r2 / r1.max(1e-9),
        links[0],
        links[1]
    ));
    out.check(
        r2 >= 1.8 * r1,
        format!("CMT aggregates: {r2:.2} Mbit/s >= 1.8 x one path's {r1:.2} Mbit/s"),
    );
    let all = AGGREGATE_TRANSFER * AGGREGATE_ROUNDS;
    for (l, b) in links.iter().enumerate() {
        out.check(
            *b >= all * 35 / 100,
            format!(
                "link {l} carried a share of the aggregate transfers: {b} bytes ({:.0}%; bound >= 35%)",
                *b as f64 * 100.0 / all as f64
            ),
        );
    }
    Ok(())
}

/// Per link and stream, the bytes of DATA chunks first seen on a link other than their
/// stream's (stream N is pinned to link N) that are not first transmissions there: their
/// TSN is below one their stream already sent on its own link (their turn on the pinned
/// path had passed), or below one already first seen on this link. usrsctp gives a chunk
/// its TSN as it queues it for a path and sends each path's chunks in TSN order, so a
/// chunk out of order on a link is a resend: a copy sent on the pinned path never reached
/// the bridge (lost on the client's side of the link; under load the last chunks of a
/// stream too), and usrsctp's CMT sends retransmissions to the path with the largest
/// ssthresh. usrsctp also moves the queued chunks of a path it gives up to another. A
/// send that ignored the pin would be in order on both links.
/// Also told, for the first few chunks on another link that are in order (what the check
/// counts as crossing): their TSN, time and the highest TSN each link had seen.
fn stray_first_sends(timeline: &[sctp_ledger::SctpEvent]) -> (sctp_ledger::PerLink, Vec<String>) {
    let mut stray = sctp_ledger::PerLink::default();
    let mut crossed = Vec::new();
    let mut highest_own = [None::<u32>; sctp_ledger::LEDGER_STREAMS];
    let mut highest_on_link = [None::<u32>; sctp_ledger::LEDGER_LINKS];
    for e in timeline {
        let sctp_ledger::SctpWhat::Data {
            tsn,
            stream,
            bytes,
            again: false,
        } = e.what
        else {
            continue;
        };
        let sid = usize::from(stream);
        if sid >= sctp_ledger::LEDGER_STREAMS || e.link >= sctp_ledger::LEDGER_LINKS {
            continue;
        }
        let behind = |h: Option<u32>| h.is_some_and(|h| (h.wrapping_sub(tsn) as i32) > 0);
        if e.link != sid && (behind(highest_own[sid]) || behind(highest_on_link[e.link])) {
            stray[e.link][sid] += bytes;
        } else if e.link != sid && bytes > 1 && crossed.len() < 3 {
            crossed.push(format!(
                "stream {sid} TSN {tsn} ({bytes} B) first on link {} at {} ms, links' highest TSNs then {:?}",
                e.link,
                e.at.as_millis(),
                highest_on_link
            ));
        }
        if e.link == sid && !behind(highest_own[sid]) {
            highest_own[sid] = Some(tsn);
        }
        if !behind(highest_on_link[e.link]) {
            highest_on_link[e.link] = Some(tsn);
        }
    }
    (stray, crossed)
}

/// What each of the two flows of `sctp-taps-fixed` sends.
const FIXED_TRANSFER: u64 = 3_000_000;

/// `sctp-taps-fixed`: two flows on one association with CMT on (`multipathPolicy`
/// aggregate), each pinned to a path (`--fixed-paths`: stream N to path N). A ledger of
/// the DATA chunks the client puts on each link tells first transmissions from
/// retransmissions: a pinned stream's new data on the other link fails the scenario;
/// retransmissions there are usrsctp's CMT retransmission policy (RTX_SSTHRESH: a
/// retransmission goes to the path with the largest ssthresh, whatever the chunk was sent
/// to), reported with their bytes.
pub(super) fn sctp_taps_fixed(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let (records, _server) = setup(lab)?;
    let ledger = lab.sctp_ledger();
    ledger.start_timeline();
    let mut c = Connect::new(SERVER0.to_string());
    c.props = Some(props("aggregate"));
    c.send_bytes = Some(FIXED_TRANSFER);
    c.flows = 2;
    c.fixed_paths = true;
    c.paths = true;
    c.sctp_udp_port = UDP_PORT;
    c.limit = Duration::from_secs(60);
    let r = ctx.connect(lab, c)?;
    show_connection(out, "#1", &r);
    for (n, f) in r.flows.iter().enumerate() {
        for (at, remote, change) in &f.path_changes {
            out.say(format!(
                "  flow {} path change at {at:.0} ms: {remote} {change}",
                n + 1
            ));
        }
    }
    let streams: Vec<Option<u16>> = r
        .flows
        .iter()
        .map(|f| f.winner.as_ref().and_then(|w| w.sctp_stream))
        .collect();
    out.check(
        r.flows.iter().all(|f| f.error.is_none()) && streams == [Some(0), Some(1)],
        format!("two flows on one association, streams {streams:?}, no error"),
    );
    for n in 0..2 {
        let rec = nth_record(&records, n)?;
        out.check(
            rec.bytes == FIXED_TRANSFER && rec.mismatched == 0,
            format!(
                "flow {}: {} of {FIXED_TRANSFER} bytes delivered in order ({} wrong)",
                n + 1,
                rec.bytes,
                rec.mismatched
            ),
        );
    }
    let (first, again) = (ledger.first_sent(), ledger.sent_again());
    let (stray, crossed_chunks) = stray_first_sends(&ledger.timeline());
    for c in &crossed_chunks {
        out.say(format!("  in order on the other link: {c}"));
    }
    // Stream N is pinned to path N: its new data all on link N, none on the other.
    for link in 0..2 {
        let other = 1 - link;
        out.say(format!(
            "  link {link}: stream {link} first sent {} bytes, resent {}; stream {other} first sent {}, resent {}",
            first[link][link], again[link][link], first[link][other], again[link][other]
        ));
        out.check(
            first[link][link] + stray[other][link] >= FIXED_TRANSFER,
            format!(
                "stream {link}'s data was all first sent over link {link} ({} bytes, and {} first seen on link {other} out of order)",
                first[link][link], stray[other][link]
            ),
        );
        // The one byte allowed is taps' announcement of a new flow on the association
        // (a 1-byte message on its stream), sent as the flow opens, before it is pinned.
        // Chunks first seen here out of order are told apart (`stray_first_sends`): not
        // a send that ignored the pin.
        let crossed = first[link][other] - stray[link][other];
        out.check(
            crossed <= 1,
            format!(
                "none of stream {other}'s new data crossed link {link} ({crossed} bytes: at most the 1-byte flow announcement sent before pinning; retransmissions moved there by usrsctp's CMT policy: {} bytes; chunks first seen here out of order, resends of copies lost before link {other}'s bridge: {} bytes)",
                again[link][other], stray[link][other]
            ),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sctp_ledger::{SctpEvent, SctpWhat};

    fn first(ms: u64, link: usize, stream: u16, tsn: u32) -> SctpEvent {
        SctpEvent {
            at: Duration::from_millis(ms),
            link,
            what: SctpWhat::Data {
                tsn,
                stream,
                bytes: 1000,
                again: false,
            },
        }
    }

    /// Streams 0 and 1 pinned to links 0 and 1. Stream 0's TSN 7 never reaches link 0's
    /// bridge and is first seen on link 1 after link 1 sent TSN 8: a resend (stray).
    /// Stream 0's TSN 9, first on link 1 and in order on both links: a crossing, told.
    #[test]
    fn out_of_order_chunks_on_the_other_link_are_resends() {
        let timeline = [
            first(1, 0, 0, 1),
            first(2, 1, 1, 2),
            first(3, 0, 0, 3),
            first(4, 1, 1, 4),
            first(5, 0, 0, 5),
            first(6, 1, 1, 6),
            first(8, 1, 1, 8),
            first(900, 1, 0, 7),
            first(950, 1, 0, 9),
        ];
        let (stray, crossed) = stray_first_sends(&timeline);
        assert_eq!(stray[1][0], 1000);
        assert_eq!(stray[0][1], 0);
        assert_eq!(crossed.len(), 1);
        assert!(crossed[0].contains("stream 0 TSN 9"), "{crossed:?}");
    }
}
