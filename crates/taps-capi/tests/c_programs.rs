//! Our own C programs (tests/c/*.c), compiled with `cc` against include/neat.h and the
//! libneat.so this crate builds, run on loopback with bounded timeouts.
//!
//! Needs `cc`, libuv1-dev (scripts/deps.sh installs them). Without them each test says
//! "SKIPPED" (taps_testkit::skip; a failure as root in CI) and returns. The tests run one
//! at a time (one lock): servers use fixed loopback ports and SCTP's UDP port.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

const TCP: &str = r#"{"transport":{"value":"TCP","precedence":2}}"#;
const UDP: &str = r#"{"transport":{"value":"UDP","precedence":2}}"#;
const SCTP: &str = r#"{"transport":{"value":"SCTP","precedence":2}}"#;

static SERIAL: Mutex<()> = Mutex::new(());

/// The directory with the libneat.so under test (target/debug/deps) and our scratch directory with the
/// soname link and the compiled programs; None (with a reason) when cc or uv is missing.
fn setup() -> Result<&'static (PathBuf, PathBuf), String> {
    static DIRS: OnceLock<Result<(PathBuf, PathBuf), String>> = OnceLock::new();
    DIRS.get_or_init(|| {
        if !Path::new("/usr/include/uv.h").exists() {
            return Err("libuv1-dev is not installed (scripts/deps.sh)".into());
        }
        if Command::new("cc").arg("--version").output().is_err() {
            return Err("no C compiler (cc)".into());
        }
        // target/debug/deps/c_programs-...: cargo builds this crate's library (all its
        // crate types, as it has an rlib) into the same deps directory for the tests, so
        // the C programs run against the code under test, never a stale target/debug
        // copy.
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let lib_dir = exe.parent().ok_or("no target dir")?.to_path_buf();
        let so = lib_dir.join("libneat.so");
        if !so.exists() {
            return Err(format!("{} was not built", so.display()));
        }
        let work = std::env::temp_dir().join(format!("taps-capi-c-{}", std::process::id()));
        std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;
        let link = work.join("libneat.so.1");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&so, &link).map_err(|e| e.to_string())?;
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
        let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
        for prog in ["layout", "server", "client", "close_everywhere", "chunks"] {
            let out = Command::new("cc")
                .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I"])
                .arg(&include)
                .arg(src.join(format!("{prog}.c")))
                .arg("-o")
                .arg(work.join(prog))
                .arg("-L")
                .arg(&lib_dir)
                .args(["-lneat", "-luv"])
                .output()
                .map_err(|e| e.to_string())?;
            assert!(
                out.status.success(),
                "cc {prog}.c failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok((lib_dir, work))
    })
    .as_ref()
    .map_err(Clone::clone)
}

macro_rules! need {
    () => {
        match setup() {
            Ok((_, work)) => (
                work.clone(),
                SERIAL.lock().unwrap_or_else(|e| e.into_inner()),
            ),
            Err(why) => {
                taps_testkit::skip(module_path!(), &why);
                return;
            }
        }
    };
}

/// The scratch directory (after [`need!`] checked that it exists).
fn work_dir() -> PathBuf {
    setup().expect("set up").1.clone()
}

fn command(work: &Path, prog: &str, args: &[&str]) -> Command {
    let mut c = Command::new(work.join(prog));
    c.args(args).env("LD_LIBRARY_PATH", work);
    c
}

/// Runs a program to its end within `limit`; kills it and fails if it takes longer.
fn run(work: &Path, prog: &str, args: &[&str], limit: Duration) -> Output {
    let mut child = command(work, prog, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "{prog} {args:?} ran over {limit:?}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A server in the background, killed when dropped; waits for its "listening" line.
struct Server(Child);

impl Server {
    fn start(work: &Path, args: &[&str]) -> Server {
        let mut child = command(work, "server", args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let mut out = child.stdout.take().expect("stdout");
        let mut seen = Vec::new();
        let mut byte = [0u8; 1];
        while !String::from_utf8_lossy(&seen).contains("listening\n") {
            assert_eq!(
                out.read(&mut byte).expect("server stdout"),
                1,
                "server ended early"
            );
            seen.push(byte[0]);
        }
        child.stdout = Some(out);
        Server(child)
    }

    /// Stops the server and returns what it printed after "listening".
    fn finish(mut self) -> String {
        let _ = self.0.kill();
        let mut s = String::new();
        if let Some(mut o) = self.0.stdout.take() {
            let _ = o.read_to_string(&mut s);
        }
        let _ = self.0.wait();
        s
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn layout_constants_and_bad_arguments() {
    let (work, _l) = need!();
    let out = run(&work, "layout", &[], Duration::from_secs(10));
    assert!(ok(&out).contains("layout ok"));
}

fn echo(work: &Path, port: &str, props: &str) {
    let server = Server::start(work, &["echo", port, props]);
    let out = run(
        work,
        "client",
        &["echo", "127.0.0.1", port, props, "20"],
        Duration::from_secs(20),
    );
    assert!(ok(&out).contains("echo ok: 20 messages"));
    drop(server);
}

#[test]
fn echo_over_tcp() {
    let (work, _l) = need!();
    echo(&work, "27101", TCP);
}

#[test]
fn echo_over_sctp_two_processes() {
    let (work, _l) = need!();
    echo(&work, "27102", SCTP);
}

#[test]
fn udp_peer_exchange() {
    let (work, _l) = need!();
    echo(&work, "27103", UDP);
}

#[test]
fn discard_server_fed_10_mb() {
    let (work, _l) = need!();
    let server = Server::start(&work, &["discard", "27104", TCP]);
    let out = run(
        &work,
        "client",
        &["feed", "127.0.0.1", "27104", TCP, "10485760"],
        Duration::from_secs(30),
    );
    ok(&out);
    // The server prints its total at on_close (end of stream), right after the client's
    // close; give it a moment.
    std::thread::sleep(Duration::from_millis(500));
    let printed = server.finish();
    assert!(
        printed.contains("discarded 10485760"),
        "server printed: {printed}"
    );
}

/// NEAT's client_data pattern (1000-byte chunks from on_writable, close in
/// on_all_written, exit right after): every byte reaches the discard server, also when
/// the stack (SCTP over UDP, usrsctp) lives inside the client's process, which must
/// finish its close before exit.
fn chunks_then_exit(port: &str, props: &str) {
    let server = Server::start(&work_dir(), &["discard", port, props]);
    for _ in 0..3 {
        let out = run(
            &work_dir(),
            "chunks",
            &["127.0.0.1", port, props, "100"],
            Duration::from_secs(20),
        );
        assert!(ok(&out).contains("chunks written: 0 left"));
    }
    std::thread::sleep(Duration::from_millis(500));
    let printed = server.finish();
    assert_eq!(
        printed.matches("discarded 100000\n").count(),
        3,
        "server printed: {printed}"
    );
}

#[test]
fn chunks_then_exit_over_sctp() {
    let (_work, _l) = need!();
    chunks_then_exit("27109", SCTP);
}

#[test]
fn chunks_then_exit_over_tcp() {
    let (_work, _l) = need!();
    chunks_then_exit("27110", TCP);
}

/// TLS over TCP, as NEAT's server_http and TLS echo do it: the listener has the
/// `security` property and one PEM file with certificate and key
/// (neat_secure_identity, NEAT_CERT_KEY_PEM). Clients verify the certificate by default
/// (this CA is not in the system's store, so that fails with on_error), and
/// NEAT's `"verification": {"value": false}` turns that off.
#[test]
fn tls_echo_with_secure_identity() {
    let (work, _l) = need!();
    let pki = taps_testkit::TestPki::new(&["localhost"]).expect("test PKI");
    let pem = pki.dir().join("cert-and-key.pem");
    let both = [
        std::fs::read_to_string(&pki.cert).expect("cert"),
        std::fs::read_to_string(&pki.key).expect("key"),
    ]
    .concat();
    std::fs::write(&pem, both).expect("write PEM");
    let secure =
        r#"{"transport":{"value":"TCP","precedence":2},"security":{"value":true,"precedence":2}}"#;
    let no_verify = r#"{"transport":{"value":"TCP","precedence":2},"security":{"value":true,"precedence":2},"verification":{"value":false}}"#;
    let server = Server::start(
        &work,
        &["echo", "27111", secure, pem.to_str().expect("path")],
    );
    let out = run(
        &work,
        "client",
        &["echo", "localhost", "27111", no_verify, "5"],
        Duration::from_secs(20),
    );
    assert!(ok(&out).contains("echo ok: 5 messages"));
    let out = run(
        &work,
        "client",
        &["echo", "localhost", "27111", secure, "5"],
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("rejected"),
        "{}",
        text(&out.stderr)
    );
    drop(server);
}

#[test]
fn daytime_server_closes_first() {
    let (work, _l) = need!();
    let server = Server::start(&work, &["daytime", "27105", TCP]);
    let out = run(
        &work,
        "client",
        &["daytime", "127.0.0.1", "27105", TCP],
        Duration::from_secs(15),
    );
    let printed = ok(&out);
    assert!(
        printed.contains(':') && printed.contains("flow closed OK!"),
        "{printed}"
    );
    drop(server);
}

#[test]
fn run_once_with_backend_fd() {
    let (work, _l) = need!();
    let server = Server::start(&work, &["echo", "27106", TCP]);
    let out = run(
        &work,
        "client",
        &["runonce", "127.0.0.1", "27106", TCP, "5"],
        Duration::from_secs(15),
    );
    let printed = ok(&out);
    assert!(
        printed.contains("echo ok: 5 messages") && printed.contains("run once:"),
        "{printed}"
    );
    drop(server);
}

#[test]
fn unresolvable_name_reports_on_error() {
    let (work, _l) = need!();
    let start = Instant::now();
    let out = run(
        &work,
        "client",
        &["echo", "not.resolvable.invalid", "80", ""],
        Duration::from_secs(15),
    );
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("on_error 4"),
        "{}",
        text(&out.stderr)
    );
    eprintln!("on_error after {:?}", start.elapsed());
}

#[test]
fn close_from_every_callback_and_twice() {
    let (work, _l) = need!();
    let out = run(
        &work,
        "close_everywhere",
        &["27107"],
        Duration::from_secs(20),
    );
    let printed = ok(&out);
    assert_eq!(printed.matches("ran 1 time(s)").count(), 5, "{printed}");
}

#[test]
fn tneat_style_256_flows() {
    let (work, _l) = need!();
    let server = Server::start(&work, &["discard", "27108", TCP]);
    let start = Instant::now();
    let out = run(
        &work,
        "client",
        &["flows", "127.0.0.1", "27108", TCP, "256"],
        Duration::from_secs(30),
    );
    assert!(ok(&out).contains("flows ok: 256 closed"));
    eprintln!("256 flows in {:?}", start.elapsed());
    std::thread::sleep(Duration::from_millis(300));
    let printed = server.finish();
    assert_eq!(printed.matches("discarded 1\n").count(), 256, "{printed}");
}
