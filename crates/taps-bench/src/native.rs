//! The C programs of the whole-process comparison (`connect-cli`): their sources are
//! part of the crate (`c/`), compiled with the system's `cc` at run time into a
//! temporary directory (removed on drop), so that the comparison needs no build script
//! and runs from any copy of `taps-bench`. `rusage_run` measures a process the way
//! a user's shell would see it: whole-process user + system CPU and peak RSS from
//! `wait4`.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The C epoll client (see `c/epoll_client.c`).
const EPOLL_CLIENT: &str = include_str!("../c/epoll_client.c");
/// The measuring runner (see `c/rusage_run.c`).
const RUSAGE_RUN: &str = include_str!("../c/rusage_run.c");

/// What `rusage_run` measured of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Exit code, or minus the signal that ended it.
    pub(crate) code: i32,
    /// User CPU, microseconds (every thread).
    pub(crate) user_us: u64,
    /// System CPU, microseconds (every thread).
    pub(crate) sys_us: u64,
    /// Peak resident set size (`ru_maxrss`), KiB.
    pub(crate) peak_rss_kib: u64,
    /// Wall time from fork to reaped, microseconds.
    pub(crate) wall_us: u64,
}

/// The compiled C programs in a directory of their own (deleted when dropped).
pub(crate) struct Tools {
    dir: PathBuf,
    /// The C epoll client: `epoll_client HOST PORT FLOWS`.
    pub(crate) client: PathBuf,
    runner: PathBuf,
}

impl Tools {
    /// Writes the sources into a fresh temporary directory and compiles them with `cc
    /// -O2` (about a quarter of a second each); a clear error if there is no compiler.
    pub(crate) fn build() -> Result<Tools, String> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "taps-bench-c-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let tools = Tools {
            client: dir.join("epoll_client"),
            runner: dir.join("rusage_run"),
            dir,
        };
        compile(&tools.dir, "epoll_client", EPOLL_CLIENT)?;
        compile(&tools.dir, "rusage_run", RUSAGE_RUN)?;
        Ok(tools)
    }

    /// Runs `program args` under `rusage_run` (stdout discarded, killed after
    /// `timeout_s`), waits for it and returns what it used, and the last lines of its
    /// stderr. An error only when it could not be measured; a failed program is a
    /// [`Usage::code`] other than 0.
    pub(crate) fn run(
        &self,
        timeout_s: u32,
        program: &Path,
        args: &[String],
    ) -> Result<(Usage, String), String> {
        let out = Command::new(&self.runner)
            .arg(timeout_s.to_string())
            .arg(program)
            .args(args)
            .output()
            .map_err(|e| format!("cannot start {}: {e}", self.runner.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(4).collect();
        let tail = tail.into_iter().rev().collect::<Vec<_>>().join(" / ");
        let usage = stdout
            .lines()
            .find_map(|l| l.strip_prefix("RUSAGE "))
            .and_then(parse_usage)
            .ok_or_else(|| {
                format!(
                    "could not measure {} ({}): {tail}",
                    program.display(),
                    out.status
                )
            })?;
        Ok((usage, tail))
    }
}

impl Drop for Tools {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Compiles `source` into `dir/name`.
fn compile(dir: &Path, name: &str, source: &str) -> Result<(), String> {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).map_err(|e| format!("writing {}: {e}", src.display()))?;
    let out = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(dir.join(name))
        .arg(&src)
        .output()
        .map_err(|e| format!("the C comparison needs a C compiler (`cc`): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cc {name}.c failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// `<code> <user µs> <sys µs> <peak RSS KiB> <wall µs>`.
fn parse_usage(line: &str) -> Option<Usage> {
    let mut w = line.split_whitespace();
    let code = w.next()?.parse().ok()?;
    let mut next = || w.next()?.parse::<u64>().ok();
    Some(Usage {
        code,
        user_us: next()?,
        sys_us: next()?,
        peak_rss_kib: next()?,
        wall_us: next()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_lines_parse_and_bad_ones_do_not() {
        assert_eq!(
            parse_usage("0 10 20 1500 99"),
            Some(Usage {
                code: 0,
                user_us: 10,
                sys_us: 20,
                peak_rss_kib: 1500,
                wall_us: 99
            })
        );
        assert_eq!(parse_usage("-9 1 2 3 4").map(|u| u.code), Some(-9));
        assert_eq!(parse_usage("0 10 20"), None);
        assert_eq!(parse_usage("x 1 2 3 4"), None);
    }

    /// The runner reports a real process's CPU and peak RSS (from wait4), and the
    /// process's own RSS, not the large parent's: `true` stays near libc's size.
    #[test]
    fn the_runner_measures_a_process_and_cleans_up() {
        let tools = Tools::build().expect("cc");
        let dir = tools.dir.clone();
        let (u, _) = tools.run(10, Path::new("true"), &[]).expect("measured");
        assert_eq!(u.code, 0);
        assert!(u.peak_rss_kib > 0 && u.peak_rss_kib < 8 * 1024, "{u:?}");
        let (u, tail) = tools
            .run(10, &tools.client, &["127.0.0.1".into(), "1".into()])
            .expect("measured");
        assert_eq!(u.code, 2, "bad arguments: {tail}");
        assert!(tail.contains("usage"), "{tail}");
        drop(tools);
        assert!(!dir.exists());
    }
}
