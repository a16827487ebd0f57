//! Fairness of experiment 1: the raw client pays its first socket inside the measured
//! window, so the taps client must pay for building its context there too. The client
//! worker records named instants (window open/close, context build start/end); this
//! test runs a real taps client worker against a real listener on loopback and fails if
//! the context were built outside the window (e.g. moved before `Window::open`).

#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};

/// The instant named `name` in the worker's `phases`.
fn at(phases: &[serde_json::Value], name: &str, last: bool) -> u64 {
    let mut it = phases.iter().filter(|p| p["name"] == name);
    let p = if last { it.next_back() } else { it.next() };
    p.and_then(|p| p["at_ns"].as_u64())
        .unwrap_or_else(|| panic!("the client recorded no `{name}`: {phases:?}"))
}

#[test]
fn the_taps_connect_window_includes_building_the_context() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("port").port();
    // Hold every accepted connection until the test process ends.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept() {
            held.push(s);
        }
    });
    let spec = serde_json::json!({
        "kind": "connect", "imp": "taps", "proto": "TCP", "port": port, "flows": 4
    });
    let mut child = Command::new(env!("CARGO_BIN_EXE_taps-bench"))
        .args(["worker", "client", &spec.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("worker");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next = |prefix: &str| loop {
        let line = lines.next().expect("worker output").expect("line");
        if let Some(rest) = line.strip_prefix(prefix) {
            return rest.trim().to_string();
        }
    };
    next("READY");
    writeln!(stdin, "go").expect("go");
    let result: serde_json::Value = serde_json::from_str(&next("RESULT")).expect("JSON");
    writeln!(stdin, "end").expect("end");
    drop(stdin);
    assert!(child.wait().expect("exit").success());

    assert_eq!(result["ok"], 4, "{result}");
    assert!(result["measure_error"].is_null(), "{result}");
    let phases = result["phases"].as_array().expect("phases");
    let (open, close) = (
        at(phases, "window-open", true),
        at(phases, "window-close", true),
    );
    let (start, end) = (
        at(phases, "context-start", false),
        at(phases, "context-end", false),
    );
    assert!(
        open <= start && start <= end && end <= close,
        "the measured window ({open}…{close} ns) must cover building the context \
         ({start}…{end} ns)"
    );
}
