//! Building the workspace's binaries from a test, as the suite's own build built them.

use std::path::Path;
use std::process::Command;

/// `cargo build --quiet` of the workspace binaries `bins` in `manifest`'s workspace, with
/// the features and the environment of the suite's own build, so that after `cargo test
/// --workspace` it compiles nothing:
/// - the whole workspace is selected, which unifies its members' features, and one
///   example target (taps' `http_get`, which the netlab suite runs too) brings in the
///   dev-dependencies' features (tokio's `test-util`, hyper's server), as every test
///   target does; `cargo build -p taps-cli` resolves neither;
/// - the variables cargo sets for a running test (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`,
///   ...) are removed: build scripts that read them (ring's does) would otherwise run
///   again, and everything above them be rebuilt: about a minute of CI per nested build.
///
/// The caller adds `--release` for a release build and runs the command.
pub fn cargo_build(manifest: &Path, bins: &[&str]) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "--workspace", "--example", "http_get"]);
    for bin in bins {
        cmd.args(["--bin", bin]);
    }
    cmd.arg("--manifest-path").arg(manifest);
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if is_set_for_tests(&name) {
            cmd.env_remove(name.as_ref());
        }
    }
    cmd
}

/// Whether cargo sets `name` for the process of a test it runs (not for cargo itself).
fn is_set_for_tests(name: &str) -> bool {
    const EXACT: [&str; 8] = [
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "OUT_DIR",
    ];
    EXACT.contains(&name) || name.starts_with("CARGO_PKG_") || name.starts_with("CARGO_BIN_EXE_")
}

#[cfg(test)]
mod tests {
    use super::is_set_for_tests;

    #[test]
    fn only_what_cargo_sets_for_a_test_is_removed() {
        for set in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_BIN_EXE_taps",
            "OUT_DIR",
        ] {
            assert!(is_set_for_tests(set), "{set}");
        }
        for kept in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "RUSTFLAGS",
            "PATH",
        ] {
            assert!(!is_set_for_tests(kept), "{kept}");
        }
    }
}
