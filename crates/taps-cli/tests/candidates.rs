//! `taps candidates` end to end: the real binary, the real resolver (hosts file and
//! literal addresses; the name server is pointed at an unused loopback port so nothing
//! leaves the machine).

use std::process::{Command, Output};

use serde_json::Value;

fn taps(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_taps"))
        .args(args)
        .args(["--name-server", "127.0.0.1:9"])
        .output()
        .expect("run taps")
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "taps failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn listed(v: &Value) -> Vec<(String, String)> {
    v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["protocol"].as_str().unwrap().to_string(),
                c["remote"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn transport_list_on_localhost_lists_both_protocols_and_families_sctp_first() {
    let out = taps(&[
        "candidates",
        "localhost",
        "8080",
        "--props",
        r#"{"transport":{"value":["SCTP","TCP"],"precedence":2}}"#,
        "--json",
    ]);
    let v = json_of(&out);
    let got = listed(&v);
    for want in [
        ("SCTP", "[::1]:8080"),
        ("SCTP", "127.0.0.1:8080"),
        ("TCP", "[::1]:8080"),
        ("TCP", "127.0.0.1:8080"),
    ] {
        assert!(
            got.contains(&(want.0.to_string(), want.1.to_string())),
            "{want:?} missing from {got:?}"
        );
    }
    assert_eq!(got[0].0, "SCTP", "{got:?}");
    assert_eq!(got.len(), 4, "{got:?}");
}

#[test]
fn services_not_protocols_yield_only_sctp() {
    let v = json_of(&taps(&[
        "candidates",
        "127.0.0.1",
        "80",
        "--props",
        r#"{"reliability":{"value":true,"precedence":2},"preserveMsgBoundaries":{"value":true,"precedence":2}}"#,
        "--json",
    ]));
    let got = listed(&v);
    assert!(!got.is_empty());
    assert!(got.iter().all(|(p, _)| p == "SCTP"), "{got:?}");
    let ruled_out: Vec<String> = v["pruned_stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["stack"].as_str().unwrap().to_string())
        .collect();
    for s in ["TCP", "UDP"] {
        assert!(ruled_out.contains(&s.to_string()), "{ruled_out:?}");
    }
}

#[test]
fn conflicting_requirements_name_both_properties() {
    let out = taps(&[
        "candidates",
        "127.0.0.1",
        "80",
        "--props",
        r#"{"transport":{"value":"TCP","precedence":2},"preserveMsgBoundaries":{"value":true,"precedence":2}}"#,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("transport"), "{err}");
    assert!(err.contains("preserveMsgBoundaries"), "{err}");
}

#[test]
fn malformed_json_reports_line_and_column() {
    let out = taps(&[
        "candidates",
        "127.0.0.1",
        "80",
        "--props",
        "{\"transport\":\n  {\"value\": \"TCP\" \"precedence\": 2}}",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("line 2, column"), "{err}");
}

#[test]
fn unknown_property_is_named() {
    let out = taps(&[
        "candidates",
        "127.0.0.1",
        "80",
        "--props",
        r#"{"reliabilty": {"value": true}}"#,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown property 'reliabilty'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn no_input_makes_it_panic() {
    let inputs = [
        "", "null", "[]", "{", "}", "{\"transport\": null}", "{\"transport\": []}",
        "{\"transport\": [[]]}", "{\"transport\": {\"value\": {}}}",
        "{\"transport\": {\"value\": {\"start\": 5, \"end\": 1}}}",
        "{\"ip_version\": {\"value\": 99999999999999999999}}",
        "{\"__he_delay\": -5}", "{\"__he_delay\": 1e300}", "{\"connTimeout\": -1}",
        "{\"connTimeout\": 1e300}", "{\"reliability\": \"sometimes\"}", "\u{1}",
        "{\"transport\": {\"value\": \"TCP\", \"precedence\": -1}}",
        "{\"interface\": {\"value\": 5, \"precedence\": 2}}", "{\"local_ips\": [\"not-an-ip\"]}",
        "{\"transport\": {\"not\": \"TCP\"}, \"precedence\": 2}",
        "{\"transport\": {\"value\": {\"not\": [\"TCP\", \"SCTP\", \"UDP\", \"UDP-Lite\", \"MPTCP\", \"QUIC\"]}, \"precedence\": 2}}",
    ];
    for input in inputs {
        let out = taps(&["candidates", "127.0.0.1", "80", "--props", input]);
        assert_ne!(
            out.status.code(),
            Some(101),
            "panicked on {input:?}: {}",
            stderr(&out)
        );
        assert!(
            !stderr(&out).contains("panicked"),
            "{input:?}: {}",
            stderr(&out)
        );
        assert!(out.status.code().is_some(), "killed on {input:?}");
    }
    // Bad ports and hosts are clean errors too.
    for args in [
        &["candidates", "127.0.0.1", "99999"][..],
        &["candidates", "", "80"][..],
        &["candidates", "[::1", "80"][..],
    ] {
        let out = taps(args);
        assert_ne!(out.status.code(), Some(101), "{args:?}: {}", stderr(&out));
        assert!(
            !stderr(&out).contains("panicked"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn pib_directory_changes_the_ranking() {
    let dir = tempfile::tempdir().unwrap();
    // Asking for multistreaming puts SCTP first; a profile can turn that round.
    let ms = r#"{"multistreaming": {"value": true, "precedence": 1}}"#;
    let before = json_of(&taps(&[
        "candidates",
        "127.0.0.1",
        "80",
        "--props",
        ms,
        "--json",
    ]));
    assert_eq!(listed(&before)[0].0, "SCTP");
    std::fs::write(
        dir.path().join("tcp_first.profile"),
        r#"{"uid": "tcp_first", "priority": 1,
            "match": {},
            "properties": {"transport": {"value": "TCP", "precedence": 1, "score": 5}}}"#,
    )
    .unwrap();
    let after = json_of(&taps(&[
        "candidates",
        "127.0.0.1",
        "80",
        "--props",
        ms,
        "--pib",
        dir.path().to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(listed(&after)[0].0, "TCP", "{after}");
    // A policy that prohibits SCTP towards port 80 removes it.
    std::fs::write(
        dir.path().join("no_sctp_on_80.policy"),
        r#"{"uid": "no_sctp_on_80", "match": {"port": {"value": 80}, "transport": {"value": "SCTP"}},
            "properties": {"transport": {"value": "TCP", "precedence": 2}}}"#,
    )
    .unwrap();
    let after = json_of(&taps(&[
        "candidates",
        "127.0.0.1",
        "80",
        "--props",
        ms,
        "--pib",
        dir.path().to_str().unwrap(),
        "--json",
    ]));
    assert!(listed(&after).iter().all(|(p, _)| p == "TCP"), "{after}");
    let pruned = after["pruned"].to_string();
    assert!(pruned.contains("no_sctp_on_80"), "{pruned}");
}
