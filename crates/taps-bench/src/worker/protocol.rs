//! The worker protocol's messages: what the orchestrator asks a server or a client
//! worker to do (the JSON specs on their command line) and what they answer (the JSON
//! on their `STATS` and `RESULT` lines).

#![forbid(unsafe_code)]

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::phases::PhaseMark;
use super::secure::Pki;
use crate::measure::Cpu;

/// How long a server waits for the counters a `stats` line asks for.
pub(crate) const STATS_WAIT: Duration = Duration::from_secs(30);

/// Payload protocol identifier of the raw SCTP baseline's end-of-data message (each way),
/// the raw counterpart of the end-of-flow marker taps sends on shutdown. ("END\0".)
pub(crate) const RAW_END_PPID: u32 = 0x454E_4400;

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
pub(crate) enum Impl {
    /// taps: `Context`, `Preconnection`, `initiate`/`listen`, `Connection`.
    Taps,
    /// Plain tokio sockets (TCP) or the `usrsctp` crate directly (SCTP).
    Raw,
}

/// How a client of experiments 3 and 4 connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ClientKind {
    /// Raw tokio `TcpSocket` to `127.0.0.1`.
    RawTcp,
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

/// What a server does with a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ServeMode {
    /// Reads and drops everything until end of stream, then closes.
    Sink,
    /// HTTP/1.0 with keep-alive: `GET /<bytes>` answers an object of that size.
    Http,
}

/// The protocols a server listens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Listen {
    /// TCP only.
    #[default]
    Tcp,
    /// SCTP (inside UDP) only.
    Sctp,
    /// TCP and SCTP on the same port number (SCTP inside UDP).
    TcpAndSctp,
}

impl Listen {
    /// Whether TCP is among the protocols.
    pub(crate) fn includes_tcp(self) -> bool {
        self != Listen::Sctp
    }

    /// Whether SCTP is among the protocols.
    pub(crate) fn includes_sctp(self) -> bool {
        self != Listen::Tcp
    }

    /// Listening on `proto` only.
    pub(crate) fn only(proto: Proto) -> Listen {
        match proto {
            Proto::Tcp => Listen::Tcp,
            Proto::Sctp => Listen::Sctp,
        }
    }
}

/// A server worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ServerSpec {
    /// Implementation.
    pub(crate) imp: Impl,
    /// What to do with connections.
    pub(crate) mode: ServeMode,
    /// Listen on `::1` and `127.0.0.1` (same port) instead of `127.0.0.1` only (TCP only).
    pub(crate) dual: bool,
    /// Protocols to listen on.
    #[serde(default)]
    pub(crate) listen: Listen,
    /// A secure server (TLS/TCP and/or QUIC) instead: `listen` and `dual` are ignored.
    #[serde(default)]
    pub(crate) secure: Option<SecureServe>,
}

/// What a secure server listens on, and with which identity.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SecureServe {
    /// The stacks.
    pub(crate) listen: SecureListen,
    /// The certificate files.
    pub(crate) pki: Pki,
}

/// The secure stacks a server listens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum SecureListen {
    /// TLS over TCP.
    Tls,
    /// QUIC (raw servers only: a taps secure listener always offers TLS/TCP too).
    Quic,
    /// TLS over TCP and QUIC on the same port number (taps).
    Both,
}

/// How a client of the secure experiment connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum SecureClient {
    /// tokio-rustls over a tokio `TcpStream` (no taps).
    RawTls,
    /// quinn's own `Endpoint` (no taps).
    RawQuic,
    /// taps requiring security and TCP: TLS/TCP, one candidate.
    TapsTls,
    /// taps requiring security and QUIC: one candidate.
    TapsQuic,
    /// taps requiring security: QUIC raced against TLS/TCP, with a seeded context
    /// (hits) and a context whose CIB forgets at once (misses).
    TapsRace,
}

/// How a client of the HTTP/3 experiment (`taps-bench http3`) sends its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum H3Client {
    /// h3 + h3-quinn on a plain quinn `Endpoint` (no taps).
    RawH3,
    /// hyper's HTTP/2 client connection over tokio-rustls over a tokio `TcpStream` (no
    /// taps).
    RawH2,
    /// `taps::http::Client` with HTTP/3 only.
    TapsH3,
    /// `taps::http::Client` with every version: QUIC raced against TLS/TCP.
    TapsRace,
    /// `taps::http::Client` with HTTP/2 and HTTP/1.1 only (TLS/TCP).
    TapsH2,
}

fn default_true() -> bool {
    true
}

/// A client worker's task.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub(crate) enum ClientSpec {
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
    /// The secure experiment: `count` connections started `rate` per second (open loop:
    /// each in a task of its own, whether the previous ones are done or not), each
    /// fetching one object of `object` bytes (HTTP/1.0), then closed.
    Secure {
        /// How to connect.
        client: SecureClient,
        /// Server port (TCP and UDP).
        port: u16,
        /// Connections.
        count: usize,
        /// Connections started per second.
        rate: f64,
        /// Object size, bytes.
        object: usize,
        /// Share of races that find the CIB seeded, in percent.
        hit_percent: u32,
        /// The certificate files (the client trusts the CA).
        pki: Pki,
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
    /// The HTTP/3 experiment: one warm-up request before the window, then `requests`
    /// GETs one after the other, on the warm-up's connection or each on a new one. The
    /// result counts a response as `ok` only with status 200 and `object` bytes; `attempts`
    /// is the connections opened in the window, `quic` the responses over HTTP/3.
    H3(H3Load),
}

/// What a client of the HTTP/3 experiment does (see [`ClientSpec::H3`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct H3Load {
    /// How it sends requests.
    pub(crate) client: H3Client,
    /// The server's port (TCP and UDP) on `localhost`.
    pub(crate) port: u16,
    /// Requests in the window, one after the other.
    pub(crate) requests: usize,
    /// The body size every response must have, bytes.
    pub(crate) object: usize,
    /// Each request on a new connection (closed after it), instead of all on the one
    /// connection the warm-up request opened.
    pub(crate) new_connections: bool,
    /// The CA certificate the client trusts (alone).
    pub(crate) ca: std::path::PathBuf,
    /// QUIC's head start in the taps race, ms (`None`: taps' default).
    #[serde(default)]
    pub(crate) head_start_ms: Option<u64>,
}

/// What the clients of experiments 1 and 2 connect to, and how.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Target {
    /// Implementation.
    pub(crate) imp: Impl,
    /// Protocol.
    #[serde(default)]
    pub(crate) proto: Proto,
    /// Server port on 127.0.0.1 (TCP port, or SCTP port).
    pub(crate) port: u16,
    /// The server's SCTP encapsulation UDP port (SCTP only).
    #[serde(default)]
    pub(crate) udp_port: u16,
    /// taps over SCTP: map the flows onto streams of one association.
    #[serde(default = "default_true")]
    pub(crate) mapping: bool,
}

/// What a client measured in its window.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ClientResult {
    /// CPU used in the window.
    pub(crate) cpu: Cpu,
    /// RSS at the start of the window, KiB.
    pub(crate) rss_before_kib: u64,
    /// RSS at the end of the window, KiB.
    pub(crate) rss_after_kib: u64,
    /// Anonymous RSS (heap, stacks) at the start of the window, KiB.
    #[serde(default)]
    pub(crate) anon_before_kib: u64,
    /// Anonymous RSS at the end of the window, KiB.
    #[serde(default)]
    pub(crate) anon_after_kib: u64,
    /// Wall time of the window, microseconds.
    pub(crate) elapsed_us: u64,
    /// Per-connection connect delays (call to connected), microseconds.
    pub(crate) delays_us: Vec<f64>,
    /// Connections (or flows) that succeeded.
    pub(crate) ok: usize,
    /// Connections (or flows) that failed.
    pub(crate) failed: usize,
    /// The first failure.
    pub(crate) first_error: Option<String>,
    /// Connection attempts started: by the races (taps; 0 for a flow mapped onto an
    /// existing association, which needs no handshake) or connects issued (raw).
    pub(crate) attempts: usize,
    /// Connections (or flows) that ended up on SCTP.
    #[serde(default)]
    pub(crate) sctp: usize,
    /// Connections that ended up on QUIC.
    #[serde(default)]
    pub(crate) quic: usize,
    /// Payload bytes moved (sent in transfers, received in HTTP).
    pub(crate) bytes: u64,
    /// HTTP requests answered.
    pub(crate) requests: u64,
    /// Why the window's own figures (CPU, RSS) could not be read, if they could not: the
    /// trial then has no measurement (never a zero standing in for one).
    #[serde(default)]
    pub(crate) measure_error: Option<String>,
    /// The named instants the client recorded (window, context), see
    /// [`super::phases`].
    #[serde(default)]
    pub(crate) phases: Vec<PhaseMark>,
}

/// A server's counters and resource use so far.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ServerStats {
    /// CPU used since the process started.
    pub(crate) cpu: Cpu,
    /// Current RSS, KiB.
    pub(crate) rss_kib: u64,
    /// Connections accepted.
    pub(crate) accepted: u64,
    /// Connections finished.
    pub(crate) closed: u64,
    /// Payload bytes received.
    pub(crate) bytes: u64,
    /// HTTP requests answered.
    pub(crate) requests: u64,
    /// Whether the counters asked for were not reached within [`STATS_WAIT`].
    pub(crate) timed_out: bool,
    /// Why CPU or RSS could not be read, if they could not (the snapshot is then no
    /// measurement).
    #[serde(default)]
    pub(crate) error: Option<String>,
}
