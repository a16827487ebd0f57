//! Debian's `caddy` (quic-go's HTTP/3, Go's HTTP/2; installed by `scripts/deps.sh`) as
//! an HTTP server no one here wrote, run as a child process in the server namespace and
//! registered with the lab, so every teardown kills it. A scenario starts one with
//! [`Lab::start_caddy`] (a certificate it made at run time) and stops it by dropping it.
//!
//! Every site is bound to one zone address (`bind`), so caddy takes no port of any other
//! address of the namespace (the TCP sink's port 80, its port 443 of `rts`).

#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use crate::lab::Lab;
use crate::netns;

/// How long caddy may take to serve every port.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `caddy` can be run here.
pub fn have_caddy() -> bool {
    taps_testkit::caddy::have_caddy()
}

/// One site of a [`CaddyServer`]: `https://HOST:port` on the server's address.
#[derive(Debug, Clone)]
pub struct CaddySite {
    /// The port (TCP, and UDP for HTTP/3).
    pub port: u16,
    /// HTTP/3 on the port's UDP side too (caddy's default); `false`: HTTP/1.1 and HTTP/2
    /// over TCP only, nothing on UDP.
    pub h3: bool,
    /// The body every response carries.
    pub body: String,
}

/// A running caddy. Killed and reaped on drop; its directory (Caddyfile, state, log)
/// removed.
#[derive(Debug)]
pub struct CaddyServer {
    lab: u64,
    child: Option<Child>,
    dir: PathBuf,
}

impl Lab {
    /// Starts caddy in the server namespace serving `sites` for `host` on `ip`, with
    /// `cert` and `key` (PEM); returns once every site's TCP port listens and every
    /// HTTP/3 site's UDP port is bound.
    pub fn start_caddy(
        &self,
        host: &str,
        ip: IpAddr,
        sites: &[CaddySite],
        cert: &Path,
        key: &Path,
    ) -> io::Result<CaddyServer> {
        let dir = std::env::temp_dir().join(format!(
            "netlab-caddy-{}-{}",
            std::process::id(),
            self.server().name()
        ));
        std::fs::create_dir_all(&dir)?;
        let mut server = CaddyServer {
            lab: self.id(),
            child: None,
            dir: dir.clone(),
        };
        let file = dir.join("Caddyfile");
        std::fs::write(&file, caddyfile(host, ip, sites, cert, key))?;
        let mut cmd = self.server().command("caddy");
        let child = taps_testkit::caddy::run_caddyfile(&mut cmd, &file, &dir)?.spawn()?;
        netns::add_pid(self.id(), child.id());
        let pid = child.id();
        server.child = Some(child);
        let start = Instant::now();
        while start.elapsed() < READY_TIMEOUT {
            if let Some(Ok(Some(status))) = server.child.as_mut().map(Child::try_wait) {
                return Err(io::Error::other(format!(
                    "caddy exited ({status}) before serving: {}",
                    server.log().trim()
                )));
            }
            let ready = sites
                .iter()
                .all(|s| bound(pid, "tcp", ip, s.port) && (!s.h3 || bound(pid, "udp", ip, s.port)));
            if ready {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(io::Error::other(format!(
            "caddy did not serve its ports within {READY_TIMEOUT:?}: {}",
            server.log().trim()
        )))
    }
}

impl CaddyServer {
    /// What caddy logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("caddy.log")).unwrap_or_default()
    }

    /// Kills and reaps it (idempotent).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Forget the pid before reaping, so a teardown never signals a reused pid.
            netns::remove_pid(self.lab, child.id());
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for CaddyServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The Caddyfile: each site on `ip` only; the TCP-only ones limited to HTTP/1.1 and
/// HTTP/2 (a server option keyed by the listener address).
fn caddyfile(host: &str, ip: IpAddr, sites: &[CaddySite], cert: &Path, key: &Path) -> String {
    let listener = |port: u16| match ip {
        IpAddr::V4(a) => format!("{a}:{port}"),
        IpAddr::V6(a) => format!("[{a}]:{port}"),
    };
    let mut f =
        String::from("{\n\tadmin off\n\tskip_install_trust\n\tauto_https disable_redirects\n");
    for s in sites.iter().filter(|s| !s.h3) {
        let _ = writeln!(
            f,
            "\tservers {} {{\n\t\tprotocols h1 h2\n\t}}",
            listener(s.port)
        );
    }
    f.push_str("}\n");
    for s in sites {
        let _ = writeln!(f, "https://{host}:{} {{", s.port);
        let _ = writeln!(f, "\tbind {ip}");
        let _ = writeln!(f, "\ttls {} {}", cert.display(), key.display());
        let _ = writeln!(f, "\trespond {:?} 200\n}}", s.body);
    }
    f
}

/// Whether process `pid`'s namespace has a `proto` (`tcp` or `udp`) socket of `ip` on
/// `port`, listening for TCP (`/proc/PID/net/{tcp,udp}[6]`, which show the namespace of
/// that process).
fn bound(pid: u32, proto: &str, ip: IpAddr, port: u16) -> bool {
    let (file, addr) = match ip {
        IpAddr::V4(a) => (
            proto.to_string(),
            format!("{:08X}", u32::from_le_bytes(a.octets())),
        ),
        IpAddr::V6(a) => {
            let hex: String = a
                .octets()
                .chunks(4)
                .map(|w| format!("{:08X}", u32::from_le_bytes([w[0], w[1], w[2], w[3]])))
                .collect();
            (format!("{proto}6"), hex)
        }
    };
    let local = format!("{addr}:{port:04X}");
    std::fs::read_to_string(format!("/proc/{pid}/net/{file}")).is_ok_and(|t| {
        t.lines().skip(1).any(|l| {
            let mut cols = l.split_whitespace();
            let here = cols.nth(1) == Some(local.as_str());
            // Column 4 is the state; 0A is LISTEN (UDP sockets show 07).
            here && (proto != "tcp" || cols.nth(1) == Some("0A"))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caddyfile_binds_every_site_and_limits_the_tcp_only_ones() {
        let ip: IpAddr = "192.0.2.96".parse().unwrap();
        let sites = [
            CaddySite {
                port: 443,
                h3: false,
                body: "a".into(),
            },
            CaddySite {
                port: 8443,
                h3: true,
                body: "b".into(),
            },
        ];
        let f = caddyfile(
            "x.test",
            ip,
            &sites,
            Path::new("/c.pem"),
            Path::new("/k.pem"),
        );
        assert!(
            f.contains("servers 192.0.2.96:443 {\n\t\tprotocols h1 h2"),
            "{f}"
        );
        assert!(!f.contains("servers 192.0.2.96:8443"), "{f}");
        assert_eq!(f.matches("\tbind 192.0.2.96\n").count(), 2, "{f}");
        assert!(f.contains("https://x.test:8443 {"), "{f}");
        assert!(f.contains("respond \"b\" 200"), "{f}");
    }
}
