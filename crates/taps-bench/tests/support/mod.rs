//! Binaries of other packages that the tests run: cargo builds only this package's own
//! for its tests, so the others are built here, as the suite's own build built them (a
//! no-op after `cargo test --workspace`).

use std::path::Path;

use taps_testkit::binaries;

/// Builds the workspace binary `bin` ([`binaries::cargo_build`]) in the test's profile
/// (debug, or release for `cargo test --release`), unless the environment variable `env`
/// names the binary to use instead. Panics if the build fails.
pub(crate) fn build_unless_named(bin: &str, env: &str) {
    if std::env::var_os(env).is_some() {
        return;
    }
    let manifest = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml"));
    let mut build = binaries::cargo_build(manifest, &[bin]);
    if !cfg!(debug_assertions) {
        build.arg("--release");
    }
    let status = build.status().expect("run cargo");
    assert!(status.success(), "cargo build --bin {bin}: {status}");
}
