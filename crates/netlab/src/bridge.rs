//! The bridge: two threads moving IP packets between the client's and the server's TUN
//! device, each direction scheduled by a `Shaper` (delay, jitter, loss, rate limit,
//! blackhole) and released from a heap of release times.

// FFI through libc (each block says why it is sound); unsafe code is denied elsewhere.
#![allow(unsafe_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::packet::{self, PacketInfo};
use crate::rules::{Direction, Rule, Shaper, Verdict};
use crate::sctp_ledger::SctpLedger;

/// Packet counters of one direction.
#[derive(Debug, Default)]
struct Counters {
    received: AtomicU64,
    forwarded: AtomicU64,
    bytes: AtomicU64,
    lost: AtomicU64,
    blackholed: AtomicU64,
    queue_full: AtomicU64,
    write_errors: AtomicU64,
    reordered: AtomicU64,
    duplicated: AtomicU64,
}

/// A snapshot of one direction's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirStats {
    /// Packets read from the input device.
    pub received: u64,
    /// Packets written to the output device.
    pub forwarded: u64,
    /// Bytes written to the output device.
    pub bytes: u64,
    /// Packets dropped by random loss.
    pub lost: u64,
    /// Packets dropped by blackhole rules.
    pub blackholed: u64,
    /// Packets dropped because a rate-limit queue was full.
    pub queue_full: u64,
    /// Packets the output device refused.
    pub write_errors: u64,
    /// Packets held back by a `reorder` rule (the packets after them overtook them).
    pub reordered: u64,
    /// Packets sent twice by a `dup` rule (each counts once here, twice in `forwarded`).
    pub duplicated: u64,
}

/// A snapshot of both directions' counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BridgeStats {
    /// Client to server.
    pub to_server: DirStats,
    /// Server to client.
    pub to_client: DirStats,
}

struct Shared {
    /// Generation (bumped on each change) and the rules.
    rules: Mutex<(u64, Vec<Rule>)>,
    counters: [Counters; 2],
    /// The link is cut: every packet, read or queued, is dropped (counted as
    /// blackholed), as on a dead path. Cleared to bring it back.
    down: AtomicBool,
    /// The lab's SCTP ledger and this bridge's link number, while one is kept
    /// ([`Bridge::keep_sctp_ledger`]); `ledger_on` says so without the lock.
    ledger: Mutex<Option<(usize, Arc<SctpLedger>)>>,
    ledger_on: AtomicBool,
}

/// A handle that cuts or restores one bridge's link from any thread (a link schedule).
/// Cloning shares the bridge's state; costs one atomic store per change.
#[derive(Clone)]
pub struct LinkSwitch(Arc<Shared>);

impl std::fmt::Debug for LinkSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkSwitch")
            .field("up", &self.is_up())
            .finish()
    }
}

impl LinkSwitch {
    /// Cuts the link (`false`: every packet dropped silently, both ways, including those
    /// already queued) or restores it (`true`).
    pub fn set_up(&self, up: bool) {
        self.0.down.store(!up, Ordering::Relaxed);
    }

    /// Whether the link passes packets.
    pub fn is_up(&self) -> bool {
        !self.0.down.load(Ordering::Relaxed)
    }
}

/// A running bridge between two TUN devices. Stops (and closes both devices) on drop.
pub struct Bridge {
    shared: Arc<Shared>,
    stop: OwnedFd,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Bridge {
    /// Starts bridging `client` and `server` (non-blocking TUN descriptors), with no rules
    /// (everything passes unchanged) and `seed` for loss and jitter.
    pub fn start(client: OwnedFd, server: OwnedFd, seed: u64) -> io::Result<Bridge> {
        // SAFETY: eventfd takes no pointers and touches no memory of ours; it returns a new
        // descriptor or -1, which is checked below.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: efd is a valid descriptor (checked above) that eventfd just created and
        // that nothing else owns or closes, so the OwnedFd becomes its only owner.
        let stop = unsafe { OwnedFd::from_raw_fd(efd) };
        let shared = Arc::new(Shared {
            rules: Mutex::new((0, Vec::new())),
            counters: Default::default(),
            down: AtomicBool::new(false),
            ledger: Mutex::new(None),
            ledger_on: AtomicBool::new(false),
        });
        let client = Arc::new(client);
        let server = Arc::new(server);
        let mut threads = Vec::new();
        for (dir, input, output) in [
            (Direction::ToServer, client.clone(), server.clone()),
            (Direction::ToClient, server, client),
        ] {
            let shared = shared.clone();
            let stop_fd = stop.as_raw_fd();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("netlab-{dir:?}"))
                    .spawn(move || pump(dir, &input, &output, stop_fd, &shared, seed))?,
            );
        }
        Ok(Bridge {
            shared,
            stop,
            threads,
        })
    }

    /// Replaces the rules (first match wins). Queued packets keep their release times.
    pub fn set_rules(&self, rules: Vec<Rule>) {
        let mut r = self.shared.rules.lock().unwrap_or_else(|e| e.into_inner());
        r.0 += 1;
        r.1 = rules;
    }

    /// A handle to cut and restore this bridge's link (see [`LinkSwitch`]).
    pub fn switch(&self) -> LinkSwitch {
        LinkSwitch(self.shared.clone())
    }

    /// Records every UDP-encapsulated SCTP packet sent over this bridge's link (number
    /// `link`) toward the server in `ledger`, or stops (`None`). While on: a CRC32c, a walk
    /// of the chunks and a lock per such packet.
    pub fn keep_sctp_ledger(&self, ledger: Option<(usize, Arc<SctpLedger>)>) {
        let on = ledger.is_some();
        *crate::sink::lock(&self.shared.ledger) = ledger;
        self.shared.ledger_on.store(on, Ordering::Relaxed);
    }

    /// Cuts the link (`false`) or restores it (`true`); see [`LinkSwitch::set_up`].
    pub fn set_up(&self, up: bool) {
        self.switch().set_up(up);
    }

    /// The current rules.
    pub fn rules(&self) -> Vec<Rule> {
        self.shared
            .rules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .clone()
    }

    /// The counters so far.
    pub fn stats(&self) -> BridgeStats {
        let snap = |c: &Counters| DirStats {
            received: c.received.load(Ordering::Relaxed),
            forwarded: c.forwarded.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            lost: c.lost.load(Ordering::Relaxed),
            blackholed: c.blackholed.load(Ordering::Relaxed),
            queue_full: c.queue_full.load(Ordering::Relaxed),
            write_errors: c.write_errors.load(Ordering::Relaxed),
            reordered: c.reordered.load(Ordering::Relaxed),
            duplicated: c.duplicated.load(Ordering::Relaxed),
        };
        BridgeStats {
            to_server: snap(&self.shared.counters[0]),
            to_client: snap(&self.shared.counters[1]),
        }
    }

    /// Stops both threads and closes both TUN devices (which removes them). Idempotent.
    pub fn stop(&mut self) {
        let one: u64 = 1;
        // SAFETY: the buffer is `one`, a live u64, and the length is its size, so write
        // reads only that memory; the descriptor is our eventfd, open as long as `self`.
        unsafe {
            libc::write(
                self.stop.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A packet waiting for its release time.
struct Queued {
    at: Instant,
    seq: u64,
    data: Vec<u8>,
}

impl PartialEq for Queued {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Queued {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// Packets read per wake-up at most, so releases are not starved by a flood.
const READ_BURST: usize = 256;

fn pump(
    dir: Direction,
    input: &OwnedFd,
    output: &OwnedFd,
    stop: RawFd,
    shared: &Shared,
    seed: u64,
) {
    let counters = &shared.counters[dir.index()];
    let (mut gen, rules) = {
        let r = shared.rules.lock().unwrap_or_else(|e| e.into_inner());
        (r.0, r.1.clone())
    };
    let mut shaper = Shaper::new(dir, rules, seed);
    let mut heap: BinaryHeap<Reverse<Queued>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut buf = vec![0u8; 65536];
    loop {
        let timeout = heap
            .peek()
            .map(|q| q.0.at.saturating_duration_since(Instant::now()));
        match wait(input, stop, timeout) {
            Wake::Stop => return,
            Wake::Idle => {}
            Wake::Readable => {
                {
                    let r = shared.rules.lock().unwrap_or_else(|e| e.into_inner());
                    if r.0 != gen {
                        gen = r.0;
                        shaper.set_rules(r.1.clone());
                    }
                }
                for _ in 0..READ_BURST {
                    // SAFETY: `buf` is a live, exclusively borrowed buffer of `buf.len()` bytes
                    // and read writes at most that many; `input` is open for the call.
                    let n = unsafe {
                        libc::read(input.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())
                    };
                    if n <= 0 {
                        break;
                    }
                    let pkt = &buf[..n as usize];
                    counters.received.fetch_add(1, Ordering::Relaxed);
                    if shared.down.load(Ordering::Relaxed) {
                        counters.blackholed.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let info = parse_and_record(shared, dir, pkt);
                    let now = Instant::now();
                    match shaper.decide(info.as_ref(), pkt.len(), now) {
                        Verdict::Release(at) if at <= now && heap.is_empty() => {
                            write_out(output, pkt, counters);
                        }
                        Verdict::Release(at) => {
                            seq += 1;
                            heap.push(Reverse(Queued {
                                at,
                                seq,
                                data: pkt.to_vec(),
                            }));
                        }
                        Verdict::Duplicate(at, copy) => {
                            counters.duplicated.fetch_add(1, Ordering::Relaxed);
                            for at in [at, copy] {
                                seq += 1;
                                heap.push(Reverse(Queued {
                                    at,
                                    seq,
                                    data: pkt.to_vec(),
                                }));
                            }
                        }
                        Verdict::Lost => {
                            counters.lost.fetch_add(1, Ordering::Relaxed);
                        }
                        Verdict::Blackholed => {
                            counters.blackholed.fetch_add(1, Ordering::Relaxed);
                        }
                        Verdict::QueueFull => queue_full(shared, dir, pkt, info.as_ref()),
                    }
                }
                counters
                    .reordered
                    .store(shaper.reordered, Ordering::Relaxed);
            }
        }
        let now = Instant::now();
        let down = shared.down.load(Ordering::Relaxed);
        while heap.peek().is_some_and(|q| q.0.at <= now || down) {
            let q = heap.pop().expect("peeked").0;
            if down {
                counters.blackholed.fetch_add(1, Ordering::Relaxed);
            } else {
                write_out(output, &q.data, counters);
            }
        }
    }
}

/// Why [`wait`] returned.
enum Wake {
    /// The bridge is stopping, or the input device failed: the thread ends.
    Stop,
    /// The input device has packets to read.
    Readable,
    /// The timeout passed (or a signal interrupted the wait): release what is due.
    Idle,
}

/// Waits until `input` is readable, `stop` is signalled, or `timeout` (forever if `None`)
/// passes.
fn wait(input: &OwnedFd, stop: RawFd, timeout: Option<Duration>) -> Wake {
    let mut fds = [
        libc::pollfd {
            fd: input.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
    // SAFETY: `fds` is a live array of exactly 2 pollfds (nfds = 2) that ppoll may
    // write to; `ts_ptr` is null or points to `ts`, alive until after the call; the
    // signal mask is null (left unchanged). `stop` stays open while this thread runs:
    // `Bridge::stop` joins the threads before the Bridge drops the descriptor.
    let rc = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, ts_ptr, std::ptr::null()) };
    if rc < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
        return Wake::Stop;
    }
    if fds[1].revents != 0 {
        return Wake::Stop;
    }
    if fds[0].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
        return Wake::Stop;
    }
    if fds[0].revents & libc::POLLIN != 0 {
        Wake::Readable
    } else {
        Wake::Idle
    }
}

fn write_out(output: &OwnedFd, pkt: &[u8], counters: &Counters) {
    // SAFETY: `pkt` is a live slice and write reads at most `pkt.len()` bytes of it;
    // `output` is open for the call.
    let n = unsafe { libc::write(output.as_raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
    if n == pkt.len() as isize {
        counters.forwarded.fetch_add(1, Ordering::Relaxed);
        counters
            .bytes
            .fetch_add(pkt.len() as u64, Ordering::Relaxed);
    } else {
        counters.write_errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// Parses `pkt` and, while the bridge keeps an SCTP ledger, hands it to the ledger.
fn parse_and_record(shared: &Shared, dir: Direction, pkt: &[u8]) -> Option<PacketInfo> {
    let info = packet::parse(pkt)?;
    if shared.ledger_on.load(Ordering::Relaxed) {
        let ledger = crate::sink::lock(&shared.ledger).clone();
        if let Some((link, ledger)) = ledger {
            ledger.record(link, dir == Direction::ToServer, pkt, &info);
        }
    }
    Some(info)
}

/// Counts `pkt` as dropped by the link's full queue and tells the ledger, if the bridge
/// keeps one and `pkt` was on its way to the server.
fn queue_full(shared: &Shared, dir: Direction, pkt: &[u8], info: Option<&PacketInfo>) {
    shared.counters[dir.index()]
        .queue_full
        .fetch_add(1, Ordering::Relaxed);
    if dir != Direction::ToServer || !shared.ledger_on.load(Ordering::Relaxed) {
        return;
    }
    let ledger = crate::sink::lock(&shared.ledger).clone();
    if let (Some((link, ledger)), Some(info)) = (ledger, info) {
        ledger.record_drop(link, pkt, info);
    }
}
