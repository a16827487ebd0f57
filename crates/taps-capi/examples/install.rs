//! Makes the built library loadable under its soname: `libneat.so.1 -> libneat.so`
//! (a relative symlink) next to the `libneat.so` cargo built for the profile this runs
//! in, so C programs link with `-L target/<profile> -lneat` and run with
//! `LD_LIBRARY_PATH=target/<profile>`. The link is relative, so it stays right across
//! rebuilds; run it once per profile:
//!
//! ```sh
//! cargo build --release -p taps-capi
//! cargo run --release -p taps-capi --example install
//! ```

use std::path::PathBuf;

fn main() {
    // target/<profile>/examples/install -> target/<profile>
    let dir: PathBuf = match std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.parent()?.to_path_buf()))
    {
        Some(d) => d,
        None => {
            eprintln!("install: cannot tell the target directory from this program's path");
            std::process::exit(1);
        }
    };
    let lib = dir.join("libneat.so");
    if !lib.exists() {
        eprintln!(
            "install: {} is missing: build it first (cargo build -p taps-capi, with --release for the release profile)",
            lib.display()
        );
        std::process::exit(1);
    }
    let link = dir.join("libneat.so.1");
    match std::fs::read_link(&link) {
        Ok(target) if target == std::path::Path::new("libneat.so") => {}
        _ => {
            let _ = std::fs::remove_file(&link);
            if let Err(e) = std::os::unix::fs::symlink("libneat.so", &link) {
                eprintln!("install: cannot make {}: {e}", link.display());
                std::process::exit(1);
            }
        }
    }
    println!("{} -> libneat.so", link.display());
    println!(
        "link with: cc -I crates/taps-capi/include prog.c -L {} -lneat -luv",
        dir.display()
    );
    println!("run with:  LD_LIBRARY_PATH={} ./a.out", dir.display());
}
