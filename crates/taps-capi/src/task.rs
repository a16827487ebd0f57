//! The tokio side: one task per flow owns its `taps::Connection` (or `Listener`) and
//! tells the application's loop what happened through the context's queue, waking it
//! with `uv_async_send`. Nothing here calls into the application.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use taps::taps_core::properties::Protocol;
use taps::{Connection, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use crate::types::*;
use crate::uv;

/// Bytes a flow may hold received but not yet read by the application before its task
/// stops reading (TCP's flow control then holds the sender back).
pub(crate) const READ_LIMIT: usize = 1 << 20;
/// Largest datagram a UDP or UDP-Lite flow sends (one IPv4 datagram's payload at most;
/// SCTP messages have no such bound).
pub(crate) const MAX_DATAGRAM: usize = 65_507;
/// Bytes one read of a stream transport takes at most; the buffer sizes the library
/// reports (`neat_get_max_buffer_sizes`, `write_size`/`read_size` in the statistics).
pub(crate) const IO_SIZE: usize = 64 * 1024;

/// What the application asks of a flow's task.
pub(crate) enum Cmd {
    Write(Vec<u8>),
    Shutdown,
    /// Close gracefully; the token counts the close until it is done.
    Close(Linger),
    Abort,
    /// The application read below [`READ_LIMIT`]: read again.
    Resume,
    Stats(std::sync::mpsc::Sender<taps::Statistics>),
}

/// What an established flow is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnInfo {
    pub(crate) stack: i32,
    pub(crate) stream_id: u16,
    pub(crate) remote: SocketAddr,
    pub(crate) local: SocketAddr,
    pub(crate) message: bool,
}

impl ConnInfo {
    pub(crate) fn of(c: &Connection) -> ConnInfo {
        let stack = match c.info().stack.protocol {
            Protocol::Tcp => NEAT_STACK_TCP,
            Protocol::Mptcp => NEAT_STACK_MPTCP,
            Protocol::Sctp => NEAT_STACK_SCTP,
            Protocol::Udp => NEAT_STACK_UDP,
            Protocol::UdpLite => NEAT_STACK_UDPLITE,
            _ => 0,
        };
        ConnInfo {
            stack,
            stream_id: c.sctp_stream().unwrap_or(0),
            remote: c.info().remote,
            local: c.info().local,
            // QUIC (no NEAT stack number: 0) carries a byte stream like TLS/TCP.
            message: matches!(stack, NEAT_STACK_SCTP | NEAT_STACK_UDP | NEAT_STACK_UDPLITE),
        }
    }
}

/// What a flow's task tells the application.
pub(crate) enum Event {
    Connected(ConnInfo),
    Accepted {
        id: u64,
        info: ConnInfo,
        tx: UnboundedSender<Cmd>,
        shared: Arc<FlowShared>,
    },
    Data(Vec<u8>),
    Written(u64),
    Eof,
    Error(NeatError, String),
}

/// Read-side flow control shared by a flow and its task.
#[derive(Default)]
pub(crate) struct FlowShared {
    pub(crate) buffered: AtomicUsize,
    pub(crate) paused: AtomicBool,
}

struct Queue {
    events: Vec<(u64, Event)>,
    async_handle: *mut uv::UvHandle,
    alive: bool,
}

// SAFETY: the handle pointer is only used for uv_async_send (thread-safe by libuv's
// contract) while `alive`, which the application thread clears under the same lock
// before it closes the handle.
unsafe impl Send for Queue {}

/// The part of a context the tokio side sees.
pub(crate) struct CtxShared {
    queue: Mutex<Queue>,
    /// The context's loop runs inline ([`crate::runtime`]): events wake [`Self::wake`]
    /// instead of the uv async handle.
    pub(crate) inline: AtomicBool,
    /// Wakes the inline loop's wait for events.
    pub(crate) wake: tokio::sync::Notify,
    next_id: AtomicU64,
    pub(crate) log_level: AtomicU8,
}

impl CtxShared {
    pub(crate) fn new(async_handle: *mut uv::UvHandle) -> CtxShared {
        CtxShared {
            queue: Mutex::new(Queue {
                events: Vec::new(),
                async_handle,
                alive: true,
            }),
            inline: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
            next_id: AtomicU64::new(1),
            log_level: AtomicU8::new(NEAT_LOG_DEBUG),
        }
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Queues an event for flow `id` and wakes the application's loop.
    pub(crate) fn post(&self, id: u64, ev: Event) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if !q.alive {
            return;
        }
        q.events.push((id, ev));
        if q.events.len() == 1 {
            if self.inline.load(Ordering::Acquire) {
                self.wake.notify_one();
            } else {
                // SAFETY: the handle is initialised and not closed while `alive` (see
                // Queue).
                unsafe { uv::uv_async_send(q.async_handle) };
            }
        }
    }

    /// Switches event delivery between the inline loop's wake (`true`) and the uv
    /// async handle; leaving inline with events queued sends the async wake-up they
    /// would have had.
    pub(crate) fn set_inline(&self, inline: bool) {
        let q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        self.inline.store(inline, Ordering::Release);
        if !inline && q.alive && !q.events.is_empty() {
            // SAFETY: as in `post`.
            unsafe { uv::uv_async_send(q.async_handle) };
        }
    }

    /// Whether events wait to be dispatched.
    pub(crate) fn has_events(&self) -> bool {
        !self
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .events
            .is_empty()
    }

    /// Takes every queued event (application thread).
    pub(crate) fn drain(&self) -> Vec<(u64, Event)> {
        std::mem::take(&mut self.queue.lock().unwrap_or_else(|e| e.into_inner()).events)
    }

    /// No more wake-ups: the context is going away.
    pub(crate) fn kill(&self) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.alive = false;
        q.events.clear();
    }

    pub(crate) fn log(&self, level: u8, msg: std::fmt::Arguments<'_>) {
        if level <= self.log_level.load(Ordering::Relaxed) {
            let tag = match level {
                NEAT_LOG_ERROR => "error",
                NEAT_LOG_WARNING => "warning",
                NEAT_LOG_INFO => "info",
                _ => "debug",
            };
            eprintln!("[taps-neat {tag}] {msg}");
        }
    }
}

/// NEAT's code for a failed open.
pub(crate) fn open_error_code(e: &taps::Error) -> NeatError {
    match e {
        taps::Error::Establish(taps::EstablishError::Resolve { .. }) => NEAT_ERROR_DNS,
        taps::Error::Io(_) => NEAT_ERROR_IO,
        _ => NEAT_ERROR_UNABLE,
    }
}

/// Initiates and then drives a client flow. Dropping the command sender (or Close)
/// before the race ends cancels it.
pub(crate) async fn open(
    pre: Arc<taps::Preconnection>,
    id: u64,
    ctx: Arc<CtxShared>,
    shared: Arc<FlowShared>,
    mut rx: UnboundedReceiver<Cmd>,
) {
    let r = tokio::select! {
        r = pre.initiate() => r,
        () = until_closed(&mut rx) => return,
    };
    match r {
        Ok(conn) => {
            ctx.post(id, Event::Connected(ConnInfo::of(&conn)));
            drive(conn, id, ctx, shared, rx).await;
        }
        Err(e) => ctx.post(id, Event::Error(open_error_code(&e), e.to_string())),
    }
}

async fn until_closed(rx: &mut UnboundedReceiver<Cmd>) {
    loop {
        match rx.recv().await {
            None | Some(Cmd::Close(_)) | Some(Cmd::Abort) => return,
            Some(_) => {}
        }
    }
}

/// Accepts connections and hands each to the application as a new flow.
pub(crate) async fn accept(
    mut l: Listener,
    id: u64,
    ctx: Arc<CtxShared>,
    mut rx: UnboundedReceiver<Cmd>,
) {
    loop {
        tokio::select! {
            c = l.accept() => match c {
                Some(Ok(conn)) => {
                    let nid = ctx.next_id();
                    let shared = Arc::new(FlowShared::default());
                    let (tx, crx) = tokio::sync::mpsc::unbounded_channel();
                    let info = ConnInfo::of(&conn);
                    ctx.post(id, Event::Accepted { id: nid, info, tx, shared: shared.clone() });
                    tokio::spawn(drive(conn, nid, ctx.clone(), shared, crx));
                }
                Some(Err(e)) => ctx.log(NEAT_LOG_WARNING, format_args!("accept failed: {e}")),
                None => {
                    ctx.post(id, Event::Error(NEAT_ERROR_IO, "every listening socket failed".into()));
                    return;
                }
            },
            () = until_closed(&mut rx) => return,
        }
    }
}

enum End {
    Close,
    Abort,
    Failed,
}

/// One established connection's task state: the application's commands, the bytes it
/// wrote and not yet handed to the connection, and where reading and closing stand.
/// [`drive`] polls its steps in order (commands, writes, shutdown, reads), so one task
/// owns the connection with no locks.
struct Pump {
    conn: Connection,
    id: u64,
    ctx: Arc<CtxShared>,
    shared: Arc<FlowShared>,
    rx: UnboundedReceiver<Cmd>,
    wq: VecDeque<Vec<u8>>,
    woff: usize,
    read_done: bool,
    /// A message transport (SCTP, UDP, UDP-Lite, DTLS): writes and reads are whole
    /// messages.
    message: bool,
    shut_req: bool,
    shut_done: bool,
    /// The application closed the flow; the token keeps the process from exiting until
    /// the close is done (see [`Linger`]).
    closing: Option<Linger>,
}

impl Pump {
    /// Takes the application's commands; Ready(Abort) when it aborted.
    fn take_commands(&mut self, cx: &mut TaskContext<'_>) -> Poll<End> {
        while self.closing.is_none() {
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(Cmd::Write(d))) => self.wq.push_back(d),
                Poll::Ready(Some(Cmd::Shutdown)) => self.shut_req = true,
                Poll::Ready(Some(Cmd::Close(token))) => self.closing = Some(token),
                Poll::Ready(None) => self.closing = Some(Linger::none()),
                Poll::Ready(Some(Cmd::Abort)) => return Poll::Ready(End::Abort),
                Poll::Ready(Some(Cmd::Resume)) => {}
                Poll::Ready(Some(Cmd::Stats(tx))) => {
                    let _ = tx.send(self.conn.statistics());
                }
                Poll::Pending => break,
            }
        }
        Poll::Pending
    }

    /// Hands queued writes to the connection (on message transports each write whole,
    /// as one message) and tells the application how many bytes went; Ready(Failed)
    /// when the connection failed.
    fn write_queued(&mut self, cx: &mut TaskContext<'_>) -> Poll<End> {
        let mut written = 0u64;
        let mut failed = None;
        while let Some(front) = self.wq.front() {
            let done = if self.message {
                match self.conn.poll_send(cx, front) {
                    Poll::Ready(Ok(())) => Ok(front.len() - self.woff),
                    Poll::Ready(Err(e)) => Err(io::Error::other(e)),
                    Poll::Pending => break,
                }
            } else {
                match Pin::new(&mut self.conn).poll_write(cx, &front[self.woff..]) {
                    Poll::Ready(Ok(0)) if front.len() > self.woff => {
                        Err(io::Error::from(io::ErrorKind::WriteZero))
                    }
                    Poll::Ready(r) => r,
                    Poll::Pending => break,
                }
            };
            match done {
                Ok(n) => {
                    self.woff += n;
                    written += n as u64;
                    if self.woff >= front.len() {
                        self.wq.pop_front();
                        self.woff = 0;
                    }
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if written > 0 {
            self.ctx.post(self.id, Event::Written(written));
        }
        match failed {
            Some(e) => {
                if self.closing.is_none() {
                    self.ctx
                        .post(self.id, Event::Error(NEAT_ERROR_IO, e.to_string()));
                }
                Poll::Ready(End::Failed)
            }
            None => Poll::Pending,
        }
    }

    /// Ends the sending side once everything asked for before the shutdown is written;
    /// Ready(Close) when the flow is closing and nothing is left to write.
    fn shut_or_close(&mut self, cx: &mut TaskContext<'_>) -> Poll<End> {
        if self.wq.is_empty()
            && self.shut_req
            && !self.shut_done
            && Pin::new(&mut self.conn).poll_shutdown(cx).is_ready()
        {
            self.shut_done = true;
        }
        if self.closing.is_some() && self.wq.is_empty() {
            return Poll::Ready(End::Close);
        }
        Poll::Pending
    }

    /// Reads what the connection has, up to [`READ_LIMIT`] unread by the application:
    /// whole messages on message transports, bytes through one scratch buffer per
    /// thread on streams (what arrived is copied out, not 64 KiB per flow).
    fn read_available(&mut self, cx: &mut TaskContext<'_>) {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; IO_SIZE]);
        }
        SCRATCH.with(|b| self.read_into(cx, &mut b.borrow_mut()));
    }

    /// Whether the application's unread bytes keep the task from reading more (and
    /// records that it waits for [`Cmd::Resume`]).
    fn over_budget(&self) -> bool {
        let shared = &self.shared;
        if shared.buffered.load(Ordering::SeqCst) < READ_LIMIT {
            return false;
        }
        shared.paused.store(true, Ordering::SeqCst);
        if shared.buffered.load(Ordering::SeqCst) >= READ_LIMIT {
            return true;
        }
        shared.paused.store(false, Ordering::SeqCst);
        false
    }

    fn read_into(&mut self, cx: &mut TaskContext<'_>, buf: &mut [u8]) {
        while self.closing.is_none() && !self.read_done && !self.over_budget() {
            let got = if self.message {
                match self.conn.poll_receive(cx) {
                    Poll::Ready(Ok(Some(m))) if m.is_empty() => continue,
                    Poll::Ready(Ok(m)) => Ok(m),
                    Poll::Ready(Err(e)) => Err(e.to_string()),
                    Poll::Pending => break,
                }
            } else {
                let mut rb = ReadBuf::new(buf);
                match Pin::new(&mut self.conn).poll_read(cx, &mut rb) {
                    Poll::Ready(Ok(())) if rb.filled().is_empty() => Ok(None),
                    Poll::Ready(Ok(())) => Ok(Some(rb.filled().to_vec())),
                    Poll::Ready(Err(e)) => Err(e.to_string()),
                    Poll::Pending => break,
                }
            };
            match got {
                Ok(Some(d)) => {
                    self.shared.buffered.fetch_add(d.len(), Ordering::SeqCst);
                    self.ctx.post(self.id, Event::Data(d));
                }
                Ok(None) => {
                    self.read_done = true;
                    self.ctx.post(self.id, Event::Eof);
                }
                Err(e) => {
                    self.read_done = true;
                    self.ctx.post(self.id, Event::Error(NEAT_ERROR_IO, e));
                }
            }
        }
    }

    /// One turn of every step, in order.
    fn poll_turn(&mut self, cx: &mut TaskContext<'_>) -> Poll<End> {
        if let Poll::Ready(end) = self.take_commands(cx) {
            return Poll::Ready(end);
        }
        if let Poll::Ready(end) = self.write_queued(cx) {
            return Poll::Ready(end);
        }
        if let Poll::Ready(end) = self.shut_or_close(cx) {
            return Poll::Ready(end);
        }
        self.read_available(cx);
        Poll::Pending
    }
}

/// Moves bytes between an established connection and the application until either
/// side ends it, then closes (gracefully, within 10 s) or aborts it.
pub(crate) async fn drive(
    conn: Connection,
    id: u64,
    ctx: Arc<CtxShared>,
    shared: Arc<FlowShared>,
    rx: UnboundedReceiver<Cmd>,
) {
    let message = ConnInfo::of(&conn).message;
    let mut p = Pump {
        conn,
        message,
        id,
        ctx,
        shared,
        rx,
        wq: VecDeque::new(),
        woff: 0,
        read_done: false,
        shut_req: false,
        shut_done: false,
        closing: None,
    };
    let end = poll_fn(|cx| p.poll_turn(cx)).await;
    let token = p.closing.take();
    // A stream whose sending side already ended (FIN, close_notify) needs no second
    // shutdown: dropping it closes the socket. SCTP's close ends the association.
    let shut_stream = p.shut_done && p.conn.info().stack.protocol != Protocol::Sctp;
    match end {
        End::Close if shut_stream => {}
        End::Close => {
            let _ = tokio::time::timeout(CLOSE_LIMIT, p.conn.close()).await;
        }
        End::Abort => p.conn.abort(),
        End::Failed => {}
    }
    drop(token);
}

/// How long a graceful close may take (the peer acknowledging what was queued).
const CLOSE_LIMIT: Duration = Duration::from_secs(10);
/// How long the process waits at exit for closes in progress.
const EXIT_LINGER: Duration = Duration::from_secs(5);

/// Closes the application asked for and the tokio side has not finished yet.
static CLOSES_IN_PROGRESS: AtomicUsize = AtomicUsize::new(0);

/// A close in progress: counted from `neat_close` until the flow's task has closed the
/// connection (or the task is gone). NEAT's streams lived in the kernel, which finishes
/// a close after the process exits; taps' SCTP (usrsctp) and QUIC run inside the
/// process, so the process waits for these at exit (see [`wait_for_closes`]), or the
/// data still queued would be lost.
pub(crate) struct Linger(bool);

impl Linger {
    /// Counts one close in progress.
    pub(crate) fn start() -> Linger {
        CLOSES_IN_PROGRESS.fetch_add(1, Ordering::SeqCst);
        Linger(true)
    }

    /// A close nobody waits for (the application dropped the flow's channel).
    fn none() -> Linger {
        Linger(false)
    }
}

impl Drop for Linger {
    fn drop(&mut self) {
        if self.0 {
            CLOSES_IN_PROGRESS.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Waits (at most [`EXIT_LINGER`]) until every close in progress is done, while the
/// background thread drives the runtime (polling an atomic with short sleeps).
pub(crate) fn wait_for_closes() {
    // The exiting thread cannot drive the runtime (glibc ran its thread-local
    // destructors, tokio's context included, before the exit handlers): the background
    // thread drives whatever still runs from here, an inline loop's turns being over.
    crate::runtime::hand_over_for_exit();
    let deadline = std::time::Instant::now() + EXIT_LINGER;
    while CLOSES_IN_PROGRESS.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

extern "C" fn wait_for_closes_at_exit() {
    wait_for_closes();
}

/// Makes `exit()` wait for closes in progress (once per process).
pub(crate) fn linger_at_exit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a plain extern "C" function with no arguments.
        unsafe { libc::atexit(wait_for_closes_at_exit) };
        // SCTP's own exit work (shutting every association down) runs from its exit
        // handler, registered when the stack starts (after this one, so it runs
        // first): the closes the application asked for go before it.
        usrsctp::before_exit(wait_for_closes);
    });
}
