//! Running `taps connect --json` (and `taps candidates --json`) in the client namespace
//! and reading their reports.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::lab::Lab;

/// Environment variable naming the `taps` binary to run.
pub const TAPS_ENV: &str = "NETLAB_TAPS";

/// Finds the `taps` binary: `$NETLAB_TAPS`, else `taps` beside the running executable
/// (or one level up, for test executables in `target/debug/deps`), else
/// `target/debug/taps` of this workspace. An error says where it looked.
pub fn taps_binary() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(TAPS_ENV) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{TAPS_ENV}={} is not a file", p.display()))
        };
    }
    let mut tried = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        for dir in exe.ancestors().skip(1).take(2) {
            tried.push(dir.join("taps"));
        }
    }
    tried.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/taps"));
    tried.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        format!(
            "the taps binary was not found (build it with `cargo build -p taps-cli`, or set \
             {TAPS_ENV}); looked beside the running executable and in {}/../../target/debug",
            env!("CARGO_MANIFEST_DIR")
        )
    })
}

/// One `taps connect` invocation.
#[derive(Debug, Clone)]
pub struct Connect {
    /// Host name or address to connect to.
    pub host: String,
    /// Port.
    pub port: u16,
    /// CIB file to keep learned outcomes in across runs (`--cib`).
    pub cib: Option<PathBuf>,
    /// Transport properties JSON (`--props`).
    pub props: Option<String>,
    /// Bytes to send on each flow (`--send-bytes`).
    pub send_bytes: Option<u64>,
    /// Number of flows (`--flows`).
    pub flows: usize,
    /// Certificate authorities to trust besides the system's (`--ca`, PEM files).
    pub ca: Vec<PathBuf>,
    /// The name to verify the server's certificate against (`--server-name`).
    pub server_name: Option<String>,
    /// A line to send raw and read the replies of (`--line`, for an echoing peer).
    pub line: Option<String>,
    /// The name server to ask (`--name-server`); the lab's DNS server if `None`.
    pub name_server: Option<std::net::SocketAddr>,
    /// The process is killed after this long.
    pub limit: Duration,
    /// Environment variables set for the process (e.g. `TAPS_PM_SOCKET`).
    pub env: Vec<(String, String)>,
    /// The server's SCTP encapsulation port (`--sctp-udp-port`).
    pub sctp_udp_port: u16,
    /// Print the connection's paths before it closes (`--paths`; [`FlowReport::paths`]).
    pub paths: bool,
    /// Pin each flow to one path of its SCTP association (`--fixed-paths`).
    pub fixed_paths: bool,
    /// Local addresses added to each connection once it is up (`--add-local`).
    pub add_local: Vec<std::net::IpAddr>,
}

impl Connect {
    /// A single connection to `host` on the lab's service port, killed after 30 s.
    pub fn new(host: impl Into<String>) -> Connect {
        Connect {
            host: host.into(),
            port: crate::lab::SERVICE_PORT,
            cib: None,
            props: None,
            send_bytes: None,
            flows: 1,
            ca: Vec::new(),
            server_name: None,
            line: None,
            name_server: None,
            limit: Duration::from_secs(30),
            env: Vec::new(),
            sctp_udp_port: crate::lab::SCTP_UDP_PORT,
            paths: false,
            fixed_paths: false,
            add_local: Vec::new(),
        }
    }
}

/// The winning connection, as taps reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Winner {
    /// Protocol stack, e.g. `TCP`.
    pub stack: String,
    /// `IPv4` or `IPv6`.
    pub family: String,
    /// Local address and port.
    pub local: String,
    /// Remote address and port.
    pub remote: String,
    /// For a secure stack: the TLS version and cipher suite (`TLSv1_3
    /// TLS13_AES_256_GCM_SHA384`).
    pub security: Option<String>,
    /// For MPTCP: whether MPTCP is in use (`false`: it fell back to TCP).
    pub mptcp_active: Option<bool>,
    /// For SCTP: the stream the flow uses.
    pub sctp_stream: Option<u16>,
}

/// One attempt (or skipped candidate) of the race.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// Protocol stack of the candidate.
    pub stack: String,
    /// Remote address and port of the candidate.
    pub remote: String,
    /// When it started, ms since the race began.
    pub start_ms: f64,
    /// When it ended, if it did.
    pub end_ms: Option<f64>,
    /// `won`, `failed`, `cancelled`, `skipped` or `pending`.
    pub outcome: String,
    /// The failure cause or skip reason.
    pub error: Option<String>,
    /// What the CIB knew about the candidate when the race ranked it (`no history`,
    /// `connected 0 s ago in 50.3 ms`, `failed 0 s ago: ...`).
    pub history: String,
    /// The local interface the candidate was bound to (`None`: the OS routed it).
    pub interface: Option<String>,
}

impl Attempt {
    /// Whether the candidate was actually attempted (not skipped).
    pub fn started(&self) -> bool {
        self.outcome != "skipped"
    }

    /// The remote IP address, if it parses.
    pub fn remote_ip(&self) -> Option<std::net::IpAddr> {
        self.remote
            .parse::<std::net::SocketAddr>()
            .ok()
            .map(|a| a.ip())
    }
}

/// What one flow of `taps connect` reported.
#[derive(Debug, Clone)]
pub struct FlowReport {
    /// The winner, if it connected.
    pub winner: Option<Winner>,
    /// The race's attempts.
    pub attempts: Vec<Attempt>,
    /// Time to connect (or to fail), ms, from the start of the race (DNS included).
    pub total_ms: f64,
    /// The error, if it failed.
    pub error: Option<String>,
    /// Bytes sent after connecting.
    pub bytes_sent: u64,
    /// The lines the peer sent back (with [`Connect::line`]).
    pub replies: Vec<String>,
    /// The race's events (ms since the race began, text), as `taps connect --trace`
    /// prints them: DNS answers, starts, `#1 reachable (peer answered): committing to
    /// it` (SCTP's INIT-ACK), cancels, the win.
    pub timeline: Vec<(f64, String)>,
    /// With [`Connect::paths`]: the connection's paths before it closed.
    pub paths: Vec<PathReport>,
    /// With [`Connect::paths`]: the path changes the connection saw, as (ms since the
    /// flow started, remote, change: `up`, `down`, ...).
    pub path_changes: Vec<(f64, String, String)>,
}

/// One path of a connection as `taps connect --paths --json` reports it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PathReport {
    /// This side's address.
    pub local: String,
    /// The peer's address.
    pub remote: String,
    /// `active`, `unconfirmed` or `inactive`.
    pub state: String,
    /// Bytes sent on the path, where taps counts them.
    pub bytes_sent: Option<u64>,
    /// Bytes received on the path, where taps counts them.
    pub bytes_received: Option<u64>,
}

impl FlowReport {
    /// When the first event containing `text` happened (ms since the race began).
    pub fn event_at(&self, text: &str) -> Option<f64> {
        self.timeline
            .iter()
            .find(|(_, e)| e.contains(text))
            .map(|(at, _)| *at)
    }
}

/// One candidate as `taps candidates --json` ranks it.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedCandidate {
    /// Its place in the race order, from 1.
    pub rank: u64,
    /// Protocol stack, e.g. `SCTP`.
    pub stack: String,
    /// Remote address and port.
    pub remote: String,
    /// What the CIB knows about it (see [`Attempt::history`]).
    pub history: String,
    /// The local interface it is bound to (`None`: the OS routes it).
    pub interface: Option<String>,
}

/// What a `taps connect` process did.
#[derive(Debug, Clone)]
pub struct ConnectReport {
    /// One report per flow.
    pub flows: Vec<FlowReport>,
    /// The process's wall-clock time.
    pub wall: Duration,
    /// Its exit code (`None` if killed at the limit or by a signal).
    pub exit_code: Option<i32>,
    /// What it printed on standard error.
    pub stderr: String,
}

impl ConnectReport {
    /// The first (for one flow: the only) flow.
    pub fn flow(&self) -> &FlowReport {
        &self.flows[0]
    }
}

impl Lab {
    /// Runs `taps connect ... --json --name-server <lab DNS>` in the client namespace and
    /// parses its report. Errors when the binary is missing, it ran out of time, or its
    /// output is not the expected JSON.
    pub fn taps_connect(&self, c: &Connect) -> Result<ConnectReport, String> {
        let taps = taps_binary()?;
        let mut cmd = self.client().command(&taps);
        cmd.arg("connect")
            .arg(&c.host)
            .arg(c.port.to_string())
            .arg("--json")
            .arg("--name-server")
            .arg(c.name_server.unwrap_or(self.dns_addr()).to_string())
            .arg("--sctp-udp-port")
            .arg(c.sctp_udp_port.to_string());
        if c.paths {
            cmd.arg("--paths");
        }
        if c.fixed_paths {
            cmd.arg("--fixed-paths");
        }
        for ip in &c.add_local {
            cmd.arg("--add-local").arg(ip.to_string());
        }
        if let Some(cib) = &c.cib {
            cmd.arg("--cib").arg(cib);
        }
        if let Some(p) = &c.props {
            cmd.arg("--props").arg(p);
        }
        if let Some(b) = c.send_bytes {
            cmd.arg("--send-bytes").arg(b.to_string());
        }
        if c.flows != 1 {
            cmd.arg("--flows").arg(c.flows.to_string());
        }
        for ca in &c.ca {
            cmd.arg("--ca").arg(ca);
        }
        if let Some(name) = &c.server_name {
            cmd.arg("--server-name").arg(name);
        }
        if let Some(line) = &c.line {
            cmd.arg("--line").arg(line);
        }
        cmd.envs(c.env.iter().map(|(k, v)| (k, v)));
        let out = self
            .run_child(cmd, c.limit)
            .map_err(|e| format!("cannot run {}: {e}", taps.display()))?;
        if out.timed_out() {
            return Err(format!(
                "taps connect {} did not finish within {:?}; stderr: {}",
                c.host,
                c.limit,
                out.stderr.trim()
            ));
        }
        let json: Value = serde_json::from_str(out.stdout.trim()).map_err(|e| {
            format!(
                "taps connect printed no JSON report ({e}); exit {:?}; stdout: {}; stderr: {}",
                out.status.and_then(|s| s.code()),
                out.stdout.trim(),
                out.stderr.trim()
            )
        })?;
        let flows = match json.get("flows").and_then(Value::as_array) {
            Some(list) => list.iter().map(parse_flow).collect(),
            None => vec![parse_flow(&json)],
        };
        Ok(ConnectReport {
            flows,
            wall: out.elapsed,
            exit_code: out.status.and_then(|s| s.code()),
            stderr: out.stderr,
        })
    }
}

impl Lab {
    /// Runs `taps candidates HOST PORT --json` in the client namespace with `props` and
    /// the CIB file `cib`, and returns the race order: what the next `taps connect` with
    /// that CIB would try, and what the CIB knows about each candidate.
    pub fn taps_candidates(
        &self,
        host: &str,
        port: u16,
        props: Option<&str>,
        cib: &std::path::Path,
    ) -> Result<Vec<RankedCandidate>, String> {
        let taps = taps_binary()?;
        let mut cmd = self.client().command(&taps);
        cmd.arg("candidates")
            .arg(host)
            .arg(port.to_string())
            .arg("--json")
            .arg("--name-server")
            .arg(self.dns_addr().to_string())
            .arg("--sctp-udp-port")
            .arg(crate::lab::SCTP_UDP_PORT.to_string())
            .arg("--cib")
            .arg(cib);
        if let Some(p) = props {
            cmd.arg("--props").arg(p);
        }
        let out = self
            .run_child(cmd, Duration::from_secs(30))
            .map_err(|e| format!("cannot run {}: {e}", taps.display()))?;
        let json: Value = serde_json::from_str(out.stdout.trim()).map_err(|e| {
            format!(
                "taps candidates printed no JSON ({e}); exit {:?}; stderr: {}",
                out.status.and_then(|s| s.code()),
                out.stderr.trim()
            )
        })?;
        Ok(json
            .get("candidates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| RankedCandidate {
                rank: c.get("rank").and_then(Value::as_u64).unwrap_or(0),
                stack: str_of(c, "stack"),
                remote: str_of(c, "remote"),
                history: str_of(c, "history"),
                interface: interface_of(c),
            })
            .collect())
    }
}

/// A candidate's `local.interface`, if it is bound to one.
fn interface_of(c: &Value) -> Option<String> {
    c.get("local")
        .and_then(|l| l.get("interface"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

fn parse_flow(v: &Value) -> FlowReport {
    let winner = v.get("winner").filter(|w| w.is_object()).map(|w| Winner {
        stack: str_of(w, "stack"),
        family: str_of(w, "family"),
        local: str_of(w, "local"),
        remote: str_of(w, "remote"),
        security: w
            .get("security")
            .filter(|s| s.is_object())
            .map(|s| format!("{} {}", str_of(s, "version"), str_of(s, "cipher_suite"))),
        mptcp_active: w.get("mptcp_active").and_then(Value::as_bool),
        sctp_stream: w
            .get("sctp_stream")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok()),
    });
    let attempts = v
        .get("attempts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|a| {
            let cand = a.get("candidate").cloned().unwrap_or(Value::Null);
            Attempt {
                stack: str_of(&cand, "stack"),
                remote: str_of(&cand, "remote"),
                start_ms: a
                    .get("start_ms")
                    .and_then(Value::as_f64)
                    .unwrap_or(f64::NAN),
                end_ms: a.get("end_ms").and_then(Value::as_f64),
                outcome: str_of(a, "outcome"),
                error: a.get("error").and_then(Value::as_str).map(str::to_string),
                history: str_of(&cand, "history"),
                interface: interface_of(&cand),
            }
        })
        .collect();
    FlowReport {
        winner,
        attempts,
        total_ms: v
            .get("total_ms")
            .and_then(Value::as_f64)
            .unwrap_or(f64::NAN),
        error: v.get("error").and_then(Value::as_str).map(str::to_string),
        bytes_sent: v.get("bytes_sent").and_then(Value::as_u64).unwrap_or(0),
        paths: v
            .get("paths")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| PathReport {
                local: str_of(p, "local"),
                remote: str_of(p, "remote"),
                state: str_of(p, "state"),
                bytes_sent: p.get("bytes_sent").and_then(Value::as_u64),
                bytes_received: p.get("bytes_received").and_then(Value::as_u64),
            })
            .collect(),
        path_changes: v
            .get("path_changes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                let at = c.get("at_ms").and_then(Value::as_f64).unwrap_or(f64::NAN);
                (at, str_of(c, "remote"), str_of(c, "change"))
            })
            .collect(),
        replies: v
            .get("replies")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        timeline: v
            .get("timeline")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|e| {
                (
                    e.get("at_ms").and_then(Value::as_f64).unwrap_or(f64::NAN),
                    str_of(e, "event"),
                )
            })
            .collect(),
    }
}
