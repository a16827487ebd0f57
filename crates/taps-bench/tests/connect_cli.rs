//! `taps-bench connect-cli` end to end (quick matrix): the real `taps` binary measured as
//! a whole process against the C epoll client compiled at run time, both against a real
//! sink server on loopback; the server's counts must match the work (else the command
//! fails), and the report and goals must carry the comparison.

mod support;

use std::process::Command;

use serde_json::Value;

#[test]
fn connect_cli_measures_taps_and_the_c_client_on_the_same_work() {
    // The `taps` to measure: `$NETLAB_TAPS`, else built now and found where netlab
    // finds it.
    support::build_unless_named("taps", netlab::taps::TAPS_ENV);
    let taps = netlab::taps::taps_binary().expect("the taps binary");
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_taps-bench"))
        .args(["connect-cli", "--quick", "--no-progress", "--taps"])
        .arg(taps)
        .arg("--out")
        .arg(dir.path())
        .output()
        .expect("run taps-bench");
    assert!(
        out.status.success(),
        "taps-bench connect-cli failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("results.json")).expect("results.json"),
    )
    .expect("JSON");
    let points = json["connect_cli"].as_array().expect("connect_cli points");
    let flows: Vec<u64> = points.iter().filter_map(|p| p["flows"].as_u64()).collect();
    assert_eq!(flows, [1, 64]);
    for p in points {
        for side in ["taps", "c"] {
            let samples = p[side]["cpu_us"]["samples"].as_array().expect("samples");
            assert_eq!(samples.len(), 2, "{p}");
            assert!(
                samples.iter().all(|s| s.as_f64().unwrap_or(0.0) > 0.0),
                "{p}"
            );
            assert!(p[side]["peak_rss_kib"]["median"].as_f64().unwrap_or(0.0) > 0.0);
        }
        assert!(p["cpu_ratio"].as_f64().is_some_and(|r| r > 0.0), "{p}");
        // The plain tokio client (built beside `taps-bench` with this package) ran the same
        // repetitions, and its comparisons were made.
        let tokio = &p["tokio"];
        let samples = tokio["side"]["cpu_us"]["samples"]
            .as_array()
            .expect("tokio samples");
        assert_eq!(samples.len(), 2, "{p}");
        assert!(
            samples.iter().all(|s| s.as_f64().unwrap_or(0.0) > 0.0),
            "{p}"
        );
        assert!(
            tokio["side"]["peak_rss_kib"]["median"]
                .as_f64()
                .unwrap_or(0.0)
                > 0.0
        );
        for ratio in ["cpu_vs_c", "taps_cpu_vs_tokio"] {
            assert!(tokio[ratio].as_f64().is_some_and(|r| r > 0.0), "{p}");
        }
    }
    // The CPU goal at 64 flows (no goal on peak RSS), evaluated on the figures (met or not).
    let goals = json["goals"].as_array().expect("goals");
    let cli: Vec<&Value> = goals
        .iter()
        .filter(|g| {
            g["name"]
                .as_str()
                .is_some_and(|n| n.contains("taps connect"))
        })
        .collect();
    assert_eq!(cli.len(), 1, "{goals:?}");
    assert!(cli.iter().all(|g| g["problem"].is_null()), "{cli:?}");
    let report = std::fs::read_to_string(dir.path().join("report.md")).expect("report");
    assert!(report.contains("## 7. The `taps` command, whole process"));
}
