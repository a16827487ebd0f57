//! `taps-bench multipath` end to end on one point (Fixed, δB=50 ms, σ=224 KiB, one run):
//! the lab, both usrsctp peers, the ledger's per-link count and the report. Checks that
//! the point ran and that Fixed kept every stream's new data on its path with CMT on —
//! never a throughput goal. Needs root (netlab) and the multihoming shim; says
//! "skipped" without them.

#![forbid(unsafe_code)]

mod support;

use std::process::Command;

#[test]
fn one_fixed_point_runs_and_keeps_its_streams_on_their_paths() {
    if let Some(why) = netlab::unsupported_reason() {
        taps_testkit::skip("taps-bench multipath", &why);
        return;
    }
    if let Err(e) = usrsctp::multihome_available() {
        taps_testkit::skip("taps-bench multipath", &e.to_string());
        return;
    }
    support::build_unless_named("netlab", netlab::sctp_server::NETLAB_ENV);
    let out = std::env::temp_dir().join(format!("taps-bench-mp-{}", std::process::id()));
    let run = Command::new(env!("CARGO_BIN_EXE_taps-bench"))
        .args(["multipath", "--quick", "--out"])
        .arg(&out)
        .env(
            taps_bench::experiments::MULTIPATH_FILTER_ENV,
            "exp 1 Fixed, δB=50 ms σ=224",
        )
        .output()
        .expect("run taps-bench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "taps-bench multipath: {stderr}");
    let r = taps_bench::experiments::read_multipath(&out.join("multipath.json"))
        .expect("the run's JSON");
    assert_eq!(r.points.len(), 1, "{stderr}");
    let p = &r.points[0];
    assert!(p.error.is_none() && p.mbit > 1.0, "{p:?}");
    let pin = p.pinning.expect("a Fixed run counts its pinning");
    assert!(pin.new_bytes > 1_000_000 && pin.crossed == 0, "{pin:?}");
    // Both links carried their stream's data.
    assert!(p.wire.len() == 2 && p.wire.iter().enumerate().all(|(l, s)| s[l][0] > 0));
    let md = std::fs::read_to_string(out.join("multipath.md")).expect("the report");
    assert!(md.contains("Fixed's pinning, checked on the wire"), "{md}");
    let _ = std::fs::remove_dir_all(&out);
}
