//! The worker processes: every measured client and server runs in a process of its own,
//! started by the orchestrator ([`crate::run`]), so that CPU time and RSS belong to one
//! side only and each client trial starts from a fresh heap.
//!
//! A worker is `<launcher> server <json ServerSpec>` or `<launcher> client <json
//! ClientSpec>`. The line protocol on stdin/stdout:
//!
//! - server: prints `PORT <p> <u>` once listening (`p`: the TCP port and SCTP port; `u`:
//!   the UDP port SCTP is encapsulated in, 0 when the server does not listen on SCTP);
//!   then answers each `stats <A> <C>` line (wait until at least A connections were
//!   accepted and C closed, at most [`STATS_WAIT`]) with `STATS <json ServerStats>`;
//!   exits on `quit` or end of input.
//! - client: does its untimed setup (e.g. connecting flows before a transfer), prints
//!   `READY`, waits for `go`, runs the measured window, prints `RESULT <json
//!   ClientResult>`, waits for `end` (or end of input), tears down and exits.
//!
//! The raw baselines: plain tokio sockets for TCP; for SCTP the `usrsctp` crate used
//! directly (one association per flow, stream 0, SCTP over UDP like taps), the same
//! user-space stack taps runs on, so a taps/raw ratio is what taps adds.

use std::io::{BufRead, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use taps::taps_core::policy::CibConfig;
use taps::taps_core::race::AttemptOutcome;
use taps::taps_core::Family;
use taps::TransportProperties;
use taps::{Connection, Context, Preconnection, Preference, Properties, Protocol, RemoteEndpoint};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use usrsctp::{Association, SctpOptions, SctpStack};

use crate::measure::{self, Cpu, Rng};

/// How long a server waits for the counters a `stats` line asks for.
pub const STATS_WAIT: Duration = Duration::from_secs(30);
/// Chunk size of writes and reads in transfers and sinks (taps also writes SCTP in
/// messages of at most 64 KiB).
const CHUNK: usize = 64 * 1024;
/// Largest HTTP object the server hands out.
const MAX_OBJECT: usize = 16 << 20;
/// A transfer flow that has not finished after this long fails (with how far it got)
/// instead of holding the trial forever; a healthy 10 MB flow takes well under 1 s.
const TRANSFER_DEADLINE: Duration = Duration::from_secs(20);
/// Payload protocol identifier of the raw SCTP baseline's end-of-data message (each way),
/// the raw counterpart of the end-of-flow marker taps sends on shutdown. ("END\0".)
const RAW_END_PPID: u32 = 0x454E_4400;

/// The transport protocol a flow uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Proto {
    /// TCP.
    #[default]
    Tcp,
    /// SCTP over UDP (usrsctp, RFC 6951).
    Sctp,
}

impl std::fmt::Display for Proto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Proto::Tcp => "TCP",
            Proto::Sctp => "SCTP",
        })
    }
}

/// Which implementation a side uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Impl {
    /// taps: `Context`, `Preconnection`, `initiate`/`listen`, `Connection`.
    Taps,
    /// Plain tokio sockets (TCP) or the `usrsctp` crate directly (SCTP).
    Raw,
}

/// How a client of experiments 3 and 4 connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientKind {
    /// Raw tokio `TcpSocket` to `127.0.0.1`.
    Raw,
    /// Raw usrsctp association to `127.0.0.1` (no taps).
    RawSctp,
    /// taps requiring TCP, to the literal `127.0.0.1`: one candidate, no DNS, no race.
    TapsSingle,
    /// taps requiring SCTP, to the literal `127.0.0.1`: one candidate, no race.
    TapsSctp,
    /// taps with `transport: ["SCTP", "TCP"]` to `127.0.0.1`: SCTP raced against TCP,
    /// with a seeded context (hits) and a context whose CIB forgets at once (misses).
    TapsRace,
    /// taps requiring TCP, to `localhost`: A and AAAA looked up, `::1` and `127.0.0.1`
    /// raced (hits and misses as for [`ClientKind::TapsRace`]).
    TapsFamilyRace,
    /// Only the taps resolver's lookup of `localhost` (both families), no connection:
    /// isolates what name resolution adds to the family race.
    TapsResolveOnly,
    /// taps requiring TCP and IPv4, to `localhost`: the family race's name lookup, one
    /// candidate, no race (the family race's single-protocol baseline).
    TapsSingleName,
}

impl ClientKind {
    /// The implementation this kind uses.
    pub fn imp(self) -> Impl {
        match self {
            ClientKind::Raw | ClientKind::RawSctp => Impl::Raw,
            _ => Impl::Taps,
        }
    }
}

/// What a server does with a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServeMode {
    /// Reads and drops everything until end of stream, then closes.
    Sink,
    /// HTTP/1.0 with keep-alive: `GET /<bytes>` answers an object of that size.
    Http,
}

/// The protocols a server listens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Listen {
    /// TCP only.
    #[default]
    Tcp,
    /// SCTP (inside UDP) only.
    Sctp,
    /// TCP and SCTP on the same port number (SCTP inside UDP).
    TcpAndSctp,
}

impl Listen {
    fn tcp(self) -> bool {
        self != Listen::Sctp
    }

    fn sctp(self) -> bool {
        self != Listen::Tcp
    }

    /// Listening on `proto` only.
    pub fn only(proto: Proto) -> Listen {
        match proto {
            Proto::Tcp => Listen::Tcp,
            Proto::Sctp => Listen::Sctp,
        }
    }
}

/// A server worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerSpec {
    /// Implementation.
    pub imp: Impl,
    /// What to do with connections.
    pub mode: ServeMode,
    /// Listen on `::1` and `127.0.0.1` (same port) instead of `127.0.0.1` only (TCP only).
    pub dual: bool,
    /// Protocols to listen on.
    #[serde(default)]
    pub listen: Listen,
}

fn yes() -> bool {
    true
}

/// A client worker's task.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum ClientSpec {
    /// Experiment 1: from context creation to the last of `flows` concurrent connects.
    Connect {
        /// What to connect to, and how.
        #[serde(flatten)]
        target: Target,
        /// Concurrent flows.
        flows: usize,
    },
    /// Experiment 2: `flows` connected before the window; in it each sends `bytes`,
    /// closes and waits for the receiver to close.
    Transfer {
        /// What to connect to, and how.
        #[serde(flatten)]
        target: Target,
        /// Concurrent flows.
        flows: usize,
        /// Bytes per flow.
        bytes: u64,
    },
    /// Experiment 3: `count` connections one after the other, each closed at once.
    Handshakes {
        /// How to connect.
        client: ClientKind,
        /// Server port.
        port: u16,
        /// SCTP encapsulation UDP port the client sends SCTP to (a port nobody listens
        /// on makes SCTP fail at once: ICMP port unreachable).
        #[serde(default)]
        udp_port: u16,
        /// Connections.
        count: usize,
        /// Share of races that find the CIB seeded, in percent.
        hit_percent: u32,
    },
    /// Experiment 4: HTTP/1.0 keep-alive requests, connections arriving as a Poisson
    /// process.
    Http {
        /// How to connect.
        client: ClientKind,
        /// Server port.
        port: u16,
        /// SCTP encapsulation UDP port the client sends SCTP to.
        #[serde(default)]
        udp_port: u16,
        /// Requests per second.
        rate: f64,
        /// Length of the load period, milliseconds.
        duration_ms: u64,
        /// Object size, bytes.
        object: usize,
        /// Requests per connection (keep-alive).
        calls_per_conn: usize,
        /// Share of races that find the CIB seeded, in percent.
        hit_percent: u32,
        /// PRNG seed of the arrival process.
        seed: u64,
    },
}

/// What a client measured in its window.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClientResult {
    /// CPU used in the window.
    pub cpu: Cpu,
    /// RSS at the start of the window, KiB.
    pub rss_before_kib: u64,
    /// RSS at the end of the window, KiB.
    pub rss_after_kib: u64,
    /// Anonymous RSS (heap, stacks) at the start of the window, KiB.
    #[serde(default)]
    pub anon_before_kib: u64,
    /// Anonymous RSS at the end of the window, KiB.
    #[serde(default)]
    pub anon_after_kib: u64,
    /// Wall time of the window, microseconds.
    pub elapsed_us: u64,
    /// Per-connection connect delays (call to connected), microseconds.
    pub delays_us: Vec<f64>,
    /// Connections (or flows) that succeeded.
    pub ok: usize,
    /// Connections (or flows) that failed.
    pub failed: usize,
    /// The first failure.
    pub first_error: Option<String>,
    /// Connection attempts started: by the races (taps; 0 for a flow mapped onto an
    /// existing association, which needs no handshake) or connects issued (raw).
    pub attempts: usize,
    /// Connections (or flows) that ended up on SCTP.
    #[serde(default)]
    pub sctp: usize,
    /// Payload bytes moved (sent in transfers, received in HTTP).
    pub bytes: u64,
    /// HTTP requests answered.
    pub requests: u64,
}

/// A server's counters and resource use so far.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerStats {
    /// CPU used since the process started.
    pub cpu: Cpu,
    /// Current RSS, KiB.
    pub rss_kib: u64,
    /// Connections accepted.
    pub accepted: u64,
    /// Connections finished.
    pub closed: u64,
    /// Payload bytes received.
    pub bytes: u64,
    /// HTTP requests answered.
    pub requests: u64,
    /// Whether the counters asked for were not reached within [`STATS_WAIT`].
    pub timed_out: bool,
}

/// Entry point of a worker process: `args` are what follows the launcher's own
/// arguments (`server <json>` or `client <json>`). Returns the exit code.
pub fn worker_main(args: &[String]) -> i32 {
    let result = match args {
        [role, spec] if role == "server" => serde_json::from_str(spec)
            .map_err(|e| format!("bad server spec: {e}"))
            .and_then(server_main),
        [role, spec] if role == "client" => serde_json::from_str(spec)
            .map_err(|e| format!("bad client spec: {e}"))
            .and_then(client_main),
        _ => Err("usage: worker (server|client) <json spec>".to_string()),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("taps-bench worker: error: {e}");
            1
        }
    }
}

/// The runtime every worker uses: what `taps` (the CLI) uses, 2 worker threads.
fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

fn compile(props: TransportProperties) -> Result<Properties, String> {
    props.compile().map_err(|e| format!("properties: {e}"))
}

/// Properties for initiating over `proto` only (required).
pub fn client_properties(proto: Proto) -> Result<Properties, String> {
    let p = match proto {
        Proto::Tcp => Protocol::Tcp,
        Proto::Sctp => Protocol::Sctp,
    };
    compile(TransportProperties::new().protocols(Preference::Require, [p]))
}

/// Properties of the race of experiments 3 and 4: NEAT's `transport: ["SCTP", "TCP"]`
/// (one of them required, SCTP preferred).
pub fn race_properties() -> Result<Properties, String> {
    compile(
        TransportProperties::new().protocols(Preference::Require, [Protocol::Sctp, Protocol::Tcp]),
    )
}

fn listener_properties(listen: Listen) -> Result<Properties, String> {
    let l = TransportProperties::for_listener();
    compile(match listen {
        Listen::Tcp => l.protocols(Preference::Require, [Protocol::Tcp]),
        Listen::Sctp => l.protocols(Preference::Require, [Protocol::Sctp]),
        Listen::TcpAndSctp => l.protocols(Preference::Require, [Protocol::Sctp, Protocol::Tcp]),
    })
}

/// A context for a taps client: `udp_port` (if not 0) is the SCTP encapsulation port,
/// `mapping` the flow-mapping switch, `cib` the CIB settings (default if `None`).
fn client_context(udp_port: u16, mapping: bool, cib: Option<CibConfig>) -> Result<Context, String> {
    let mut b = Context::builder();
    if udp_port != 0 {
        b = b.sctp_udp_port(udp_port);
    }
    if !mapping {
        b = b.flow_mapping(false);
    }
    if let Some(c) = cib {
        b = b.cib_config(c);
    }
    b.build().map_err(|e| format!("context: {e}"))
}

/// A UDP port on `ip` nobody uses at this moment (bound and released again). The
/// benchmarks give every SCTP server its own encapsulation port, so runs do not collide
/// with each other or with a taps on the default port 9899; a port nobody listens on is
/// also how "SCTP dead" is made (the kernel answers ICMP port unreachable).
pub fn free_udp_port(ip: IpAddr) -> Result<u16, String> {
    std::net::UdpSocket::bind((ip, 0))
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("probing a free UDP port: {e}"))
}

/// A UDP port on 127.0.0.1 that nobody listens on and that stays so: below the kernel's
/// ephemeral range (`ip_local_port_range`), so no socket bound to port 0 (every client
/// association's UDP socket) can land on it. SCTP sent there fails at once (ICMP port
/// unreachable), which is how the benchmarks make SCTP "dead".
pub fn dead_udp_port() -> Result<u16, String> {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|w| w.parse::<u16>().ok())
        })
        .unwrap_or(32768);
    let top = low.saturating_sub(1000).max(2000);
    (1024.max(top.saturating_sub(5000))..top)
        .rev()
        .find(|p| std::net::UdpSocket::bind((LOCALHOST_V4, *p)).is_ok())
        .ok_or_else(|| "no free UDP port below the ephemeral range".to_string())
}

/// A TCP port on `ip` nobody uses at this moment.
fn free_tcp_port(ip: IpAddr) -> Result<u16, String> {
    std::net::TcpListener::bind((ip, 0))
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("probing a free TCP port: {e}"))
}

fn say(line: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|_| out.flush())
        .map_err(|e| format!("stdout: {e}"))
}

// ---------------------------------------------------------------------------------------
// Servers

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    closed: AtomicU64,
    bytes: AtomicU64,
    requests: AtomicU64,
}

fn server_main(spec: ServerSpec) -> Result<(), String> {
    let rt = runtime()?;
    let counters = Arc::new(Counters::default());
    let (port, udp_port) = rt.block_on(start_server(&spec, counters.clone()))?;
    say(&format!("PORT {port} {udp_port}"))?;
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| format!("stdin: {e}"))?;
        let mut words = line.split_whitespace();
        match words.next() {
            Some("stats") => {
                let want_accepted: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                let want_closed: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                let deadline = Instant::now() + STATS_WAIT;
                let mut timed_out = false;
                while counters.accepted.load(Ordering::Acquire) < want_accepted
                    || counters.closed.load(Ordering::Acquire) < want_closed
                {
                    if Instant::now() > deadline {
                        timed_out = true;
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(500));
                }
                let stats = ServerStats {
                    cpu: measure::process_cpu(),
                    rss_kib: measure::rss_kib(),
                    accepted: counters.accepted.load(Ordering::Acquire),
                    closed: counters.closed.load(Ordering::Acquire),
                    bytes: counters.bytes.load(Ordering::Acquire),
                    requests: counters.requests.load(Ordering::Acquire),
                    timed_out,
                };
                let json = serde_json::to_string(&stats).map_err(|e| e.to_string())?;
                say(&format!("STATS {json}"))?;
            }
            Some("quit") => break,
            _ => {}
        }
    }
    rt.shutdown_timeout(Duration::from_millis(100));
    Ok(())
}

/// Starts listening (and accepting, in spawned tasks); returns the port (TCP port and
/// SCTP port) and the SCTP encapsulation UDP port (0 without SCTP).
async fn start_server(spec: &ServerSpec, counters: Arc<Counters>) -> Result<(u16, u16), String> {
    if spec.dual && spec.listen != Listen::Tcp {
        return Err("dual-family servers listen on TCP only".into());
    }
    match spec.imp {
        Impl::Raw => start_raw_server(spec, counters).await,
        Impl::Taps if spec.listen.sctp() => start_taps_sctp_server(spec, counters).await,
        Impl::Taps => start_taps_tcp_server(spec, counters).await,
    }
}

const LOCALHOST_V4: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

async fn start_raw_server(
    spec: &ServerSpec,
    counters: Arc<Counters>,
) -> Result<(u16, u16), String> {
    let mut port = 0;
    if spec.listen.tcp() {
        let first: SocketAddr = if spec.dual {
            (Ipv6Addr::LOCALHOST, 0).into()
        } else {
            (Ipv4Addr::LOCALHOST, 0).into()
        };
        let l = raw_listen(first)?;
        port = l.local_addr().map_err(|e| e.to_string())?.port();
        let mut listeners = vec![l];
        if spec.dual {
            listeners.push(raw_listen(SocketAddr::new(LOCALHOST_V4, port))?);
        }
        for l in listeners {
            let (counters, mode) = (counters.clone(), spec.mode);
            tokio::spawn(async move {
                while let Ok((s, _)) = l.accept().await {
                    let _ = s.set_nodelay(true);
                    counters.accepted.fetch_add(1, Ordering::AcqRel);
                    tokio::spawn(serve(s, mode, counters.clone()));
                }
            });
        }
    }
    let mut udp_port = 0;
    if spec.listen.sctp() {
        if spec.mode != ServeMode::Sink {
            return Err("the raw SCTP server only sinks".into());
        }
        // SCTP ports are per process (one usrsctp instance): any number will do; use the
        // TCP port when there is one, like taps does.
        if port == 0 {
            port = free_tcp_port(LOCALHOST_V4)?;
        }
        let l = SctpStack::global()
            .listen(
                SocketAddr::new(LOCALHOST_V4, 0),
                port,
                &SctpOptions::default(),
            )
            .map_err(|e| format!("SCTP listen: {e}"))?;
        udp_port = l.local_addr().port();
        tokio::spawn(async move {
            while let Ok((a, _)) = l.accept().await {
                counters.accepted.fetch_add(1, Ordering::AcqRel);
                tokio::spawn(raw_sctp_sink(a, counters.clone()));
            }
        });
    }
    Ok((port, udp_port))
}

async fn start_taps_tcp_server(
    spec: &ServerSpec,
    counters: Arc<Counters>,
) -> Result<(u16, u16), String> {
    let first: SocketAddr = if spec.dual {
        (Ipv6Addr::LOCALHOST, 0).into()
    } else {
        (Ipv4Addr::LOCALHOST, 0).into()
    };
    let ctx = Context::builder()
        .build()
        .map_err(|e| format!("context: {e}"))?;
    let props = listener_properties(Listen::Tcp)?;
    let l = Preconnection::new(&ctx, props.clone())
        .local(first)
        .listen()
        .await
        .map_err(|e| format!("listen on {first}: {e}"))?;
    let port = l
        .local_addrs()
        .first()
        .map(|(_, a)| a.port())
        .ok_or("the listener bound nothing")?;
    let mut listeners = vec![l];
    if spec.dual {
        let second = SocketAddr::new(LOCALHOST_V4, port);
        listeners.push(
            Preconnection::new(&ctx, props)
                .local(second)
                .listen()
                .await
                .map_err(|e| format!("listen on {second}: {e}"))?,
        );
    }
    for l in listeners {
        spawn_taps_accept(l, spec.mode, counters.clone());
    }
    Ok((port, 0))
}

/// A taps listener with SCTP (and TCP if asked): the context gets a free UDP
/// encapsulation port, the listener a port free for TCP (SCTP uses the same number).
async fn start_taps_sctp_server(
    spec: &ServerSpec,
    counters: Arc<Counters>,
) -> Result<(u16, u16), String> {
    let props = listener_properties(spec.listen)?;
    let mut last_error = String::new();
    // The probed ports could be taken before we bind them: try a few times.
    for _ in 0..5 {
        let udp_port = free_udp_port(LOCALHOST_V4)?;
        let port = free_tcp_port(LOCALHOST_V4)?;
        let ctx = Context::builder()
            .sctp_udp_port(udp_port)
            .build()
            .map_err(|e| format!("context: {e}"))?;
        let local = SocketAddr::new(LOCALHOST_V4, port);
        match Preconnection::new(&ctx, props.clone())
            .local(local)
            .listen()
            .await
        {
            Ok(l) => {
                let has = |p: Protocol| l.local_addrs().iter().any(|(s, _)| s.protocol == p);
                if has(Protocol::Sctp) && (!spec.listen.tcp() || has(Protocol::Tcp)) {
                    spawn_taps_accept(l, spec.mode, counters);
                    return Ok((port, udp_port));
                }
                last_error = format!("listener bound only {:?}", l.local_addrs());
            }
            Err(e) => last_error = format!("listen on {local} (UDP {udp_port}): {e}"),
        }
    }
    Err(last_error)
}

fn spawn_taps_accept(mut l: taps::Listener, mode: ServeMode, counters: Arc<Counters>) {
    tokio::spawn(async move {
        while let Some(accepted) = l.accept().await {
            let Ok(conn) = accepted else { continue };
            counters.accepted.fetch_add(1, Ordering::AcqRel);
            tokio::spawn(serve(conn, mode, counters.clone()));
        }
    });
}

/// Listen backlog of the raw servers: the same as taps's listeners.
const RAW_BACKLOG: u32 = 1024;

fn raw_listen(addr: SocketAddr) -> Result<TcpListener, String> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    };
    socket
        .and_then(|s| {
            s.set_reuseaddr(true)?;
            s.bind(addr)?;
            s.listen(RAW_BACKLOG)
        })
        .map_err(|e| format!("listen on {addr}: {e}"))
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(s: S, mode: ServeMode, counters: Arc<Counters>) {
    match mode {
        ServeMode::Sink => sink(s, &counters).await,
        ServeMode::Http => http_serve(s, &counters).await,
    }
    counters.closed.fetch_add(1, Ordering::AcqRel);
}

async fn sink<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, counters: &Counters) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                counters.bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
    }
    let _ = s.shutdown().await;
}

/// The raw SCTP sink: reads messages until the peer's end-of-data message on a stream,
/// answers it with its own on that stream (the flow counts as closed; the raw baseline
/// has one flow per association, on stream 0), then holds the association until the peer
/// shuts it down or aborts it (dropping it earlier would abort it, and an ABORT can
/// overtake queued data).
async fn raw_sctp_sink(a: Association, counters: Arc<Counters>) {
    let mut ended = 0u64;
    loop {
        match a.recv().await {
            Ok(Some(m)) if m.ppid == RAW_END_PPID => {
                let _ = a.send(m.stream, &[0], true, RAW_END_PPID).await;
                counters.closed.fetch_add(1, Ordering::AcqRel);
                ended += 1;
            }
            Ok(Some(m)) => {
                counters
                    .bytes
                    .fetch_add(m.data.len() as u64, Ordering::Relaxed);
            }
            Ok(None) | Err(_) => break,
        }
    }
    if ended == 0 {
        counters.closed.fetch_add(1, Ordering::AcqRel);
    }
}

/// A minimal HTTP/1.0 server: `GET /<n>` gets `n` bytes; `Connection: keep-alive`
/// keeps the connection for the next request.
async fn http_serve<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, counters: &Counters) {
    static BODY: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let body = BODY.get_or_init(|| vec![b'x'; MAX_OBJECT]);
    let mut buf = Vec::with_capacity(1024);
    loop {
        let Some(head_len) = read_head(&mut s, &mut buf).await else {
            break;
        };
        let head = String::from_utf8_lossy(&buf[..head_len]).into_owned();
        buf.drain(..head_len);
        let size = head
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|p| p.trim_start_matches('/').parse::<usize>().ok());
        let keep_alive = head.to_ascii_lowercase().contains("connection: keep-alive");
        let response = match size {
            Some(n) if n <= MAX_OBJECT => {
                let mut r = format!(
                    "HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {n}\r\n{}\r\n",
                    if keep_alive { "Connection: keep-alive\r\n" } else { "" }
                )
                .into_bytes();
                r.extend_from_slice(&body[..n]);
                r
            }
            _ => b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
        };
        if s.write_all(&response).await.is_err() {
            break;
        }
        counters.requests.fetch_add(1, Ordering::Relaxed);
        if !keep_alive {
            break;
        }
    }
    let _ = s.shutdown().await;
}

/// Reads until `buf` holds a full header block; returns its length (with the blank
/// line), or None at end of stream.
async fn read_head<S: AsyncRead + Unpin>(s: &mut S, buf: &mut Vec<u8>) -> Option<usize> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some(i + 4);
        }
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Clients

/// A connected flow of either implementation. Not boxed: boxing would add an allocation
/// per flow to the taps side only.
#[allow(clippy::large_enum_variant)]
enum Flow {
    Taps(Connection),
    Raw(TcpStream),
    RawSctp(Association),
}

impl Flow {
    fn is_sctp(&self) -> bool {
        match self {
            Flow::Taps(c) => c.info().stack.protocol == Protocol::Sctp,
            Flow::Raw(_) => false,
            Flow::RawSctp(_) => true,
        }
    }

    /// Connection attempts this flow took: the race's started attempts (taps; 0 for a
    /// flow mapped onto an existing association), one connect (raw).
    fn attempts(&self) -> usize {
        match self {
            Flow::Taps(c) => started_attempts(c),
            Flow::Raw(_) | Flow::RawSctp(_) => 1,
        }
    }
}

/// How a client opens a flow.
#[derive(Clone)]
enum Dial {
    /// taps: `initiate` on a shared preconnection.
    Taps(Arc<Preconnection>),
    /// Raw TCP to this address.
    Tcp(SocketAddr),
    /// Raw usrsctp association to SCTP `port` behind the UDP address `udp`.
    Sctp { udp: SocketAddr, port: u16 },
}

impl Dial {
    /// The raw dial for `proto` to `127.0.0.1`.
    fn raw(proto: Proto, port: u16, udp_port: u16) -> Dial {
        match proto {
            Proto::Tcp => Dial::Tcp(v4(port)),
            Proto::Sctp => Dial::Sctp {
                udp: v4(udp_port),
                port,
            },
        }
    }

    async fn open(&self) -> Result<Flow, String> {
        match self {
            Dial::Taps(pre) => pre
                .initiate()
                .await
                .map(Flow::Taps)
                .map_err(|e| e.to_string()),
            Dial::Tcp(addr) => raw_connect(*addr)
                .await
                .map(Flow::Raw)
                .map_err(|e| e.to_string()),
            Dial::Sctp { udp, port } => raw_sctp_connect(*udp, *port)
                .await
                .map(Flow::RawSctp)
                .map_err(|e| format!("SCTP to {udp} port {port}: {e}")),
        }
    }
}

/// Waits for a line from the orchestrator; `false` at end of input.
fn wait_for(word: &str) -> bool {
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.trim() == word => return true,
            Some(Ok(_)) => continue,
            _ => return false,
        }
    }
}

fn client_main(spec: ClientSpec) -> Result<(), String> {
    let rt = runtime()?;
    let result = rt.block_on(async move {
        match spec {
            ClientSpec::Connect { target, flows } => connect_client(target, flows).await,
            ClientSpec::Transfer {
                target,
                flows,
                bytes,
            } => transfer_client(target, flows, bytes).await,
            ClientSpec::Handshakes {
                client,
                port,
                udp_port,
                count,
                hit_percent,
            } => handshake_client(client, port, udp_port, count, hit_percent).await,
            ClientSpec::Http {
                client,
                port,
                udp_port,
                rate,
                duration_ms,
                object,
                calls_per_conn,
                hit_percent,
                seed,
            } => {
                let load = Load {
                    rate,
                    duration: Duration::from_millis(duration_ms),
                    object,
                    calls_per_conn: calls_per_conn.max(1),
                    seed,
                };
                http_client(client, port, udp_port, hit_percent, load).await
            }
        }
    });
    rt.shutdown_timeout(Duration::from_millis(100));
    result
}

/// Prints READY and blocks (outside the runtime's workers) until `go`.
async fn ready() -> Result<(), String> {
    say("READY")?;
    let go = tokio::task::spawn_blocking(|| wait_for("go"))
        .await
        .map_err(|e| e.to_string())?;
    if go {
        Ok(())
    } else {
        Err("the orchestrator went away before `go`".into())
    }
}

/// Prints the result and blocks until `end` (teardown happens after).
async fn report(result: &ClientResult) -> Result<(), String> {
    let json = serde_json::to_string(result).map_err(|e| e.to_string())?;
    say(&format!("RESULT {json}"))?;
    tokio::task::spawn_blocking(|| wait_for("end"))
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

struct Window {
    cpu: Cpu,
    rss: u64,
    anon: u64,
    t0: Instant,
}

impl Window {
    fn open() -> Window {
        Window {
            rss: measure::rss_kib(),
            anon: measure::anon_kib(),
            cpu: measure::process_cpu(),
            t0: Instant::now(),
        }
    }

    fn close(&self, r: &mut ClientResult) {
        r.elapsed_us = self.t0.elapsed().as_micros() as u64;
        r.cpu = measure::process_cpu().since(&self.cpu);
        r.rss_before_kib = self.rss;
        r.rss_after_kib = measure::rss_kib();
        r.anon_before_kib = self.anon;
        r.anon_after_kib = measure::anon_kib();
    }
}

fn v4(port: u16) -> SocketAddr {
    (Ipv4Addr::LOCALHOST, port).into()
}

async fn raw_connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_nodelay(true)?;
    socket.connect(addr).await
}

/// The raw SCTP baseline's connect: one association (with taps's defaults: 1024 streams,
/// no-delay) per flow, straight from the `usrsctp` crate.
async fn raw_sctp_connect(udp: SocketAddr, port: u16) -> usrsctp::Result<Association> {
    SctpStack::global()
        .connect(udp, port, &SctpOptions::default())?
        .await
}

fn note_failure(r: &mut ClientResult, e: impl std::fmt::Display) {
    r.failed += 1;
    if r.first_error.is_none() {
        r.first_error = Some(e.to_string());
    }
}

fn started_attempts(conn: &Connection) -> usize {
    conn.info().race.as_ref().map_or(0, |rep| {
        rep.attempts
            .iter()
            .filter(|a| !matches!(a.outcome, AttemptOutcome::Skipped(_)))
            .count()
    })
}

/// Opens `flows` concurrent flows (each its own task); returns them with their delays.
async fn open_flows(dial: &Dial, flows: usize, r: &mut ClientResult) -> Vec<Flow> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..flows {
        let dial = dial.clone();
        set.spawn(async move {
            let t = Instant::now();
            let flow = dial.open().await;
            (t.elapsed(), flow)
        });
    }
    let mut out = Vec::with_capacity(flows);
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((d, Ok(flow))) => {
                r.delays_us.push(d.as_secs_f64() * 1e6);
                r.attempts += flow.attempts();
                r.sctp += usize::from(flow.is_sctp());
                r.ok += 1;
                out.push(flow);
            }
            Ok((_, Err(e))) => note_failure(r, e),
            Err(e) => note_failure(r, format!("flow task failed: {e}")),
        }
    }
    out
}

fn preconnection(
    ctx: &Context,
    props: Properties,
    host: &str,
    port: u16,
) -> Result<Arc<Preconnection>, String> {
    let pre = Preconnection::new(ctx, props).remote(RemoteEndpoint::new(host, port));
    pre.plan().map_err(|e| format!("plan: {e}"))?;
    Ok(Arc::new(pre))
}

/// What the clients of experiments 1 and 2 connect to, and how.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Target {
    /// Implementation.
    pub imp: Impl,
    /// Protocol.
    #[serde(default)]
    pub proto: Proto,
    /// Server port on 127.0.0.1 (TCP port, or SCTP port).
    pub port: u16,
    /// The server's SCTP encapsulation UDP port (SCTP only).
    #[serde(default)]
    pub udp_port: u16,
    /// taps over SCTP: map the flows onto streams of one association.
    #[serde(default = "yes")]
    pub mapping: bool,
}

async fn connect_client(t: Target, flows: usize) -> Result<(), String> {
    ready().await?;
    let mut r = ClientResult::default();
    let w = Window::open();
    let held = match t.imp {
        Impl::Taps => {
            let ctx = client_context(t.udp_port, t.mapping, None)?;
            let pre = Preconnection::new(&ctx, client_properties(t.proto)?)
                .remote(RemoteEndpoint::new("127.0.0.1", t.port));
            let flows = open_flows(&Dial::Taps(Arc::new(pre)), flows, &mut r).await;
            w.close(&mut r);
            (flows, Some(ctx))
        }
        Impl::Raw => {
            let flows = open_flows(&Dial::raw(t.proto, t.port, t.udp_port), flows, &mut r).await;
            w.close(&mut r);
            (flows, None)
        }
    };
    report(&r).await?;
    drop(held);
    Ok(())
}

/// How far a transfer flow got (for the error when it misses [`TRANSFER_DEADLINE`]).
#[derive(Default)]
struct FlowProgress {
    /// Bytes handed to the connection.
    written: AtomicU64,
    /// 0: writing, 1: ending its sending side, 2: waiting for the receiver's end.
    phase: AtomicU64,
}

impl FlowProgress {
    fn describe(&self, bytes: u64) -> String {
        let phase = match self.phase.load(Ordering::Relaxed) {
            0 => "writing",
            1 => "ending its sending side",
            _ => "waiting for the receiver's end",
        };
        format!(
            "flow not done after {} s: {} of {bytes} bytes written, {phase}",
            TRANSFER_DEADLINE.as_secs(),
            self.written.load(Ordering::Relaxed)
        )
    }
}

async fn send_and_wait<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    bytes: u64,
    progress: &FlowProgress,
) -> std::io::Result<u64> {
    let chunk = vec![0x5au8; CHUNK];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        s.write_all(&chunk[..n]).await?;
        left -= n as u64;
        progress.written.fetch_add(n as u64, Ordering::Relaxed);
    }
    progress.phase.store(1, Ordering::Relaxed);
    s.shutdown().await?;
    progress.phase.store(2, Ordering::Relaxed);
    let mut sink = [0u8; 1024];
    while s.read(&mut sink).await? > 0 {}
    Ok(bytes)
}

/// The raw SCTP counterpart of [`send_and_wait`]: the bytes in messages of at most
/// 64 KiB on stream 0, an end-of-data message, then wait for the receiver's.
async fn raw_sctp_send_and_wait(
    a: Association,
    bytes: u64,
    progress: &FlowProgress,
) -> Result<u64, String> {
    let chunk = vec![0x5au8; CHUNK];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        a.send(0, &chunk[..n], true, 0)
            .await
            .map_err(|e| e.to_string())?;
        left -= n as u64;
        progress.written.fetch_add(n as u64, Ordering::Relaxed);
    }
    progress.phase.store(1, Ordering::Relaxed);
    a.send(0, &[0], true, RAW_END_PPID)
        .await
        .map_err(|e| e.to_string())?;
    progress.phase.store(2, Ordering::Relaxed);
    loop {
        match a.recv().await.map_err(|e| e.to_string())? {
            Some(m) if m.ppid == RAW_END_PPID => return Ok(bytes),
            Some(_) => continue,
            None => return Err("association ended before the receiver's end".into()),
        }
    }
}

async fn transfer_client(t: Target, flows: usize, bytes: u64) -> Result<(), String> {
    let mut setup = ClientResult::default();
    let ctx = match t.imp {
        Impl::Taps => Some(client_context(t.udp_port, t.mapping, None)?),
        Impl::Raw => None,
    };
    let dial = match &ctx {
        Some(ctx) => Dial::Taps(preconnection(
            ctx,
            client_properties(t.proto)?,
            "127.0.0.1",
            t.port,
        )?),
        None => Dial::raw(t.proto, t.port, t.udp_port),
    };
    let opened = open_flows(&dial, flows, &mut setup).await;
    if let Some(e) = setup.first_error {
        return Err(format!("connecting the flows: {e}"));
    }
    ready().await?;
    let mut r = ClientResult::default();
    let w = Window::open();
    let mut set = tokio::task::JoinSet::new();
    for flow in opened {
        set.spawn(async move {
            let progress = FlowProgress::default();
            let sent = async {
                match flow {
                    Flow::Taps(c) => send_and_wait(c, bytes, &progress)
                        .await
                        .map_err(|e| e.to_string()),
                    Flow::Raw(s) => send_and_wait(s, bytes, &progress)
                        .await
                        .map_err(|e| e.to_string()),
                    Flow::RawSctp(a) => raw_sctp_send_and_wait(a, bytes, &progress).await,
                }
            };
            match tokio::time::timeout(TRANSFER_DEADLINE, sent).await {
                Ok(r) => r,
                Err(_) => Err(progress.describe(bytes)),
            }
        });
    }
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(Ok(n)) => {
                r.ok += 1;
                r.bytes += n;
            }
            Ok(Err(e)) => note_failure(&mut r, e),
            Err(e) => note_failure(&mut r, e),
        }
    }
    w.close(&mut r);
    report(&r).await
}

/// How the clients of experiments 3 and 4 connect: raw, taps to a literal with one
/// protocol, or taps racing with a seeded context (hits) and a context whose CIB forgets
/// at once (misses). Every taps context has flow mapping off, so every connection is a
/// race (or a single attempt) of its own.
struct Connector {
    kind: ClientKind,
    raw: Option<Dial>,
    single: Option<Arc<Preconnection>>,
    hit: Option<Arc<Preconnection>>,
    miss: Option<Arc<Preconnection>>,
    contexts: Vec<Context>,
}

/// One connection made by a [`Connector`].
struct Connected {
    flow: Option<Flow>,
    attempts: usize,
    sctp: bool,
}

impl Connector {
    async fn new(kind: ClientKind, port: u16, udp_port: u16) -> Result<Connector, String> {
        let mut c = Connector {
            kind,
            raw: None,
            single: None,
            hit: None,
            miss: None,
            contexts: Vec::new(),
        };
        match kind {
            ClientKind::Raw => c.raw = Some(Dial::raw(Proto::Tcp, port, udp_port)),
            ClientKind::RawSctp => c.raw = Some(Dial::raw(Proto::Sctp, port, udp_port)),
            ClientKind::TapsResolveOnly => c.contexts.push(client_context(0, false, None)?),
            ClientKind::TapsSingleName => {
                let ctx = client_context(0, false, None)?;
                let props = compile(
                    TransportProperties::new()
                        .protocols(Preference::Require, [Protocol::Tcp])
                        .ip_version(Preference::Require, Family::V4),
                )?;
                c.single = Some(preconnection(&ctx, props, "localhost", port)?);
                c.contexts.push(ctx);
            }
            ClientKind::TapsSingle | ClientKind::TapsSctp => {
                let (proto, udp) = if kind == ClientKind::TapsSctp {
                    (Proto::Sctp, udp_port)
                } else {
                    (Proto::Tcp, 0)
                };
                let ctx = client_context(udp, false, None)?;
                c.single = Some(preconnection(
                    &ctx,
                    client_properties(proto)?,
                    "127.0.0.1",
                    port,
                )?);
                c.contexts.push(ctx);
            }
            ClientKind::TapsRace | ClientKind::TapsFamilyRace => {
                let (props, host, udp) = if kind == ClientKind::TapsRace {
                    (race_properties()?, "127.0.0.1", udp_port)
                } else {
                    (client_properties(Proto::Tcp)?, "localhost", 0)
                };
                let hit_ctx = client_context(udp, false, None)?;
                let forget = CibConfig {
                    lifetime: Duration::ZERO,
                    ..CibConfig::default()
                };
                let miss_ctx = client_context(udp, false, Some(forget))?;
                let hit = preconnection(&hit_ctx, props.clone(), host, port)?;
                // Seed the CIB the way an application would: by a preliminary connection.
                let seed = hit
                    .initiate()
                    .await
                    .map_err(|e| format!("seeding connection to {host}:{port}: {e}"))?;
                drop(seed);
                if hit_ctx.cib().is_empty() {
                    return Err("the seeding connection left the CIB empty".into());
                }
                c.hit = Some(hit);
                c.miss = Some(preconnection(&miss_ctx, props, host, port)?);
                c.contexts.push(hit_ctx);
                c.contexts.push(miss_ctx);
            }
        }
        Ok(c)
    }

    /// Connects (a cache hit or a miss, for races).
    async fn connect(&self, hit: bool) -> Result<Connected, String> {
        let pre = match self.kind {
            ClientKind::TapsResolveOnly => {
                let ctx = self.contexts.first().ok_or("connector not set up")?;
                let mut resolution = ctx.resolver().resolve("localhost");
                let mut any = false;
                while let Some(answer) = resolution.next().await {
                    any |= answer.result.is_ok();
                }
                return if any {
                    Ok(Connected {
                        flow: None,
                        attempts: 0,
                        sctp: false,
                    })
                } else {
                    Err("localhost did not resolve".into())
                };
            }
            ClientKind::Raw | ClientKind::RawSctp => {
                let flow = self
                    .raw
                    .as_ref()
                    .ok_or("connector not set up")?
                    .open()
                    .await?;
                return Ok(Connected {
                    attempts: 1,
                    sctp: flow.is_sctp(),
                    flow: Some(flow),
                });
            }
            ClientKind::TapsSingle | ClientKind::TapsSctp | ClientKind::TapsSingleName => {
                self.single.as_ref()
            }
            ClientKind::TapsRace | ClientKind::TapsFamilyRace if hit => self.hit.as_ref(),
            ClientKind::TapsRace | ClientKind::TapsFamilyRace => self.miss.as_ref(),
        };
        let pre = pre.ok_or("connector not set up")?;
        let c = pre.initiate().await.map_err(|e| e.to_string())?;
        let flow = Flow::Taps(c);
        Ok(Connected {
            attempts: flow.attempts(),
            sctp: flow.is_sctp(),
            flow: Some(flow),
        })
    }
}

async fn handshake_client(
    kind: ClientKind,
    port: u16,
    udp_port: u16,
    count: usize,
    hit_percent: u32,
) -> Result<(), String> {
    let connector = Connector::new(kind, port, udp_port).await?;
    ready().await?;
    let mut r = ClientResult::default();
    let w = Window::open();
    for i in 0..count {
        let t = Instant::now();
        match connector.connect(measure::is_hit(i, hit_percent)).await {
            Ok(c) => {
                r.delays_us.push(t.elapsed().as_secs_f64() * 1e6);
                r.attempts += c.attempts;
                r.sctp += usize::from(c.sctp);
                r.ok += 1;
                drop(c.flow);
            }
            Err(e) => note_failure(&mut r, e),
        }
    }
    w.close(&mut r);
    report(&r).await
}

struct Load {
    rate: f64,
    duration: Duration,
    object: usize,
    calls_per_conn: usize,
    seed: u64,
}

/// One connection of the load: `calls` keep-alive requests. Returns (bytes, requests).
async fn http_session<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    object: usize,
    calls: usize,
) -> std::io::Result<(u64, u64)> {
    let mut bytes = 0;
    let mut buf = Vec::with_capacity(object + 512);
    let mut chunk = vec![0u8; CHUNK];
    for _ in 0..calls {
        let req =
            format!("GET /{object} HTTP/1.0\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n");
        s.write_all(req.as_bytes()).await?;
        buf.clear();
        let (head, length) = loop {
            let n = s.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let text = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                let length = text
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                break (i + 4, length);
            }
        };
        let mut have = buf.len() - head;
        while have < length {
            let n = s.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            have += n;
        }
        bytes += length as u64;
    }
    s.shutdown().await?;
    Ok((bytes, calls as u64))
}

async fn http_client(
    kind: ClientKind,
    port: u16,
    udp_port: u16,
    hit_percent: u32,
    load: Load,
) -> Result<(), String> {
    if kind == ClientKind::RawSctp {
        return Err("the HTTP load generator has no raw SCTP client".into());
    }
    let connector = Arc::new(Connector::new(kind, port, udp_port).await?);
    let conn_rate = load.rate / load.calls_per_conn as f64;
    let mut rng = Rng::new(load.seed);
    let mut arrivals = Vec::new();
    let mut at = 0.0;
    loop {
        at += rng.exponential(1.0 / conn_rate);
        if at >= load.duration.as_secs_f64() {
            break;
        }
        arrivals.push(Duration::from_secs_f64(at));
    }
    ready().await?;
    let mut r = ClientResult::default();
    let w = Window::open();
    let start = tokio::time::Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for (i, offset) in arrivals.into_iter().enumerate() {
        tokio::time::sleep_until(start + offset).await;
        let connector = connector.clone();
        let (object, calls) = (load.object, load.calls_per_conn);
        let hit = measure::is_hit(i, hit_percent);
        set.spawn(async move {
            let t = Instant::now();
            let c = connector.connect(hit).await?;
            let delay = t.elapsed();
            let moved = match c.flow {
                Some(Flow::Taps(conn)) => http_session(conn, object, calls).await,
                Some(Flow::Raw(s)) => http_session(s, object, calls).await,
                Some(Flow::RawSctp(_)) | None => Ok((0, 0)),
            }
            .map_err(|e| e.to_string())?;
            Ok::<_, String>((delay, c.attempts, c.sctp, moved))
        });
    }
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(Ok((delay, attempts, sctp, (bytes, requests)))) => {
                r.ok += 1;
                r.delays_us.push(delay.as_secs_f64() * 1e6);
                r.attempts += attempts;
                r.sctp += usize::from(sctp);
                r.bytes += bytes;
                r.requests += requests;
            }
            Ok(Err(e)) => note_failure(&mut r, e),
            Err(e) => note_failure(&mut r, e),
        }
    }
    w.close(&mut r);
    report(&r).await
}
