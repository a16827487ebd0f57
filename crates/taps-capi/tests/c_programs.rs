//! Our own C programs (tests/c/*.c), compiled with `cc` against include/neat.h and the
//! libneat.so this crate builds, run on loopback with bounded timeouts.
//!
//! Needs `cc`, libuv1-dev (scripts/deps.sh installs them). Without them each test says
//! "SKIPPED" (taps_testkit::skip; a failure as root in CI) and returns. The tests run one
//! at a time (one lock): servers listen on ports found free, and SCTP travels in a UDP
//! port found free once for this binary (`TAPS_SCTP_UDP_PORT`), so no fixed port is used.

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
    c.args(args)
        .env("LD_LIBRARY_PATH", work)
        .env("TAPS_SCTP_UDP_PORT", sctp_udp_port());
    c
}

/// The UDP port SCTP travels in for this test binary's programs (the library's
/// `TAPS_SCTP_UDP_PORT`): one found free, not SCTP's usual 9899, which any other program
/// on the host may hold.
fn sctp_udp_port() -> &'static str {
    static PORT: OnceLock<String> = OnceLock::new();
    PORT.get_or_init(|| {
        let s = std::net::UdpSocket::bind("0.0.0.0:0").expect("bind UDP");
        s.local_addr().expect("addr").port().to_string()
    })
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

/// A port free on every address for TCP and UDP when asked (the servers listen on
/// both, and on SCTP inside the context's UDP port).
fn free_port() -> String {
    loop {
        let tcp = std::net::TcpListener::bind("0.0.0.0:0").expect("bind TCP");
        let port = tcp.local_addr().expect("addr").port();
        if std::net::UdpSocket::bind(("0.0.0.0", port)).is_ok() {
            return port.to_string();
        }
    }
}

/// A program in the background, killed when dropped; its stdout is collected as it
/// comes.
struct Bg {
    child: Child,
    out: std::sync::Arc<Mutex<String>>,
}

impl Bg {
    fn spawn(work: &Path, prog: &str, args: &[&str]) -> Bg {
        let mut child = command(work, prog, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let out = std::sync::Arc::new(Mutex::new(String::new()));
        let mut stdout = child.stdout.take().expect("stdout");
        let sink = out.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let more = String::from_utf8_lossy(&buf[..n]).into_owned();
                sink.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push_str(&more);
            }
        });
        Bg { child, out }
    }

    /// What it printed so far.
    fn output(&self) -> String {
        self.out.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until it printed `needle` `count` times; fails after `limit` or when it
    /// exited without.
    fn wait_for(&mut self, needle: &str, count: usize, limit: Duration) -> String {
        let start = Instant::now();
        loop {
            let printed = self.output();
            if printed.matches(needle).count() >= count {
                return printed;
            }
            let exited = self.child.try_wait().expect("wait").is_some();
            if exited || start.elapsed() > limit {
                // Whatever the reader thread had not collected yet.
                std::thread::sleep(Duration::from_millis(50));
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    if exited {
                        let _ = e.read_to_string(&mut err);
                    }
                }
                panic!(
                    "waited {:?} for {count} x {needle:?} (exited: {exited})\nstdout: {}\nstderr: {err}",
                    start.elapsed(),
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A test server in the background (tests/c/server.c), ready once it printed
/// "listening".
fn server(work: &Path, args: &[&str]) -> Bg {
    let mut s = Bg::spawn(work, "server", args);
    s.wait_for("listening\n", 1, Duration::from_secs(20));
    s
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

fn echo(work: &Path, props: &str) {
    let port = &free_port();
    let server = server(work, &["echo", port, props]);
    let out = client(work, &["echo", "127.0.0.1", port, props, "20"], 20);
    assert!(ok(&out).contains("echo ok: 20 messages"));
    drop(server);
}

#[test]
fn echo_over_tcp() {
    let (work, _l) = need!();
    echo(&work, TCP);
}

#[test]
fn echo_over_sctp_two_processes() {
    let (work, _l) = need!();
    echo(&work, SCTP);
}

#[test]
fn udp_peer_exchange() {
    let (work, _l) = need!();
    echo(&work, UDP);
}

/// Runs the client program with `args`, killed after `secs` seconds.
fn client(work: &Path, args: &[&str], secs: u64) -> std::process::Output {
    run(work, "client", args, Duration::from_secs(secs))
}

/// The program exited `code` with `needle` in its stderr.
fn failed_with(out: &std::process::Output, code: i32, needle: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert!(err.contains(needle), "{err}");
}

/// Runs the discard server with `props` and the client's `mode` sending `bytes`; what
/// the server printed up to its total (printed at on_close, the end of stream) must
/// contain `expected`.
fn discard(work: &Path, props: &str, mode: &str, bytes: &str, expected: &str) {
    let port = &free_port();
    let mut server = server(work, &["discard", port, props]);
    let out = client(work, &[mode, "127.0.0.1", port, props, bytes], 30);
    ok(&out);
    let printed = server.wait_for("discarded", 1, Duration::from_secs(20));
    assert!(printed.contains(expected), "server printed: {printed}");
}

#[test]
fn discard_server_fed_10_mb() {
    let (work, _l) = need!();
    discard(&work, TCP, "feed", "10485760", "discarded 10485760");
}

/// NEAT's client_data pattern (1000-byte chunks from on_writable, close in
/// on_all_written, exit right after): every byte reaches the discard server, also when
/// the stack (SCTP over UDP, usrsctp) lives inside the client's process, which must
/// finish its close before exit.
fn chunks_then_exit(props: &str) {
    let port = &free_port();
    let mut server = server(&work_dir(), &["discard", port, props]);
    for _ in 0..3 {
        let out = run(
            &work_dir(),
            "chunks",
            &["127.0.0.1", port, props, "100"],
            Duration::from_secs(20),
        );
        assert!(ok(&out).contains("chunks written: 0 left"));
    }
    let printed = server.wait_for("discarded", 3, Duration::from_secs(20));
    assert_eq!(
        printed.matches("discarded 100000\n").count(),
        3,
        "server printed: {printed}"
    );
}

#[test]
fn chunks_then_exit_over_sctp() {
    let (_work, _l) = need!();
    chunks_then_exit(SCTP);
}

#[test]
fn chunks_then_exit_over_tcp() {
    let (_work, _l) = need!();
    chunks_then_exit(TCP);
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
    let port = &free_port();
    let server = server(&work, &["echo", port, secure, pem.to_str().expect("path")]);
    let out = client(&work, &["echo", "localhost", port, no_verify, "5"], 20);
    assert!(ok(&out).contains("echo ok: 5 messages"));
    let out = client(&work, &["echo", "localhost", port, secure, "5"], 20);
    failed_with(&out, 1, "rejected");
    drop(server);
}

#[test]
fn daytime_server_closes_first() {
    let (work, _l) = need!();
    let port = &free_port();
    let server = server(&work, &["daytime", port, TCP]);
    let out = client(&work, &["daytime", "127.0.0.1", port, TCP], 15);
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
    let port = &free_port();
    let server = server(&work, &["echo", port, TCP]);
    let out = client(&work, &["runonce", "127.0.0.1", port, TCP, "5"], 15);
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
    let out = client(&work, &["echo", "not.resolvable.invalid", "80", ""], 15);
    failed_with(&out, 1, "on_error 4");
    eprintln!("on_error after {:?}", start.elapsed());
}

#[test]
fn close_from_every_callback_and_twice() {
    let (work, _l) = need!();
    let out = run(
        &work,
        "close_everywhere",
        &[&free_port()],
        Duration::from_secs(20),
    );
    let printed = ok(&out);
    assert_eq!(printed.matches("ran 1 time(s)").count(), 5, "{printed}");
}

#[test]
fn tneat_style_256_flows() {
    let (work, _l) = need!();
    let port = &free_port();
    let mut server = server(&work, &["discard", port, TCP]);
    let start = Instant::now();
    let out = client(&work, &["flows", "127.0.0.1", port, TCP, "256"], 30);
    assert!(ok(&out).contains("flows ok: 256 closed"));
    eprintln!("256 flows in {:?}", start.elapsed());
    let printed = server.wait_for("discarded", 256, Duration::from_secs(20));
    assert_eq!(printed.matches("discarded 1\n").count(), 256, "{printed}");
}

/// Flows left open for neat_free_ctx to close, the client living on after the free:
/// the server sees every flow's byte and end while the client process still runs (not
/// only at its exit).
fn free_ctx_ends_closes(props: &str, flows: usize) {
    let work = work_dir();
    let port = &free_port();
    let mut server = server(&work, &["discard", port, props]);
    let n = flows.to_string();
    let mut client = Bg::spawn(&work, "client", &["leave", "127.0.0.1", port, props, &n]);
    client.wait_for("freed\n", 1, Duration::from_secs(30));
    let printed = server.wait_for("discarded", flows, Duration::from_secs(20));
    assert_eq!(printed.matches("discarded 1\n").count(), flows, "{printed}");
    assert!(
        client.child.try_wait().expect("wait").is_none(),
        "the client exited"
    );
}

/// 256 TCP flows: their closes end inside neat_free_ctx, on the caller's thread (a
/// shut-down stream needs no peer to close).
#[test]
fn free_ctx_ends_tcp_closes_itself() {
    let (_work, _l) = need!();
    free_ctx_ends_closes(TCP, 256);
}

/// SCTP flows: their closes wait for the peer's SHUTDOWN ACK, so neat_free_ctx leaves
/// them to the background thread it starts.
#[test]
fn free_ctx_ends_sctp_closes_after_it() {
    let (_work, _l) = need!();
    free_ctx_ends_closes(SCTP, 8);
}

/// NEAT's daytime server and client over SCTP (write one line, close at once), 200
/// times: every client gets the line, then the end of stream. (The line used to wait
/// unclaimed when it came before the client had claimed its stream: 12 of 246 NEAT
/// runs got neither the line nor a close.)
#[test]
fn daytime_over_sctp_200_times_loses_nothing() {
    let (work, _l) = need!();
    let port = &free_port();
    let _server = server(&work, &["daytime", port, SCTP]);
    let mut failed = Vec::new();
    for i in 0..200 {
        let out = client(&work, &["daytime", "127.0.0.1", port, SCTP], 30);
        let printed = text(&out.stdout);
        if !(out.status.success() && printed.contains(':') && printed.contains("flow closed OK!")) {
            failed.push(format!(
                "run {i}: {:?} {printed:?} {}",
                out.status,
                text(&out.stderr)
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of 200 failed: {failed:#?}",
        failed.len()
    );
}

/// One neat_write of 1 MiB on SCTP goes as one message (no 64 KiB cap): the discard
/// server reads all of it, then the end of stream as a 0-byte read (NEAT on SCTP).
#[test]
fn one_mebibyte_write_over_sctp() {
    let (work, _l) = need!();
    discard(
        &work,
        SCTP,
        "big",
        "1048576",
        "0-byte read at the end\ndiscarded 1048576\n",
    );
}

/// neat_set_primary_dest on an SCTP flow: the peer's own address is accepted, an address
/// that is none of the association's paths and a name are bad arguments; the statistics
/// list the association's path as primary. On TCP it is NEAT_ERROR_UNABLE, as in NEAT.
#[test]
fn primary_path_of_an_sctp_flow() {
    let (work, _l) = need!();
    let port = &free_port();
    let _server = server(&work, &["echo", port, SCTP]);
    let out = ok(&client(&work, &["primary", "127.0.0.1", port, SCTP], 20));
    assert_eq!(
        out, "own 0\nforeign 2\nname 2\npaths listed\nprimary marked\n",
        "{out}"
    );
    let port = &free_port();
    let _server = server(&work, &["echo", port, TCP]);
    let out = ok(&client(&work, &["primary", "127.0.0.1", port, TCP], 20));
    assert!(
        out.starts_with("own 7\nforeign 7\nname 7\npaths absent\n"),
        "{out}"
    );
}

/// NEAT's `multihoming` property with a `local_ips` list on both ends (127.0.0.1 and ::1,
/// loopback's two "links"): one SCTP association over which the client learns the
/// server's second address from the handshake and makes it the primary path with
/// neat_set_primary_dest; the statistics list both paths, each with the bytes it sent.
#[test]
fn multihoming_property_and_primary_dest_over_two_addresses() {
    let (work, _l) = need!();
    const MULTIHOMED: &str = r#"{"transport":{"value":"SCTP","precedence":2},"multihoming":{"value":true,"precedence":2},"local_ips":{"value":["127.0.0.1","::1"],"precedence":2}}"#;
    let port = &free_port();
    let _server = server(&work, &["echo", port, MULTIHOMED]);
    let out = ok(&client(
        &work,
        &["other", "127.0.0.1", port, MULTIHOMED],
        30,
    ));
    assert_eq!(
        out, "other 0\nv6 primary listed\npaths 2\ncounted 2\n",
        "{out}"
    );
}

/// The peer's end of stream: a 0-byte read on SCTP (as NEAT on SCTP), on_close with no
/// 0-byte read on TCP (as NEAT on TCP; the server exits 3 on a 0-byte read there).
#[test]
fn end_of_stream_is_a_zero_byte_read_on_sctp_only() {
    let (work, _l) = need!();
    for (props, zero) in [(SCTP, true), (TCP, false)] {
        let port = &free_port();
        let mut server = server(&work, &["discard", port, props]);
        ok(&client(
            &work,
            &["feed", "127.0.0.1", port, props, "1000"],
            20,
        ));
        let printed = server.wait_for("discarded 1000\n", 1, Duration::from_secs(20));
        assert_eq!(printed.contains("0-byte read"), zero, "{props}: {printed}");
    }
}

/// NEAT enables exactly the listed stacks: UDP named with precedence 1 (NEAT's
/// prop_udp.json) listens on UDP, where a plain UDP socket gets its echo, and not on TCP.
#[test]
fn udp_properties_listen_on_udp() {
    let (work, _l) = need!();
    let port = &free_port();
    let props = r#"{"transport":{"value":"UDP","precedence":1}}"#;
    let _server = server(&work, &["echo", port, props]);
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    sock.send_to(b"hello, udp", format!("127.0.0.1:{port}"))
        .expect("send");
    let mut buf = [0u8; 64];
    let (n, _) = sock.recv_from(&mut buf).expect("the echo over UDP");
    assert_eq!(&buf[..n], b"hello, udp");
    let tcp = std::net::TcpStream::connect(format!("127.0.0.1:{port}"));
    assert!(tcp.is_err(), "a TCP listener too: {tcp:?}");
}

/// A required transport taps does not know fails the flow through on_error
/// (NEAT_ERROR_UNABLE, 7), on the client and on the listener; it is not run over TCP.
#[test]
fn required_unknown_transport_fails_the_flow() {
    let (work, _l) = need!();
    let props = r#"{"transport":{"value":"FOO","precedence":2}}"#;
    let port = &free_port();
    let out = client(&work, &["echo", "127.0.0.1", port, props, "1"], 15);
    failed_with(&out, 1, "on_error 7");
    let out = run(
        &work,
        "server",
        &["echo", port, props],
        Duration::from_secs(15),
    );
    failed_with(&out, 2, "on_error 7");
}

/// A peer killed with SIGKILL sends nothing; the client's next heartbeat (every 0.2 s
/// plus one retransmission timeout, here at most 0.4 s: `keepAliveTimeout` 0.2 s,
/// `connTimeout` 2 s) draws an ICMP port unreachable from the peer's host, which ends
/// the association: the client hears of it within 2 s.
#[test]
fn killed_sctp_peer_is_noticed() {
    let (work, _l) = need!();
    let props =
        r#"{"transport":{"value":"SCTP","precedence":2},"keepAliveTimeout":0.2,"connTimeout":2}"#;
    let port = &free_port();
    let mut server = server(&work, &["echo", port, props]);
    let mut client = Bg::spawn(&work, "client", &["hold", "127.0.0.1", port, props]);
    client.wait_for("connected\n", 1, Duration::from_secs(20));
    let killed = Instant::now();
    server.child.kill().expect("kill -9");
    let printed = client.wait_for("peer gone", 1, Duration::from_secs(10));
    let after = killed.elapsed();
    eprintln!("the client heard of the killed server after {after:?}: {printed}");
    assert!(after < Duration::from_secs(2), "{after:?}");
}
