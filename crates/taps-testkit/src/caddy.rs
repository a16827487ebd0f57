//! Debian's `caddy` (installed by `scripts/deps.sh`) as an independent HTTP/3 and HTTP/2
//! server: quic-go's HTTP/3 and Go's HTTP/2, on ports picked at run time.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;
use crate::openssl::Killed;

/// Whether `caddy` can be run here.
pub fn have_caddy() -> bool {
    Command::new("caddy")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One site of a [`Caddy`] server: `https://HOST:PORT`.
#[derive(Debug, Clone, Default)]
pub struct Site {
    /// The site's host name (`localhost` when empty); the certificate must name it.
    pub host: String,
    /// Serve HTTP/3 on the port's UDP side too (caddy's default); `false`: HTTP/1.1 and
    /// HTTP/2 over TCP only, nothing on UDP.
    pub h3: bool,
    /// An `Alt-Svc` header to add to every response (`{PORTn}` is replaced by the n-th
    /// site's port, from 0).
    pub alt_svc: Option<String>,
    /// The body every response carries.
    pub body: String,
}

/// A running caddy serving the [`Site`]s with one certificate; stopped (by its PID) on
/// drop.
pub struct Caddy {
    _process: Killed,
    /// Each site's port, in the order given.
    pub ports: Vec<u16>,
    dir: PathBuf,
}

impl Drop for Caddy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Caddy {
    /// Starts caddy with `sites`, presenting `cert`/`key` (PEM) for `localhost`, each on a
    /// free port of this host, once every site's TCP port accepts and every HTTP/3 site's
    /// UDP port is bound. A caddy that exits first (a port taken in between) starts again
    /// on other ports (five tries). Its state (`HOME`, `XDG_*`) stays in a temporary
    /// directory; its admin endpoint is off.
    pub fn start(sites: &[Site], cert: &Path, key: &Path) -> Caddy {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("taps-caddy-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("caddy's directory");
        for _ in 0..5 {
            let ports: Vec<u16> = sites.iter().map(|_| free_port()).collect();
            let file = dir.join("Caddyfile");
            std::fs::write(&file, caddyfile(sites, &ports, cert, key)).expect("Caddyfile");
            let mut cmd = Command::new("caddy");
            run_caddyfile(&mut cmd, &file, &dir).expect("caddy's log");
            let process = Killed(cmd.spawn().expect("run caddy"));
            let mut caddy = Caddy {
                _process: process,
                ports,
                dir: dir.clone(),
            };
            if caddy.wait_ready(sites) {
                return caddy;
            }
            // Exited: keep the directory for the next try.
            caddy.dir = PathBuf::new();
        }
        let log = std::fs::read_to_string(dir.join("caddy.log")).unwrap_or_default();
        panic!("caddy did not start on any of five port sets:\n{log}");
    }

    /// Waits (10 s at most) until every port is served; `false` if caddy exited first.
    fn wait_ready(&mut self, sites: &[Site]) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self._process.0.try_wait() {
                return false;
            }
            let ready = sites.iter().zip(&self.ports).all(|(s, &p)| {
                std::net::TcpStream::connect(("127.0.0.1", p)).is_ok() && (!s.h3 || udp_bound(p))
            });
            if ready {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("caddy did not serve its ports within 10 s");
    }

    /// The file caddy logged into.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("caddy.log")).unwrap_or_default()
    }
}

/// The Caddyfile of `sites` on `ports`.
/// Makes `cmd` (a `caddy` command, wherever it runs) serve the Caddyfile `config`, with
/// its state (`HOME`, `XDG_*`) in `dir` and its stderr in `dir/caddy.log`.
pub fn run_caddyfile<'a>(
    cmd: &'a mut Command,
    config: &Path,
    dir: &Path,
) -> std::io::Result<&'a mut Command> {
    Ok(cmd
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(config)
        .env("HOME", dir)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("caddy.log"))?))
}

fn caddyfile(sites: &[Site], ports: &[u16], cert: &Path, key: &Path) -> String {
    let mut f =
        String::from("{\n\tadmin off\n\tskip_install_trust\n\tauto_https disable_redirects\n");
    for (site, port) in sites.iter().zip(ports) {
        if !site.h3 {
            let _ = writeln!(f, "\tservers :{port} {{\n\t\tprotocols h1 h2\n\t}}");
        }
    }
    f.push_str("}\n");
    for (site, port) in sites.iter().zip(ports) {
        let host = if site.host.is_empty() {
            "localhost"
        } else {
            &site.host
        };
        let _ = writeln!(f, "https://{host}:{port} {{");
        let _ = writeln!(f, "\ttls {} {}", cert.display(), key.display());
        if let Some(alt) = &site.alt_svc {
            let mut alt = alt.clone();
            for (i, p) in ports.iter().enumerate() {
                alt = alt.replace(&format!("{{PORT{i}}}"), &p.to_string());
            }
            let _ = writeln!(f, "\theader Alt-Svc {:?}", alt);
        }
        let _ = writeln!(f, "\trespond {:?} 200\n}}", site.body);
    }
    f
}

/// Whether a UDP socket of any address is bound to `port` (`/proc/net/udp` and `udp6`).
fn udp_bound(port: u16) -> bool {
    let suffix = format!(":{port:04X}");
    ["/proc/net/udp", "/proc/net/udp6"].iter().any(|file| {
        std::fs::read_to_string(file).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|a| a.ends_with(&suffix))
            })
        })
    })
}
