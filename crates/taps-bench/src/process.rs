//! Starting and talking to worker processes (see [`crate::worker`] for the protocol).

#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::worker::{ClientResult, ClientSpec, ServerSpec, ServerStats};

/// How long to wait for a worker's line before giving up on it (longer than a server's
/// [`crate::worker::protocol::STATS_WAIT`]; the longest healthy trial takes a few seconds).
const LINE_TIMEOUT: Duration = Duration::from_secs(45);

/// How to start a worker process: a program and the arguments that select worker mode
/// (e.g. `taps-bench` with `worker`).
#[derive(Debug, Clone)]
pub struct Launcher {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before `server <spec>` / `client <spec>`.
    pub args: Vec<String>,
}

impl Launcher {
    /// A launcher for `program args...`.
    pub fn new(program: impl Into<PathBuf>, args: &[&str]) -> Launcher {
        Launcher {
            program: program.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// Lines of a worker's stderr kept for error messages.
const STDERR_TAIL: usize = 8;

/// A running worker: its stdin, a channel of its stdout lines and the last lines of its
/// stderr.
struct Worker {
    what: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

/// Why a worker stopped talking.
#[derive(Debug, Clone)]
pub(crate) enum WorkerError {
    /// The process ended (exited with an error, or killed by a signal: a crash), or
    /// stopped answering within [`LINE_TIMEOUT`] (a hang; it is killed).
    Died(String),
    /// Anything else (timeout, bad output, cannot start).
    Other(String),
}

impl WorkerError {
    /// The message.
    pub(crate) fn message(&self) -> &str {
        match self {
            WorkerError::Died(m) | WorkerError::Other(m) => m,
        }
    }
}

impl From<String> for WorkerError {
    fn from(m: String) -> WorkerError {
        WorkerError::Other(m)
    }
}

impl From<WorkerError> for String {
    fn from(e: WorkerError) -> String {
        e.message().to_string()
    }
}

impl Worker {
    fn spawn(
        launcher: &Launcher,
        role: &str,
        spec: String,
        what: String,
    ) -> Result<Worker, String> {
        let mut child = Command::new(&launcher.program)
            .args(&launcher.args)
            .arg(role)
            .arg(&spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", launcher.program.display()))?;
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(err) = child.stderr.take() {
            let tail = stderr.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines() {
                    let Ok(line) = line else { break };
                    let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                    if t.len() == STDERR_TAIL {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            });
        }
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| format!("{what}: no stdout"))?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Ok(Worker {
            what,
            child,
            stdin,
            lines,
            stderr,
        })
    }

    fn send(&mut self, line: &str) -> Result<(), String> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| format!("{}: stdin closed", self.what))?;
        writeln!(stdin, "{line}")
            .and_then(|_| stdin.flush())
            .map_err(|e| format!("{} went away: {e}", self.what))
    }

    /// The last lines the worker wrote on stderr, joined.
    fn stderr_tail(&self) -> String {
        // Give the reader thread a moment to collect what a dying process wrote last.
        std::thread::sleep(Duration::from_millis(20));
        let t = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        t.iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" / ")
    }

    /// The rest of the next line starting with `prefix` (other lines are ignored).
    fn expect(&mut self, prefix: &str) -> Result<String, WorkerError> {
        let deadline = Instant::now() + LINE_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return Ok(rest.trim().to_string());
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    // What it said before (a client's stall report, see
                    // `worker/client/stall.rs`) is the only evidence of where it hung.
                    let said = self.stderr_tail();
                    let said = if said.is_empty() {
                        "nothing on stderr".to_string()
                    } else {
                        format!("its stderr: {said}")
                    };
                    return Err(WorkerError::Died(format!(
                        "{} hung: no `{prefix}` within {LINE_TIMEOUT:?}; killed; {said}",
                        self.what
                    )));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                    return Err(WorkerError::Died(format!(
                        "{} exited ({status}) before `{prefix}`: {}",
                        self.what,
                        self.stderr_tail()
                    )));
                }
            }
        }
    }

    /// Closes stdin and waits (bounded) for the exit; kills it if it lingers. Returns the
    /// exit status (`None` when it had to be killed).
    fn finish(&mut self) -> Option<std::process::ExitStatus> {
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.finish();
        }
    }
}

/// A server worker.
pub(crate) struct Server {
    worker: Worker,
    /// The port it listens on (on 127.0.0.1, and on ::1 for a dual server): the TCP port
    /// and the SCTP port.
    pub(crate) port: u16,
    /// The UDP port its SCTP is encapsulated in (0: it does not listen on SCTP).
    pub(crate) udp_port: u16,
    /// The counters of the last `stats` answer.
    last_stats: ServerStats,
}

impl Server {
    /// Starts a server and waits until it listens.
    pub(crate) fn start(launcher: &Launcher, spec: ServerSpec) -> Result<Server, String> {
        let json = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
        let what = format!(
            "server worker {:?}/{:?}/{:?}",
            spec.imp, spec.mode, spec.listen
        );
        let mut worker = Worker::spawn(launcher, "server", json, what)?;
        let line = worker.expect("PORT")?;
        let mut words = line.split_whitespace().map(str::parse::<u16>);
        let (port, udp_port) = match (words.next(), words.next()) {
            (Some(Ok(p)), Some(Ok(u))) => (p, u),
            _ => return Err(format!("server worker: bad PORT line {line:?}")),
        };
        Ok(Server {
            worker,
            port,
            udp_port,
            last_stats: ServerStats::default(),
        })
    }

    /// Re-reads the server's counters (after a trial that failed half-way, so the next
    /// trial's expectations start from what the server has now seen).
    pub(crate) fn resync(&mut self) -> Result<(), WorkerError> {
        self.stats(0, 0).map(|_| ())
    }

    /// The server's counters and resource use, once it has accepted at least
    /// `accepted` and closed at least `closed` connections (or the wait timed out).
    pub(crate) fn stats(&mut self, accepted: u64, closed: u64) -> Result<ServerStats, WorkerError> {
        self.worker.send(&format!("stats {accepted} {closed}"))?;
        let json = self.worker.expect("STATS")?;
        let stats: ServerStats =
            serde_json::from_str(&json).map_err(|e| format!("server stats: {e}"))?;
        self.last_stats = stats.clone();
        match &stats.error {
            // No figure is better than a zero standing in for one.
            Some(e) => Err(WorkerError::Other(format!("server could not measure: {e}"))),
            None => Ok(stats),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.worker.send("quit");
        let _ = self.worker.finish();
    }
}

/// What the server has to have done before the window's server measurement ends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expect {
    /// New connections accepted.
    pub(crate) accepted: u64,
    /// New connections closed.
    pub(crate) closed: u64,
}

/// One trial: the client's result and the server's resource use over the same window.
#[derive(Debug, Clone)]
pub(crate) struct Trial {
    /// What the client measured.
    pub(crate) client: ClientResult,
    /// Server CPU during the window, microseconds.
    pub(crate) server_cpu_us: u64,
    /// Server RSS growth during the window, KiB (may be negative).
    pub(crate) server_rss_growth_kib: i64,
    /// Whether the server did not reach the expected counters in time, at the
    /// snapshot before the window (the setup's connections) or after it.
    pub(crate) server_timed_out: bool,
    /// Payload bytes the server received during the window.
    pub(crate) server_bytes: u64,
    /// The client failed after its result (crashed or errored in teardown, or had to
    /// be killed): the measurement stands, the failure must be reported.
    pub(crate) teardown_error: Option<String>,
}

/// The result of a client trial with no server worker (see [`client_trial`]).
#[derive(Debug, Clone)]
pub(crate) struct ClientTrial {
    /// What the client measured.
    pub(crate) client: ClientResult,
    /// As [`Trial::teardown_error`].
    pub(crate) teardown_error: Option<String>,
}

/// Runs one client trial whose server is no worker (a program the experiment started,
/// e.g. caddy): client setup, window, result, teardown. Errors as [`trial`]'s.
pub(crate) fn client_trial(
    launcher: &Launcher,
    spec: &ClientSpec,
) -> Result<ClientTrial, WorkerError> {
    let json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
    let mut client = Worker::spawn(launcher, "client", json, "client worker".into())?;
    client.expect("READY")?;
    client.send("go")?;
    let result = client_result(&mut client)?;
    let _ = client.send("end");
    Ok(ClientTrial {
        client: result,
        teardown_error: teardown(&mut client),
    })
}

/// The client's `RESULT` line, read: an error if it could not measure.
fn client_result(client: &mut Worker) -> Result<ClientResult, WorkerError> {
    let result = client.expect("RESULT")?;
    let result: ClientResult =
        serde_json::from_str(&result).map_err(|e| format!("client result: {e}"))?;
    match &result.measure_error {
        Some(e) => Err(WorkerError::Other(format!("client could not measure: {e}"))),
        None => Ok(result),
    }
}

/// Waits for a client's exit after its result; what went wrong, if anything.
fn teardown(client: &mut Worker) -> Option<String> {
    match client.finish() {
        Some(status) if status.success() => None,
        Some(status) => Some(format!(
            "client worker exited ({status}) after its result: {}",
            client.stderr_tail()
        )),
        None => Some("client worker did not exit after its result; killed".into()),
    }
}

/// Runs one client trial against `server`: client setup, server snapshot (once the
/// server has seen `setup` more connections than at its last snapshot), window,
/// server snapshot once it has seen what `expect` derives from the client's result,
/// client teardown. A client that dies (crash, error exit) is a [`WorkerError::Died`]
/// naming its exit status and the last lines of its stderr.
pub(crate) fn trial(
    launcher: &Launcher,
    server: &mut Server,
    spec: &ClientSpec,
    setup: Expect,
    expect: impl Fn(&ClientResult) -> Expect,
) -> Result<Trial, WorkerError> {
    let json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
    let mut client = Worker::spawn(launcher, "client", json, "client worker".into())?;
    client.expect("READY")?;
    let (a, c) = (server.last_stats.accepted, server.last_stats.closed);
    let before = server.stats(a + setup.accepted, c + setup.closed)?;
    client.send("go")?;
    let result = client_result(&mut client)?;
    let expect = expect(&result);
    let after = server.stats(
        before.accepted + expect.accepted,
        before.closed + expect.closed,
    )?;
    let _ = client.send("end");
    let teardown_error = teardown(&mut client);
    Ok(Trial {
        client: result,
        server_cpu_us: after.cpu.since(&before.cpu).total_us(),
        server_rss_growth_kib: after.rss_kib as i64 - before.rss_kib as i64,
        server_timed_out: before.timed_out || after.timed_out,
        server_bytes: after.bytes.saturating_sub(before.bytes),
        teardown_error,
    })
}
