//! `scripts/install-neat.sh` installs libneat as a C library: run twice into a fresh
//! temporary prefix with the library under test (`--prebuilt` target/debug/deps, so the
//! test builds nothing and cannot wait on cargo's build lock), then `pkg-config` finds
//! `neat`, a C program compiles with `cc prog.c $(pkg-config --cflags --libs neat)` and
//! starts through the installed `libneat.so.1` link alone, and the same program links
//! statically against `libneat.a` with what `pkg-config --static` gives.
//!
//! Needs cc, pkg-config, readelf (binutils) and libuv1-dev (scripts/deps.sh installs
//! them); without them the test says "SKIPPED" (taps_testkit::skip) and returns.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The tiny NEAT program: a context, its uv loop, freed again.
const PROG: &str = r#"#include <stdio.h>
#include <neat.h>

int main(void)
{
    struct neat_ctx *ctx = neat_init_ctx();
    if (ctx == NULL) {
        fprintf(stderr, "neat_init_ctx failed\n");
        return 1;
    }
    uv_loop_t *loop = neat_get_event_loop(ctx);
    printf("neat context up, uv loop %s\n", loop != NULL ? "present" : "missing");
    neat_free_ctx(ctx);
    return loop != NULL ? 0 : 1;
}
"#;
const PROG_SAYS: &str = "neat context up, uv loop present\n";

/// Removes the scratch directory (a debug libneat.a is over 100 MB) however the test ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Why the test cannot run here, if it cannot.
fn missing_tool() -> Option<String> {
    for (tool, arg) in [("cc", "--version"), ("pkg-config", "--version")] {
        if Command::new(tool).arg(arg).output().is_err() {
            return Some(format!("{tool} is not installed (scripts/deps.sh)"));
        }
    }
    if Command::new("readelf").arg("--version").output().is_err() {
        return Some("readelf is not installed (binutils)".into());
    }
    let uv = Command::new("pkg-config")
        .args(["--exists", "libuv"])
        .status();
    if !uv.is_ok_and(|s| s.success()) {
        return Some("libuv1-dev (libuv.pc) is not installed (scripts/deps.sh)".into());
    }
    None
}

/// Runs `cmd` and fails the test, showing its output, unless it succeeds.
fn ok(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({})\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `readelf -d`'s NEEDED entries of `file`.
fn needed(file: &Path) -> Vec<String> {
    let out = ok(Command::new("readelf").arg("-d").arg(file));
    text(&out)
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| Some(l.split_once('[')?.1.split_once(']')?.0.to_string()))
        .collect()
}

/// `pkg-config ARGS neat` with only our prefix added to its search path.
fn pkg_config(pc_dir: &Path, args: &[&str]) -> String {
    let out = ok(Command::new("pkg-config")
        .args(args)
        .arg("neat")
        .env("PKG_CONFIG_PATH", pc_dir));
    text(&out).trim().to_string()
}

#[test]
fn installs_into_a_fresh_prefix_for_pkg_config_cc_and_the_soname() {
    if let Some(why) = missing_tool() {
        taps_testkit::skip(module_path!(), &why);
        return;
    }
    // target/debug/deps/install-...: cargo built this crate's libneat.so and libneat.a
    // there for the tests (as tests/c_programs.rs uses them).
    let exe = std::env::current_exe().expect("current exe");
    let built = exe.parent().expect("deps dir").to_path_buf();
    for f in ["libneat.so", "libneat.a"] {
        assert!(
            built.join(f).exists(),
            "{} was not built",
            built.join(f).display()
        );
    }
    let scratch =
        Scratch(std::env::temp_dir().join(format!("taps-capi-install-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&scratch.0);
    std::fs::create_dir_all(&scratch.0).expect("scratch dir");
    let work = scratch.0.clone();
    let prefix = work.join("prefix");
    let lib = prefix.join("lib");
    let pc_dir = lib.join("pkgconfig");

    // Install twice: the second run must replace everything in place, without errors.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-neat.sh");
    for _ in 0..2 {
        ok(Command::new("bash")
            .arg(&script)
            .arg("--prefix")
            .arg(&prefix)
            .arg("--prebuilt")
            .arg(&built)
            .env_remove("DESTDIR"));
    }

    // The files and links: libneat.so.1.<crate minor>.<crate patch>.
    let mut v = env!("CARGO_PKG_VERSION").split(['.', '-', '+']);
    let (_, minor, patch) = (v.next(), v.next().unwrap(), v.next().unwrap());
    let version = format!("1.{minor}.{patch}");
    let real = format!("libneat.so.{version}");
    let meta = std::fs::symlink_metadata(lib.join(&real)).expect("the real library");
    assert!(meta.file_type().is_file(), "{real} is not a regular file");
    for (link, to) in [
        ("libneat.so.1", real.as_str()),
        ("libneat.so", "libneat.so.1"),
    ] {
        let target = std::fs::read_link(lib.join(link)).expect(link);
        assert_eq!(
            target,
            Path::new(to),
            "{link} points to {}",
            target.display()
        );
    }
    assert!(lib.join("libneat.a").is_file());
    assert!(prefix.join("include/neat.h").is_file());
    let names: Vec<_> = std::fs::read_dir(&lib)
        .expect("lib dir")
        .map(|e| e.expect("entry").file_name().into_string().expect("name"))
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with('.')),
        "leftover temporary files: {names:?}"
    );

    // pkg-config.
    assert_eq!(pkg_config(&pc_dir, &["--modversion"]), version);
    let flags = pkg_config(&pc_dir, &["--cflags", "--libs"]);
    for want in [
        format!("-I{}", prefix.join("include").display()),
        format!("-L{}", lib.display()),
        "-lneat".to_string(),
        "-luv".to_string(),
    ] {
        assert!(
            flags.split_whitespace().any(|f| f == want),
            "`pkg-config --cflags --libs neat` gave {flags:?}, without {want}"
        );
    }

    // The documented command, through a shell.
    std::fs::write(work.join("prog.c"), PROG).expect("prog.c");
    ok(Command::new("sh")
        .arg("-c")
        .arg("cc -Wall -Werror prog.c $(pkg-config --cflags --libs neat) -o prog")
        .current_dir(&work)
        .env("PKG_CONFIG_PATH", &pc_dir));
    assert!(
        needed(&work.join("prog")).contains(&"libneat.so.1".to_string()),
        "prog does not load libneat.so.1"
    );
    // It starts from the prefix alone (cargo's LD_LIBRARY_PATH replaced) ...
    let run = |ld_path: &Path| {
        Command::new(work.join("prog"))
            .env("LD_LIBRARY_PATH", ld_path)
            .output()
            .expect("run prog")
    };
    let out = run(&lib);
    assert!(
        out.status.success(),
        "prog failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text(&out), PROG_SAYS);
    // ... and it is the soname link that makes it start.
    let aside = work.join("libneat.so.1.aside");
    std::fs::rename(lib.join("libneat.so.1"), &aside).expect("move the link");
    let out = run(&lib);
    std::fs::rename(&aside, lib.join("libneat.so.1")).expect("restore the link");
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("libneat.so.1"),
        "prog ran without libneat.so.1: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Statically: `pkg-config --static --libs neat` with libneat.a in place of -lneat
    // (-lneat alone picks the shared library next to it).
    let static_libs = pkg_config(&pc_dir, &["--static", "--libs"]);
    let cflags = pkg_config(&pc_dir, &["--cflags"]);
    ok(Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Werror"])
        .args(cflags.split_whitespace())
        .arg(work.join("prog.c"))
        .args(
            static_libs
                .split_whitespace()
                .map(|f| if f == "-lneat" { "-l:libneat.a" } else { f }),
        )
        .arg("-o")
        .arg(work.join("prog_static")));
    let deps = needed(&work.join("prog_static"));
    assert!(
        deps.iter().all(|n| !n.starts_with("libneat")),
        "prog_static still loads {deps:?}"
    );
    let out = ok(Command::new(work.join("prog_static")).env_remove("LD_LIBRARY_PATH"));
    assert_eq!(text(&out), PROG_SAYS);
}
