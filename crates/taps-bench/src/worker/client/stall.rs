//! A watch over a client's measured window: when the window stops making progress, the
//! worker says on stderr what its process is doing (the user-space SCTP stack's counts, and
//! every thread's state and kernel wait channel), so that a trial the orchestrator finds
//! hung (and kills after 45 s) leaves evidence in its crash record instead of silence.
//!
//! An OS thread of its own, not a task: it still reports when the runtime itself is stuck.
//! It sleeps [`CHECK`] at a time, longer than a normal window, so in a measured window it
//! costs nothing but one relaxed atomic add per connection (the same for every variant).

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use usrsctp::SctpStack;

/// How often the watch looks.
const CHECK: Duration = Duration::from_secs(5);
/// No progress for this long is a stall worth a report (the orchestrator kills at 45 s).
const STALL: Duration = Duration::from_secs(10);
/// Reports per window at most (they repeat while the stall lasts, to show what moves).
const MAX_REPORTS: usize = 3;

/// A running watch; dropping it stops the thread.
pub(super) struct StallWatch {
    done: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StallWatch {
    /// Starts watching a window of `what` (named in the reports).
    pub(super) fn start(what: &'static str) -> StallWatch {
        let done = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (d, s) = (done.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("stall-watch".into())
            .spawn(move || watch(what, &d, &s))
            .ok();
        StallWatch { done, stop, thread }
    }

    /// One more unit of work done (a connection). One relaxed atomic add.
    pub(super) fn progress(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for StallWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

fn watch(what: &str, done: &AtomicUsize, stop: &AtomicBool) {
    let mut last = done.load(Ordering::Relaxed);
    let mut since = Instant::now();
    let mut reports = 0;
    loop {
        std::thread::park_timeout(CHECK);
        if stop.load(Ordering::Acquire) {
            return;
        }
        let now = done.load(Ordering::Relaxed);
        if now != last {
            (last, since) = (now, Instant::now());
            continue;
        }
        if since.elapsed() >= STALL && reports < MAX_REPORTS {
            reports += 1;
            eprintln!("{}", report(what, now, since.elapsed()));
        }
    }
}

/// One line: what is done, the SCTP stack's counts, every thread's state.
fn report(what: &str, done: usize, stalled: Duration) -> String {
    let sctp = SctpStack::global();
    let stats = sctp.stats();
    let (sends, packets) = sctp.udp_sends();
    format!(
        "stall: {what}: {done} done, none for {:.0} s; usrsctp {} sockets, {} conn addresses, \
         {} UDP sockets, {} sockets made, {sends} UDP sends of {packets} packets; threads: {}",
        stalled.as_secs_f64(),
        stats.sctp_sockets,
        stats.conn_addrs,
        stats.udp_sockets,
        sctp.sockets_made(),
        threads(),
    )
}

/// `name state wchan` for every thread of this process, from /proc.
fn threads() -> String {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return "unreadable".into();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let path = entry.path();
        let read = |f: &str| std::fs::read_to_string(path.join(f)).unwrap_or_default();
        let stat = read("stat");
        // The state follows the parenthesised name, which may itself hold spaces.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .unwrap_or("?")
            .to_string();
        out.push(format!(
            "{} {state} {}",
            read("comm").trim(),
            read("wchan").trim()
        ));
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report names this thread with its state (running, as it reads its own).
    #[test]
    fn a_report_lists_the_threads() {
        let r = report("test", 3, Duration::from_secs(12));
        assert!(
            r.starts_with("stall: test: 3 done, none for 12 s; usrsctp "),
            "{r}"
        );
        let me = std::thread::current()
            .name()
            .map(|n| n.chars().take(15).collect::<String>());
        assert!(me.is_none_or(|n| r.contains(&format!("{n} R"))), "{r}");
    }
}
