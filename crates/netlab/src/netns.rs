//! Network namespaces netlab creates, the processes it starts in them, and the registry
//! that lets teardown remove exactly those (on drop, on panic, on a signal).
//!
//! Safety rules kept here:
//! - every namespace name is `nl<pid>-<lab>` plus a suffix, and `ip netns add` refuses a
//!   name that exists, so netlab never adopts a namespace it did not create;
//! - teardown deletes only namespaces recorded in the registry by this process and kills
//!   only the child processes it started and has not reaped yet (so the pid is still its
//!   child's);
//! - each namespace gets a marker file in [`MARKER_DIR`] naming the creating process, so
//!   [`cleanup_stale`] can remove what a killed netlab (SIGKILL) left, and nothing else.

// FFI through libc (each block says why it is sound); unsafe code is denied elsewhere.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, Once};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// Directory of marker files, one per namespace netlab created (content: creator's pid).
pub const MARKER_DIR: &str = "/run/netlab";

/// Where `ip netns` keeps its namespace handles.
const NETNS_DIR: &str = "/run/netns";

#[derive(Default)]
struct Registry {
    next_id: u64,
    labs: BTreeMap<u64, LabEntry>,
}

struct LabEntry {
    owner: ThreadId,
    namespaces: Vec<String>,
    pids: Vec<u32>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    next_id: 0,
    labs: BTreeMap::new(),
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// The name prefix of everything this process creates: `nl<pid>-`.
pub(crate) fn prefix() -> String {
    format!("nl{}-", std::process::id())
}

/// Registers a new lab owned by the current thread; returns its id.
pub(crate) fn register_lab() -> u64 {
    install_panic_hook();
    let mut r = registry();
    r.next_id += 1;
    let id = r.next_id;
    r.labs.insert(
        id,
        LabEntry {
            owner: std::thread::current().id(),
            namespaces: Vec::new(),
            pids: Vec::new(),
        },
    );
    id
}

fn with_lab(lab: u64, f: impl FnOnce(&mut LabEntry)) {
    if let Some(e) = registry().labs.get_mut(&lab) {
        f(e);
    }
}

/// Records a child process of `lab` (killed by teardown unless reaped before).
pub(crate) fn add_pid(lab: u64, pid: u32) {
    with_lab(lab, |e| e.pids.push(pid));
}

/// Forgets a child process (call before reaping it, so its pid is never killed later).
pub(crate) fn remove_pid(lab: u64, pid: u32) {
    with_lab(lab, |e| e.pids.retain(|p| *p != pid));
}

/// Tears down what the registry holds for `lab`: kills its children, deletes its
/// namespaces and their markers. Idempotent. Returns the problems met (empty if clean).
pub(crate) fn teardown_lab(lab: u64) -> Vec<String> {
    let entry = registry().labs.remove(&lab);
    match entry {
        Some(e) => teardown_entry(e),
        None => Vec::new(),
    }
}

/// Tears down every lab of this process (for signal handlers and fatal errors).
pub fn teardown_all() -> Vec<String> {
    let labs = std::mem::take(&mut registry().labs);
    labs.into_values().flat_map(teardown_entry).collect()
}

fn teardown_entry(e: LabEntry) -> Vec<String> {
    let mut problems = Vec::new();
    for pid in &e.pids {
        // SAFETY: kill takes no pointers and touches no memory of ours. (It also hits the
        // right process: the pid is still our unreaped child, since the registry drops
        // pids before reaping them, so it cannot have been reused.)
        unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
    }
    let own = prefix();
    for ns in e.namespaces.iter().rev() {
        if !ns.starts_with(&own) {
            problems.push(format!("refusing to delete namespace {ns}: not ours"));
            continue;
        }
        if let Err(err) = delete_namespace(ns) {
            problems.push(err.to_string());
        }
    }
    problems
}

fn delete_namespace(ns: &str) -> io::Result<()> {
    if Path::new(NETNS_DIR).join(ns).exists() {
        let out = Command::new("ip")
            .args(["netns", "del", ns])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "ip netns del {ns}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    let _ = std::fs::remove_file(Path::new(MARKER_DIR).join(ns));
    Ok(())
}

/// Installs (once) a panic hook that tears down the labs owned by the panicking thread
/// before the previous hook runs; `Drop` would do it too while unwinding, but not when
/// panics abort or a drop panics. Other threads' labs are left alone.
pub(crate) fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let me = std::thread::current().id();
            let mine: Vec<LabEntry> = {
                let mut r = registry();
                let ids: Vec<u64> = r
                    .labs
                    .iter()
                    .filter(|(_, e)| e.owner == me)
                    .map(|(id, _)| *id)
                    .collect();
                ids.iter().filter_map(|id| r.labs.remove(id)).collect()
            };
            for e in mine {
                for p in teardown_entry(e) {
                    eprintln!("netlab: teardown after panic: {p}");
                }
            }
            previous(info);
        }));
    });
}

/// A network namespace this process created. Deleted by the lab's teardown, not on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates namespace `name` (which must start with [`prefix`]) for `lab`, records it,
    /// writes its marker and brings its loopback up. Fails if the name exists.
    pub(crate) fn create(lab: u64, name: String) -> io::Result<Netns> {
        if !name.starts_with(&prefix()) || name.len() > 64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad namespace name {name}"),
            ));
        }
        if Path::new(NETNS_DIR).join(&name).exists() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("namespace {name} exists and is not ours"),
            ));
        }
        run_ip(&["netns", "add", &name])?;
        with_lab(lab, |e| e.namespaces.push(name.clone()));
        std::fs::create_dir_all(MARKER_DIR)?;
        let mut marker = File::create(Path::new(MARKER_DIR).join(&name))?;
        writeln!(marker, "{}", std::process::id())?;
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Its name (for `ip netns exec NAME ...`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n NAME ARGS...`; an error carries ip's message.
    pub fn ip(&self, args: &[&str]) -> io::Result<()> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        run_ip(&all)
    }

    /// Runs every line of `script` with `ip -n NAME -batch -` (one process for many
    /// commands; lines are `ip` arguments without the leading `ip`).
    pub fn ip_batch(&self, script: &str) -> io::Result<()> {
        let mut child = Command::new("ip")
            .args(["-n", &self.name, "-batch", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(script.as_bytes())?;
        let out = child.wait_with_output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "ip -n {} -batch: {}",
                self.name,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// Runs `f` on a new thread that has joined this namespace, and returns its result.
    /// Sockets and TUN devices created there stay in the namespace wherever they are used
    /// afterwards. A panic in `f` is propagated.
    pub fn run<F, R>(&self, f: F) -> io::Result<R>
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        let handle = File::open(Path::new(NETNS_DIR).join(&self.name))?;
        std::thread::scope(|s| {
            let t = std::thread::Builder::new()
                .name(format!("netns-{}", self.name))
                .spawn_scoped(s, || {
                    // SAFETY: setns takes no pointers; `handle` is a namespace file we opened
                    // and keep open for the call. It moves only this new, scoped thread into
                    // the namespace; no other thread or descriptor changes.
                    if unsafe { libc::setns(handle.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(f())
                })?;
            t.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// A command that runs `program` inside this namespace (`ip netns exec`).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }
}

/// One namespace of this process with its loopback up and nothing else in it: no TUN, no
/// bridge, no servers (for a measurement that needs only an isolated loopback, e.g. with
/// its own MTU). Registered like a lab, so a panic or [`teardown_all`] removes it too;
/// deleted by [`Scratch::teardown`] or on drop.
#[derive(Debug)]
pub struct Scratch {
    id: u64,
    ns: Netns,
    torn_down: bool,
}

impl Scratch {
    /// Creates it (root only; see [`unsupported_reason`]).
    pub fn new() -> io::Result<Scratch> {
        if let Some(why) = unsupported_reason() {
            return Err(io::Error::new(io::ErrorKind::Unsupported, why));
        }
        let id = register_lab();
        match Netns::create(id, format!("{}{id}x", prefix())) {
            Ok(ns) => Ok(Scratch {
                id,
                ns,
                torn_down: false,
            }),
            Err(e) => {
                teardown_lab(id);
                Err(e)
            }
        }
    }

    /// The namespace.
    pub fn netns(&self) -> &Netns {
        &self.ns
    }

    /// Deletes it; what could not be removed, if anything.
    pub fn teardown(mut self) -> Result<(), String> {
        self.torn_down = true;
        let problems = teardown_lab(self.id);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.torn_down {
            for p in teardown_lab(self.id) {
                eprintln!("netlab: teardown: {p}");
            }
        }
    }
}

fn run_ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run ip (iproute2): {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The outcome of a child process run with [`Lab::run_child`](crate::Lab::run_child).
#[derive(Debug, Clone)]
pub struct Captured {
    /// Its exit status (`None` if it was killed at the time limit).
    pub status: Option<ExitStatus>,
    /// Everything it printed on standard output.
    pub stdout: String,
    /// Everything it printed on standard error.
    pub stderr: String,
    /// Wall-clock time from spawn to exit (or to the kill).
    pub elapsed: Duration,
}

impl Captured {
    /// Whether it ran out of time and was killed.
    pub fn timed_out(&self) -> bool {
        self.status.is_none()
    }
}

/// Runs `cmd` as a child of `lab` with stdout and stderr captured, killing it after
/// `limit`. The child is registered so a signal or panic teardown kills it too.
pub(crate) fn run_child(lab: u64, mut cmd: Command, limit: Duration) -> io::Result<Captured> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn()?;
    let pid = child.id();
    add_pid(lab, pid);
    let guard = ChildGuard {
        lab,
        child: Some(&mut child),
    };
    let result = guard.wait(limit, started);
    result.map(|(status, stdout, stderr)| Captured {
        status,
        stdout,
        stderr,
        elapsed: started.elapsed(),
    })
}

/// Kills (if still running) and reaps a registered child when dropped.
struct ChildGuard<'a> {
    lab: u64,
    child: Option<&'a mut Child>,
}

impl ChildGuard<'_> {
    #[allow(clippy::type_complexity)]
    fn wait(
        mut self,
        limit: Duration,
        started: Instant,
    ) -> io::Result<(Option<ExitStatus>, String, String)> {
        let child = self.child.as_mut().expect("present");
        let out = reader(child.stdout.take());
        let err = reader(child.stderr.take());
        let mut status = None;
        while started.elapsed() < limit {
            // try_wait reaps: forget the pid first would race with a signal teardown
            // killing a reaped pid, so poll with WNOWAIT semantics via waitid instead.
            if exited(child.id())? {
                remove_pid(self.lab, child.id());
                status = Some(child.wait()?);
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        drop(self.kill_and_reap());
        let stdout = out.join().unwrap_or_default();
        let stderr = err.join().unwrap_or_default();
        Ok((status, stdout, stderr))
    }

    fn kill_and_reap(&mut self) -> io::Result<()> {
        if let Some(child) = self.child.take() {
            let pid = child.id();
            let _ = child.kill();
            remove_pid(self.lab, pid);
            child.wait()?;
        }
        Ok(())
    }
}

impl Drop for ChildGuard<'_> {
    fn drop(&mut self) {
        let _ = self.kill_and_reap();
    }
}

/// Whether child `pid` has exited, without reaping it.
fn exited(pid: u32) -> io::Result<bool> {
    // SAFETY: siginfo_t is a plain C struct of integers (and unions of integers), for which
    // all zeros is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a live, exclusively borrowed siginfo_t that waitid fills; with
    // WNOWAIT the child is only inspected, not reaped, so its pid stays ours.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: waitid succeeded, so `info` is either still all zeros (WNOHANG and no child
    // exited) or a SIGCHLD-style siginfo for our child; either way the fields si_pid reads
    // are initialized and laid out as si_pid expects.
    Ok(unsafe { info.si_pid() } != 0)
}

fn reader<R: Read + Send + 'static>(src: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(mut r) = src {
            let _ = r.read_to_end(&mut s);
        }
        String::from_utf8_lossy(&s).into_owned()
    })
}

/// What this process created and has not removed: namespaces named `nl<pid>-...`,
/// marker files naming this process, registered child processes, open TUN devices.
/// Empty when everything was torn down.
pub fn leftovers() -> Vec<String> {
    let mut found = Vec::new();
    let own = prefix();
    if let Ok(dir) = std::fs::read_dir(NETNS_DIR) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&own) {
                found.push(format!("namespace {name}"));
            }
        }
    }
    for (name, pid) in markers() {
        if pid == std::process::id() {
            found.push(format!("marker {MARKER_DIR}/{name}"));
        }
    }
    for e in registry().labs.values() {
        for pid in &e.pids {
            found.push(format!("child process {pid}"));
        }
    }
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        for e in dir.flatten() {
            if std::fs::read_link(e.path()).is_ok_and(|t| t == Path::new("/dev/net/tun")) {
                found.push(format!("open TUN device (fd {:?})", e.file_name()));
            }
        }
    }
    found
}

/// Marker files: (namespace name, creator pid).
fn markers() -> Vec<(String, u32)> {
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir(MARKER_DIR) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = std::fs::read_to_string(e.path())
                .ok()
                .and_then(|s| s.trim().parse().ok());
            if let Some(pid) = pid {
                out.push((name, pid));
            }
        }
    }
    out
}

/// Removes namespaces left by netlab processes that no longer run (killed with SIGKILL,
/// say): only names with a marker whose creator is gone and that look like netlab's.
/// Processes still inside such a namespace are listed in the result, not killed.
/// Returns what was done.
pub fn cleanup_stale() -> Vec<String> {
    let mut done = Vec::new();
    for (name, pid) in markers() {
        // SAFETY: kill with signal 0 takes no pointers and sends nothing; it only checks
        // whether `pid` exists.
        let alive = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if alive || !name.starts_with(&format!("nl{pid}-")) {
            continue;
        }
        let handle: PathBuf = Path::new(NETNS_DIR).join(&name);
        if handle.exists() {
            if let Ok(out) = Command::new("ip").args(["netns", "pids", &name]).output() {
                let pids = String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .replace('\n', " ");
                if !pids.is_empty() {
                    done.push(format!("namespace {name} still holds processes {pids}"));
                }
            }
        }
        match delete_namespace(&name) {
            Ok(()) => done.push(format!(
                "removed stale namespace {name} (creator {pid} is gone)"
            )),
            Err(e) => done.push(e.to_string()),
        }
    }
    done
}

/// Why netlab cannot run here, if it cannot: not root, no `/dev/net/tun`, no `ip`.
pub fn unsupported_reason() -> Option<String> {
    // SAFETY: geteuid takes no arguments, cannot fail and touches no memory of ours.
    if unsafe { libc::geteuid() } != 0 {
        return Some("netlab needs root (network namespaces and TUN devices)".into());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("netlab needs /dev/net/tun".into());
    }
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => None,
        _ => Some("netlab needs the ip command (iproute2)".into()),
    }
}
