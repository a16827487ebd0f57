//! Running the multihomed SCTP peer ([`crate::sctp_mp`]) as a child process inside a lab
//! namespace, and reading its JSON lines as they come (each stamped with the time it was
//! read), so a scenario can act on them (cut a link when a phase starts, sample the
//! bridges' counters when it ends).
//!
//! Costs: one child process and two reader threads per peer; the child is registered with
//! its lab (killed by the lab's teardown too) and killed and reaped on drop.

#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::lab::Lab;
use crate::netns::{self, Netns};
use crate::sctp_mp::{PeerConfig, SUBCOMMAND};
use crate::sctp_server::netlab_binary;

/// One line of a peer's output and when it was read.
#[derive(Debug, Clone)]
pub struct PeerLine {
    /// When the line was read.
    pub at: Instant,
    /// The line, parsed (a non-JSON line becomes a string).
    pub value: Value,
}

/// A running peer. Killed and reaped on drop.
#[derive(Debug)]
pub struct PeerProcess {
    lab: u64,
    child: Option<Child>,
    lines: Receiver<PeerLine>,
    errors: Arc<Mutex<String>>,
    role: &'static str,
}

impl PeerProcess {
    /// Starts `netlab sctp-mp-peer --role ROLE` with `cfg` in `ns` (the lab's server or
    /// client namespace). Returns at once.
    pub fn start(
        lab: &Lab,
        ns: &Netns,
        role: &'static str,
        cfg: &PeerConfig,
    ) -> Result<PeerProcess, String> {
        let exe = netlab_binary()?;
        let mut cmd = ns.command(&exe);
        cmd.arg(SUBCOMMAND)
            .arg("--role")
            .arg(role)
            .arg("--config")
            .arg(cfg.to_json())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {} {SUBCOMMAND}: {e}", exe.display()))?;
        netns::add_pid(lab.id(), child.id());
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        let errors = Arc::new(Mutex::new(String::new()));
        let errs = errors.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("netlab-mp-{role}"))
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
                    if tx
                        .send(PeerLine {
                            at: Instant::now(),
                            value,
                        })
                        .is_err()
                    {
                        break;
                    }
                }
            })
            .and_then(|_| {
                std::thread::Builder::new()
                    .name(format!("netlab-mp-{role}-err"))
                    .spawn(move || {
                        let mut s = String::new();
                        let _ = BufReader::new(stderr).read_to_string(&mut s);
                        *crate::sink::lock(&errs) = s;
                    })
            });
        let p = PeerProcess {
            lab: lab.id(),
            child: Some(child),
            lines,
            errors,
            role,
        };
        spawned.map_err(|e| format!("cannot start reader threads: {e}"))?;
        Ok(p)
    }

    /// The next line, waiting at most `limit`. On an exit or a timeout the error says
    /// which, with what the peer wrote on stderr.
    pub fn next(&mut self, limit: Duration) -> Result<PeerLine, String> {
        match self.lines.recv_timeout(limit) {
            Ok(l) => Ok(l),
            Err(RecvTimeoutError::Timeout) => Err(format!(
                "the {} peer said nothing for {limit:?}{}",
                self.role,
                self.stderr_note()
            )),
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.stop();
                Err(format!(
                    "the {} peer exited ({status}){}",
                    self.role,
                    self.stderr_note()
                ))
            }
        }
    }

    /// Lines already read, without waiting.
    pub fn ready_lines(&mut self) -> Vec<PeerLine> {
        self.lines.try_iter().collect()
    }

    /// Waits for a line whose `key` is `value`; returns it and the lines before it.
    pub fn wait_for(
        &mut self,
        key: &str,
        value: &str,
        limit: Duration,
    ) -> Result<(PeerLine, Vec<PeerLine>), String> {
        let deadline = Instant::now() + limit;
        let mut before = Vec::new();
        loop {
            let l = self.next(deadline.saturating_duration_since(Instant::now()))?;
            if l.value.get(key).and_then(Value::as_str) == Some(value) {
                return Ok((l, before));
            }
            before.push(l);
        }
    }

    fn stderr_note(&self) -> String {
        std::thread::sleep(Duration::from_millis(50));
        let e = crate::sink::lock(&self.errors).trim().to_string();
        if e.is_empty() {
            String::new()
        } else {
            format!("; stderr: {e}")
        }
    }

    /// Kills (if still running) and reaps the child; its exit status as text.
    pub fn stop(&mut self) -> String {
        let Some(mut child) = self.child.take() else {
            return "already stopped".into();
        };
        netns::remove_pid(self.lab, child.id());
        // Give a peer that is finishing a moment to exit on its own.
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(st)) = child.try_wait() {
                return st.to_string();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        child
            .wait()
            .map(|s| format!("killed: {s}"))
            .unwrap_or_else(|e| e.to_string())
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}
