//! `taps connect`: open N flows at once (each raced), optionally send bytes or a
//! message on each, then close; print the race as a trace or as JSON.

use std::future::Future;
use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use serde_json::{json, Value};
use taps::taps_core::race::{AttemptOutcome, RaceReport};
use taps::taps_core::Family;
use taps::{Connection, Preconnection, RemoteEndpoint, TransportProperties};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::candidates::candidate_json;
use crate::common::{CliError, ContextArgs, SecurityArgs};
use crate::path_args::PathArgs;

/// How long the flows wait for their peers to finish after closing their side: the run
/// gives up on its last flows once every one of them has waited this long since the
/// last of them began waiting.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Arguments of `taps connect`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Remote host name or address.
    host: String,
    /// Remote port.
    port: u16,
    #[command(flatten)]
    ctx: ContextArgs,
    #[command(flatten)]
    path_args: PathArgs,
    /// Print each race as a timeline, and the path changes (a failover) while it ran.
    #[arg(long)]
    trace: bool,
    /// Print one JSON report (an object; with --flows > 1, flows and totals).
    #[arg(long)]
    json: bool,
    /// Print each flow's paths before it closes: addresses, state, which is primary,
    /// RTT; on SCTP also RTO, congestion window and MTU; bytes sent and received per path
    /// where counted (TCP, MPTCP subflows, multihomed SCTP); and every path change seen
    /// while the flow ran (a path going down or up: a failover).
    #[arg(long)]
    paths: bool,
    /// Pin each flow to one path of its SCTP association, flow on stream N to the Nth
    /// path (N mod the number of paths, paths in the order of the peer's addresses): the
    /// stream-to-path mapping "Fixed" of CMT scheduling. Waits up to 2 s for every path
    /// to be confirmed first.
    #[arg(long)]
    fixed_paths: bool,
    /// After connecting, add this local address to each flow's connection (repeatable):
    /// an SCTP connection made with --multihoming tells the peer (ASCONF), which gets a
    /// path to the address; any other connection fails with an error naming the property.
    #[arg(long = "add-local", value_name = "ADDR")]
    add_local: Vec<std::net::IpAddr>,
    /// Open this many flows at once, each raced.
    #[arg(long, default_value_t = 1, value_name = "N")]
    flows: usize,
    /// Send this many bytes on each flow (as a byte stream; byte i is i mod 251, so the
    /// receiver can check order), then close.
    #[arg(long, value_name = "B", conflicts_with = "message")]
    send_bytes: Option<u64>,
    /// Send this message on each flow, print what comes back, then close.
    #[arg(long, value_name = "TEXT", conflicts_with = "line")]
    message: Option<String>,
    /// Send TEXT and a newline as raw bytes, without taps' message framing (for
    /// line-based peers such as `openssl s_server -rev`), print each line that comes
    /// back until the peer closes, then close.
    #[arg(long, value_name = "TEXT", conflicts_with = "send_bytes")]
    line: Option<String>,
    #[command(flatten)]
    security: SecurityArgs,
}

/// One flow's outcome: only what the chosen output prints (the race report is copied
/// out of the connection only for `--trace` and `--json`; the winner's JSON only for
/// `--json`). Each flow writes into its own slot of the run's results, so that a flow
/// the run gives up on leaves what it recorded.
#[derive(Default)]
struct FlowResult {
    /// Boxed: each flow has a slot, most runs print no report.
    report: Option<Box<RaceReport>>,
    /// The race's total time (also without the report).
    total: Option<Duration>,
    winner: Option<Winner>,
    error: Option<String>,
    sent: u64,
    replies: Vec<String>,
    /// `--paths`: the connection's paths before it closed.
    paths: Vec<taps::Path>,
    /// `--paths`: the path changes seen while it ran (since the flow started).
    path_changes: Vec<(Duration, taps::PathChange)>,
    /// From the flow's start to its race's end (connected or failed): the time shown
    /// when the race has no total.
    elapsed: Duration,
}

/// Runs the command.
pub(crate) async fn run(args: Args) -> Result<(), CliError> {
    if args.flows == 0 {
        return Err(CliError::usage("--flows must be at least 1"));
    }
    let ctx = args.ctx.context()?;
    // A security option (--ca, --alpn, ...) requires security: only secure stacks race.
    let props = args.ctx.client_properties(
        args.path_args.apply(TransportProperties::new())?,
        &args.security.given(),
    )?;
    let pre = Preconnection::new(&ctx, props)
        .remote(RemoteEndpoint::new(&args.host, args.port))
        .security(args.security.params()?)
        // The timeline is printed by --trace and is part of the --json output.
        .race_timeline(args.trace || args.json);
    // Fail fast on unsatisfiable properties or unusable security files before any flow.
    pre.prepare()?;
    let started = Instant::now();
    // The `--send-bytes` pattern, made once for every flow (no longer than what a flow
    // sends: a 1-byte flow should not fault in 256 KiB).
    let pattern = args
        .send_bytes
        .map(|total| send_pattern(total.min(PATTERN_CHUNK as u64) as usize))
        .unwrap_or_default();
    let payload = Payload {
        bytes: args.send_bytes,
        pattern: &pattern,
        message: args.message.as_deref(),
        line: args.line.as_deref(),
        add_local: &args.add_local,
    };
    let wants = Wants {
        report: args.trace || args.json,
        json: args.json,
        paths: args.paths,
        fixed_paths: args.fixed_paths,
    };
    // Every flow runs inside this task, polled when its socket wakes it, and writes its
    // outcome into its slot of `results` (flow N is the Nth). Not a task per flow: a
    // spawned task is a cache-aligned allocation (glibc's slow `posix_memalign` path), a
    // copy of the flow's future into it and the scheduler's bookkeeping. Unconstrained:
    // tokio's cooperative budget is per task, and this one task does the I/O of every
    // flow.
    let mut results: Vec<FlowResult> = std::iter::repeat_with(FlowResult::default)
        .take(args.flows)
        .collect();
    let waiting = Waiting::new();
    let running: FuturesUnordered<_> = results
        .iter_mut()
        .map(|r| flow(&pre, &payload, wants, &waiting, r))
        .collect();
    tokio::task::unconstrained(run_flows(running, &waiting)).await;
    let elapsed = started.elapsed();
    let _ = ctx.save_cib();
    // A short-lived program: let the outcomes reach the policy manager (if one runs)
    // before exiting, waiting 100 ms at most.
    ctx.flush_policy_manager(Duration::from_millis(100)).await;
    let failed = results.iter().filter(|r| r.error.is_some()).count();
    print_results(&args, &results, failed, elapsed)?;
    if failed > 0 {
        let first = results
            .iter()
            .find_map(|r| r.error.clone())
            .unwrap_or_default();
        return Err(CliError::failure(if args.flows == 1 {
            first
        } else {
            format!("{failed} of {} flows failed; first: {first}", args.flows)
        }));
    }
    Ok(())
}

/// Prints every flow's outcome and, with several flows, the totals: one JSON document
/// with `--json`, else a line per flow written in one buffer.
fn print_results(
    args: &Args,
    results: &[FlowResult],
    failed: usize,
    elapsed: Duration,
) -> Result<(), CliError> {
    if args.json {
        let flows: Vec<Value> = results.iter().map(flow_json).collect();
        let out = if args.flows == 1 {
            flows.into_iter().next().unwrap_or(Value::Null)
        } else {
            json!({
                "flows": flows,
                "totals": {
                    "flows": args.flows,
                    "connected": args.flows - failed,
                    "failed": failed,
                    "bytes_sent": results.iter().map(|r| r.sent).sum::<u64>(),
                    "elapsed_ms": millis_f64(elapsed),
                },
            })
        };
        println!("{}", serde_json::to_string_pretty(&out).expect("JSON"));
    } else {
        // Every flow has ended: the lines go out in one buffer (one write, not one per
        // line as `println!` would make).
        let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
        let written = results
            .iter()
            .enumerate()
            .try_for_each(|(i, r)| print_flow(&mut out, i, r, args.trace, args.flows > 1))
            .and_then(|()| {
                if args.flows > 1 {
                    writeln!(
                        out,
                        "{} flows: {} connected, {failed} failed, {} bytes sent, {:.1} ms",
                        args.flows,
                        args.flows - failed,
                        results.iter().map(|r| r.sent).sum::<u64>(),
                        millis_f64(elapsed)
                    )?;
                }
                out.flush()
            });
        written.map_err(|e| CliError::failure(format!("cannot write the results: {e}")))?;
    }
    Ok(())
}

/// What the output needs of the winning connection.
enum Winner {
    /// `--json`: the whole object.
    Json(Value),
    /// Text: the line `connected: STACK LOCAL -> REMOTE` and the security summary.
    Text {
        stack: taps::taps_core::Stack,
        local: std::net::SocketAddr,
        remote: std::net::SocketAddr,
        security: Option<String>,
    },
}

/// What the output asks of each flow.
#[derive(Clone, Copy)]
struct Wants {
    report: bool,
    json: bool,
    paths: bool,
    fixed_paths: bool,
}

/// What each flow sends (the command's arguments, shared by every flow, which each hold
/// a reference: 8 bytes of a flow's future rather than 64).
#[derive(Clone, Copy)]
struct Payload<'a> {
    bytes: Option<u64>,
    /// The start of the `--send-bytes` pattern, written over and over.
    pattern: &'a [u8],
    message: Option<&'a str>,
    line: Option<&'a str>,
    /// `--add-local`: addresses added to each connection once it is up.
    add_local: &'a [std::net::IpAddr],
}

/// Flows waiting for their peers (after shutting down their sending side: draining,
/// then closing), shared by the flows of one run. One timer watches them for the whole
/// run (see [`run_flows`]): a timer per flow would be a registration with the runtime's
/// timer wheel and, in a burst of flows, a wake-up of its driver (an eventfd write) per
/// flow.
struct Waiting {
    /// The runtime's clock (virtual in tests).
    started: tokio::time::Instant,
    /// Flows waiting now.
    count: AtomicUsize,
    /// When the last of them began, µs after `started`.
    last_began_us: AtomicU64,
}

impl Waiting {
    fn new() -> Waiting {
        Waiting {
            started: tokio::time::Instant::now(),
            count: AtomicUsize::new(0),
            last_began_us: AtomicU64::new(0),
        }
    }

    /// A flow begins waiting, until the guard is dropped.
    fn begin(&self) -> WaitingFlow<'_> {
        self.count.fetch_add(1, Ordering::Relaxed);
        let us = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.last_began_us.fetch_max(us, Ordering::Relaxed);
        WaitingFlow(self)
    }

    /// When the waiting flows time out: DRAIN_TIMEOUT after the last began.
    fn deadline(&self) -> tokio::time::Instant {
        self.started
            + Duration::from_micros(self.last_began_us.load(Ordering::Relaxed))
            + DRAIN_TIMEOUT
    }
}

/// A flow counted as waiting in [`Waiting`].
struct WaitingFlow<'a>(&'a Waiting);

impl Drop for WaitingFlow<'_> {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Runs the flows to their ends, or gives up on the rest (drops them: their connections
/// close, their slots keep what they recorded) once every flow still running is waiting
/// for its peer and the last of them began [`DRAIN_TIMEOUT`] ago.
async fn run_flows(mut running: FuturesUnordered<impl Future<Output = ()>>, waiting: &Waiting) {
    let check = tokio::time::sleep(DRAIN_TIMEOUT);
    tokio::pin!(check);
    loop {
        tokio::select! {
            biased;
            next = running.next() => if next.is_none() {
                return;
            },
            () = &mut check => {
                let now = tokio::time::Instant::now();
                let deadline = waiting.deadline();
                if waiting.count.load(Ordering::Relaxed) == running.len() && deadline <= now {
                    return;
                }
                // Flows still connecting or sending: look again in a while.
                check.as_mut().reset(deadline.max(now + DRAIN_TIMEOUT / 10));
            }
        }
    }
}

async fn flow(
    pre: &Preconnection,
    payload: &Payload<'_>,
    wants: Wants,
    waiting: &Waiting,
    r: &mut FlowResult,
) {
    let t0 = Instant::now();
    // Boxed: what a connected flow does (its connection, the exchange, the close) is
    // allocated once it has connected, so the flow's future, alive while every flow
    // races, stays small. (The initiate result ends with this block: kept until the
    // await below, the connection it holds would be part of the future.)
    let connected_flow = {
        let initiated = pre.initiate().await;
        r.elapsed = t0.elapsed();
        match initiated {
            Ok(conn) => Some(Box::pin(connected(conn, payload, wants, waiting, r))),
            Err(e) => {
                r.total = e.race().and_then(|race| race.report().total);
                if wants.report {
                    r.report = e.race().map(|race| Box::new(race.report().clone()));
                }
                r.error = Some(e.to_string());
                None
            }
        }
    };
    if let Some(flow) = connected_flow {
        flow.await;
    }
}

/// A connected flow: records its winner, sends the payload and shuts down its sending
/// side, waits for the peer to finish, closes. An async block, not an async fn: an
/// async fn's future holds its arguments and the locals they are moved into, the
/// connection twice.
// The async fn that clippy suggests is what this avoids (see above).
#[allow(clippy::manual_async_fn)]
fn connected<'a>(
    mut conn: Connection,
    payload: &'a Payload<'a>,
    wants: Wants,
    waiting: &'a Waiting,
    r: &'a mut FlowResult,
) -> impl Future<Output = ()> + Send + 'a {
    async move {
        let race = conn.info().race.as_ref();
        r.total = race.and_then(|rep| rep.total);
        if wants.report {
            r.report = race.cloned().map(Box::new);
        }
        r.winner = Some(if wants.json {
            Winner::Json(winner_json(&conn))
        } else {
            winner_text(&conn)
        });
        if wants.fixed_paths {
            if let Err(e) = path_watch::pin_fixed(&conn).await {
                r.error = Some(format!("pinning to a path: {e}"));
            }
        }
        // --paths and --trace (and --json) show the path changes (a failover) too.
        let watch = (wants.paths || wants.report)
            .then(|| path_watch::PathWatch::start(&conn, waiting.started))
            .flatten();
        for ip in payload.add_local {
            if let Err(e) = conn.add_local_address(*ip) {
                r.error = Some(format!("adding local address {ip}: {e}"));
            }
        }
        // Waiting for the peer begins once the payload is out (or failed to go out).
        let mut waited = None;
        let talked = async {
            exchange(&mut conn, payload, r).await?;
            // While the association still runs (the peer may end it once it has read).
            if wants.paths {
                r.paths = conn.paths().unwrap_or_default();
            }
            // The path changes so far, kept if the run gives up on this flow while it
            // waits for the peer (the full list replaces them after the close).
            if let Some(w) = &watch {
                r.path_changes = w.seen_so_far();
            }
            waited = Some(waiting.begin());
            drain(&mut conn, payload, r).await
        };
        if let Err(e) = talked.await {
            r.error = Some(format!("after connecting: {e}"));
        }
        let _waited = waited.unwrap_or_else(|| waiting.begin());
        // A graceful close (SCTP: SHUTDOWN of the association once its last flow
        // closes, instead of an ABORT on drop).
        let _ = conn.close().await;
        if let Some(w) = watch {
            r.path_changes = w.finish().await;
        }
    }
}

/// Sends the payload and shuts down the sending side.
async fn exchange(
    conn: &mut Connection,
    payload: &Payload<'_>,
    r: &mut FlowResult,
) -> Result<(), taps::Error> {
    let &Payload {
        bytes,
        pattern,
        message,
        line,
        ..
    } = payload;
    if let Some(line) = line {
        conn.write_all(format!("{line}\n").as_bytes()).await?;
        r.sent += line.len() as u64 + 1;
    }
    if let Some(total) = bytes {
        let mut left = total;
        while left > 0 {
            let n = left.min(pattern.len() as u64) as usize;
            conn.write_all(&pattern[..n]).await?;
            left -= n as u64;
        }
        r.sent = total;
    }
    if let Some(m) = message {
        // Boxed: the message send's future is the largest await here and would size
        // every flow's, the byte streams' too.
        Box::pin(conn.send(m.as_bytes())).await?;
        r.sent += m.len() as u64;
    }
    conn.shutdown().await?;
    Ok(())
}

/// Waits for the peer to finish: reads replies (messages if we sent one) until it
/// closes.
async fn drain(
    conn: &mut Connection,
    payload: &Payload<'_>,
    r: &mut FlowResult,
) -> Result<(), taps::Error> {
    if payload.line.is_some() || payload.message.is_some() {
        // Boxed: reading replies takes futures several times the size of the plain wait
        // below, which would size every flow's future.
        return Box::pin(read_replies(conn, payload.line.is_some(), r)).await;
    }
    if !conn.info().stack.is_datagram() {
        // Most peers send nothing back and just close: wait with a small buffer, and
        // take a bigger one only if data does come (1,024 flows waiting must not hold
        // 16 MiB of buffers).
        let mut first = [0u8; 64];
        if conn.read(&mut first).await? > 0 {
            let mut sink = vec![0u8; 16 * 1024];
            while conn.read(&mut sink).await? > 0 {}
        }
    }
    Ok(())
}

/// Reads the replies to `--line` (lines until the peer closes) or to `--message`
/// (messages until it closes; on a datagram flow, one within a second).
async fn read_replies(
    conn: &mut Connection,
    lines: bool,
    r: &mut FlowResult,
) -> Result<(), taps::Error> {
    if lines {
        let mut all = Vec::new();
        conn.read_to_end(&mut all).await?;
        let text = String::from_utf8_lossy(&all);
        r.replies.extend(text.lines().map(str::to_owned));
    } else if !conn.info().stack.is_datagram() {
        while let Some(reply) = conn.receive().await? {
            r.replies.push(String::from_utf8_lossy(&reply).into_owned());
        }
    } else {
        let reply = tokio::time::timeout(Duration::from_secs(1), conn.receive()).await;
        if let Ok(Ok(Some(reply))) = reply {
            r.replies.push(String::from_utf8_lossy(&reply).into_owned());
        }
    }
    Ok(())
}

fn millis_f64(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

fn winner_json(conn: &Connection) -> Value {
    let i = conn.info();
    json!({
        "stack": i.stack.to_string(),
        "family": if Family::of(&i.remote.ip()) == Family::V4 { "IPv4" } else { "IPv6" },
        "local": i.local.to_string(),
        "remote": i.remote.to_string(),
        "mptcp_active": i.mptcp_active,
        "sctp_stream": conn.sctp_stream(),
        "security": i.security.as_ref().map(|s| json!({
            "version": s.version,
            "cipher_suite": s.cipher_suite,
            "alpn": s.alpn.as_ref().map(|a| String::from_utf8_lossy(a).into_owned()),
            "resumed": s.resumed,
            "early_data": s.early_data,
            "peer_certificates": s.peer_certificates.len(),
        })),
    })
}

fn winner_text(conn: &Connection) -> Winner {
    let i = conn.info();
    Winner::Text {
        stack: i.stack,
        local: i.local,
        remote: i.remote,
        security: i.security.as_ref().map(|s| {
            format!(
                "{} {}, ALPN {}, {}",
                s.version,
                s.cipher_suite,
                s.alpn
                    .as_ref()
                    .map_or("none".into(), |a| String::from_utf8_lossy(a).into_owned()),
                if s.resumed {
                    "resumed session"
                } else {
                    "full handshake"
                }
            )
        }),
    }
}

fn outcome(o: &AttemptOutcome) -> (&'static str, Option<String>) {
    match o {
        AttemptOutcome::Won => ("won", None),
        AttemptOutcome::Failed(cause) => ("failed", Some(cause.to_string())),
        AttemptOutcome::Cancelled => ("cancelled", None),
        AttemptOutcome::Skipped(why) => ("skipped", Some(why.to_string())),
        AttemptOutcome::Pending => ("pending", None),
    }
}

fn flow_json(r: &FlowResult) -> Value {
    let attempts: Vec<Value> = r
        .report
        .iter()
        .flat_map(|rep| rep.attempts.iter())
        .map(|a| {
            let (o, err) = outcome(&a.outcome);
            json!({
                "candidate": candidate_json(&a.candidate),
                "start_ms": millis_f64(a.start),
                "end_ms": a.end.map(millis_f64),
                "outcome": o,
                "error": err,
            })
        })
        .collect();
    // The race's events (DNS answers, starts, SCTP's "reachable", cancels), as `--trace`
    // prints them.
    let timeline: Vec<Value> = r
        .report
        .iter()
        .flat_map(|rep| rep.timeline_text())
        .map(|(at, event)| json!({"at_ms": millis_f64(at), "event": event.to_string()}))
        .collect();
    let winner = match &r.winner {
        Some(Winner::Json(v)) => v.clone(),
        _ => Value::Null,
    };
    json!({
        "winner": winner,
        "attempts": attempts,
        "timeline": timeline,
        "total_ms": millis_f64(r.total.unwrap_or(r.elapsed)),
        "error": r.error,
        "bytes_sent": r.sent,
        "replies": r.replies,
        "paths": r.paths.iter().map(path_watch::path_json).collect::<Vec<_>>(),
        "path_changes": r.path_changes.iter().map(path_watch::change_json).collect::<Vec<_>>(),
    })
}

fn print_flow(
    out: &mut impl Write,
    i: usize,
    r: &FlowResult,
    trace: bool,
    many: bool,
) -> std::io::Result<()> {
    let flow = many.then_some(i + 1);
    if trace {
        if let Some(rep) = &r.report {
            put_prefix(out, flow)?;
            writeln!(out, "race trace (ms since start):")?;
            for (at, text) in rep.timeline_text() {
                writeln!(out, "  {:>9.3}  {text}", millis_f64(at))?;
            }
        }
    }
    // Connected whenever the race was won (the handshake completed), even when the
    // peer ended the connection right after.
    if let Some(Winner::Text {
        stack,
        local,
        remote,
        ..
    }) = &r.winner
    {
        write_connected(
            out,
            flow,
            stack,
            local,
            remote,
            r.total.unwrap_or(r.elapsed),
        )?;
    }
    // A single flow's error is reported once, on stderr, by the caller.
    if let (Some(e), true) = (&r.error, many) {
        put_prefix(out, flow)?;
        writeln!(out, "failed: {e}")?;
    }
    if let Some(Winner::Text {
        security: Some(s), ..
    }) = &r.winner
    {
        put_prefix(out, flow)?;
        writeln!(out, "security: {s}")?;
    }
    for reply in &r.replies {
        put_prefix(out, flow)?;
        writeln!(out, "reply: {reply}")?;
    }
    for p in &r.paths {
        path_watch::write_path(out, flow, p)?;
    }
    for c in &r.path_changes {
        put_prefix(out, flow)?;
        path_watch::write_change(out, c)?;
    }
    Ok(())
}

/// `flow N: ` when several flows are printed.
fn put_prefix(out: &mut impl Write, flow: Option<usize>) -> std::io::Result<()> {
    if let Some(n) = flow {
        out.write_all(b"flow ")?;
        put_decimal(out, n as u64)?;
        out.write_all(b": ")?;
    }
    Ok(())
}

/// `[flow N: ]connected: STACK LOCAL -> REMOTE in M.MMM ms`, byte for byte what
/// `writeln!` with `{:.3}` of [`millis_f64`] writes, with numbers and IPv4 addresses put
/// out digit by digit (IPv6 addresses go through `Display`): at 1,024 flows formatting
/// these lines was an eighth of the command's instructions.
fn write_connected(
    out: &mut impl Write,
    flow: Option<usize>,
    stack: &taps::taps_core::Stack,
    local: &std::net::SocketAddr,
    remote: &std::net::SocketAddr,
    took: Duration,
) -> std::io::Result<()> {
    put_prefix(out, flow)?;
    write!(out, "connected: {stack} ")?;
    put_addr(out, local)?;
    out.write_all(b" -> ")?;
    put_addr(out, remote)?;
    let micros = (took.as_secs_f64() * 1e6).round() as u64;
    out.write_all(b" in ")?;
    put_decimal(out, micros / 1000)?;
    let frac = micros % 1000;
    out.write_all(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ])?;
    out.write_all(b" ms\n")
}

/// `addr` as `Display` writes it.
fn put_addr(out: &mut impl Write, addr: &std::net::SocketAddr) -> std::io::Result<()> {
    match addr {
        std::net::SocketAddr::V4(a) => {
            for (k, octet) in a.ip().octets().into_iter().enumerate() {
                if k > 0 {
                    out.write_all(b".")?;
                }
                put_decimal(out, u64::from(octet))?;
            }
            out.write_all(b":")?;
            put_decimal(out, u64::from(a.port()))
        }
        std::net::SocketAddr::V6(_) => write!(out, "{addr}"),
    }
}

/// `n` in decimal.
fn put_decimal(out: &mut impl Write, mut n: u64) -> std::io::Result<()> {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.write_all(&digits[at..])
}

#[cfg(test)]
mod tests;

#[path = "connect/path_watch.rs"]
mod path_watch;

#[path = "connect/pattern.rs"]
mod pattern;
use pattern::{send_pattern, PATTERN_CHUNK};
