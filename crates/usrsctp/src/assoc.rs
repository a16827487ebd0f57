//! Associations: the per-association driver task, message routing to streams, sending with
//! back-pressure, schedulers and send-queue accounting.

use std::collections::{HashMap, VecDeque};
use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::ffi::{self, Plain};
use crate::sys::{lock, would_block, Sock};
use crate::udp::{ClientEvents, ClientLink, SharedUdp};
use crate::{Scheduler, SctpOptions};

/// Whether `SCTP_GET_SNDBUF_USE` works (probed on first use): 0 unknown, 1 yes, 2 no.
static SNDBUF_USE: AtomicUsize = AtomicUsize::new(0);

/// One complete user message (reassembled from usrsctp's partial deliveries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Stream the message arrived on.
    pub stream: u16,
    /// Payload protocol identifier, in host order (sent big-endian on the wire).
    pub ppid: u32,
    /// Whether it was sent unordered.
    pub unordered: bool,
    /// The payload.
    pub data: Vec<u8>,
}

/// Where an association is in its life, as published on [`Connecting::progress`].
#[derive(Debug, Clone)]
pub enum Progress {
    /// INIT sent, nothing heard yet.
    Connecting,
    /// An INIT ACK arrived `after` the attempt started: the peer is reachable (one RTT).
    Reachable {
        /// Time from `connect` to the INIT ACK.
        after: Duration,
    },
    /// COMM_UP: the association is established (two RTTs).
    Established {
        /// Inbound streams negotiated.
        inbound: u16,
        /// Outbound streams negotiated.
        outbound: u16,
    },
    /// Gracefully shut down.
    Closed,
    /// Failed or aborted.
    Failed(Error),
}

/// A FIFO that tasks can await, closed with a terminal result.
pub(crate) struct Inbox<T> {
    st: Mutex<InboxState<T>>,
    notify: Notify,
}

struct InboxState<T> {
    q: VecDeque<T>,
    /// `Some(None)`: ended gracefully; `Some(Some(e))`: ended with an error.
    end: Option<Option<Error>>,
}

impl<T> Inbox<T> {
    fn new() -> Arc<Inbox<T>> {
        Arc::new(Inbox {
            st: Mutex::new(InboxState {
                q: VecDeque::new(),
                end: None,
            }),
            notify: Notify::new(),
        })
    }

    fn push(&self, v: T) {
        lock(&self.st).q.push_back(v);
        self.notify.notify_waiters();
    }

    fn end(&self, end: Option<Error>) {
        let mut st = lock(&self.st);
        if st.end.is_none() {
            st.end = Some(end);
        }
        drop(st);
        self.notify.notify_waiters();
    }

    async fn pop(&self) -> Result<Option<T>> {
        loop {
            let mut n = pin!(self.notify.notified());
            n.as_mut().enable();
            {
                let mut st = lock(&self.st);
                if let Some(v) = st.q.pop_front() {
                    return Ok(Some(v));
                }
                match &st.end {
                    Some(None) => return Ok(None),
                    Some(Some(e)) => return Err(e.clone()),
                    None => {}
                }
            }
            n.await;
        }
    }

    fn drain(&self) -> Vec<T> {
        lock(&self.st).q.drain(..).collect()
    }
}

type StreamInbox = Arc<Inbox<Message>>;

struct Router {
    default: StreamInbox,
    streams: HashMap<u16, StreamInbox>,
    accept_mode: bool,
    accepts: Arc<Inbox<(u16, StreamInbox)>>,
    end: Option<Option<Error>>,
}

impl Router {
    fn dispatch(&mut self, m: Message) {
        if let Some(ib) = self.streams.get(&m.stream) {
            ib.push(m);
        } else if self.accept_mode {
            let ib = Inbox::new();
            let sid = m.stream;
            ib.push(m);
            self.streams.insert(sid, ib.clone());
            self.accepts.push((sid, ib));
        } else {
            self.default.push(m);
        }
    }
}

/// State shared by the handles, the driver task and the client UDP task.
pub(crate) struct AssocShared {
    pub(crate) sock: Arc<Sock>,
    remote: SocketAddr,
    started: Instant,
    progress: watch::Sender<Progress>,
    reachable_after: OnceLock<Duration>,
    router: Mutex<Router>,
    buffered: AtomicUsize,
    recv_budget: usize,
    drained: Notify,
    /// inbound << 16 | outbound.
    streams: AtomicU32,
    /// Bytes handed to usrsctp per stream since its send buffer was last seen empty.
    acct: Mutex<HashMap<u16, usize>>,
    send_lock: tokio::sync::Mutex<()>,
    piece: usize,
    /// The round-robin-per-packet scheduler is active (see [`AssocShared::kick`]).
    rrp: AtomicBool,
}

impl AssocShared {
    pub(crate) fn new(
        sock: Arc<Sock>,
        remote: SocketAddr,
        opts: &SctpOptions,
        progress: Progress,
    ) -> Arc<AssocShared> {
        let mut sndbuf: libc::c_int = 0;
        let piece = match sock.getopt(libc::SOL_SOCKET, libc::SO_SNDBUF, &mut sndbuf, "SO_SNDBUF") {
            Ok(()) if sndbuf > 0 => (sndbuf as usize / 2).clamp(1024, 64 * 1024),
            _ => 16 * 1024,
        };
        let streams = match &progress {
            Progress::Established { inbound, outbound } => {
                (u32::from(*inbound) << 16) | u32::from(*outbound)
            }
            _ => 0,
        };
        Arc::new(AssocShared {
            sock,
            remote,
            started: Instant::now(),
            progress: watch::Sender::new(progress),
            reachable_after: OnceLock::new(),
            router: Mutex::new(Router {
                default: Inbox::new(),
                streams: HashMap::new(),
                accept_mode: opts.accept_streams,
                accepts: Inbox::new(),
                end: None,
            }),
            buffered: AtomicUsize::new(0),
            recv_budget: opts.recv_budget.max(1),
            drained: Notify::new(),
            streams: AtomicU32::new(streams),
            acct: Mutex::new(HashMap::new()),
            send_lock: tokio::sync::Mutex::new(()),
            piece,
            rrp: AtomicBool::new(opts.scheduler == Some(Scheduler::RoundRobinPacket)),
        })
    }

    fn streams(&self) -> (u16, u16) {
        let v = self.streams.load(Ordering::SeqCst);
        ((v >> 16) as u16, v as u16)
    }

    fn end_error(&self) -> Option<Error> {
        match &lock(&self.router).end {
            None => None,
            Some(None) => Some(Error::Closed),
            Some(Some(e)) => Some(e.clone()),
        }
    }

    /// Ends the association: every inbox ends, waiters wake, progress becomes terminal.
    fn finish(&self, end: Option<Error>) {
        {
            let mut r = lock(&self.router);
            if r.end.is_some() {
                return;
            }
            r.end = Some(end.clone());
            r.default.end(end.clone());
            for ib in r.streams.values() {
                ib.end(end.clone());
            }
            r.accepts.end(end.clone());
        }
        self.progress.send_modify(|p| {
            *p = match &end {
                None => Progress::Closed,
                Some(e) => Progress::Failed(e.clone()),
            }
        });
        self.sock.wakers.wake_all();
        self.drained.notify_waiters();
    }

    fn release(&self, n: usize) {
        let before = self.buffered.fetch_sub(n, Ordering::SeqCst);
        if before >= self.recv_budget && before - n < self.recv_budget {
            self.drained.notify_waiters();
        }
    }

    /// One non-blocking `usrsctp_recvv`. `Ok(None)`: would block.
    fn recv_once(&self, buf: &mut [u8]) -> Result<Option<(usize, ffi::sctp_rcvinfo, libc::c_int)>> {
        match self.sock.recvv(buf) {
            Ok(v) => Ok(Some(v)),
            Err(Error::Sys { source, .. }) if would_block(&source) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// One non-blocking `usrsctp_sendv` of a piece; `Ok(None)`: no buffer space (also when
    /// usrsctp took nothing: with explicit EOR, `sctp_lower_sosend` returns 0 without an error
    /// when the free space is positive but no more than `sctp_add_more_threshold`, 1452
    /// bytes, and smaller than the piece).
    fn send_piece(
        &self,
        stream: u16,
        data: &[u8],
        ordered: bool,
        ppid: u32,
        eor: bool,
    ) -> Result<Option<usize>> {
        let mut acct = lock(&self.acct);
        let mut flags = 0u16;
        if !ordered {
            flags |= ffi::SCTP_UNORDERED;
        }
        if eor {
            flags |= ffi::SCTP_EOR;
        }
        let info = ffi::sctp_sndinfo {
            snd_sid: stream,
            snd_flags: flags,
            snd_ppid: ppid.to_be(),
            snd_context: 0,
            snd_assoc_id: 0,
        };
        match self.sock.sendv(data, &info) {
            Ok(0) => Ok(None),
            Ok(n) => {
                *acct.entry(stream).or_default() += n;
                Ok(Some(n))
            }
            Err(Error::Sys { source, .. }) if would_block(&source) => Ok(None),
            Err(Error::Sys { op, source }) => match self.end_error() {
                Some(end) => Err(end),
                None => match source.raw_os_error() {
                    Some(libc::EPIPE) | Some(libc::ENOTCONN) | Some(libc::ECONNRESET) => {
                        Err(Error::Closed)
                    }
                    _ => Err(Error::Sys { op, source }),
                },
            },
            Err(e) => Err(e),
        }
    }

    async fn send(&self, stream: u16, data: &[u8], ordered: bool, ppid: u32) -> Result<()> {
        if data.is_empty() {
            return Err(Error::EmptyMessage);
        }
        let (_, outbound) = self.streams();
        if outbound != 0 && stream >= outbound {
            return Err(Error::InvalidStream {
                stream,
                streams: outbound,
            });
        }
        if let Some(e) = self.end_error() {
            return Err(e);
        }
        let _serial = self.send_lock.lock().await;
        let kick = self.rrp.load(Ordering::Relaxed) && self.sndbuf_use() == Some(0);
        // Aborts the association if this future is dropped with a message half handed over.
        struct Partial<'a>(&'a AssocShared, bool);
        impl Drop for Partial<'_> {
            fn drop(&mut self) {
                if self.1 {
                    self.0.abort();
                }
            }
        }
        let mut partial = Partial(self, false);
        let mut off = 0;
        while off < data.len() {
            let end = (off + self.piece).min(data.len());
            let eor = end == data.len();
            let mut writable = pin!(self.sock.wakers.writable.notified());
            writable.as_mut().enable();
            match self.send_piece(stream, &data[off..end], ordered, ppid, eor)? {
                Some(n) => {
                    off += n;
                    partial.1 = off < data.len();
                }
                None => {
                    if let Some(e) = self.end_error() {
                        return Err(e);
                    }
                    writable.await;
                }
            }
        }
        partial.1 = false;
        if kick {
            self.kick();
        }
        Ok(())
    }

    /// Works around libusrsctp 0.9.5's round-robin-per-packet scheduler: its `select` returns
    /// the stream chosen when the previous packet was done, which is none when the association
    /// was idle, so a message queued on an idle association waits for the next packet of any
    /// kind (the 30 s heartbeat). An on-demand HEARTBEAT runs the output path once more, and
    /// the message goes out bundled with it. Costs one getpaddrs, one setsockopt and a
    /// HEARTBEAT chunk, only when a message is queued on an idle RRP association.
    fn kick(&self) {
        let peer = self.sock.first_peer_addr();
        if let Ok(Some(spp_address)) = peer {
            let mut p = ffi::sctp_paddrparams::zeroed();
            p.spp_address = spp_address;
            p.spp_flags = ffi::SPP_HB_DEMAND;
            let _ = self.sock.setopt(
                ffi::IPPROTO_SCTP,
                ffi::SCTP_PEER_ADDR_PARAMS,
                &p,
                "SCTP_PEER_ADDR_PARAMS",
            );
        }
    }

    pub(crate) fn abort(&self) {
        self.sock.close(true);
        self.finish(Some(Error::Aborted));
    }

    /// Total bytes in usrsctp's send queue (queued + in flight, DATA chunk headers of chunked
    /// data included), via the internal `SCTP_GET_SNDBUF_USE` option if this libusrsctp has it.
    fn sndbuf_use(&self) -> Option<usize> {
        if SNDBUF_USE.load(Ordering::Relaxed) == 2 {
            return None;
        }
        let mut ss = ffi::sctp_sockstat::default();
        match self.sock.getopt(
            ffi::IPPROTO_SCTP,
            ffi::SCTP_GET_SNDBUF_USE,
            &mut ss,
            "SCTP_GET_SNDBUF_USE",
        ) {
            Ok(()) => {
                SNDBUF_USE.store(1, Ordering::Relaxed);
                Some(ss.ss_total_sndbuf as usize)
            }
            Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::ENOPROTOOPT) => {
                SNDBUF_USE.store(2, Ordering::Relaxed);
                None
            }
            Err(_) => None,
        }
    }

    fn queued(&self, stream: Option<u16>) -> usize {
        let mut acct = lock(&self.acct);
        let total = self.sndbuf_use();
        if let Some(t) = total {
            if t == 0 {
                acct.clear();
            } else {
                for v in acct.values_mut() {
                    *v = (*v).min(t);
                }
            }
        }
        let sum: usize = acct.values().sum();
        match stream {
            Some(s) => acct.get(&s).copied().unwrap_or(0),
            None => total.map_or(sum, |t| t.min(sum)),
        }
    }

    fn on_sender_dry(&self) {
        // The send queue was empty when usrsctp queued this event. Without the exact total we
        // reset here (bytes handed over between the event and now are then forgotten).
        if SNDBUF_USE.load(Ordering::Relaxed) != 1 {
            lock(&self.acct).clear();
        } else {
            let _ = self.queued(None);
        }
    }

    fn on_notification(&self, n: &[u8], shutdown_comp: &mut bool) {
        let u16_at = |o: usize| n.get(o..o + 2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
        let Some(ty) = u16_at(0) else { return };
        match ty {
            ffi::SCTP_ASSOC_CHANGE => {
                let (Some(state), Some(error), Some(outbound), Some(inbound)) =
                    (u16_at(8), u16_at(10), u16_at(12), u16_at(14))
                else {
                    return;
                };
                match state {
                    ffi::SCTP_COMM_UP | ffi::SCTP_RESTART => {
                        self.streams.store(
                            (u32::from(inbound) << 16) | u32::from(outbound),
                            Ordering::SeqCst,
                        );
                        let _ = self.reachable_after.set(self.started.elapsed());
                        self.progress
                            .send_modify(|p| *p = Progress::Established { inbound, outbound });
                    }
                    ffi::SCTP_COMM_LOST => self.finish(Some(Error::Lost(error))),
                    ffi::SCTP_CANT_STR_ASSOC => self.finish(Some(Error::CannotStart(error))),
                    ffi::SCTP_SHUTDOWN_COMP => *shutdown_comp = true,
                    _ => {}
                }
            }
            ffi::SCTP_SENDER_DRY_EVENT => self.on_sender_dry(),
            ffi::SCTP_STREAM_RESET_EVENT => {
                let Some(flags) = u16_at(2) else { return };
                if flags & ffi::SCTP_STREAM_RESET_INCOMING_SSN == 0 {
                    return;
                }
                let len = n
                    .get(4..8)
                    .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize)
                    .min(n.len());
                let mut r = lock(&self.router);
                let mut o = 12;
                while o + 2 <= len {
                    if let Some(sid) = u16_at(o) {
                        if let Some(ib) = r.streams.remove(&sid) {
                            ib.end(None);
                        }
                    }
                    o += 2;
                }
            }
            _ => {}
        }
    }

    fn is_connecting(&self) -> bool {
        matches!(
            *self.progress.borrow(),
            Progress::Connecting | Progress::Reachable { .. }
        )
    }
}

impl ClientEvents for AssocShared {
    fn init_ack(&self) {
        let after = self.started.elapsed();
        let _ = self.reachable_after.set(after);
        self.progress.send_if_modified(|p| {
            if matches!(p, Progress::Connecting) {
                *p = Progress::Reachable { after };
                true
            } else {
                false
            }
        });
    }

    fn refused(&self) {
        if self.is_connecting() {
            self.finish(Some(Error::Refused(self.remote)));
        }
    }
}

/// Reads everything usrsctp has for this socket, reassembles messages, handles notifications.
/// Stops reading while more than `recv_budget` bytes wait in our inboxes (so the SCTP receive
/// window closes when the application does not read).
async fn driver(shared: Arc<AssocShared>) {
    let mut partial: HashMap<u16, Message> = HashMap::new();
    let mut notif: Vec<u8> = Vec::new();
    let mut shutdown_comp = false;
    /// What the driver does after one read.
    enum Step {
        Again,
        Wait,
        Done,
    }
    loop {
        if lock(&shared.router).end.is_some() {
            return;
        }
        if shared.buffered.load(Ordering::SeqCst) >= shared.recv_budget {
            let mut d = pin!(shared.drained.notified());
            d.as_mut().enable();
            if shared.buffered.load(Ordering::SeqCst) >= shared.recv_budget
                && lock(&shared.router).end.is_none()
            {
                d.await;
            }
            continue;
        }
        let mut readable = pin!(shared.sock.wakers.readable.notified());
        readable.as_mut().enable();
        // One read into this thread's receive buffer; what it gives is copied out (into
        // the partial message or the notification) before the driver awaits again.
        let step = crate::udp::with_recv_buf(|buf| match shared.recv_once(buf) {
            Ok(Some((n, info, flags))) => {
                if flags & ffi::MSG_NOTIFICATION != 0 {
                    notif.extend_from_slice(&buf[..n]);
                    if flags & ffi::MSG_EOR != 0 {
                        let nb = std::mem::take(&mut notif);
                        shared.on_notification(&nb, &mut shutdown_comp);
                    }
                    return Step::Again;
                }
                if n == 0 {
                    shared.finish(None);
                    return Step::Done;
                }
                let sid = info.rcv_sid;
                let m = partial.entry(sid).or_insert_with(|| Message {
                    stream: sid,
                    ppid: u32::from_be(info.rcv_ppid),
                    unordered: info.rcv_flags & ffi::SCTP_UNORDERED != 0,
                    data: Vec::new(),
                });
                m.data.extend_from_slice(&buf[..n]);
                if flags & ffi::MSG_EOR != 0 {
                    if let Some(m) = partial.remove(&sid) {
                        // Only complete messages count against the budget: a message larger
                        // than the budget must still be read whole to be delivered.
                        shared.buffered.fetch_add(m.data.len(), Ordering::SeqCst);
                        lock(&shared.router).dispatch(m);
                    }
                }
                Step::Again
            }
            Ok(None) => {
                if shutdown_comp {
                    shared.finish(None);
                    Step::Done
                } else {
                    Step::Wait
                }
            }
            Err(Error::Sys { source, .. })
                if source.raw_os_error() == Some(libc::ENOTCONN) && shared.is_connecting() =>
            {
                Step::Wait
            }
            Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::ENOTCONN) => {
                shared.finish(None);
                Step::Done
            }
            Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::ECONNRESET) => {
                shared.finish(Some(Error::Lost(0)));
                Step::Done
            }
            Err(Error::Closed) => {
                shared.finish(Some(Error::Aborted));
                Step::Done
            }
            Err(e) => {
                shared.finish(Some(e));
                Step::Done
            }
        });
        match step {
            Step::Again => {}
            Step::Wait => readable.await,
            Step::Done => return,
        }
    }
}

/// How the association reaches the network.
pub(crate) enum Link {
    Client(ClientLink),
    Server {
        udp: Arc<SharedUdp>,
        remote: SocketAddr,
    },
}

/// Owns the association's resources; dropped when the last handle goes.
pub(crate) struct AssocInner {
    pub(crate) shared: Arc<AssocShared>,
    driver: Option<JoinHandle<()>>,
    link: Link,
    local: SocketAddr,
    remote: SocketAddr,
}

impl Drop for AssocInner {
    fn drop(&mut self) {
        // ABORT goes out through the link, which is still registered here.
        self.shared.sock.close(true);
        self.shared.finish(Some(Error::Aborted));
        if let Some(d) = self.driver.take() {
            d.abort();
        }
        if let Link::Server { udp, remote } = &self.link {
            udp.unclaim(*remote);
        }
        // Then `link` drops: a client's reader task is aborted and its conn address deregistered.
    }
}

impl AssocInner {
    pub(crate) fn start(
        shared: Arc<AssocShared>,
        link: Link,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Arc<AssocInner> {
        let driver = tokio::spawn(driver(shared.clone()));
        Arc::new(AssocInner {
            shared,
            driver: Some(driver),
            link,
            local,
            remote,
        })
    }
}

/// A pending client association. Await it (it implements `IntoFuture`) for the
/// [`Association`]; use [`Connecting::reachable`] or [`Connecting::progress`] to learn of the
/// INIT ACK first. Dropping it aborts the attempt and frees everything at once.
pub struct Connecting {
    pub(crate) inner: Arc<AssocInner>,
    rx: watch::Receiver<Progress>,
}

impl Connecting {
    pub(crate) fn new(inner: Arc<AssocInner>) -> Connecting {
        let rx = inner.shared.progress.subscribe();
        Connecting { inner, rx }
    }

    /// A receiver of progress events (`Connecting` → `Reachable` → `Established`, or
    /// `Failed`). Cheap (a `watch` receiver); intermediate states can be skipped by a slow
    /// reader, but `Reachable` is always published before `Established`.
    pub fn progress(&self) -> watch::Receiver<Progress> {
        self.rx.clone()
    }

    /// Whether an INIT ACK has arrived. No I/O.
    pub fn is_reachable(&self) -> bool {
        self.inner.shared.reachable_after.get().is_some()
    }

    /// Waits for the INIT ACK (the peer's SCTP stack answered: one RTT) and returns the time
    /// since `connect`. Resolves at once if it already arrived; fails if the attempt failed.
    pub async fn reachable(&mut self) -> Result<Duration> {
        loop {
            if let Some(d) = self.inner.shared.reachable_after.get() {
                return Ok(*d);
            }
            match &*self.rx.borrow_and_update() {
                Progress::Failed(e) => return Err(e.clone()),
                Progress::Closed => return Err(Error::Closed),
                _ => {}
            }
            if self.rx.changed().await.is_err() {
                return Err(Error::Closed);
            }
        }
    }

    /// Waits for COMM_UP and returns the association (same as `.await`).
    pub async fn established(mut self) -> Result<Association> {
        loop {
            match &*self.rx.borrow_and_update() {
                Progress::Established { .. } => {
                    return Ok(Association {
                        inner: self.inner.clone(),
                    })
                }
                Progress::Failed(e) => return Err(e.clone()),
                Progress::Closed => return Err(Error::Closed),
                _ => {}
            }
            if self.rx.changed().await.is_err() {
                return Err(Error::Closed);
            }
        }
    }

    /// Local UDP address of the attempt's socket. No I/O.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    /// The peer's UDP encapsulation address. No I/O.
    pub fn remote_addr(&self) -> SocketAddr {
        self.inner.remote
    }
}

impl IntoFuture for Connecting {
    type Output = Result<Association>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Association>> + Send>>;

    /// Boxes [`Connecting::established`] (one allocation).
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.established())
    }
}

/// An established SCTP association. Cloning is an `Arc` increment; all clones share the
/// association, which is aborted (ABORT chunk, socket and UDP resources freed) when the last
/// clone and the last [`StreamHandle`] are dropped.
#[derive(Clone)]
pub struct Association {
    pub(crate) inner: Arc<AssocInner>,
}

impl std::fmt::Debug for Association {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Association")
            .field("local", &self.inner.local)
            .field("remote", &self.inner.remote)
            .finish()
    }
}

impl Association {
    fn shared(&self) -> &AssocShared {
        &self.inner.shared
    }

    /// Sends one message on `stream`. Waits (asynchronously) for send-buffer space instead of
    /// failing; messages larger than a piece (half the send buffer, at most 64 KiB) are handed
    /// over in pieces with explicit EOR. Senders on one association are serialised per
    /// message. Cancel-safe between messages only: dropping the future after part of a
    /// multi-piece message was handed over aborts the association.
    pub async fn send(&self, stream: u16, data: &[u8], ordered: bool, ppid: u32) -> Result<()> {
        self.shared().send(stream, data, ordered, ppid).await
    }

    /// Receives the next message of a stream that has no [`StreamHandle`] (all streams if
    /// none were claimed and stream accepting is off). `Ok(None)` after a graceful shutdown,
    /// `Err` after an abort. Cancel-safe.
    pub async fn recv(&self) -> Result<Option<Message>> {
        let ib = lock(&self.shared().router).default.clone();
        let m = ib.pop().await?;
        if let Some(m) = &m {
            self.shared().release(m.data.len());
        }
        Ok(m)
    }

    /// Negotiated `(inbound, outbound)` stream counts. No I/O.
    pub fn streams(&self) -> (u16, u16) {
        self.shared().streams()
    }

    /// Our UDP address. No I/O.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    /// The peer's UDP address. No I/O.
    pub fn remote_addr(&self) -> SocketAddr {
        self.inner.remote
    }

    /// Graceful close of the whole association: SHUTDOWN once all queued data is
    /// acknowledged, then waits for the shutdown to complete (bound it with a timeout).
    pub async fn close(&self) -> Result<()> {
        let mut rx = self.shared().progress.subscribe();
        match self.shared().sock.shutdown(libc::SHUT_WR) {
            Ok(()) => {}
            Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::ENOTCONN) => {}
            Err(e) => return Err(e),
        }
        loop {
            match &*rx.borrow_and_update() {
                Progress::Closed => return Ok(()),
                Progress::Failed(e) => return Err(e.clone()),
                _ => {}
            }
            if rx.changed().await.is_err() {
                return Ok(());
            }
        }
    }

    /// Aborts the association at once (ABORT chunk); every waiter gets [`Error::Aborted`].
    pub fn abort(&self) {
        self.shared().abort();
    }

    /// Whether the association has ended (closed, lost or aborted). No I/O.
    pub fn is_closed(&self) -> bool {
        lock(&self.shared().router).end.is_some()
    }

    /// Selects the RFC 8260 stream scheduler (`SCTP_PLUGGABLE_SS`). One setsockopt; applies
    /// to data queued from now on (usrsctp re-sorts what is already queued).
    pub fn set_scheduler(&self, s: Scheduler) -> Result<()> {
        self.shared()
            .rrp
            .store(s == Scheduler::RoundRobinPacket, Ordering::Relaxed);
        let v = ffi::sctp_assoc_value {
            assoc_id: 0,
            assoc_value: s.raw(),
        };
        self.shared().sock.setopt(
            ffi::IPPROTO_SCTP,
            ffi::SCTP_PLUGGABLE_SS,
            &v,
            "SCTP_PLUGGABLE_SS",
        )
    }

    /// Sets the scheduler parameter of an outbound stream (`SCTP_SS_VALUE`): the priority for
    /// [`Scheduler::Priority`] (lower value is served first), the weight for
    /// [`Scheduler::FairBandwidth`]. One setsockopt.
    pub fn set_stream_value(&self, stream: u16, value: u16) -> Result<()> {
        let v = ffi::sctp_stream_value {
            assoc_id: 0,
            stream_id: stream,
            stream_value: value,
        };
        self.shared()
            .sock
            .setopt(ffi::IPPROTO_SCTP, ffi::SCTP_SS_VALUE, &v, "SCTP_SS_VALUE")
    }

    /// Bytes handed to usrsctp on `stream` and not yet known to be acknowledged. usrsctp has
    /// no per-stream queue query, so this is our own count: bytes handed over on the stream
    /// since the association's send buffer was last seen empty, capped by the association's
    /// total (an upper bound; exact when one stream has data outstanding; 0 once everything
    /// is acknowledged). One getsockopt.
    pub fn queued_bytes(&self, stream: u16) -> usize {
        self.shared().queued(Some(stream))
    }

    /// Bytes queued or in flight for the whole association (usrsctp's own count, which
    /// includes 16 bytes of DATA chunk header per chunk already built; capped by what we
    /// handed over). One getsockopt.
    pub fn queued_bytes_total(&self) -> usize {
        self.shared().queued(None)
    }

    /// Claims `stream`: from now on its messages go to the returned handle (messages already
    /// queued for [`Association::recv`] stay there). Fails if the stream already has a handle.
    pub fn stream(&self, id: u16) -> Result<StreamHandle> {
        let (_, outbound) = self.streams();
        if outbound != 0 && id >= outbound {
            return Err(Error::InvalidStream {
                stream: id,
                streams: outbound,
            });
        }
        let mut r = lock(&self.shared().router);
        if r.streams.contains_key(&id) {
            return Err(Error::StreamInUse(id));
        }
        let ib = Inbox::new();
        if let Some(end) = &r.end {
            ib.end(end.clone());
        }
        r.streams.insert(id, ib.clone());
        Ok(StreamHandle {
            assoc: self.clone(),
            id,
            inbox: ib,
        })
    }

    /// Waits for a stream the peer started using (a message on a stream without a handle).
    /// The first call switches the association to stream-accepting mode (also settable with
    /// [`SctpOptions::accept_streams`]); messages already waiting for `recv` move to their
    /// streams. `Ok(None)` after a graceful shutdown.
    pub async fn accept_stream(&self) -> Result<Option<StreamHandle>> {
        let accepts = {
            let mut r = lock(&self.shared().router);
            if !r.accept_mode {
                r.accept_mode = true;
                let waiting = r.default.drain();
                for m in waiting {
                    r.dispatch(m);
                }
            }
            r.accepts.clone()
        };
        Ok(accepts.pop().await?.map(|(id, inbox)| StreamHandle {
            assoc: self.clone(),
            id,
            inbox,
        }))
    }
}

/// One stream of an association: sends on it, receives only its messages. Holds the
/// association alive. Dropping it releases the stream id (later messages on it go to
/// `recv`/`accept_stream` again).
pub struct StreamHandle {
    assoc: Association,
    id: u16,
    inbox: StreamInbox,
}

impl std::fmt::Debug for StreamHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamHandle")
            .field("id", &self.id)
            .finish()
    }
}

impl StreamHandle {
    /// The stream id. No I/O.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// The association this stream belongs to (an `Arc` clone).
    pub fn association(&self) -> &Association {
        &self.assoc
    }

    /// Sends one message on this stream; see [`Association::send`].
    pub async fn send(&self, data: &[u8], ordered: bool, ppid: u32) -> Result<()> {
        self.assoc.send(self.id, data, ordered, ppid).await
    }

    /// Receives the next message of this stream. `Ok(None)` when the association shut down
    /// gracefully or the peer reset the stream. Cancel-safe.
    pub async fn recv(&self) -> Result<Option<Message>> {
        let m = self.inbox.pop().await?;
        if let Some(m) = &m {
            self.assoc.shared().release(m.data.len());
        }
        Ok(m)
    }

    /// Bytes queued on this stream, see [`Association::queued_bytes`].
    pub fn queued_bytes(&self) -> usize {
        self.assoc.queued_bytes(self.id)
    }
}

impl Drop for StreamHandle {
    fn drop(&mut self) {
        let mut r = lock(&self.assoc.shared().router);
        if r.streams
            .get(&self.id)
            .is_some_and(|ib| Arc::ptr_eq(ib, &self.inbox))
        {
            r.streams.remove(&self.id);
        }
        let rest = self.inbox.drain();
        drop(r);
        let n: usize = rest.iter().map(|m| m.data.len()).sum();
        self.assoc.shared().release(n);
    }
}

impl AssocInner {
    /// The conn address of a client association (0 for server-side ones).
    pub(crate) fn conn_id(&self) -> usize {
        match &self.link {
            Link::Client(l) => l.addr.id,
            Link::Server { .. } => 0,
        }
    }
}
