//! The netlab scenario suite (needs root, /dev/net/tun and iproute2; skipped with a
//! message otherwise). Runs every scenario in its own lab, one at a time (they measure
//! time), each under a time bound; then checks the binary (`netlab run rx` twice with one
//! CIB, teardown on SIGINT), teardown on panic, and finally that nothing was left behind.
//!
//! A custom harness (`harness = false`): sequential by construction, with a last check
//! after everything else. It prints libtest's summary line, so CI counts it. Arguments
//! that are not flags filter tests by substring, e.g. `cargo test -p netlab --test
//! scenarios -- rx`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use netlab::scenario::{self, RunOptions};
use taps_testkit::binaries;

/// Every test's time bound; the loss transfers (`loss` over TCP, `sctp-loss` over SCTP)
/// get more.
const DEFAULT_LIMIT: Duration = Duration::from_secs(60);
const LOSS_LIMIT: Duration = Duration::from_secs(400);
const LOSS_SCENARIOS: &[&str] = &["loss", "sctp-loss"];
/// What each transfer of the loss scenarios sends here: at 2 % loss each way dozens of
/// packets are still lost and resent in both directions (each transfer checks that),
/// which is what the suite needs; the 10 MiB figures (three minutes of transfers in
/// `sctp-loss`) are `taps bench lab`'s.
const SUITE_LOSS_TRANSFER: u64 = 2 * 1024 * 1024;

type TestFn = Box<dyn FnOnce() -> Result<(), String> + Send>;

struct Test {
    name: String,
    limit: Duration,
    needs_taps: bool,
    run: TestFn,
}

fn main() {
    // The labs run their SCTP server with this package's netlab binary (built by cargo
    // for integration tests), not whatever the search in `netlab_binary` finds.
    if std::env::var_os(netlab::sctp_server::NETLAB_ENV).is_none() {
        std::env::set_var(
            netlab::sctp_server::NETLAB_ENV,
            env!("CARGO_BIN_EXE_netlab"),
        );
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let tests = all_tests();
    if args.iter().any(|a| a == "--list") {
        for t in &tests {
            println!("{}: test", t.name);
        }
        return;
    }
    let selected: Vec<Test> = tests
        .into_iter()
        .filter(|t| filters.is_empty() || filters.iter().any(|f| t.name.contains(f.as_str())))
        .collect();
    let filtered_out = scenario::all().len() + 4 - selected.len();
    println!("\nrunning {} tests", selected.len());
    if let Some(why) = netlab::unsupported_reason() {
        println!("netlab scenarios SKIPPED: {why} (run the suite as root on Linux with /dev/net/tun and iproute2)");
        for t in &selected {
            println!("test {} ... ignored, {why}", t.name);
        }
        println!(
            "\ntest result: ok. 0 passed; 0 failed; {} ignored; 0 measured; {filtered_out} filtered out; finished in 0.00s\n",
            selected.len()
        );
        return;
    }
    let started = Instant::now();
    let taps = if selected.iter().any(|t| t.needs_taps) {
        Some(ensure_taps())
    } else {
        None
    };
    let http_get = if selected.iter().any(|t| t.name.contains("http")) {
        Some(ensure_http_get())
    } else {
        None
    };
    let (mut passed, mut failed) = (0, Vec::new());
    for t in selected {
        let begun = Instant::now();
        let result = match (&taps, t.needs_taps) {
            (Some(Err(e)), true) => Err(format!("cannot run: {e}")),
            _ if t.name.contains("http") && matches!(&http_get, Some(Err(_))) => {
                let e = http_get.as_ref().and_then(|r| r.as_ref().err());
                Err(format!("cannot run: {}", e.map_or("", String::as_str)))
            }
            _ => run_bounded(t.name.clone(), t.limit, t.run),
        };
        match result {
            Ok(()) => {
                // The time taken is printed so that the slowest labs stand out in CI logs.
                println!(
                    "test {} ... ok ({:.1} s)",
                    t.name,
                    begun.elapsed().as_secs_f64()
                );
                passed += 1;
            }
            Err(e) => {
                println!("test {} ... FAILED\n  {}", t.name, e.replace('\n', "\n  "));
                failed.push(t.name);
            }
        }
    }
    if !failed.is_empty() {
        println!("\nfailures:");
        for f in &failed {
            println!("    {f}");
        }
    }
    println!(
        "\ntest result: {}. {passed} passed; {} failed; 0 ignored; 0 measured; {filtered_out} filtered out; finished in {:.2}s\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        std::process::exit(101);
    }
}

fn all_tests() -> Vec<Test> {
    let mut tests: Vec<Test> = scenario::all()
        .iter()
        .map(|s| Test {
            name: format!("scenario_{}", s.name.replace('-', "_")),
            limit: if LOSS_SCENARIOS.contains(&s.name) {
                LOSS_LIMIT
            } else {
                DEFAULT_LIMIT
            },
            needs_taps: s.needs_taps,
            run: Box::new(move || run_scenario(s.name)),
        })
        .collect();
    tests.push(Test {
        name: "cli_run_rx_twice_in_one_cib_lifetime".into(),
        limit: DEFAULT_LIMIT,
        needs_taps: true,
        run: Box::new(cli_rx_twice),
    });
    tests.push(Test {
        name: "cli_up_tears_down_on_sigint".into(),
        limit: DEFAULT_LIMIT,
        needs_taps: false,
        run: Box::new(cli_sigint),
    });
    tests.push(Test {
        name: "panic_tears_down".into(),
        limit: DEFAULT_LIMIT,
        needs_taps: false,
        run: Box::new(panic_tears_down),
    });
    tests.push(Test {
        name: "suite_leaves_nothing_behind".into(),
        limit: DEFAULT_LIMIT,
        needs_taps: false,
        run: Box::new(nothing_left),
    });
    tests
}

/// Runs `f` on a thread; fails if it panics or takes longer than `limit` (then tears
/// down every lab of this process and exits: a stuck test must not hang CI).
fn run_bounded(name: String, limit: Duration, f: TestFn) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                .unwrap_or_else(|_| Err("panicked".into()));
            let _ = tx.send(r);
        })
        .expect("spawn a test thread");
    match rx.recv_timeout(limit) {
        Ok(r) => r,
        Err(_) => {
            println!("test {name} ... FAILED: still running after {limit:?}; tearing down and stopping the suite");
            for p in netlab::teardown_all() {
                println!("  teardown: {p}");
            }
            println!("\ntest result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out\n");
            std::process::exit(101);
        }
    }
}

/// Builds the taps CLI (with the `http_get` example: one build, the suite's features)
/// unless `NETLAB_TAPS` names a binary; returns where it is.
fn ensure_taps() -> Result<PathBuf, String> {
    if std::env::var_os(netlab::taps::TAPS_ENV).is_none() {
        build_taps()?;
    }
    netlab::taps::taps_binary()
}

/// Builds taps' `http_get` example (the `http-rx` scenario's client) unless
/// `NETLAB_HTTP_GET` names a binary; returns where it is.
fn ensure_http_get() -> Result<PathBuf, String> {
    if std::env::var_os(scenario::HTTP_GET_ENV).is_none() {
        build_taps()?;
    }
    scenario::http_get_binary()
}

/// Builds the taps CLI and the `http_get` example as the suite's own build did
/// ([`binaries::cargo_build`]: nothing to compile after it), within 10 minutes; once per
/// run (both binaries come from the one build).
fn build_taps() -> Result<(), String> {
    static BUILT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_taps_once).clone()
}

fn build_taps_once() -> Result<(), String> {
    let what = "--workspace --bin taps --example http_get";
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    println!("building (cargo build {what}) ...");
    let mut child = binaries::cargo_build(&manifest, &["taps"])
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            if !status.success() {
                return Err(format!("cargo build {what} failed ({status})"));
            }
            return Ok(());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("cargo build {what} took over 10 minutes"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn run_scenario(name: &str) -> Result<(), String> {
    let opts = RunOptions {
        echo: true,
        loss_transfer: LOSS_SCENARIOS
            .contains(&name)
            .then_some(SUITE_LOSS_TRANSFER),
        ..RunOptions::default()
    };
    let out = scenario::run(name, &opts)?;
    if out.passed() {
        Ok(())
    } else {
        Err(out.failures().join("\n"))
    }
}

fn netlab_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_netlab"))
}

/// Namespaces whose names start with `nl<pid>-`.
fn namespaces_of(pid: u32) -> Vec<String> {
    let prefix = format!("nl{pid}-");
    std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// `netlab run rx --cib FILE` twice: the first invocation's first connection comes one RTT
/// after the attempt delay, the second's (what the first learned: the dead IPv6 address
/// skipped) one RTT after its start. Each bound is where one more RTT would end, so the
/// load of a busy machine (a process of its own, in a debug build) stays inside it, and
/// waiting for another attempt delay or RTT does not.
fn cli_rx_twice() -> Result<(), String> {
    let cib = std::env::temp_dir().join(format!("netlab-test-{}-rx.cib.json", std::process::id()));
    let _ = std::fs::remove_file(&cib);
    let mut firsts = Vec::new();
    for run in 1..=2 {
        let child = Command::new(netlab_bin())
            .args(["run", "rx", "--cib"])
            .arg(&cib)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let pid = child.id();
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        println!(
            "--- netlab run rx --cib {} (invocation {run})",
            cib.display()
        );
        print!("{stdout}");
        let left = namespaces_of(pid);
        if !left.is_empty() {
            return Err(format!("netlab left namespaces behind: {left:?}"));
        }
        let first = stdout
            .lines()
            .find(|l| l.trim_start().starts_with("#1: connected"))
            .and_then(|l| l.split(" in ").nth(1))
            .and_then(|t| t.split_whitespace().next())
            .and_then(|t| t.parse::<f64>().ok())
            .ok_or_else(|| {
                format!(
                    "invocation {run}: no time to connect printed; stderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })?;
        firsts.push(first);
    }
    let _ = std::fs::remove_file(&cib);
    // The `rx` scenario's attempt delay (250 ms) and RTT (50 ms): the first connection
    // within the attempt delay + 1 RTT, the second within 1 RTT, each before one more.
    let (first_bound, second_bound) = (250.0 + 2.0 * 50.0, 2.0 * 50.0);
    if firsts[0] >= first_bound {
        return Err(format!(
            "first invocation connected in {:.1} ms, not before attempt delay + 2 RTT = {first_bound} ms",
            firsts[0]
        ));
    }
    if firsts[1] >= second_bound {
        return Err(format!(
            "second invocation (same CIB) connected in {:.1} ms, not before 2 RTT = {second_bound} ms: the dead IPv6 address was not skipped",
            firsts[1]
        ));
    }
    println!(
        "first invocation {:.1} ms (< {first_bound} ms), second {:.1} ms (< {second_bound} ms)",
        firsts[0], firsts[1]
    );
    Ok(())
}

/// `netlab up` then SIGINT: exits 130 and leaves no namespace or marker.
fn cli_sigint() -> Result<(), String> {
    let mut child = Command::new(netlab_bin())
        .args(["up", "--rule", "host=192.0.2.11,rtt=20ms"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let pid = child.id();
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains("Ctrl-C") {
                let _ = tx.send(());
            }
        }
    });
    let ready = rx.recv_timeout(Duration::from_secs(20)).is_ok();
    let during = namespaces_of(pid);
    // SAFETY: signals our own child, which has not been reaped.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGINT)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let after = namespaces_of(pid);
    let markers: Vec<String> = std::fs::read_dir(netlab::netns::MARKER_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("nl{pid}-")))
        .collect();
    println!("netlab up (pid {pid}): namespaces while up {during:?}; after SIGINT {after:?}; exit {status:?}");
    if !ready || during.len() != 2 {
        return Err(format!(
            "netlab up did not come up with two namespaces (ready {ready}, {during:?})"
        ));
    }
    if status.and_then(|s| s.code()) != Some(130) {
        return Err(format!(
            "netlab up did not exit with 130 on SIGINT: {status:?}"
        ));
    }
    if !after.is_empty() || !markers.is_empty() {
        return Err(format!("left behind after SIGINT: {after:?} {markers:?}"));
    }
    Ok(())
}

/// A panic on the thread that owns a lab removes the lab.
fn panic_tears_down() -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    let joined = std::thread::spawn(move || {
        let lab = netlab::Lab::start(netlab::LabOptions::default()).expect("lab");
        let names = vec![
            lab.client().name().to_string(),
            lab.server().name().to_string(),
        ];
        tx.send(names).expect("send");
        // The panic hook tears the lab down first; unwinding then drops it (a no-op).
        let _keep = &lab;
        panic!("deliberate panic to test teardown");
    })
    .join();
    let names = rx.recv().map_err(|e| e.to_string())?;
    if joined.is_ok() {
        return Err("the thread did not panic".into());
    }
    let left: Vec<&String> = names
        .iter()
        .filter(|n| std::path::Path::new("/run/netns").join(n).exists())
        .collect();
    println!("panic teardown: lab {names:?}; left {left:?}");
    if left.is_empty() {
        Ok(())
    } else {
        Err(format!("left behind after a panic: {left:?}"))
    }
}

/// Nothing of this process is left: no namespace, marker file, registered or other child
/// process, or open TUN device.
fn nothing_left() -> Result<(), String> {
    let mut left: Vec<String> = netlab::leftovers();
    let me = std::process::id();
    // Child processes of this test binary still running (or unreaped).
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(status) = std::fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        let ppid = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|p| p.trim().parse::<u32>().ok());
        if ppid == Some(me) {
            let name = status.lines().next().unwrap_or("").to_string();
            left.push(format!(
                "child process {} ({name})",
                e.file_name().to_string_lossy()
            ));
        }
    }
    if left.is_empty() {
        println!("nothing left behind: no namespace, marker file, TUN device or child process of pid {me}");
        Ok(())
    } else {
        Err(format!("left behind: {}", left.join(", ")))
    }
}
