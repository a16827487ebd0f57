//! Logs of the real `taps` binary: `RUST_LOG` and `-v` print the race's events on stderr
//! inside its `race` and `attempt` spans; without them stderr stays silent, and logs
//! never reach stdout (the `--json` report still parses). The peer is a real TCP
//! listener on 127.0.0.1; `localhost` also names ::1, where nothing listens, so the race
//! has a failed attempt too.

use std::net::TcpListener;
use std::process::{Command, Output};
use std::thread;

/// A TCP listener on 127.0.0.1 that accepts and closes connections until the test ends.
fn listener() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    thread::spawn(move || {
        for conn in l.incoming() {
            drop(conn);
        }
    });
    port
}

/// `taps connect localhost PORT` over TCP, with `rust_log` (or none) and `extra` args.
fn connect(port: u16, rust_log: Option<&str>, extra: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_taps"));
    cmd.args(["connect", "localhost", &port.to_string()])
        .args(["--name-server", "127.0.0.1:9"])
        .args(["--props", r#"{"transport":{"value":"TCP","precedence":2}}"#])
        .args(extra)
        .env_remove("RUST_LOG");
    if let Some(filter) = rust_log {
        cmd.env("RUST_LOG", filter);
    }
    let out = cmd.output().expect("run taps");
    assert!(
        out.status.success(),
        "taps failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The line of `log` that contains every one of `parts`, if any.
fn line_with<'a>(log: &'a str, parts: &[&str]) -> Option<&'a str> {
    log.lines().find(|l| parts.iter().all(|p| l.contains(p)))
}

#[test]
fn rust_log_debug_prints_the_race_inside_its_spans() {
    let port = listener();
    let log = stderr(&connect(port, Some("debug"), &[]));
    let remote = format!("race{{id=1 remote=localhost:{port}}}");
    // DNS answers, in the race's span.
    assert!(line_with(&log, &[&remote, "DNS answer"]).is_some(), "{log}");
    // An attempt's start and its connection, in its attempt span inside the race's.
    let winner = format!("remote=127.0.0.1:{port}");
    assert!(
        line_with(&log, &[&remote, ":attempt{", &winner, "started"]).is_some(),
        "{log}"
    );
    assert!(
        line_with(
            &log,
            &[&remote, ":attempt{", "stack=TCP", &winner, "connected"]
        )
        .is_some(),
        "{log}"
    );
    assert!(
        line_with(&log, &[":attempt{", &winner, " won"]).is_some(),
        "{log}"
    );
    // ::1 refuses: the failure says so, with its cause, in its own attempt span.
    let v6 = format!("remote=[::1]:{port}");
    assert!(
        line_with(&log, &[&v6, "failed", "cause="]).is_some(),
        "{log}"
    );
}

#[test]
fn verbose_flag_prints_attempt_outcomes_at_info() {
    let port = listener();
    let log = stderr(&connect(port, None, &["-v"]));
    assert!(
        line_with(&log, &["INFO", "race{", ":attempt{", "connected"]).is_some(),
        "{log}"
    );
    // -v is info: no debug events.
    assert!(!log.contains("DEBUG"), "{log}");
    // -vv adds them.
    let log = stderr(&connect(port, None, &["-vv"]));
    assert!(
        line_with(&log, &["DEBUG", "race{", "DNS answer"]).is_some(),
        "{log}"
    );
}

#[test]
fn without_rust_log_or_verbose_stderr_has_no_log_lines() {
    let port = listener();
    let out = connect(port, None, &[]);
    assert_eq!(stderr(&out), "", "stderr should be empty");
    assert!(String::from_utf8_lossy(&out.stdout).contains("TCP"));
}

#[test]
fn logs_stay_off_stdout_so_json_still_parses() {
    let port = listener();
    let out = connect(port, Some("trace"), &["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert!(v.is_object(), "{v}");
    assert!(stderr(&out).contains("race{"));
}

#[test]
fn a_rust_log_that_does_not_parse_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_taps"))
        .args([
            "candidates",
            "localhost",
            "80",
            "--name-server",
            "127.0.0.1:9",
        ])
        .env("RUST_LOG", "taps=loud")
        .output()
        .expect("run taps");
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("RUST_LOG") && err.contains("loud"), "{err}");
}
