//! The saturated multi-stream run of the multihomed SCTP peer (`taps-bench multipath`):
//! the client keeps every stream supplied for the whole run, round robin (one message per
//! stream per turn) or by the streams' unsent bytes (the stream with the fewest next), each
//! stream pinned to a path (Fixed) or not (CMT spreads it); the server measures, per stream,
//! the payload throughput and the mean message delay (send timestamp in the message, the
//! namespaces share one host clock) over a window after a settling time, checks that each
//! stream's messages arrive in order, prints one JSON line and tells the client to stop.
//!
//! Costs: one pass over each message's first 16 bytes; one `unsent_bytes` call per stream
//! per message when filling by queue.

#![forbid(unsafe_code)]

use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use usrsctp::{Association, PathId};

/// A saturated run: the client keeps every stream's queue full for `warmup_ms +
/// measure_ms`; the server measures per-stream throughput and message delay in the
/// measurement window.
#[derive(Debug, Clone, PartialEq)]
pub struct Saturate {
    /// Streams used (0..streams).
    pub streams: u16,
    /// Message size in bytes (>= 16: a send timestamp and the stream's sequence number).
    pub msg: usize,
    /// Fixed: stream s is sent on path `map[s]` (`send_on_path`); `None`: round robin, CMT
    /// spreads unpinned data.
    pub map: Option<Vec<usize>>,
    /// Fill the stream with the fewest unsent bytes next (`Association::unsent_bytes`);
    /// otherwise streams take turns, one message each.
    pub fill_by_queue: bool,
    /// Settling time before the measurement, ms.
    pub warmup_ms: u64,
    /// Measurement window, ms.
    pub measure_ms: u64,
}

/// Prints one JSON line on stdout and flushes it.
pub(crate) fn emit(v: Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

/// Control messages' ppid (as in the phases).
const PPID_CONTROL: u32 = 1;
/// Extra time the client may run past warm-up + measurement before it gives up waiting
/// for the server's stop.
const GRACE: Duration = Duration::from_secs(15);

/// Parses the `saturate` object.
pub(crate) fn parse(v: &Value) -> Result<Saturate, String> {
    let n = |k: &str| {
        v.get(k)
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("config: saturate.{k} missing"))
    };
    let streams = n("streams")?.clamp(1, 64) as u16;
    let map = match v.get("map") {
        Some(Value::Array(a)) => Some(
            a.iter()
                .map(|x| x.as_u64().map(|p| p as usize).ok_or("config: bad map"))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        _ => None,
    };
    if map
        .as_ref()
        .is_some_and(|m| m.len() != usize::from(streams))
    {
        return Err("config: saturate.map needs one path per stream".into());
    }
    Ok(Saturate {
        streams,
        msg: (n("msg")? as usize).clamp(16, 65536),
        map,
        fill_by_queue: v
            .get("fill_by_queue")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        warmup_ms: n("warmup_ms")?,
        measure_ms: n("measure_ms")?,
    })
}

/// The JSON form of `s`.
pub(crate) fn to_json(s: &Saturate) -> Value {
    json!({"streams": s.streams, "msg": s.msg, "map": s.map, "fill_by_queue": s.fill_by_queue,
           "warmup_ms": s.warmup_ms, "measure_ms": s.measure_ms})
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The client: sends until the server says stop (or the run's time plus [`GRACE`]).
pub(crate) async fn send(assoc: &Association, s: &Saturate, ids: &[PathId]) -> Result<(), String> {
    let paths: Option<Vec<PathId>> = match &s.map {
        Some(m) => Some(
            m.iter()
                .map(|&p| ids.get(p).copied().ok_or(format!("no path {p}")))
                .collect::<Result<_, _>>()?,
        ),
        None => None,
    };
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let rx = assoc.clone();
    let listener = tokio::spawn(async move {
        while let Ok(Some(m)) = rx.recv().await {
            if m.ppid == PPID_CONTROL && m.data == b"stop" {
                break;
            }
        }
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let limit = Instant::now() + Duration::from_millis(s.warmup_ms + s.measure_ms) + GRACE;
    let mut seq = vec![0u64; usize::from(s.streams)];
    let mut buf = vec![0x5au8; s.msg];
    let mut turn = 0u16;
    let (mut sent, mut by_queue_calls) = (0u64, 0u64);
    while !stop.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < limit {
        let st = if s.fill_by_queue {
            // The stream with the fewest unsent bytes; among equals, the next one after
            // the last served (so streams that all have room are served in turn).
            let mut best = (usize::MAX, 0u16);
            for j in 1..=s.streams {
                let k = (turn + j) % s.streams;
                let q = assoc
                    .unsent_bytes(k)
                    .map_err(|e| format!("unsent_bytes({k}): {e}"))?;
                by_queue_calls += 1;
                if q < best.0 {
                    best = (q, k);
                }
            }
            turn = best.1;
            best.1
        } else {
            turn = (turn + 1) % s.streams;
            turn
        };
        let i = usize::from(st);
        buf[..8].copy_from_slice(&now_ns().to_le_bytes());
        buf[8..16].copy_from_slice(&seq[i].to_le_bytes());
        seq[i] += 1;
        let r = match &paths {
            Some(p) => assoc.send_on_path(p[i], st, &buf, true, 0).await,
            None => assoc.send(st, &buf, true, 0).await,
        };
        if let Err(e) = r {
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            return Err(format!("send on stream {st}: {e}"));
        }
        sent += 1;
    }
    listener.abort();
    emit(
        json!({"event": "sent", "messages": sent, "per_stream": seq, "queue_queries": by_queue_calls,
                "stopped": stop.load(std::sync::atomic::Ordering::SeqCst)}),
    );
    Ok(())
}

/// Per-stream counters in the window.
#[derive(Debug, Default, Clone)]
struct StreamRx {
    bytes: u64,
    messages: u64,
    delay_ns: u128,
    next_seq: u64,
    out_of_order: u64,
}

/// The server: measures and then tells the client to stop.
pub(crate) async fn serve(assoc: &Association, s: &Saturate) -> Result<(), String> {
    let mut st = vec![StreamRx::default(); usize::from(s.streams)];
    let mut window: Option<(Instant, Instant)> = None;
    let warm = Duration::from_millis(s.warmup_ms);
    let measure = Duration::from_millis(s.measure_ms);
    let limit = Instant::now() + warm + measure + GRACE + Duration::from_secs(10);
    loop {
        let left = limit.saturating_duration_since(Instant::now());
        let m = match tokio::time::timeout(left, assoc.recv()).await {
            Ok(Ok(Some(m))) => m,
            Ok(Ok(None)) => return Err("association closed before the window ended".into()),
            Ok(Err(e)) => return Err(format!("recv: {e}")),
            Err(_) => return Err("the window never ended (no data?)".into()),
        };
        let now = Instant::now();
        let (start, end) = *window.get_or_insert((now + warm, now + warm + measure));
        if now >= end {
            break;
        }
        let Some(r) = st.get_mut(usize::from(m.stream)) else {
            continue;
        };
        if m.data.len() < 16 {
            continue;
        }
        let sent_ns = u64::from_le_bytes(m.data[..8].try_into().unwrap_or_default());
        let seq = u64::from_le_bytes(m.data[8..16].try_into().unwrap_or_default());
        if seq != r.next_seq {
            r.out_of_order += 1;
        }
        r.next_seq = seq + 1;
        if now >= start {
            r.bytes += m.data.len() as u64;
            r.messages += 1;
            r.delay_ns += u128::from(now_ns().saturating_sub(sent_ns));
        }
    }
    let secs = measure.as_secs_f64();
    let streams: Vec<Value> = st
        .iter()
        .map(|r| {
            json!({"bytes": r.bytes, "messages": r.messages,
                   "mbit": r.bytes as f64 * 8.0 / secs / 1e6,
                   "delay_ms": if r.messages > 0 { r.delay_ns as f64 / r.messages as f64 / 1e6 } else { f64::NAN },
                   "out_of_order": r.out_of_order})
        })
        .collect();
    let total: u64 = st.iter().map(|r| r.bytes).sum();
    let msgs: u64 = st.iter().map(|r| r.messages).sum();
    let delay: u128 = st.iter().map(|r| r.delay_ns).sum();
    emit(
        json!({"event": "result", "measure_s": secs, "streams": streams,
                "mbit": total as f64 * 8.0 / secs / 1e6,
                "delay_ms": if msgs > 0 { delay as f64 / msgs as f64 / 1e6 } else { f64::NAN }}),
    );
    let _ = assoc.send(0, b"stop", true, PPID_CONTROL).await;
    // Let the stop reach the client before this process exits.
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(())
}
