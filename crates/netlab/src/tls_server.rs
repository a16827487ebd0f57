//! A TLS server for the TLS scenarios: `taps listen PORT --local ADDR --cert FILE --key
//! FILE --echo`, taps' own TLS listener (the thing under test), run as a child process in
//! the server namespace and registered with the lab, so every teardown kills it. A
//! scenario starts one with [`Lab::start_tls_server`] (certificates it made at run time
//! with `taps_testkit::TestPki`) and stops it by dropping it.
//!
//! What it did is read from its standard output: `listening: STACK on ADDR` once
//! listening, `accepted #N: STACK LOCAL <- REMOTE` for each connection whose TLS
//! handshake finished (a failed handshake prints nothing), `closed #N: B bytes` when it
//! ended, B being the application data it received (and echoed).

#![forbid(unsafe_code)]

use std::io::{self, BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::lab::Lab;
use crate::netns;
use crate::sink::lock;

/// How long the server may take to come up.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// One connection the server accepted (its TLS handshake finished).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConnection {
    /// What `taps listen` printed for it: `STACK LOCAL <- REMOTE`.
    pub accepted: String,
    /// The application data it received (and echoed), once it closed.
    pub bytes: Option<u64>,
}

#[derive(Debug, Default)]
struct Seen {
    listening: Vec<String>,
    connections: Vec<(u64, TlsConnection)>,
    stderr: String,
}

/// A running `taps listen` with a certificate. Killed and reaped on drop.
#[derive(Debug)]
pub struct TlsServer {
    lab: u64,
    child: Option<Child>,
    addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
}

impl Lab {
    /// Starts `taps listen` in the server namespace on `addr` (one address and port),
    /// presenting `cert` with `key`, echoing what arrives; waits until it listens.
    pub fn start_tls_server(
        &self,
        addr: SocketAddr,
        cert: &Path,
        key: &Path,
    ) -> io::Result<TlsServer> {
        let taps = crate::taps::taps_binary().map_err(io::Error::other)?;
        let mut cmd = self.server().command(&taps);
        cmd.arg("listen")
            .arg(addr.port().to_string())
            .arg("--local")
            .arg(addr.ip().to_string())
            .arg("--cert")
            .arg(cert)
            .arg("--key")
            .arg(key)
            .arg("--echo")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn()?;
        netns::add_pid(self.id(), child.id());
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let mut server = TlsServer {
            lab: self.id(),
            child: Some(child),
            addr,
            seen: Arc::new(Mutex::new(Seen::default())),
        };
        let (ready_tx, ready_rx) = mpsc::channel();
        let seen = server.seen.clone();
        std::thread::Builder::new()
            .name("netlab-tls-out".into())
            .spawn(move || read_stdout(stdout, ready_tx, seen))?;
        let seen = server.seen.clone();
        std::thread::Builder::new()
            .name("netlab-tls-err".into())
            .spawn(move || read_stderr(stderr, seen))?;
        if ready_rx.recv_timeout(READY_TIMEOUT).is_ok() {
            return Ok(server);
        }
        let status = server.stop();
        std::thread::sleep(Duration::from_millis(50));
        Err(io::Error::other(format!(
            "the TLS server (`{} listen` on {addr} in {}) did not come up (exit {status:?}): {}",
            taps.display(),
            self.server().name(),
            lock(&server.seen).stderr.trim()
        )))
    }
}

impl TlsServer {
    /// The address and port it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What it listens with: `STACK on ADDR`, one per stack.
    pub fn listening(&self) -> Vec<String> {
        lock(&self.seen).listening.clone()
    }

    /// Waits up to `limit` until it says it listens with `stack` (`listening: STACK on
    /// ADDR`, one line per stack; [`Lab::start_tls_server`] returns after the first);
    /// whether it did.
    pub fn wait_listening(&self, stack: &str, limit: Duration) -> bool {
        let start = Instant::now();
        let prefix = format!("{stack} on ");
        loop {
            if self.listening().iter().any(|l| l.starts_with(&prefix)) {
                return true;
            }
            if start.elapsed() >= limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Every connection it accepted so far (handshake finished), in order.
    pub fn connections(&self) -> Vec<TlsConnection> {
        lock(&self.seen)
            .connections
            .iter()
            .map(|(_, c)| c.clone())
            .collect()
    }

    /// Waits up to `limit` until `n` accepted connections have closed; returns every
    /// connection so far.
    pub fn wait_closed(&self, n: usize, limit: Duration) -> Vec<TlsConnection> {
        let start = Instant::now();
        loop {
            let c = self.connections();
            if c.iter().filter(|c| c.bytes.is_some()).count() >= n || start.elapsed() >= limit {
                return c;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// What it printed on standard error so far.
    pub fn stderr(&self) -> String {
        lock(&self.seen).stderr.clone()
    }

    /// Kills and reaps it (idempotent); returns its exit status if it had one.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        // Forget the pid before reaping, so a teardown never signals a reused pid.
        netns::remove_pid(self.lab, child.id());
        let _ = child.kill();
        child.wait().ok()
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads `taps listen`'s standard output: `listening:` (ready), `accepted #N:`,
/// `closed #N: B bytes`.
fn read_stdout(stdout: impl Read, ready: mpsc::Sender<()>, seen: Arc<Mutex<Seen>>) {
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        let mut s = lock(&seen);
        if let Some(what) = line.strip_prefix("listening: ") {
            s.listening.push(what.to_string());
            let _ = ready.send(());
        } else if let Some((n, rest)) = numbered(&line, "accepted #") {
            s.connections.push((
                n,
                TlsConnection {
                    accepted: rest.to_string(),
                    bytes: None,
                },
            ));
        } else if let Some((n, rest)) = numbered(&line, "closed #") {
            let bytes = rest.strip_suffix(" bytes").and_then(|b| b.parse().ok());
            if let Some((_, c)) = s.connections.iter_mut().find(|(m, _)| *m == n) {
                c.bytes = bytes;
            }
        }
    }
}

/// `accepted #3: rest` with `prefix` `accepted #` → `(3, "rest")`.
fn numbered<'a>(line: &'a str, prefix: &str) -> Option<(u64, &'a str)> {
    let (n, rest) = line.strip_prefix(prefix)?.split_once(": ")?;
    Some((n.parse().ok()?, rest))
}

/// Collects standard error (for errors and the log).
fn read_stderr(stderr: impl Read, seen: Arc<Mutex<Seen>>) {
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        let mut s = lock(&seen);
        s.stderr.push_str(&line);
        s.stderr.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_taps_listen_prints() {
        let out = "listening: TLS/TCP on 192.0.2.71:443\n\
                   accepted #1: TLS/TCP 192.0.2.71:443 <- 198.51.100.2:40000\n\
                   accepted #2: TLS/TCP 192.0.2.71:443 <- 198.51.100.2:40002\n\
                   closed #2: 6 bytes\n\
                   total: 2 connections, 6 bytes received\n";
        let (tx, rx) = mpsc::channel();
        let seen = Arc::new(Mutex::new(Seen::default()));
        read_stdout(out.as_bytes(), tx, seen.clone());
        assert!(rx.try_recv().is_ok());
        let s = lock(&seen);
        assert_eq!(s.listening, ["TLS/TCP on 192.0.2.71:443"]);
        let got: Vec<(u64, Option<u64>)> =
            s.connections.iter().map(|(n, c)| (*n, c.bytes)).collect();
        assert_eq!(got, [(1, None), (2, Some(6))]);
        assert_eq!(
            s.connections[0].1.accepted,
            "TLS/TCP 192.0.2.71:443 <- 198.51.100.2:40000"
        );
    }
}
