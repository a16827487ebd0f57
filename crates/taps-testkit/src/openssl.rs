//! OpenSSL's command-line server as a test peer: an independent TLS stack to connect to.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use std::path::{Path, PathBuf};

use crate::{free_port, TestPki};

/// A child process killed (and reaped) when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `openssl s_server -rev` (it answers each line reversed) with `pki`'s certificate and
/// the `extra` arguments, on a free TCP port of 127.0.0.1, once it listens: it says
/// "ACCEPT" on its output when its own socket is bound and listening. A port answering
/// would not be enough: a port free when picked can be taken before the server binds it,
/// by another test's listener; the server then exits, and the port's other owner may be
/// gone a moment later. A server that exits before it listens starts again on another
/// port (five tries).
pub fn s_server_rev(pki: &TestPki, extra: &[&str]) -> (Killed, u16) {
    s_server_rev_with(&pki.cert, &pki.key, extra)
}

/// [`s_server_rev`] presenting the certificate `cert` (PEM) with its key `key`.
pub fn s_server_rev_with(cert: &Path, key: &Path, extra: &[&str]) -> (Killed, u16) {
    for _ in 0..5 {
        let port = free_port();
        let mut server = Killed(
            Command::new("openssl")
                .args(["s_server", "-rev"])
                .args(extra)
                .arg("-accept")
                .arg(format!("127.0.0.1:{port}"))
                .arg("-cert")
                .arg(cert)
                .arg("-key")
                .arg(key)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("run openssl s_server"),
        );
        let out = server.0.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads the server's output to its end (so it never blocks on a full pipe) and
        // says whether "ACCEPT" came before it.
        std::thread::spawn(move || {
            let mut said = false;
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if !said && line.trim() == "ACCEPT" {
                    said = true;
                    let _ = tx.send(true);
                }
            }
            if !said {
                let _ = tx.send(false);
            }
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(true) => return (server, port),
            Ok(false) => continue,
            Err(_) => panic!("openssl s_server did not listen on {port} within 10 s"),
        }
    }
    panic!("openssl s_server did not listen on any of five free ports");
}

/// A self-signed certificate for `name` made the way OpenSSL's manual makes one: `openssl
/// req -x509 -newkey <key> -subj /CN=<name> -addext subjectAltName=DNS:<name>` with the
/// `extra` arguments (e.g. `-addext basicConstraints=critical,CA:FALSE`), written as
/// `<stem>.pem` and `<stem>.key` into `dir`. `key` is `ec` (P-256) or `rsa` (2048 bits).
/// OpenSSL marks such a certificate `CA:TRUE` unless told otherwise.
pub fn self_signed(
    dir: &Path,
    stem: &str,
    key: &str,
    name: &str,
    extra: &[&str],
) -> std::io::Result<(PathBuf, PathBuf)> {
    let (cert_file, key_file) = (
        dir.join(format!("{stem}.pem")),
        dir.join(format!("{stem}.key")),
    );
    let newkey: &[&str] = match key {
        "rsa" => &["-newkey", "rsa:2048"],
        _ => &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
    };
    let out = Command::new("openssl")
        .args(["req", "-x509", "-nodes", "-days", "30"])
        .args(newkey)
        .arg("-keyout")
        .arg(&key_file)
        .arg("-out")
        .arg(&cert_file)
        .args(["-subj", &format!("/CN={name}")])
        .args(["-addext", &format!("subjectAltName=DNS:{name}")])
        .args(extra)
        .output()?;
    if !out.status.success() {
        return Err(std::io::Error::other(format!(
            "openssl req failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok((cert_file, key_file))
}
