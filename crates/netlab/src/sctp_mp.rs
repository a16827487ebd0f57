//! A multihomed usrsctp peer for the SCTP multipath scenarios: the hidden subcommand
//! `netlab sctp-mp-peer --role server|client --config JSON`, run by a scenario inside the
//! server or the client namespace (one process per side: usrsctp is one instance per
//! process, and its CMT switches are process-wide).
//!
//! Both sides build the same association: the client connects from its link-0 address to
//! the server's UDP socket ([`PeerConfig::listen`]); then each extra path `n` is one UDP
//! socket per side at fixed addresses (client `client_v4(n)`:[`CLIENT_PATH_PORT`], server
//! `server_addr_v4(n)`:[`SERVER_PATH_PORT`]), so neither side needs to learn the other's
//! port, and each side adds it with `Association::add_peer_path`. The client then runs its
//! phases: each phase optionally makes a path primary, sends `bytes` on stream 0 (a byte
//! pattern that depends on the offset) and an end marker, and waits for the server's
//! acknowledgement of that marker. The server checks every byte of each phase, measures
//! the longest gap between reads, and prints one JSON line per phase.
//!
//! Output (stdout, one JSON object per line): the client prints `{"event": ..., "t_ms": ...}`
//! lines (`paths-up`, `phase-start`, `phase-end`, `done`), the server `ready` and one
//! `{"phase": ...}` line per phase. Errors go to stderr and the exit status.
//!
//! Costs: a tokio runtime with two workers, one UDP socket per path per side; a phase's
//! check is one pass over its bytes.

#![forbid(unsafe_code)]

use std::future::IntoFuture;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use usrsctp::{
    Association, CmtGlobal, CmtMode, PathEvent, PathId, PathParams, PathState, PathThresholds,
    PeerPath, SctpOptions, SctpPath, SctpStack,
};

use crate::links;
use crate::sctp_mp_sat::emit;
pub use crate::sctp_mp_sat::Saturate;
use crate::sink::pattern_byte;

/// The hidden subcommand's name.
pub const SUBCOMMAND: &str = "sctp-mp-peer";
/// UDP port of the server's extra-path sockets.
pub const SERVER_PATH_PORT: u16 = 9912;
/// UDP port of the client's extra-path sockets.
pub const CLIENT_PATH_PORT: u16 = 9913;
/// The ppid of control messages (phase start/end markers, acks); data uses 0.
const PPID_CONTROL: u32 = 1;
/// How long setting up the association and its paths may take.
const SETUP_LIMIT: Duration = Duration::from_secs(15);
/// How often an unconfirmed path gets a heartbeat while setting up.
const NUDGE_EVERY: Duration = Duration::from_millis(1000);
/// How long one phase may take from its end marker to the server's ack.
const PHASE_LIMIT: Duration = Duration::from_secs(60);

/// What both sides need to know (the same JSON is given to both).
#[derive(Debug, Clone)]
pub struct PeerConfig {
    /// The server's UDP encapsulation address (path 0).
    pub listen: SocketAddr,
    /// The SCTP port.
    pub sctp_port: u16,
    /// How many extra paths (links 1..=extra).
    pub extra_paths: usize,
    /// Heartbeat interval in ms.
    pub hb_ms: u32,
    /// Maximum (and so minimum and initial) RTO in ms.
    pub rto_max_ms: u32,
    /// Per-path `pathmaxrxt`.
    pub pathmaxrxt: u16,
    /// Per-path potentially-failed threshold (RFC 7829).
    pub pf_threshold: u16,
    /// CMT on (base) for the association.
    pub cmt: bool,
    /// The client's phases.
    pub phases: Vec<Phase>,
    /// Send and receive buffers (and the receive budget) in bytes; `None`: defaults.
    pub buffer: Option<u32>,
    /// Offer NR-SACK.
    pub nr_sack: bool,
    /// NR-ack every chunk on arrival (sysctl `sctp_do_drain=0`, see
    /// [`usrsctp::set_renege`]) instead of once it is delivered.
    pub nr_on_arrival: bool,
    /// With CMT: split only the send buffer among the paths (sysctl
    /// `sctp_buffer_splitting=1`), not the peer's receive window as well (3).
    pub send_split_only: bool,
    /// Fixed path MTU on every path (PMTU discovery off); `None`: usrsctp's.
    pub mtu: Option<u32>,
    /// The sysctl `sctp_peer_chunk_oh`; `None`: usrsctp's 256.
    pub chunk_overhead: Option<u32>,
    /// Instead of the phases: a saturated multi-stream run (module `sctp_mp_sat`).
    pub saturate: Option<Saturate>,
}

/// One step of the client's plan.
#[derive(Debug, Clone)]
pub struct Phase {
    /// Its name (reported by both sides).
    pub name: String,
    /// Make path N primary first (0 = the association's own path).
    pub primary: Option<usize>,
    /// Bytes to send on stream 0.
    pub bytes: u64,
    /// Message size.
    pub msg: usize,
}

fn field<'a>(v: &'a Value, k: &str) -> Result<&'a Value, String> {
    v.get(k).ok_or_else(|| format!("config: missing {k:?}"))
}

fn num(v: &Value, k: &str) -> Result<u64, String> {
    field(v, k)?
        .as_u64()
        .ok_or_else(|| format!("config: {k:?} is not a number"))
}

impl PeerConfig {
    /// Parses the JSON form ([`PeerConfig::to_json`]).
    pub fn parse(s: &str) -> Result<PeerConfig, String> {
        let v: Value = serde_json::from_str(s).map_err(|e| format!("config: {e}"))?;
        let listen = field(&v, "listen")?
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or("config: \"listen\" is not a socket address")?;
        let mut phases = Vec::new();
        for p in field(&v, "phases")?
            .as_array()
            .ok_or("config: \"phases\" is not a list")?
        {
            phases.push(Phase {
                name: field(p, "name")?.as_str().unwrap_or("?").to_string(),
                primary: p.get("primary").and_then(Value::as_u64).map(|n| n as usize),
                bytes: num(p, "bytes")?,
                msg: (num(p, "msg")? as usize).clamp(1, 1 << 20),
            });
        }
        let saturate = match v.get("saturate") {
            Some(sv) if !sv.is_null() => Some(crate::sctp_mp_sat::parse(sv)?),
            _ => None,
        };
        let opt_u32 = |k: &str| v.get(k).and_then(Value::as_u64).map(|n| n as u32);
        let extra = num(&v, "extra_paths")? as usize;
        if extra >= links::MAX_LINKS {
            return Err(format!(
                "config: at most {} extra paths",
                links::MAX_LINKS - 1
            ));
        }
        Ok(PeerConfig {
            listen,
            sctp_port: num(&v, "sctp_port")? as u16,
            extra_paths: extra,
            hb_ms: num(&v, "hb_ms")? as u32,
            rto_max_ms: num(&v, "rto_max_ms")? as u32,
            pathmaxrxt: num(&v, "pathmaxrxt")? as u16,
            pf_threshold: num(&v, "pf_threshold")? as u16,
            cmt: field(&v, "cmt")?.as_bool().unwrap_or(false),
            phases,
            buffer: opt_u32("buffer"),
            nr_sack: v.get("nr_sack").and_then(Value::as_bool).unwrap_or(false),
            nr_on_arrival: v
                .get("nr_on_arrival")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            send_split_only: v
                .get("send_split_only")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            mtu: opt_u32("mtu"),
            chunk_overhead: opt_u32("chunk_overhead"),
            saturate,
        })
    }

    /// The JSON form, for the command line.
    pub fn to_json(&self) -> String {
        let phases: Vec<Value> = self
            .phases
            .iter()
            .map(|p| json!({"name": p.name, "primary": p.primary, "bytes": p.bytes, "msg": p.msg}))
            .collect();
        json!({
            "listen": self.listen.to_string(), "sctp_port": self.sctp_port,
            "extra_paths": self.extra_paths, "hb_ms": self.hb_ms, "rto_max_ms": self.rto_max_ms,
            "pathmaxrxt": self.pathmaxrxt, "pf_threshold": self.pf_threshold, "cmt": self.cmt,
            "phases": phases, "buffer": self.buffer, "nr_sack": self.nr_sack, "mtu": self.mtu,
            "chunk_overhead": self.chunk_overhead, "nr_on_arrival": self.nr_on_arrival,
            "send_split_only": self.send_split_only,
            "saturate": self.saturate.as_ref().map(crate::sctp_mp_sat::to_json),
        })
        .to_string()
    }

    fn options(&self) -> SctpOptions {
        SctpOptions {
            rto_max_ms: self.rto_max_ms,
            heartbeat_interval_ms: self.hb_ms,
            cmt: Some(if self.cmt {
                CmtMode::Base
            } else {
                CmtMode::Off
            }),
            send_buffer: self.buffer,
            recv_buffer: self.buffer,
            recv_budget: self.buffer.map_or(256 * 1024, |b| b as usize),
            nr_sack: self.nr_sack,
            ..Default::default()
        }
    }

    /// Extra path `n`'s (local, remote) UDP addresses for `server` or the client.
    fn path_addrs(n: usize, server: bool) -> (SocketAddr, SocketAddr) {
        let c = SocketAddr::new(IpAddr::V4(links::client_v4(n)), CLIENT_PATH_PORT);
        let s = SocketAddr::new(IpAddr::V4(links::server_addr_v4(n)), SERVER_PATH_PORT);
        if server {
            (s, c)
        } else {
            (c, s)
        }
    }
}

/// Runs the peer: `role` is `server` or `client`. Blocks until done.
pub fn run(role: &str, config: &str) -> Result<(), String> {
    if role != "server" && role != "client" {
        return Err(format!("unknown role {role:?} (server or client)"));
    }
    let cfg = PeerConfig::parse(config)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    usrsctp::set_cmt_global(&CmtGlobal {
        cmt: true,
        dac: true,
        buffer_splitting: match (cfg.cmt, cfg.send_split_only) {
            (true, false) => usrsctp::BufferSplitting::Both,
            (true, true) => usrsctp::BufferSplitting::Send,
            (false, _) => usrsctp::BufferSplitting::Off,
        },
        max_burst_per_send: true,
    })
    .map_err(|e| format!("CMT switches: {e}"))?;
    if let Some(oh) = cfg.chunk_overhead {
        usrsctp::set_peer_chunk_overhead(oh).map_err(|e| format!("sctp_peer_chunk_oh: {e}"))?;
    }
    if cfg.nr_on_arrival {
        usrsctp::set_renege(false).map_err(|e| format!("sctp_do_drain: {e}"))?;
    }
    usrsctp::multihome_available().map_err(|e| e.to_string())?;
    match role {
        "server" => rt.block_on(server(&cfg)),
        "client" => rt.block_on(client(&cfg)),
        other => Err(format!("unknown role {other:?} (server or client)")),
    }
}

/// Per-path params and thresholds on every path of `assoc`.
fn tune_paths(assoc: &Association, cfg: &PeerConfig) -> Result<(), String> {
    for p in assoc.paths().map_err(|e| e.to_string())? {
        tune_path(assoc, p.id, cfg)?;
    }
    Ok(())
}

fn tune_path(assoc: &Association, id: PathId, cfg: &PeerConfig) -> Result<(), String> {
    let params = PathParams {
        heartbeat_interval_ms: Some(cfg.hb_ms),
        max_retransmits: Some(cfg.pathmaxrxt),
        mtu: cfg.mtu,
    };
    assoc
        .set_path_params(id, &params)
        .map_err(|e| format!("path params: {e}"))?;
    assoc
        .set_path_thresholds(
            id,
            &PathThresholds {
                max_retransmits: cfg.pathmaxrxt,
                pf_threshold: cfg.pf_threshold.min(cfg.pathmaxrxt),
            },
        )
        .map_err(|e| format!("path thresholds: {e}"))
}

/// Opens and adds the extra paths on one side.
fn add_paths(assoc: &Association, cfg: &PeerConfig, server: bool) -> Result<Vec<PeerPath>, String> {
    let mut added = Vec::new();
    for n in 1..=cfg.extra_paths {
        let (local, remote) = PeerConfig::path_addrs(n, server);
        let p = SctpPath::open(local, remote).map_err(|e| format!("path {n}: {e}"))?;
        let pp = assoc
            .add_peer_path(p)
            .map_err(|e| format!("add path {n}: {e}"))?;
        tune_path(assoc, pp.id(), cfg)?;
        added.push(pp);
    }
    Ok(added)
}

/// The index of `id` in `ids` (0 = the association's own path), as reported.
fn index(ids: &[PathId], id: Option<PathId>) -> Option<usize> {
    id.and_then(|id| ids.iter().position(|p| *p == id))
}

pub(crate) fn paths_json(assoc: &Association, ids: &[PathId]) -> Value {
    match assoc.paths() {
        Ok(ps) => Value::Array(
            ps.iter()
                .map(|p| {
                    json!({"path": index(ids, Some(p.id)), "state": format!("{:?}", p.state), "primary": p.primary,
                           "cwnd": p.cwnd, "srtt_ms": p.srtt_ms, "rto_ms": p.rto_ms, "mtu": p.mtu})
                })
                .collect(),
        ),
        Err(e) => json!(e.to_string()),
    }
}

/// Waits until every path of `assoc` is active, nudging the unconfirmed ones with a
/// heartbeat (the first one may have reached the peer before it added its side).
async fn wait_all_active(assoc: &Association, n: usize) -> Result<(), String> {
    let deadline = Instant::now() + SETUP_LIMIT;
    let mut last_nudge = Instant::now();
    loop {
        let ps = assoc.paths().map_err(|e| e.to_string())?;
        if ps.len() == n && ps.iter().all(|p| p.state == PathState::Active) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("paths not all confirmed: {ps:?}"));
        }
        // A new heartbeat replaces the nonce the path waits for: nudge only as often as a
        // round trip of the slowest path (1 s covers the lab's), or none ever confirms.
        if last_nudge.elapsed() >= NUDGE_EVERY {
            for p in ps.iter().filter(|p| p.state == PathState::Unconfirmed) {
                let _ = assoc.heartbeat_now(p.id);
            }
            last_nudge = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What the server learns about one phase.
#[derive(Default)]
struct PhaseRx {
    bytes: u64,
    mismatched: u64,
    max_gap: Duration,
    max_gap_after: u64,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl PhaseRx {
    fn take(&mut self, data: &[u8]) {
        let now = Instant::now();
        if let Some(last) = self.last {
            if now - last > self.max_gap {
                self.max_gap = now - last;
                self.max_gap_after = self.bytes;
            }
        }
        self.first.get_or_insert(now);
        self.last = Some(now);
        for (i, b) in data.iter().enumerate() {
            if *b != pattern_byte(self.bytes + i as u64) {
                self.mismatched += 1;
            }
        }
        self.bytes += data.len() as u64;
    }
}

async fn server(cfg: &PeerConfig) -> Result<(), String> {
    let stack = SctpStack::global();
    let listener = stack
        .listen(cfg.listen, cfg.sctp_port, &cfg.options())
        .map_err(|e| format!("listen on {}: {e}", cfg.listen))?;
    emit(json!({"event": "ready"}));
    let (assoc, peer) = tokio::time::timeout(SETUP_LIMIT, listener.accept())
        .await
        .map_err(|_| "no association within the setup limit".to_string())?
        .map_err(|e| format!("accept: {e}"))?;
    tune_paths(&assoc, cfg)?;
    let path0 = assoc.primary_path().map_err(|e| e.to_string())?;
    let paths = add_paths(&assoc, cfg, true)?;
    let ids: Vec<PathId> = std::iter::once(path0)
        .chain(paths.iter().map(PeerPath::id))
        .collect();
    wait_all_active(&assoc, cfg.extra_paths + 1).await?;
    emit(json!({"event": "paths-up", "peer": peer.to_string(), "paths": paths_json(&assoc, &ids)}));
    if let Some(sat) = &cfg.saturate {
        return crate::sctp_mp_sat::serve(&assoc, sat).await;
    }
    let mut rx: Option<(String, PhaseRx)> = None;
    while let Some(m) = assoc.recv().await.map_err(|e| format!("recv: {e}"))? {
        if m.ppid != PPID_CONTROL {
            match rx.as_mut() {
                Some((_, r)) => r.take(&m.data),
                None => return Err("data outside a phase".into()),
            }
            continue;
        }
        let text = String::from_utf8_lossy(&m.data).to_string();
        if let Some(name) = text.strip_prefix("start ") {
            rx = Some((name.to_string(), PhaseRx::default()));
        } else if let Some(name) = text.strip_prefix("end ") {
            let (_, r) = rx.take().ok_or("end marker outside a phase")?;
            let active = match (r.first, r.last) {
                (Some(a), Some(b)) => b - a,
                _ => Duration::ZERO,
            };
            emit(json!({
                "phase": name, "bytes": r.bytes, "mismatched": r.mismatched,
                "max_gap_ms": r.max_gap.as_secs_f64() * 1e3, "max_gap_after": r.max_gap_after,
                "active_ms": active.as_secs_f64() * 1e3, "paths": paths_json(&assoc, &ids),
            }));
            assoc
                .send(0, format!("ack {name}").as_bytes(), true, PPID_CONTROL)
                .await
                .map_err(|e| format!("ack: {e}"))?;
        }
    }
    emit(json!({"event": "closed"}));
    Ok(())
}

async fn client(cfg: &PeerConfig) -> Result<(), String> {
    let t0 = Instant::now();
    let ms = move || t0.elapsed().as_secs_f64() * 1e3;
    let stack = SctpStack::global();
    let c = stack
        .connect(cfg.listen, cfg.sctp_port, &cfg.options())
        .map_err(|e| format!("connect: {e}"))?;
    let assoc = tokio::time::timeout(SETUP_LIMIT, c.into_future())
        .await
        .map_err(|_| "no association within the setup limit".to_string())?
        .map_err(|e| format!("connect: {e}"))?;
    let events = assoc.path_events().map_err(|e| e.to_string())?;
    tune_paths(&assoc, cfg)?;
    let path0 = assoc.primary_path().map_err(|e| e.to_string())?;
    let extra = add_paths(&assoc, cfg, false)?;
    wait_all_active(&assoc, cfg.extra_paths + 1).await?;
    let ids: Vec<PathId> = std::iter::once(path0)
        .chain(extra.iter().map(PeerPath::id))
        .collect();
    emit(json!({"event": "paths-up", "t_ms": ms(), "paths": paths_json(&assoc, &ids)}));
    let watcher = tokio::spawn(watch_events(events, ids.clone(), t0));
    if let Some(sat) = &cfg.saturate {
        let r = crate::sctp_mp_sat::send(&assoc, sat, &ids).await;
        emit(json!({"event": "done", "t_ms": ms(), "paths": paths_json(&assoc, &ids)}));
        assoc.abort();
        watcher.abort();
        drop(extra);
        return r;
    }
    let mut buf = Vec::new();
    for ph in &cfg.phases {
        if let Some(n) = ph.primary {
            let id = *ids.get(n).ok_or_else(|| format!("no path {n}"))?;
            assoc
                .set_primary(id)
                .map_err(|e| format!("set_primary({n}): {e}"))?;
        }
        let primary = index(&ids, assoc.primary_path().ok());
        assoc
            .send(
                0,
                format!("start {}", ph.name).as_bytes(),
                true,
                PPID_CONTROL,
            )
            .await
            .map_err(|e| format!("send: {e}"))?;
        emit(json!({"event": "phase-start", "phase": ph.name, "t_ms": ms(), "primary": primary}));
        let mut off = 0u64;
        while off < ph.bytes {
            let len = (ph.bytes - off).min(ph.msg as u64) as usize;
            buf.clear();
            buf.extend((0..len as u64).map(|i| pattern_byte(off + i)));
            assoc
                .send(0, &buf, true, 0)
                .await
                .map_err(|e| format!("send at {off}: {e}"))?;
            off += len as u64;
        }
        let sent_ms = ms();
        assoc
            .send(0, format!("end {}", ph.name).as_bytes(), true, PPID_CONTROL)
            .await
            .map_err(|e| format!("send: {e}"))?;
        let ack = tokio::time::timeout(PHASE_LIMIT, assoc.recv())
            .await
            .map_err(|_| format!("phase {}: no ack within {PHASE_LIMIT:?}", ph.name))?
            .map_err(|e| format!("recv: {e}"))?
            .ok_or("association closed before the ack")?;
        emit(json!({
            "event": "phase-end", "phase": ph.name, "t_ms": ms(), "sent_ms": sent_ms,
            "ack": String::from_utf8_lossy(&ack.data), "paths": paths_json(&assoc, &ids),
        }));
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), assoc.close()).await;
    emit(json!({"event": "done", "t_ms": ms()}));
    watcher.abort();
    drop(extra);
    Ok(())
}

/// Prints each path event as it arrives: `{"event": "path", "path": N, "kind": ...}`.
async fn watch_events(mut events: usrsctp::PathEvents, ids: Vec<PathId>, t0: Instant) {
    while let Some(e) = events.next().await {
        emit(event_json(&e, &ids, t0));
    }
}

fn event_json(e: &PathEvent, ids: &[PathId], t0: Instant) -> Value {
    json!({"event": "path", "t_ms": t0.elapsed().as_secs_f64() * 1e3, "path": index(ids, e.path),
           "kind": format!("{:?}", e.kind), "error": e.error})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PeerConfig {
        PeerConfig {
            listen: "192.0.2.11:9911".parse().unwrap(),
            sctp_port: 5001,
            extra_paths: 2,
            hb_ms: 1000,
            rto_max_ms: 0,
            pathmaxrxt: 5,
            pf_threshold: 5,
            cmt: true,
            phases: vec![Phase {
                name: "p".into(),
                primary: Some(1),
                bytes: 10,
                msg: 4,
            }],
            buffer: Some(65536),
            nr_sack: true,
            nr_on_arrival: true,
            send_split_only: true,
            mtu: Some(1472),
            chunk_overhead: Some(0),
            saturate: Some(Saturate {
                streams: 2,
                msg: 1444,
                map: Some(vec![0, 1]),
                fill_by_queue: true,
                warmup_ms: 1,
                measure_ms: 2,
            }),
        }
    }

    #[test]
    fn config_round_trips() {
        let c = sample();
        let back = PeerConfig::parse(&c.to_json()).unwrap();
        assert_eq!(back.to_json(), c.to_json());
        assert_eq!(back.saturate, c.saturate);
    }

    #[test]
    fn bad_configs_say_what_is_wrong() {
        let err = |s: &str| PeerConfig::parse(s).unwrap_err();
        assert!(err("not json").starts_with("config:"));
        assert!(err("{}").contains("\"listen\""));
        let mut c = sample();
        c.extra_paths = links::MAX_LINKS;
        assert!(err(&c.to_json()).contains("at most"));
        let mut v: Value = serde_json::from_str(&sample().to_json()).unwrap();
        v["saturate"]["map"] = json!([0]);
        assert!(err(&v.to_string()).contains("one path per stream"));
        v["saturate"] = json!({"streams": 2});
        assert!(err(&v.to_string()).contains("saturate.msg"));
        assert!(run("nobody", &sample().to_json()).is_err());
    }

    #[test]
    fn pattern_depends_on_the_offset() {
        assert_eq!(pattern_byte(0), 0);
        assert_eq!(pattern_byte(250), 250);
        assert_eq!(pattern_byte(251), 0);
    }
}
