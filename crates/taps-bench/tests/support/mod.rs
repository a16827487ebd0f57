//! Binaries of other packages that the tests run: cargo builds only this package's own
//! for its tests, so the others are built here (a no-op when they are up to date, as
//! after a workspace build).

use std::process::Command;

/// `cargo build -p PACKAGE` in this workspace and the test's profile (debug, or release
/// for `cargo test --release`), unless the environment variable `env` names the binary
/// to use instead. Panics if the build fails.
pub(crate) fn build_unless_named(package: &str, env: &str) {
    if std::env::var_os(env).is_some() {
        return;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .args(["build", "--quiet", "-p", package, "--manifest-path"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml"));
    if !cfg!(debug_assertions) {
        build.arg("--release");
    }
    let status = build.status().expect("run cargo");
    assert!(status.success(), "cargo build -p {package}: {status}");
}
