//! Running `taps get URL --trace --body` (taps' HTTP client: HTTP/3 raced against HTTP/2)
//! in the client namespace and reading its report: the status, the HTTP version, the
//! connection, both legs of the protocol race, QUIC's head start, the times, the address
//! race of the winning leg and the body.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::lab::Lab;

/// What the race line calls the TLS/TCP leg.
const TCP_LEG: &str = "; TLS/TCP (h2, http/1.1): ";

/// One `taps get` run.
#[derive(Debug, Clone)]
pub struct Get {
    /// The URL.
    pub url: String,
    /// Trusted CA file (`--ca`).
    pub ca: PathBuf,
    /// CIB file (`--cib`); none: the process starts with an empty CIB and keeps nothing.
    pub cib: Option<PathBuf>,
    /// QUIC's head start (`--quic-head-start`); none: taps' own choice.
    pub quic_head_start: Option<Duration>,
}

/// What `taps get` reported.
#[derive(Debug, Clone, Default)]
pub struct GetReport {
    /// Its exit code (`None`: killed at the time limit).
    pub exit_code: Option<i32>,
    /// The HTTP status.
    pub status: Option<u16>,
    /// `HTTP/3.0`, `HTTP/2.0` or `HTTP/1.1`.
    pub protocol: Option<String>,
    /// The connection's stack (`QUIC`, `TLS/TCP`).
    pub stack: Option<String>,
    /// The connection's remote address.
    pub remote: Option<SocketAddr>,
    /// Where QUIC was (or would have been) tried (`host:port`).
    pub quic_target: Option<String>,
    /// The QUIC leg's outcome in words (`won in 58.1 ms`, `skipped: ...`).
    pub quic: String,
    /// The TLS/TCP leg's outcome in words.
    pub tcp: String,
    /// QUIC's head start in ms, when QUIC ran.
    pub head_start_ms: Option<f64>,
    /// When QUIC's first attempt started, in ms from the race's start (the head start
    /// counts from then).
    pub quic_began_ms: Option<f64>,
    /// Connect time (preconnections built, then the race), in ms.
    pub connect_ms: Option<f64>,
    /// From the call to the response's head, in ms.
    pub first_byte_ms: Option<f64>,
    /// The winning leg's address race: `(ms since its start, event)`.
    pub trace: Vec<(f64, String)>,
    /// The body's last line.
    pub body: String,
    /// Everything it printed.
    pub stdout: String,
    /// What it printed on standard error.
    pub stderr: String,
}

impl GetReport {
    /// When a leg (`won in X ms`) won, in ms from the race's start.
    pub fn won_ms(leg: &str) -> Option<f64> {
        leg.strip_prefix("won in ")?
            .strip_suffix(" ms")?
            .parse()
            .ok()
    }

    /// How long the race took to the winning leg, in ms.
    pub fn race_ms(&self) -> Option<f64> {
        Self::won_ms(&self.quic).or_else(|| Self::won_ms(&self.tcp))
    }

    /// How long the winning attempt took from its own start to its win, in ms: the
    /// address race's `#N connected in X ms: won` (without the leg's DNS).
    pub fn handshake_ms(&self) -> Option<f64> {
        self.trace.iter().find_map(|(_, e)| {
            let (_, rest) = e.split_once(" connected in ")?;
            rest.strip_suffix(" ms: won")?.parse().ok()
        })
    }

    /// Whether it exited 0 with status 200.
    pub fn ok(&self) -> bool {
        self.exit_code == Some(0) && self.status == Some(200)
    }

    /// Reads `taps get`'s standard output.
    pub fn parse(stdout: &str) -> GetReport {
        let mut r = GetReport {
            stdout: stdout.to_string(),
            ..GetReport::default()
        };
        let mut in_trace = false;
        for line in stdout.lines() {
            if in_trace {
                let t = line.trim_start();
                match t.split_once("  ").map(|(a, e)| (a.parse::<f64>(), e)) {
                    Some((Ok(at), e)) if line.starts_with("  ") => {
                        r.trace.push((at, e.trim().to_string()));
                        continue;
                    }
                    _ => in_trace = false,
                }
            }
            if let Some(v) = line.strip_prefix("status: ") {
                r.status = v.trim().parse().ok();
            } else if let Some(v) = line.strip_prefix("protocol: ") {
                r.protocol = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("connection: ") {
                r.stack = v.split_whitespace().next().map(str::to_string);
                r.remote = v
                    .split_once(" -> ")
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .and_then(|a| a.parse().ok());
            } else if let Some(v) = line.strip_prefix("race: ") {
                r.read_race(v);
            } else if let Some(v) = line.strip_prefix("time: ") {
                r.connect_ms = figure(v, "connect ");
                r.first_byte_ms = figure(v, "first byte ");
            } else if line.starts_with("address race of the winning leg") {
                in_trace = true;
            }
        }
        r.body = stdout.lines().last().unwrap_or("").to_string();
        r
    }

    /// `QUIC (h3) to HOST:PORT[, from Alt-Svc]: LEG[ (head start N ms)][ [first attempt
    /// at X ms]]; TLS/TCP (h2, http/1.1): LEG`.
    fn read_race(&mut self, v: &str) {
        let (quic, tcp) = v.rsplit_once(TCP_LEG).unwrap_or((v, ""));
        self.tcp = tcp.trim().to_string();
        let quic = quic.strip_prefix("QUIC (h3) to ").unwrap_or(quic);
        let (target, leg) = quic.split_once(": ").unwrap_or((quic, ""));
        self.quic_target = Some(target.to_string());
        let (leg, began) = match leg.rsplit_once(" [first attempt at ") {
            Some((l, b)) => (l, b.strip_suffix(" ms]").and_then(|b| b.parse().ok())),
            None => (leg, None),
        };
        self.quic_began_ms = began;
        let (leg, head) = match leg.rsplit_once(" (head start ") {
            Some((l, h)) => (l, h.strip_suffix(" ms)").and_then(|h| h.parse().ok())),
            None => (leg, None),
        };
        self.quic = leg.to_string();
        self.head_start_ms = head;
    }
}

/// The number after `name` in `connect 1.5 ms, first byte ...`.
fn figure(line: &str, name: &str) -> Option<f64> {
    let (_, rest) = line.split_once(name)?;
    rest.split_whitespace().next()?.parse().ok()
}

impl Lab {
    /// Runs `taps get URL --trace --body --name-server <lab DNS>` in the client namespace
    /// (30 s at most) and reads its report. Errors when the binary is missing or it ran
    /// out of time; a failed request is a report with its exit code and no status.
    pub fn taps_get(&self, g: &Get) -> Result<GetReport, String> {
        let taps = crate::taps::taps_binary()?;
        let mut cmd = self.client().command(&taps);
        cmd.arg("get")
            .arg(&g.url)
            .arg("--ca")
            .arg(&g.ca)
            .args(["--trace", "--body", "--name-server"])
            .arg(self.dns_addr().to_string());
        if let Some(cib) = &g.cib {
            cmd.arg("--cib").arg(cib);
        }
        if let Some(h) = g.quic_head_start {
            cmd.arg("--quic-head-start").arg(h.as_millis().to_string());
        }
        let limit = Duration::from_secs(30);
        let out = self
            .run_child(cmd, limit)
            .map_err(|e| format!("cannot run {}: {e}", taps.display()))?;
        if out.timed_out() {
            return Err(format!(
                "taps get {} did not finish within {limit:?}; stderr: {}",
                g.url,
                out.stderr.trim()
            ));
        }
        let mut r = GetReport::parse(&out.stdout);
        r.exit_code = out.status.and_then(|s| s.code());
        r.stderr = out.stderr;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FALLBACK: &str = "status: 200
protocol: HTTP/2.0
connection: TLS/TCP 198.51.100.2:42476 -> 192.0.2.91:443 (new)
race: QUIC (h3) to rq.netlab.test:443: still connecting at 206.3 ms, given up (head start 100 ms) [first attempt at 3.2 ms]; TLS/TCP (h2, http/1.1): won in 206.3 ms
time: connect 240.5 ms, first byte 292.3 ms, total 292.4 ms
size: 8 bytes
alt-svc: h3=\":443\"; ma=2592000
address race of the winning leg (ms since its start):
      0.501  A answered: 1 address (2 candidates)
      0.677  start #1 TLS/TCP 192.0.2.91:443
    105.205  #1 connected in 104.5 ms: won
port 443
";

    #[test]
    fn reads_a_fallback_to_http2() {
        let r = GetReport::parse(FALLBACK);
        assert_eq!(r.status, Some(200));
        assert_eq!(r.protocol.as_deref(), Some("HTTP/2.0"));
        assert_eq!(r.stack.as_deref(), Some("TLS/TCP"));
        assert_eq!(r.remote, Some("192.0.2.91:443".parse().unwrap()));
        assert_eq!(r.quic_target.as_deref(), Some("rq.netlab.test:443"));
        assert_eq!(r.quic, "still connecting at 206.3 ms, given up");
        assert_eq!(r.head_start_ms, Some(100.0));
        assert_eq!(r.quic_began_ms, Some(3.2));
        assert_eq!(r.tcp, "won in 206.3 ms");
        assert_eq!(r.race_ms(), Some(206.3));
        assert_eq!((r.connect_ms, r.first_byte_ms), (Some(240.5), Some(292.3)));
        assert_eq!(r.trace.len(), 3);
        assert_eq!(
            r.trace[2],
            (105.205, "#1 connected in 104.5 ms: won".into())
        );
        assert_eq!(r.body, "port 443");
    }

    #[test]
    fn reads_a_skipped_quic_leg_with_semicolons_in_it() {
        let r = GetReport::parse(
            "status: 200\nrace: QUIC (h3) to a.test:443: skipped: the CIB marks it broken (x; y, 0 s ago); TLS/TCP (h2, http/1.1): won in 101.0 ms\n",
        );
        assert_eq!(r.quic, "skipped: the CIB marks it broken (x; y, 0 s ago)");
        assert_eq!(r.head_start_ms, None);
        assert_eq!(r.race_ms(), Some(101.0));
    }
}
