//! The lab's SCTP server: a taps [`Listener`](::taps::Listener) that allows SCTP only,
//! listening on SCTP port [`SERVICE_PORT`](crate::lab::SERVICE_PORT) inside UDP port
//! [`SCTP_UDP_PORT`](crate::lab::SCTP_UDP_PORT) (RFC 6951) on the address of
//! [`SCTP_HOST`](crate::lab::SCTP_HOST). Each connection is read to its end and checked
//! against the stream pattern like the TCP sink's; the records land in the lab's
//! [`Sink`](crate::sink::Sink) with protocol [`Proto::Sctp`].
//!
//! It runs as a child process, `netlab serve-sctp`, inside the server namespace, one per
//! lab, because usrsctp is one instance per process: SCTP ports are process-wide (a
//! second lab in the same process could not listen on port 80 while anything of the
//! first lingered), its timer thread would stay in (and keep alive) the namespace of
//! whichever thread opened the first socket, and a server UDP socket belongs to the
//! tokio runtime of the first listener. A process per lab starts from a fresh usrsctp,
//! and killing it frees everything. It exits on its own when its standard input closes
//! (netlab is gone).
//!
//! It listens on one address, not on all of them: a listener on the unspecified address
//! (one dual-stack UDP socket) answers from whatever source address the kernel picks for
//! the reply, not the one the client's INIT went to, and the client's connected UDP socket
//! drops such answers, so only one of the server's many addresses would work (see
//! docs/netlab.md). Binding UDP to one address avoids that; SCTP's one-listener-per-port
//! limit then allows only one address per process.
//!
//! Protocol on its standard output: one line `ready <SCTP endpoint>` once listening,
//! then one JSON object per finished connection: peer, local, bytes, mismatched,
//! clean_close, duration_us.

#![forbid(unsafe_code)]

use std::io::{self, BufRead, BufReader, Read};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::netns::{self, Netns};
use crate::packet::Proto;
use crate::sink::{self, SinkRecord, IDLE_TIMEOUT};

/// The hidden `netlab` subcommand that runs the server.
pub const SUBCOMMAND: &str = "serve-sctp";
/// Environment variable naming the `netlab` binary to run the server with.
pub const NETLAB_ENV: &str = "NETLAB_BIN";
/// NEAT properties that allow SCTP only: the listener's (the TCP sink serves TCP on the
/// same port), and `sctp-loss`'s.
pub const SCTP_ONLY: &str = r#"{"transport": {"value": "SCTP", "precedence": 2}}"#;
/// How long the server may take to come up.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long closing an accepted connection may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// The running server, seen from netlab. Stopped (killed and reaped) on drop.
#[derive(Debug)]
pub struct SctpServer {
    lab: u64,
    child: Option<Child>,
    endpoint: SocketAddr,
    udp_port: u16,
}

impl SctpServer {
    /// Starts `netlab serve-sctp` in `ns`, listening on SCTP port `port` inside UDP
    /// `udp_port` on `addrs` (the first; with more, multihomed over all, see `--also`);
    /// waits until it listens. Records go to `records`. The child
    /// is registered with lab `lab`, so a signal or panic teardown kills it too.
    pub(crate) fn start(
        lab: u64,
        ns: &Netns,
        addrs: &[IpAddr],
        port: u16,
        udp_port: u16,
        name_server: SocketAddr,
        records: Arc<Mutex<Vec<SinkRecord>>>,
    ) -> io::Result<SctpServer> {
        let (&addr, also) = addrs
            .split_first()
            .ok_or_else(|| io::Error::other("an SCTP server needs an address"))?;
        let exe = netlab_binary().map_err(io::Error::other)?;
        let mut cmd = ns.command(&exe);
        cmd.arg(SUBCOMMAND)
            .arg("--addr")
            .arg(addr.to_string())
            .arg("--port")
            .arg(port.to_string())
            .arg("--udp-port")
            .arg(udp_port.to_string())
            .arg("--name-server")
            .arg(name_server.to_string())
            .args(
                also.iter()
                    .flat_map(|a| ["--also".to_string(), a.to_string()]),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn()?;
        netns::add_pid(lab, child.id());
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let mut server = SctpServer {
            lab,
            child: Some(child),
            endpoint: SocketAddr::new(addr, port),
            udp_port,
        };
        let errors = Arc::new(Mutex::new(String::new()));
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("netlab-sctp-out".into())
            .spawn(move || read_records(stdout, ready_tx, records))?;
        let errs = errors.clone();
        std::thread::Builder::new()
            .name("netlab-sctp-err".into())
            .spawn(move || read_errors(stderr, errs))?;
        match ready_rx.recv_timeout(READY_TIMEOUT) {
            Ok(()) => Ok(server),
            Err(e) => {
                let status = server.stop();
                // Give the stderr reader a moment to collect the last words.
                std::thread::sleep(Duration::from_millis(50));
                let said = sink::lock(&errors).trim().to_string();
                Err(io::Error::other(format!(
                    "the SCTP server (`{} {SUBCOMMAND}` in {}) did not come up ({}; exit {status:?}): {said}",
                    exe.display(),
                    ns.name(),
                    match e {
                        mpsc::RecvTimeoutError::Timeout => "timed out",
                        mpsc::RecvTimeoutError::Disconnected => "it exited",
                    }
                )))
            }
        }
    }

    /// The SCTP endpoint it listens on (address and SCTP port).
    pub fn endpoint(&self) -> SocketAddr {
        self.endpoint
    }

    /// The UDP encapsulation port.
    pub fn udp_port(&self) -> u16 {
        self.udp_port
    }

    /// Kills and reaps the child (idempotent); returns its exit status if it had one.
    pub(crate) fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        // Forget the pid before reaping, so a teardown never signals a reused pid.
        netns::remove_pid(self.lab, child.id());
        let _ = child.kill();
        child.wait().ok()
    }
}

impl Drop for SctpServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads the child's standard output: the ready line, then one record per line.
fn read_records(stdout: impl Read, ready: mpsc::Sender<()>, records: Arc<Mutex<Vec<SinkRecord>>>) {
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        if line.starts_with("ready ") {
            let _ = ready.send(());
            continue;
        }
        match serde_json::from_str::<Value>(&line)
            .ok()
            .and_then(|v| record_from_json(&v))
        {
            Some(r) => sink::lock(&records).push(r),
            None => eprintln!("netlab: SCTP server said: {line}"),
        }
    }
}

/// Collects the child's standard error (for the error message if it does not come up)
/// and passes it on to ours.
fn read_errors(stderr: impl Read, collected: Arc<Mutex<String>>) {
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        eprintln!("netlab: SCTP server: {line}");
        let mut c = sink::lock(&collected);
        c.push_str(&line);
        c.push('\n');
    }
}

/// The `netlab` binary: `$NETLAB_BIN`, else the running executable if it is netlab,
/// else `netlab` beside it (or one level up, for test executables in
/// `target/debug/deps`), else `target/debug/netlab` of this workspace.
pub fn netlab_binary() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(NETLAB_ENV) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{NETLAB_ENV}={} is not a file", p.display()))
        };
    }
    let mut tried = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if exe.file_name().is_some_and(|n| n == "netlab") {
            return Ok(exe);
        }
        for dir in exe.ancestors().skip(1).take(2) {
            tried.push(dir.join("netlab"));
        }
    }
    tried.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/netlab"));
    tried.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        format!(
            "the netlab binary (which runs the lab's SCTP server) was not found (build it with \
             `cargo build -p netlab`, or set {NETLAB_ENV})"
        )
    })
}

/// One finished connection as the server prints it: a JSON object on one line.
fn record_to_json(r: &SinkRecord) -> Value {
    json!({
        "peer": r.peer.to_string(),
        "local": r.local.to_string(),
        "bytes": r.bytes,
        "mismatched": r.mismatched,
        "clean_close": r.clean_close,
        "duration_us": r.duration.as_micros() as u64,
        "peer_paths": r.peer_paths,
        "peer_paths_at_end": r.peer_paths_at_end,
    })
}

/// The record of one line the server printed (`None` if it is not one).
fn record_from_json(v: &Value) -> Option<SinkRecord> {
    let addr = |k: &str| v.get(k)?.as_str()?.parse::<SocketAddr>().ok();
    Some(SinkRecord {
        protocol: Proto::Sctp,
        peer: addr("peer")?,
        local: addr("local")?,
        bytes: v.get("bytes")?.as_u64()?,
        mismatched: v.get("mismatched")?.as_u64()?,
        clean_close: v.get("clean_close")?.as_bool()?,
        duration: Duration::from_micros(v.get("duration_us")?.as_u64()?),
        peer_paths: v.get("peer_paths").and_then(Value::as_u64).unwrap_or(0) as usize,
        peer_paths_at_end: v
            .get("peer_paths_at_end")
            .and_then(Value::as_u64)
            .unwrap_or(0) as usize,
    })
}

/// The server itself (`netlab serve-sctp`): listens for SCTP on `addr`:`port` inside UDP
/// `udp_port`, prints `ready`, then one JSON line per finished connection. Returns when
/// standard input closes; an error if it cannot listen.
pub fn serve(
    addr: IpAddr,
    also: &[IpAddr],
    port: u16,
    udp_port: u16,
    name_server: SocketAddr,
) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
    runtime.block_on(async move {
        let ctx = ::taps::Context::builder()
            .watch_interfaces(false)
            .name_servers(vec![name_server])
            .sctp_udp_port(udp_port)
            .build()
            .map_err(|e| e.to_string())?;
        let props = ::taps::TransportProperties::for_listener()
            .merge_neat_json(SCTP_ONLY)
            .and_then(|p| match also.is_empty() {
                true => Ok(p),
                false => p.merge_neat_json(&multihomed(addr, also)),
            })
            .and_then(|p| p.compile())
            .map_err(|e| e.to_string())?;
        let mut listener = ::taps::Preconnection::new(&ctx, props)
            .local(SocketAddr::new(addr, port))
            .listen()
            .await
            .map_err(|e| format!("cannot listen on SCTP {addr}:{port} (UDP {udp_port}): {e}"))?;
        let (stdin_closed_tx, mut stdin_closed) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("stdin-watch".into())
            .spawn(move || {
                let _ = io::copy(&mut io::stdin(), &mut io::sink());
                let _ = stdin_closed_tx.send(());
            })
            .map_err(|e| e.to_string())?;
        println!("ready {addr}:{port}");
        let mut conns = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Some(Ok(conn)) => {
                        conns.spawn(serve_connection(conn));
                    }
                    Some(Err(e)) => eprintln!("accept failed: {e}"),
                    None => return Err("every listening socket failed".to_string()),
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
                _ = &mut stdin_closed => return Ok(()),
            }
        }
    })
}

/// The listener properties that add multihoming over `addr` and `also` (`local_ips`).
fn multihomed(addr: IpAddr, also: &[IpAddr]) -> String {
    let ips: Vec<String> = std::iter::once(addr)
        .chain(also.iter().copied())
        .map(|a| a.to_string())
        .collect();
    serde_json::json!({
        "multihoming": {"value": true, "precedence": 2},
        "local_ips": {"value": ips, "precedence": 2},
        "multipathPolicy": "aggregate",
    })
    .to_string()
}

/// Reads one accepted connection to its end, checks the bytes, closes it and prints
/// its record.
async fn serve_connection(mut conn: ::taps::Connection) {
    let start = Instant::now();
    let (peer, local) = (conn.info().remote, conn.info().local);
    let peer_paths = conn.paths().map_or(0, |p| p.len());
    let c = sink::read_and_check(&mut conn, IDLE_TIMEOUT).await;
    let peer_paths_at_end = conn.paths().map_or(0, |p| p.len());
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, conn.close()).await;
    let record = SinkRecord {
        peer_paths,
        peer_paths_at_end,
        ..SinkRecord::new(Proto::Sctp, peer, local, c, start)
    };
    println!("{}", record_to_json(&record));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_lines_round_trip() {
        let record = SinkRecord {
            protocol: Proto::Sctp,
            peer: "198.51.100.2:40000".parse().unwrap(),
            local: "192.0.2.61:9899".parse().unwrap(),
            bytes: 10 << 20,
            mismatched: 0,
            clean_close: true,
            duration: Duration::from_micros(1_234_567),
            peer_paths: 2,
            peer_paths_at_end: 3,
        };
        let text = record_to_json(&record).to_string();
        assert!(!text.contains('\n'));
        let back = record_from_json(&serde_json::from_str(&text).unwrap());
        assert_eq!(back, Some(record));
        assert_eq!(record_from_json(&json!({"ready": true})), None);
    }
}
