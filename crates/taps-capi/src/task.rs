//! The tokio side: one task per flow owns its `taps::Connection` (or `Listener`) and
//! tells the application's loop what happened through the context's queue, waking it
//! with `uv_async_send`. Nothing here calls into the application.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Poll;
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
/// Largest message on message transports (one datagram, one SCTP write).
pub(crate) const MAX_MESSAGE: usize = 65536;

/// The one process-wide tokio runtime (one worker thread) that runs every flow.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("taps-neat")
            .enable_all()
            .build()
            .expect("the tokio runtime of the NEAT C API")
    })
}

/// What the application asks of a flow's task.
pub(crate) enum Cmd {
    Write(Vec<u8>),
    Shutdown,
    Close,
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
            message: !matches!(stack, NEAT_STACK_TCP | NEAT_STACK_MPTCP),
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
            // SAFETY: the handle is initialised and not closed while `alive` (see Queue).
            unsafe { uv::uv_async_send(q.async_handle) };
        }
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
    pre: taps::Preconnection,
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
            None | Some(Cmd::Close) | Some(Cmd::Abort) => return,
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

/// Moves bytes between an established connection and the application until either
/// side ends it. One poll function handles commands, writes and reads, so a single
/// task owns the connection with no locks.
pub(crate) async fn drive(
    mut conn: Connection,
    id: u64,
    ctx: Arc<CtxShared>,
    shared: Arc<FlowShared>,
    mut rx: UnboundedReceiver<Cmd>,
) {
    let mut wq: VecDeque<Vec<u8>> = VecDeque::new();
    let mut woff = 0usize;
    let mut buf = vec![0u8; MAX_MESSAGE];
    let mut read_done = false;
    let mut shut_req = false;
    let mut shut_done = false;
    let mut closing = false;
    let end = poll_fn(|cx| {
        while !closing {
            match rx.poll_recv(cx) {
                Poll::Ready(Some(Cmd::Write(d))) => wq.push_back(d),
                Poll::Ready(Some(Cmd::Shutdown)) => shut_req = true,
                Poll::Ready(Some(Cmd::Close)) | Poll::Ready(None) => closing = true,
                Poll::Ready(Some(Cmd::Abort)) => return Poll::Ready(End::Abort),
                Poll::Ready(Some(Cmd::Resume)) => {}
                Poll::Ready(Some(Cmd::Stats(tx))) => {
                    let _ = tx.send(conn.statistics());
                }
                Poll::Pending => break,
            }
        }
        let mut written = 0u64;
        while let Some(front) = wq.front() {
            match Pin::new(&mut conn).poll_write(cx, &front[woff..]) {
                Poll::Ready(Ok(0)) if front.len() > woff => {
                    let e = io::Error::from(io::ErrorKind::WriteZero);
                    ctx.post(id, Event::Error(NEAT_ERROR_IO, e.to_string()));
                    return Poll::Ready(End::Failed);
                }
                Poll::Ready(Ok(n)) => {
                    woff += n;
                    written += n as u64;
                    if woff >= front.len() {
                        wq.pop_front();
                        woff = 0;
                    }
                }
                Poll::Ready(Err(e)) => {
                    if written > 0 {
                        ctx.post(id, Event::Written(written));
                    }
                    if !closing {
                        ctx.post(id, Event::Error(NEAT_ERROR_IO, e.to_string()));
                    }
                    return Poll::Ready(End::Failed);
                }
                Poll::Pending => break,
            }
        }
        if written > 0 {
            ctx.post(id, Event::Written(written));
        }
        if wq.is_empty()
            && shut_req
            && !shut_done
            && Pin::new(&mut conn).poll_shutdown(cx).is_ready()
        {
            shut_done = true;
        }
        if closing && wq.is_empty() {
            return Poll::Ready(End::Close);
        }
        while !closing && !read_done {
            if shared.buffered.load(Ordering::SeqCst) >= READ_LIMIT {
                shared.paused.store(true, Ordering::SeqCst);
                if shared.buffered.load(Ordering::SeqCst) >= READ_LIMIT {
                    break;
                }
                shared.paused.store(false, Ordering::SeqCst);
            }
            let mut rb = ReadBuf::new(&mut buf);
            match Pin::new(&mut conn).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    if n == 0 {
                        read_done = true;
                        ctx.post(id, Event::Eof);
                    } else {
                        shared.buffered.fetch_add(n, Ordering::SeqCst);
                        ctx.post(id, Event::Data(rb.filled().to_vec()));
                    }
                }
                Poll::Ready(Err(e)) => {
                    read_done = true;
                    ctx.post(id, Event::Error(NEAT_ERROR_IO, e.to_string()));
                }
                Poll::Pending => break,
            }
        }
        Poll::Pending
    })
    .await;
    match end {
        End::Close => {
            let _ = tokio::time::timeout(Duration::from_secs(10), conn.close()).await;
        }
        End::Abort => conn.abort(),
        End::Failed => {}
    }
}
