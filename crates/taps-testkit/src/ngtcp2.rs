//! ngtcp2's HTTP/3 server (`gtlsserver`, Debian's ngtcp2-server) as a test peer: an
//! independent QUIC stack (ngtcp2 with GnuTLS) to connect to.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;
use crate::openssl::Killed;

/// Whether `gtlsserver` can be run here.
pub fn have_gtlsserver() -> bool {
    Command::new("gtlsserver")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// `gtlsserver` presenting `cert` (PEM) with its key `key` and the `extra` arguments, on
/// a free UDP port of 127.0.0.1, once its socket is bound (seen in `/proc/net/udp`: a
/// UDP server says nothing when it is ready, and a port free when picked can be taken
/// before the server binds it). A server that exits before binding starts again on
/// another port (five tries).
pub fn gtlsserver(cert: &Path, key: &Path, extra: &[&str]) -> (Killed, u16) {
    for _ in 0..5 {
        let port = free_port();
        let mut server = Killed(
            Command::new("gtlsserver")
                .args(["--quiet"])
                .args(extra)
                .args(["127.0.0.1", &port.to_string()])
                .arg(key)
                .arg(cert)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("run gtlsserver"),
        );
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = server.0.try_wait() {
                break;
            }
            if udp_bound(port) {
                return (server, port);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Ok(None) = server.0.try_wait() {
            panic!("gtlsserver did not bind 127.0.0.1:{port} within 10 s");
        }
    }
    panic!("gtlsserver did not bind any of five free ports");
}

/// Whether a UDP socket is bound to 127.0.0.1:`port` (`/proc/net/udp`).
fn udp_bound(port: u16) -> bool {
    let local = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/udp")
        .map(|t| {
            t.lines()
                .skip(1)
                .any(|l| l.split_whitespace().nth(1) == Some(local.as_str()))
        })
        .unwrap_or(false)
}
