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
    /// The connection's counters and paths.
    Stats(Reply<(taps::Statistics, Vec<taps::Path>)>),
    /// Make the path to this peer address the primary one.
    SetPrimary(SocketAddr, Reply<Result<(), taps::Error>>),
}

/// Where a flow's task answers a question of the application.
pub(crate) type Reply<T> = tokio::sync::oneshot::Sender<T>;

/// Asks an open flow's task and drives the runtime until it answers (straight to the
/// task, not through an inline loop's outbox); `None` if it does not within a second.
pub(crate) fn ask<T>(shared: &FlowShared, question: impl FnOnce(Reply<T>) -> Cmd) -> Option<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    shared.cmds.send(question(tx));
    crate::runtime::block_on(async { tokio::time::timeout(Duration::from_secs(1), rx).await })
        .ok()
        .and_then(Result::ok)
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
        shared: Arc<FlowShared>,
    },
    Data(Vec<u8>),
    Written(u64),
    Eof,
    Error(NeatError, String),
}

/// What a flow and its task share: the application's commands and read-side flow
/// control.
#[derive(Default)]
pub(crate) struct FlowShared {
    pub(crate) cmds: Commands,
    pub(crate) buffered: AtomicUsize,
    pub(crate) paused: AtomicBool,
}

/// Commands from the application to one flow's task, in order: a queue and the task's
/// waker under one lock (a channel would preallocate a block of slots per flow).
#[derive(Default)]
pub(crate) struct Commands(Mutex<CommandState>);

#[derive(Default)]
struct CommandState {
    queue: VecDeque<Cmd>,
    waker: Option<std::task::Waker>,
}

impl Commands {
    fn state(&self) -> std::sync::MutexGuard<'_, CommandState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `cmd` and wakes the task.
    pub(crate) fn send(&self, cmd: Cmd) {
        let waker = {
            let mut st = self.state();
            st.queue.push_back(cmd);
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The next command.
    fn poll_next(&self, cx: &mut TaskContext<'_>) -> Poll<Cmd> {
        let mut st = self.state();
        if let Some(cmd) = st.queue.pop_front() {
            return Poll::Ready(cmd);
        }
        if !st.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            st.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }
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

    /// Moves every queued event into `into` (empty), whose allocation the queue keeps
    /// for the events to come (application thread).
    pub(crate) fn take_events(&self, into: &mut Vec<(u64, Event)>) {
        debug_assert!(into.is_empty());
        std::mem::swap(
            &mut self.queue.lock().unwrap_or_else(|e| e.into_inner()).events,
            into,
        );
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

/// A client flow to open at the loop's next turn (NEAT connects on the next loop turn:
/// a program may open before it accepts on the port it connects to).
pub(crate) struct OpenRequest {
    pub(crate) pre: Arc<taps::Preconnection>,
    pub(crate) id: u64,
    pub(crate) ctx: Arc<CtxShared>,
    pub(crate) shared: Arc<FlowShared>,
}

impl OpenRequest {
    /// Initiates the flow, then drives the connection ([`drive`]) in the same task: one
    /// task per flow from open to close. The race's state is boxed inside `initiate` and
    /// freed when the race ends. Close or abort before the race ends cancels it.
    #[allow(clippy::manual_async_fn)]
    pub(crate) fn run(self) -> impl std::future::Future<Output = ()> + Send {
        // An async block, not an async fn, as for `drive`. The opening's state and the
        // established flow's never coexist: `open`'s future is a temporary gone before
        // `drive`'s is made, so the task is sized by the larger of the two.
        async move {
            let Some(pump) = self.open().await else {
                return;
            };
            drive(pump).await;
        }
    }

    /// Races for the connection; the established flow's state, or None when the open
    /// failed (the application is told) or was cancelled.
    async fn open(self) -> Option<Pump> {
        let OpenRequest {
            pre,
            id,
            ctx,
            shared,
        } = self;
        let r = tokio::select! {
            r = pre.initiate() => r,
            () = until_closed(&shared) => return None,
        };
        match r {
            Ok(conn) => {
                ctx.post(id, Event::Connected(ConnInfo::of(&conn)));
                Some(Pump::new(conn, id, ctx, shared))
            }
            Err(e) => {
                ctx.post(id, Event::Error(open_error_code(&e), e.to_string()));
                None
            }
        }
    }
}

/// Resolves when the application closes or aborts the flow (other commands are
/// dropped: none comes before a flow is open).
fn until_closed(shared: &FlowShared) -> impl std::future::Future<Output = ()> + '_ {
    poll_fn(move |cx| loop {
        match std::task::ready!(shared.cmds.poll_next(cx)) {
            Cmd::Close(_) | Cmd::Abort => return Poll::Ready(()),
            _ => {}
        }
    })
}

/// Accepts connections and hands each to the application as a new flow.
pub(crate) async fn accept(mut l: Listener, id: u64, ctx: Arc<CtxShared>, own: Arc<FlowShared>) {
    loop {
        tokio::select! {
            c = l.accept() => match c {
                Some(Ok(conn)) => {
                    let nid = ctx.next_id();
                    let shared = Arc::new(FlowShared::default());
                    let info = ConnInfo::of(&conn);
                    ctx.post(id, Event::Accepted { id: nid, info, shared: shared.clone() });
                    tokio::spawn(drive(Pump::new(conn, nid, ctx.clone(), shared)));
                }
                Some(Err(e)) => ctx.log(NEAT_LOG_WARNING, format_args!("accept failed: {e}")),
                None => {
                    ctx.post(id, Event::Error(NEAT_ERROR_IO, "every listening socket failed".into()));
                    return;
                }
            },
            () = until_closed(&own) => return,
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
            match self.shared.cmds.poll_next(cx) {
                Poll::Ready(Cmd::Write(d)) => self.wq.push_back(d),
                Poll::Ready(Cmd::Shutdown) => self.shut_req = true,
                Poll::Ready(Cmd::Close(token)) => self.closing = Some(token),
                Poll::Ready(Cmd::Abort) => return Poll::Ready(End::Abort),
                Poll::Ready(Cmd::Resume) => {}
                Poll::Ready(Cmd::Stats(tx)) => {
                    let paths = self.conn.paths().unwrap_or_default();
                    let _ = tx.send((self.conn.statistics(), paths));
                }
                Poll::Ready(Cmd::SetPrimary(remote, tx)) => {
                    let _ = tx.send(self.conn.set_primary_path(remote));
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

impl Pump {
    /// The task state of an established connection.
    fn new(conn: Connection, id: u64, ctx: Arc<CtxShared>, shared: Arc<FlowShared>) -> Pump {
        Pump {
            message: ConnInfo::of(&conn).message,
            conn,
            id,
            ctx,
            shared,
            wq: VecDeque::new(),
            woff: 0,
            read_done: false,
            shut_req: false,
            shut_done: false,
            closing: None,
        }
    }
}

/// Moves bytes between an established connection and the application until either
/// side ends it, then closes (gracefully, within 10 s) or aborts it. Takes the state
/// built already, so the future holds one copy of it.
// Not an async fn: see the comment inside.
#[allow(clippy::manual_async_fn)]
fn drive(mut p: Pump) -> impl std::future::Future<Output = ()> + Send {
    // An async block, not an async fn: the fn's argument would be moved into a local
    // of its body, and the task would hold the state twice.
    async move {
        let end = poll_fn(|cx| p.poll_turn(cx)).await;
        if let Some(close) = p.finish(end) {
            close.await;
        }
    }
}

/// What ends a flow's task: a graceful close to await (boxed, so the task does not
/// carry its state, the transport and a timer, inline for its whole life).
type Closing = Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

impl Pump {
    /// Ends the connection as `end` says: the graceful close to await, if any (the
    /// close-in-progress token is released when it is done).
    fn finish(self, end: End) -> Option<Closing> {
        let Pump {
            conn,
            closing: token,
            shut_done,
            ..
        } = self;
        // A stream whose sending side already ended (FIN, close_notify) needs no second
        // shutdown: dropping it closes the socket. SCTP's close ends the association.
        let shut_stream = shut_done && conn.info().stack.protocol != Protocol::Sctp;
        match end {
            End::Close if !shut_stream => Some(Box::pin(async move {
                let _ = tokio::time::timeout(CLOSE_LIMIT, conn.close()).await;
                drop(token);
            })),
            End::Abort => {
                conn.abort();
                None
            }
            End::Close | End::Failed => None,
        }
    }
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
pub(crate) struct Linger(());

impl Linger {
    /// Counts one close in progress.
    pub(crate) fn start() -> Linger {
        CLOSES_IN_PROGRESS.fetch_add(1, Ordering::SeqCst);
        Linger(())
    }
}

impl Drop for Linger {
    fn drop(&mut self) {
        if CLOSES_IN_PROGRESS.fetch_sub(1, Ordering::SeqCst) == 1 {
            let _g = CLOSES_DONE.0.lock().unwrap_or_else(|e| e.into_inner());
            CLOSES_DONE.1.notify_all();
        }
    }
}

/// Waits (at most [`EXIT_LINGER`]) until every close in progress is done, while the
/// background thread drives the runtime.
pub(crate) fn wait_for_closes() {
    // The exiting thread cannot drive the runtime (glibc ran its thread-local
    // destructors, tokio's context included, before the exit handlers): the background
    // thread drives whatever still runs from here, an inline loop's turns being over.
    if CLOSES_IN_PROGRESS.load(Ordering::SeqCst) == 0 {
        return;
    }
    crate::runtime::hand_over_for_exit();
    let deadline = std::time::Instant::now() + EXIT_LINGER;
    let mut n = CLOSES_DONE.0.lock().unwrap_or_else(|e| e.into_inner());
    while CLOSES_IN_PROGRESS.load(Ordering::SeqCst) > 0 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        n = CLOSES_DONE
            .1
            .wait_timeout(n, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// Ends the closes in progress as `neat_free_ctx` must, as the kernel would for its own
/// stacks: those that need only a turn of the runtime (a stream already shut down, an
/// abort) end now, on this thread; for the rest, which wait on a peer (SCTP's
/// SHUTDOWN, a TLS close_notify), the background thread is started, so they go on while
/// the program runs after the free (and not only from the exit handler). Turns the
/// runtime until no close is left or [`IDLE_TURNS`] turns in a row end none; a program
/// that closed only TCP flows starts no thread.
pub(crate) fn end_closes() {
    /// Turns in a row that end no close before the rest are taken to wait on a peer.
    const IDLE_TURNS: u32 = 3;
    let mut left = CLOSES_IN_PROGRESS.load(Ordering::SeqCst);
    if left == 0 {
        return;
    }
    crate::runtime::block_on(async {
        let mut idle = 0;
        while left > 0 && idle < IDLE_TURNS {
            // One turn: the runtime runs the tasks that are ready and polls its I/O.
            tokio::task::yield_now().await;
            let now = CLOSES_IN_PROGRESS.load(Ordering::SeqCst);
            idle = if now < left { 0 } else { idle + 1 };
            left = now;
        }
    });
    if left > 0 {
        crate::runtime::start_background();
    }
}

/// Signalled when a close in progress ends (the exit handler waits on it).
static CLOSES_DONE: (Mutex<()>, std::sync::Condvar) = (Mutex::new(()), std::sync::Condvar::new());

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
