//! `taps-bench http3` end to end (quick matrix) against Debian's caddy: every client
//! variant got every response (status 200, the body's size) over the protocol it must
//! use, both sides of each comparison opened the same connections, the ratios exist, and
//! the goals are evaluated for every comparison. Without caddy the experiment says
//! "skipped" and its goals are not met. No figure is compared with a bound: a goal may be
//! met or not on a busy machine.

use std::process::Command;

use serde_json::Value;
use taps_testkit::caddy::have_caddy;

/// The variants a taps variant is compared with.
fn baseline(v: &str) -> Option<&'static str> {
    match v {
        "taps-h3" | "taps-race" => Some("raw-h3"),
        "taps-h2" => Some("raw-h2"),
        _ => None,
    }
}

#[test]
fn http3_measures_every_client_on_the_same_work_or_says_skipped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_taps-bench"))
        .args(["http3", "--quick", "--no-progress", "--out"])
        .arg(dir.path())
        // A head start no busy machine outlasts: the race must end on HTTP/3.
        .env(taps_bench::experiments::HEAD_START_ENV, "10000")
        .output()
        .expect("run taps-bench");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "taps-bench http3 failed: {said}");
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("results.json")).expect("results.json"),
    )
    .expect("JSON");
    let goals: Vec<&Value> = json["goals"]
        .as_array()
        .expect("goals")
        .iter()
        .filter(|g| {
            g["name"]
                .as_str()
                .unwrap_or("")
                .starts_with("HTTP client CPU")
        })
        .collect();
    assert_eq!(goals.len(), 6, "{said}");
    let h3 = &json["http3"];
    if !have_caddy() {
        assert!(h3["skipped"].as_str().unwrap_or("").contains("skipped"));
        assert!(goals.iter().all(|g| g["met"] == false), "{said}");
        taps_testkit::skip(
            "http3_measures_every_client_on_the_same_work_or_says_skipped",
            "caddy is not installed (scripts/deps.sh installs it)",
        );
        return;
    }
    assert!(h3["skipped"].is_null(), "{h3}");
    let points = h3["points"].as_array().expect("points");
    assert_eq!(points.len(), 10, "{h3}");
    for p in points {
        let v = p["variant"].as_str().expect("variant");
        let requests = p["requests"].as_f64().expect("requests");
        let new = p["new_connections"].as_bool().expect("shape");
        assert_eq!(p["failed"], 0, "{p}");
        assert!(p["work_problem"].is_null(), "{p}");
        let samples = |k: &str| -> Vec<f64> {
            p[k]["samples"]
                .as_array()
                .expect("samples")
                .iter()
                .map(|s| s.as_f64().expect("a number"))
                .collect()
        };
        let cpu = samples("cpu_per_request_us");
        assert_eq!(cpu.len(), 2, "{p}");
        assert!(cpu.iter().all(|c| *c > 0.0), "{p}");
        let conns = if new { requests } else { 0.0 };
        assert!(samples("connections").iter().all(|c| *c == conns), "{p}");
        let on_h3 = if v.ends_with("h2") { 0.0 } else { requests };
        assert!(samples("h3_responses").iter().all(|c| *c == on_h3), "{p}");
        match baseline(v) {
            Some(b) => {
                assert_eq!(p["baseline"], b, "{p}");
                assert!(p["vs_baseline"].as_f64().is_some_and(|r| r > 0.0), "{p}");
            }
            None => assert!(p["baseline"].is_null(), "{p}"),
        }
    }
    // Every goal has its figure (met or not: no timing is asserted).
    for g in goals {
        assert!(g["problem"].is_null(), "{g}");
        assert!(g["value"].as_f64().is_some_and(|v| v > 0.0), "{g}");
    }
    let report = std::fs::read_to_string(dir.path().join("report.md")).expect("report.md");
    assert!(report.contains("## 4b. HTTP client CPU per request"));
}
