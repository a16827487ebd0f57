//! `taps connect --paths` against a real `taps listen` over SCTP (usrsctp over UDP on
//! 127.0.0.1): the association's path with usrsctp's figures, in text and in JSON.

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

const SCTP: &str = r#"{"transport":{"value":"SCTP","precedence":2}}"#;

/// A UDP port free now (SCTP's port and its UDP encapsulation port).
fn free_udp_port() -> String {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.local_addr().expect("addr").port().to_string()
}

/// `taps listen` echoing over SCTP, once it says it listens; killed on drop.
struct Listener(Child);

impl Listener {
    fn start(port: &str, udp: &str) -> Listener {
        Listener::start_with(port, udp, &[])
    }

    fn start_with(port: &str, udp: &str, extra: &[&str]) -> Listener {
        let mut child = Command::new(env!("CARGO_BIN_EXE_taps"))
            .args(["listen", port, "--echo", "--local", "127.0.0.1"])
            .args(["--props", SCTP, "--sctp-udp-port", udp])
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("run taps listen");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        assert!(first.starts_with("listening: SCTP"), "{first}");
        // Read on, so that the listener's writes never meet a closed pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Listener(child)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn connect(port: &str, udp: &str, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_taps"))
        .args([
            "connect",
            "127.0.0.1",
            port,
            "--message",
            "hello",
            "--paths",
        ])
        .args(["--props", SCTP, "--sctp-udp-port", udp])
        .args(extra)
        .output()
        .expect("run taps connect");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn connect_prints_the_sctp_path_with_its_figures() {
    let (port, udp) = (free_udp_port(), free_udp_port());
    let _listener = Listener::start(&port, &udp);
    let text = connect(&port, &udp, &[]);
    let line = text
        .lines()
        .find(|l| l.starts_with("path: "))
        .unwrap_or_else(|| panic!("no path line: {text}"));
    assert!(
        line.contains(&format!("-> 127.0.0.1:{udp} active primary srtt ")),
        "{line}"
    );
    assert!(line.contains(" rto ") && line.contains(" cwnd ") && line.contains(" mtu "));
    let json: Value = serde_json::from_str(&connect(&port, &udp, &["--json"])).expect("JSON");
    let paths = json["paths"].as_array().expect("paths");
    assert_eq!(paths.len(), 1, "{json}");
    assert_eq!(paths[0]["state"], "active");
    assert_eq!(paths[0]["primary"], true);
    assert!(paths[0]["cwnd"].as_u64().unwrap() > 0, "{json}");
    assert!(paths[0]["srtt_ms"].is_number(), "{json}");
}

/// `--local` twice and `--multihoming` on both ends: one association over 127.0.0.1 and
/// ::1, each end learning the other's second address from the handshake; `--paths` lists
/// both of the listener's addresses.
#[test]
fn multihoming_from_the_command_line_lists_both_paths() {
    let (port, udp) = (free_udp_port(), free_udp_port());
    let two = ["--local", "::1", "--multihoming"];
    let _listener = Listener::start_with(&port, &udp, &two);
    let text = connect(
        &port,
        &udp,
        &["--local", "127.0.0.1", "--local", "::1", "--multihoming"],
    );
    let remotes: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("path: "))
        .filter_map(|l| l.split(" -> ").nth(1)?.split(' ').next())
        .collect();
    assert!(
        remotes.contains(&format!("127.0.0.1:{udp}").as_str())
            && remotes.contains(&format!("[::1]:{udp}").as_str()),
        "{text}"
    );
}
