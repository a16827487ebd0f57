//! Tests that cannot run here say so: [`skip`] prints a `SKIPPED:` line that the test
//! log keeps (written straight to standard error, past libtest's output capture, so it
//! shows even for a passing test) and `scripts/test.sh` counts; in a run that must be
//! complete (as root, with `TAPS_REQUIRE_ROOT_TESTS=1` or `CI` set) it fails instead.

use std::io::Write;

/// Whether this process runs as root (uid 0, read from `/proc/self/status`). One file
/// read.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|uid| uid == "0"))
        })
        .unwrap_or(false)
}

/// Whether skips of tests that need root (or what root can set up) are failures: as
/// root with `TAPS_REQUIRE_ROOT_TESTS=1` or `CI` set (non-empty, not `0`/`false`).
pub fn skips_must_fail() -> bool {
    let set = |name: &str| {
        std::env::var(name)
            .is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
    };
    is_root() && (set("TAPS_REQUIRE_ROOT_TESTS") || set("CI"))
}

/// Reports that `test` could not run because of `reason`, something a root CI machine
/// provides (a network namespace, IPv6, an installed tool): prints
/// `SKIPPED: <test>: <reason>`, and panics instead when [`skips_must_fail`]. The caller
/// returns after it.
pub fn skip(test: &str, reason: &str) {
    if skips_must_fail() {
        panic!("{test} cannot run as root in CI: {reason}");
    }
    skip_by_chance(test, reason);
}

/// Reports that `test` did not run because of a passing condition of this machine (a
/// port that happened to be taken): prints the `SKIPPED:` line, never fails.
pub fn skip_by_chance(test: &str, reason: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED: {test}: {reason}");
}
