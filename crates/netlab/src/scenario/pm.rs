//! The host-wide policy manager across processes (`pm-rx`): with `taps pm` running in the
//! client namespace, the second of two `taps connect` processes (no CIB file of their
//! own) skips the dead IPv6 address because the first one's outcome reached the daemon;
//! with the daemon stopped both still connect, the second as a first contact again.

#![forbid(unsafe_code)]

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::checks::{check_connected, show_connection};
use super::runner::{Ctx, Outcome};
use super::setup::{answer_first, describe_rules, rtt_rules, tcp_to, ATTEMPT_DELAY, SLACK};
use crate::dns::RecordType;
use crate::lab::{fqdn, is_dead, Lab};
use crate::taps::{taps_binary, ConnectReport};

/// `taps pm` in the client namespace, killed (and its directory removed) when dropped.
struct PolicyManager {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
}

impl PolicyManager {
    fn start(lab: &Lab) -> Result<PolicyManager, String> {
        let dir = std::env::temp_dir().join(format!(
            "netlab-pm-{}-{}",
            std::process::id(),
            lab.client().name()
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let socket = dir.join("pm.sock");
        let child = lab
            .client()
            .command(taps_binary()?)
            .arg("pm")
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start taps pm: {e}"))?;
        let mut pm = PolicyManager { child, dir, socket };
        let until = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&pm.socket).is_err() {
            if Instant::now() > until || pm.child.try_wait().ok().flatten().is_some() {
                return Err("taps pm did not start listening within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(pm)
    }

    /// Stops the daemon the harshest way (SIGKILL: `ip netns exec` execs it, so the
    /// child is the daemon) and reaps it. Its socket file stays behind, as after a
    /// crash; clients must find nobody there and go on alone.
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PolicyManager {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `taps connect` to `name`, TCP only, without a CIB file, told where the daemon is.
fn connect(lab: &Lab, name: &str, socket: &Path) -> Result<ConnectReport, String> {
    let mut c = tcp_to(name);
    c.env = vec![("TAPS_PM_SOCKET".into(), socket.display().to_string())];
    lab.taps_connect(&c)
}

/// The dead addresses `r` attempted.
fn dead_attempts(r: &ConnectReport) -> Vec<String> {
    r.flow()
        .attempts
        .iter()
        .filter(|a| a.started() && a.remote_ip().is_some_and(is_dead))
        .map(|a| a.remote.clone())
        .collect()
}

pub(super) fn pm_rx(lab: &Lab, _ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let rtt = Duration::from_millis(50);
    lab.set_rules(rtt_rules(rtt, rtt));
    out.say(describe_rules(rtt, rtt));
    answer_first(lab, RecordType::AAAA);
    out.say(format!(
        "  {}: IPv6 dead, IPv4 live; AAAA answered first",
        fqdn("rx")
    ));
    let mut pm = PolicyManager::start(lab)?;
    out.say(format!(
        "  taps pm running in the client namespace on {}",
        pm.socket.display()
    ));
    let first_bound = ATTEMPT_DELAY + rtt + Duration::from_millis(20);
    let first_why = "attempt delay 250 + RTT 50 + 20";
    let first = connect(lab, "rx", &pm.socket)?;
    show_connection(out, "#1 (daemon running)", &first);
    check_connected(
        out,
        "#1",
        first.flow(),
        Some("IPv4"),
        first_bound,
        first_why,
    );
    let second = connect(lab, "rx", &pm.socket)?;
    show_connection(out, "#2 (daemon running, another process)", &second);
    check_connected(
        out,
        "#2",
        second.flow(),
        Some("IPv4"),
        rtt + SLACK,
        "RTT 50 + 25: the daemon told it the IPv6 address is dead",
    );
    let tried = dead_attempts(&second);
    out.check(
        tried.is_empty(),
        format!("#2 attempted no dead address (attempted: {tried:?})"),
    );
    pm.stop();
    out.say("  taps pm stopped");
    for label in ["#3", "#4"] {
        let r = connect(lab, "rx", &pm.socket)?;
        show_connection(out, &format!("{label} (daemon stopped)"), &r);
        check_connected(out, label, r.flow(), Some("IPv4"), first_bound, first_why);
        let tried = dead_attempts(&r);
        out.check(
            !tried.is_empty(),
            format!("{label} is a first contact again: it tried the dead IPv6 address first"),
        );
    }
    lab.dns().clear_delays();
    Ok(())
}
