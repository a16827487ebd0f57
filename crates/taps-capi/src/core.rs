//! The application side: contexts, flows and the dispatch of callbacks. Everything here
//! runs on the application's thread, inside the NEAT calls or inside `uv_run`.
//!
//! Discipline: contexts and flows are reached through raw pointers, and no Rust
//! reference to either is alive while a C callback runs (a callback may call any NEAT
//! function on the same flow or context). After a callback, state is looked up again.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::props::PropSet;
use crate::task::{self, Cmd, ConnInfo, CtxShared, Event, FlowShared};
use crate::types::*;
use crate::uv;

/// on_writable keeps firing while fewer bytes than this wait for the kernel.
pub(crate) const WRITE_HIGH: u64 = 256 * 1024;

/// Whether on_writable may fire: NEAT's writes reach the kernel inside neat_write, so a
/// program that set on_all_written sees it before the next on_writable. Here a write
/// takes a hop to the tokio thread, so with on_all_written set on_writable waits until
/// everything is written; without it, on_writable fires while less than [`WRITE_HIGH`]
/// waits (a bulk writer is not held to one write per hop).
fn writable(f: &Flow) -> bool {
    f.state == State::Open
        && f.ops.on_writable.is_some()
        && !f.io.shut
        && if f.ops.on_all_written.is_some() {
            f.io.unsent == 0
        } else {
            f.io.unsent < WRITE_HIGH
        }
}

/// Entries of each of [`Ctx`]'s caches (property texts, preconnections); a full cache
/// is emptied.
pub(crate) const CACHE_SIZE: usize = 64;

/// The UDP port SCTP is carried in (RFC 6951), for listening and towards peers:
/// `TAPS_SCTP_UDP_PORT` when set to a port number (NEAT's API has no call for it),
/// else taps' default, 9899. Read once per context.
fn sctp_udp_port() -> Option<u16> {
    let v = std::env::var("TAPS_SCTP_UDP_PORT").ok()?;
    match v.parse::<u16>() {
        Ok(p) if p > 0 => Some(p),
        _ => {
            eprintln!("[taps-neat warning] TAPS_SCTP_UDP_PORT={v} is not a port: 9899 used");
            None
        }
    }
}

/// A `struct neat_ctx`.
pub(crate) struct Ctx {
    pub(crate) uv: *mut uv::UvLoop,
    async_handle: *mut uv::UvHandle,
    idle_handle: *mut uv::UvHandle,
    idle_on: bool,
    pub(crate) shared: Arc<CtxShared>,
    pub(crate) taps: taps::Context,
    /// Flows not yet closed, by id (ids grow with creation).
    pub(crate) flows: rustc_hash::FxHashMap<u64, *mut Flow>,
    /// Flows the next dispatch looks at (in id order): those with news from their task,
    /// those an API call touched, those that wanted a callback at the last dispatch.
    /// A dispatch costs what is ready, not every flow of the context.
    ready: Ready,
    /// Property texts given to `neat_set_property`, parsed and checked once (programs
    /// give every flow the same text). At most [`CACHE_SIZE`] entries.
    pub(crate) prop_sets: rustc_hash::FxHashMap<Box<str>, Arc<PropSet>>,
    /// Client preconnections by property texts, remote and security files: flows
    /// opened alike share one, so its plan is made once and its races share what it
    /// learnt (the scored DNS answer, the TLS configuration). At most [`CACHE_SIZE`].
    pub(crate) preconnections: rustc_hash::FxHashMap<String, Arc<taps::Preconnection>>,
    /// Closed flows, freed at the next dispatch (after their on_close returned).
    graveyard: Vec<*mut Flow>,
    /// Opens started at the next dispatch, as NEAT connects on the next loop turn (a
    /// program may open before it accepts on the port it connects to).
    pub(crate) pending_opens: Vec<task::OpenRequest>,
    /// This context's loop runs inline on this thread ([`crate::runtime`]).
    pub(crate) inline: bool,
    /// Inline: commands for the flows' tasks, handed over at the start of the loop's
    /// next turn, inside the runtime (a task woken from outside the runtime costs a
    /// wake-up of its driver, a system call).
    pub(crate) outbox: Vec<(Arc<FlowShared>, Cmd)>,
    /// Emptied batches of events and ready ids, kept for their capacity: each dispatch
    /// swaps them with what it drains, so it allocates only for a batch larger than
    /// any before.
    batches: (Vec<(u64, task::Event)>, Vec<u64>),
    /// Inline: something asked for another dispatch (a close, an open).
    pub(crate) again: bool,
    /// `neat_stop_event_loop` was called: the inline loop returns.
    pub(crate) stop: bool,
}

/// How the peer's end of stream reaches a program on SCTP. NEAT on SCTP ended a flow's
/// reading with a `neat_read` that returns `NEAT_OK` and 0 bytes (on kernel SCTP the
/// SHUTDOWN event sets `eofSeen`, and the next read of an empty buffer returns so);
/// msbench's server closes on that read and prints its report. On TCP NEAT found the
/// end with a 1-byte peek before on_readable and ran on_close, never a 0-byte read.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) enum ZeroRead {
    /// Not an SCTP flow, or the end has not come.
    #[default]
    No,
    /// The SCTP peer ended its side: on_readable runs once more with nothing queued.
    Due,
    /// That on_readable ran: `neat_read` returns 0 bytes; the next dispatch closes.
    Offered,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum State {
    New,
    Opening,
    Listening,
    Open,
    /// on_error reported a failed open or listen, or the connection failed.
    Failed,
    Closed,
}

/// A `struct neat_flow`: its callbacks, what the program set up, the link to its task,
/// what moves between the program and the task, and the peer.
pub(crate) struct Flow {
    /// The flow's own operations: callbacks get a pointer to this.
    pub(crate) ops: NeatFlowOperations,
    pub(crate) ctx: *mut Ctx,
    pub(crate) id: u64,
    pub(crate) state: State,
    /// The `neat_set_property` texts given, in order.
    pub(crate) props: Vec<Arc<PropSet>>,
    /// PEM files from `neat_secure_identity`.
    pub(crate) tls: TlsFiles,
    /// A task runs this flow (it opened, or listens, or was accepted): commands go to
    /// it through [`FlowShared::cmds`].
    pub(crate) has_task: bool,
    pub(crate) shared: Arc<FlowShared>,
    pub(crate) io: FlowIo,
    pub(crate) peer: Peer,
}

/// PEM files named by `neat_secure_identity`: certificate, key, both in one file.
#[derive(Default)]
pub(crate) struct TlsFiles {
    pub(crate) cert_pem: Option<String>,
    pub(crate) key_pem: Option<String>,
    pub(crate) cert_key_pem: Option<String>,
}

/// What moves between the program and the flow's task, and how far it got.
#[derive(Default)]
pub(crate) struct FlowIo {
    /// Received, not yet read: messages (message transports) or chunks (streams).
    pub(crate) inbound: VecDeque<Vec<u8>>,
    /// Bytes of the front message already read.
    pub(crate) head: usize,
    /// The peer ended its side (or the connection failed) after what is queued.
    pub(crate) eof: bool,
    /// NEAT's end of stream on SCTP: a read of 0 bytes (see [`ZeroRead`]).
    pub(crate) zero_read: ZeroRead,
    /// Written by the program, not yet handed to the transport.
    pub(crate) unsent: u64,
    /// on_all_written is owed once `unsent` reaches 0.
    pub(crate) drain_pending: bool,
    /// `neat_shutdown` was called.
    pub(crate) shut: bool,
    pub(crate) bytes_sent: u64,
    pub(crate) bytes_received: u64,
}

/// The other end: what the connection is (once established) and the name it was
/// opened to.
#[derive(Default)]
pub(crate) struct Peer {
    pub(crate) info: Option<ConnInfo>,
    pub(crate) host: String,
    pub(crate) port: u16,
}

/// Flow ids waiting for a dispatch: a push per mark (duplicates allowed), taken in id
/// order, once each, by the dispatch. Cheaper than an ordered set, whose nodes were
/// allocated and freed on every mark and dispatch.
#[derive(Default)]
struct Ready(Vec<u64>);

impl Ready {
    /// Adds `id` (sorting out duplicates now and then, so that marks between two
    /// dispatches cannot grow it without bound).
    fn insert(&mut self, id: u64) {
        self.0.push(id);
        let n = self.0.len();
        if n >= 64 && n.is_power_of_two() {
            self.0.sort_unstable();
            self.0.dedup();
        }
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Moves every id marked into `into` (empty), ascending, once each, and keeps
    /// `into`'s allocation for the marks to come: a dispatch allocates nothing here.
    fn take_into(&mut self, into: &mut Vec<u64>) {
        debug_assert!(into.is_empty());
        std::mem::swap(&mut self.0, into);
        into.sort_unstable();
        into.dedup();
    }
}

impl Ctx {
    /// A context with its own uv loop (None if libuv fails).
    pub(crate) fn new() -> Option<*mut Ctx> {
        let rt = crate::runtime::runtime();
        task::linger_at_exit();
        let taps = {
            let _g = rt.enter();
            let mut b = taps::Context::builder();
            if let Some(port) = sctp_udp_port() {
                b = b.sctp_udp_port(port);
            }
            b.build().ok()?
        };
        // SAFETY: sizes come from libuv itself; the allocations are freed in `free`.
        unsafe {
            let lp = libc::calloc(1, uv::uv_loop_size()) as *mut uv::UvLoop;
            let ah = libc::calloc(1, uv::uv_handle_size(uv::UV_ASYNC));
            let ih = libc::calloc(1, uv::uv_handle_size(uv::UV_IDLE));
            if lp.is_null() || ah.is_null() || ih.is_null() || uv::uv_loop_init(lp) != 0 {
                libc::free(lp.cast());
                libc::free(ah);
                libc::free(ih);
                return None;
            }
            uv::uv_async_init(lp, ah, on_async);
            uv::uv_idle_init(lp, ih);
            let ctx = Box::into_raw(Box::new(Ctx {
                uv: lp,
                async_handle: ah,
                idle_handle: ih,
                idle_on: false,
                shared: Arc::new(CtxShared::new(ah)),
                taps,
                flows: rustc_hash::FxHashMap::default(),
                ready: Ready::default(),
                prop_sets: rustc_hash::FxHashMap::default(),
                preconnections: rustc_hash::FxHashMap::default(),
                graveyard: Vec::new(),
                pending_opens: Vec::new(),
                inline: false,
                outbox: Vec::new(),
                batches: (Vec::new(), Vec::new()),
                again: false,
                stop: false,
            }));
            uv::uv_handle_set_data(ah, ctx.cast());
            uv::uv_handle_set_data(ih, ctx.cast());
            Some(ctx)
        }
    }

    /// Whether the loop has work of its own at once (flows that still want a
    /// level-triggered callback, a dispatch asked for): its next turn must not wait.
    pub(crate) fn busy(&self) -> bool {
        self.again || !self.ready.is_empty() || !self.graveyard.is_empty()
    }

    /// `neat_stop_event_loop`: the inline loop returns after this turn; a threaded
    /// `uv_run` after this iteration.
    pub(crate) fn stop(&mut self) {
        self.stop = true;
        // SAFETY: the context's own loop.
        unsafe { uv::uv_stop(self.uv) };
    }

    /// libuv's backend fd (its epoll fd).
    pub(crate) fn backend_fd(&self) -> libc::c_int {
        // SAFETY: the context's own loop.
        unsafe { uv::uv_backend_fd(self.uv) }
    }

    /// libuv's backend timeout (ms until its next timer; 0 with work pending; -1 none).
    pub(crate) fn backend_timeout(&self) -> libc::c_int {
        // SAFETY: the context's own loop.
        unsafe { uv::uv_backend_timeout(self.uv) }
    }

    /// A new flow of this context (freed after it closed, at a later dispatch).
    pub(crate) fn new_flow(&mut self) -> *mut Flow {
        let id = self.shared.next_id();
        let f = Box::into_raw(Box::new(Flow::new(self, id)));
        self.flows.insert(id, f);
        f
    }

    /// Hands `cmd` to `f`'s task: at once, or (inline loop) at the loop's next turn.
    pub(crate) fn command(&mut self, f: &Flow, cmd: Cmd) {
        if !f.has_task {
            return;
        }
        if self.inline {
            self.outbox.push((f.shared.clone(), cmd));
        } else {
            f.shared.cmds.send(cmd);
        }
    }

    /// Marks flow `id` for the next dispatch and makes sure there is one (after an API
    /// call that may make the flow ready: set_operations, a zero-length write, a read
    /// outside its callback).
    pub(crate) fn mark(&mut self, id: u64) {
        self.ready.insert(id);
        if !self.inline {
            self.set_idle(true);
        }
    }

    /// Frees the flow-side read budget after the application read `n` bytes of `f`.
    pub(crate) fn consumed(&mut self, f: &mut Flow, n: usize) {
        f.shared.buffered.fetch_sub(n, Ordering::SeqCst);
        if f.shared.paused.load(Ordering::SeqCst)
            && f.shared.buffered.load(Ordering::SeqCst) < task::READ_LIMIT
            && f.shared.paused.swap(false, Ordering::SeqCst)
        {
            self.command(f, Cmd::Resume);
        }
    }

    /// Stops or restarts the idle handle (the threaded loop's way back to ready flows).
    pub(crate) fn set_idle(&mut self, on: bool) {
        if on != self.idle_on {
            self.idle_on = on;
            // SAFETY: the idle handle lives as long as the context.
            unsafe {
                if on {
                    uv::uv_idle_start(self.idle_handle, on_idle);
                } else {
                    uv::uv_idle_stop(self.idle_handle);
                }
            }
        }
    }

    /// The context's own handles (async, idle) keep the loop alive, or not: an inline
    /// loop asks libuv whether the application has handles of its own.
    pub(crate) fn ref_handles(&self, on: bool) {
        // SAFETY: both handles live as long as the context.
        unsafe {
            for h in [self.async_handle, self.idle_handle] {
                if on {
                    uv::uv_ref(h);
                } else {
                    uv::uv_unref(h);
                }
            }
        }
    }

    pub(crate) fn log(&self, level: u8, msg: std::fmt::Arguments<'_>) {
        self.shared.log(level, msg);
    }

    /// Wakes the loop for one more dispatch (frees the graveyard, re-checks flows).
    pub(crate) fn wake(&mut self) {
        if self.inline {
            self.again = true;
        } else {
            // SAFETY: the async handle lives as long as the context.
            unsafe { uv::uv_async_send(self.async_handle) };
        }
    }

    /// `neat_free_ctx`: closes every flow (on_close), then the loop and everything.
    ///
    /// # Safety
    /// `ctx` came from [`Ctx::new`] and is not used afterwards.
    pub(crate) unsafe fn free(ctx: *mut Ctx) {
        // In creation order; again for flows an on_close opened meanwhile.
        loop {
            // SAFETY: ctx is valid; the borrow ends before close() calls into C.
            let mut ids: Vec<u64> = unsafe { (*ctx).flows.keys().copied().collect() };
            if ids.is_empty() {
                break;
            }
            ids.sort_unstable();
            for id in ids {
                // SAFETY: ctx is valid; flows in the map are live.
                unsafe {
                    if let Some(f) = lookup(ctx, id) {
                        close(f, false);
                    }
                }
            }
        }
        task::end_closes();
        // SAFETY: ctx is valid and no callback runs from here on.
        unsafe {
            let c = &mut *ctx;
            c.shared.kill();
            uv::uv_walk(c.uv, close_walk, std::ptr::null_mut());
            uv::uv_run(c.uv, uv::UV_RUN_DEFAULT);
            uv::uv_loop_close(c.uv);
            for f in c.graveyard.drain(..) {
                drop(Box::from_raw(f));
            }
            libc::free(c.uv.cast());
            libc::free(c.async_handle);
            libc::free(c.idle_handle);
            drop(Box::from_raw(ctx));
        }
    }
}

unsafe extern "C" fn close_walk(h: *mut uv::UvHandle, _arg: *mut c_void) {
    // SAFETY: libuv passes live handles of the loop.
    unsafe {
        if uv::uv_is_closing(h) == 0 {
            uv::uv_close(h, None);
        }
    }
}

impl Flow {
    pub(crate) fn new(ctx: *mut Ctx, id: u64) -> Flow {
        Flow {
            ops: NeatFlowOperations::ZERO,
            ctx,
            id,
            state: State::New,
            props: Vec::new(),
            tls: TlsFiles::default(),
            has_task: false,
            shared: Arc::new(FlowShared::default()),
            io: FlowIo::default(),
            peer: Peer::default(),
        }
    }

    /// Whether a dispatch would call something on this flow now.
    fn wants_dispatch(&self) -> bool {
        if self.state != State::Open {
            return false;
        }
        (self.ops.on_readable.is_some() && !self.io.inbound.is_empty())
            || (self.io.eof && (self.io.inbound.is_empty() || self.ops.on_readable.is_none()))
            || writable(self)
            || (self.io.drain_pending && self.io.unsent == 0 && self.ops.on_all_written.is_some())
    }
}

/// Which callback to run.
#[derive(Clone, Copy)]
pub(crate) enum Cb {
    Connected,
    Error,
    Readable,
    Writable,
    AllWritten,
    Close,
}

/// Runs one callback of `flow` with its operations refreshed; false if none is set.
///
/// # Safety
/// `flow` is live (possibly closed but not freed). No reference into it may be held.
pub(crate) unsafe fn call(flow: *mut Flow, cb: Cb, status: NeatError) -> bool {
    // SAFETY: flow is live; the borrow ends before the C call.
    let (fx, ops) = unsafe {
        let f = &mut *flow;
        let fx = match cb {
            Cb::Connected => f.ops.on_connected,
            Cb::Error => f.ops.on_error,
            Cb::Readable => f.ops.on_readable,
            Cb::Writable => f.ops.on_writable,
            Cb::AllWritten => f.ops.on_all_written,
            Cb::Close => f.ops.on_close,
        };
        let Some(fx) = fx else { return false };
        f.ops.status = status;
        f.ops.stream_id = f.peer.info.map_or(0, |i| i.stream_id);
        f.ops.ctx = f.ctx.cast();
        f.ops.flow = flow.cast();
        (fx, &mut f.ops as *mut NeatFlowOperations)
    };
    // SAFETY: a callback of the application with its flow's operations, as NEAT does.
    unsafe { fx(ops) };
    true
}

/// Closes a flow: stops its task, marks it closed, runs on_close (inside this call, as
/// NEAT does) and frees it at a later dispatch. Closing twice does nothing.
///
/// # Safety
/// `flow` is live (possibly closed but not freed).
pub(crate) unsafe fn close(flow: *mut Flow, abort: bool) {
    // SAFETY: flow is live; the borrow ends before on_close.
    unsafe {
        let f = &mut *flow;
        if f.state == State::Closed {
            return;
        }
        f.state = State::Closed;
        let ctx = &mut *f.ctx;
        ctx.command(
            f,
            if abort {
                Cmd::Abort
            } else {
                Cmd::Close(task::Linger::start())
            },
        );
        // The Close or Abort just sent is the task's last command.
        f.has_task = false;
        f.io.inbound.clear();
        ctx.flows.remove(&f.id);
        ctx.graveyard.push(flow);
        ctx.wake();
    }
    // SAFETY: as above; the flow stays allocated until the next dispatch.
    unsafe { call(flow, Cb::Close, NEAT_OK) };
}

unsafe extern "C" fn on_async(h: *mut uv::UvHandle) {
    let r = std::panic::catch_unwind(|| {
        // SAFETY: the handle's data is its context, alive while the handle is.
        unsafe { dispatch(uv::uv_handle_get_data(h).cast(), true) }
    });
    if r.is_err() {
        eprintln!("[taps-neat error] internal panic in the event dispatch");
    }
}

unsafe extern "C" fn on_idle(h: *mut uv::UvHandle) {
    let r = std::panic::catch_unwind(|| {
        // SAFETY: as in on_async.
        unsafe { dispatch(uv::uv_handle_get_data(h).cast(), false) }
    });
    if r.is_err() {
        eprintln!("[taps-neat error] internal panic in the event dispatch");
    }
}

/// One dispatch: frees closed flows, applies the tokio side's events (edge callbacks),
/// then runs the level-triggered callbacks once, and arms the idle handle if some flow
/// wants another turn.
///
/// # Safety
/// `ctx` is live.
pub(crate) unsafe fn dispatch(ctx: *mut Ctx, events: bool) {
    // SAFETY: ctx is live; short borrows only, none across callbacks.
    unsafe {
        // Freeing a flow runs no callback and does not touch the context.
        for f in (*ctx).graveyard.drain(..) {
            drop(Box::from_raw(f));
        }
        if !(*ctx).inline {
            // (Inline, the loop spawns them inside the runtime at its next turn.)
            for open in (*ctx).pending_opens.drain(..) {
                crate::runtime::runtime().spawn(open.run());
            }
        }
        // The batches are taken out of the context while callbacks run (a callback may
        // end in another dispatch, which then starts from empty ones).
        let (mut evs, mut ids) = std::mem::take(&mut (*ctx).batches);
        if events {
            (*ctx).shared.take_events(&mut evs);
            for (id, ev) in evs.drain(..) {
                apply(ctx, id, ev);
            }
        }
        (*ctx).ready.take_into(&mut ids);
        for &id in &ids {
            level(ctx, id);
        }
        // Flows that still want a callback stay ready (level-triggered); flows the
        // callbacks touched were marked meanwhile.
        for id in ids.drain(..) {
            if lookup(ctx, id).is_some_and(|f| (*f).wants_dispatch()) {
                (*ctx).ready.insert(id);
            }
        }
        (*ctx).batches = (evs, ids);
        let c = &mut *ctx;
        // Inline, the loop itself comes back for flows still ready.
        let want = !c.ready.is_empty() && !c.inline;
        if want != c.idle_on {
            c.idle_on = want;
            if want {
                uv::uv_idle_start(c.idle_handle, on_idle);
            } else {
                uv::uv_idle_stop(c.idle_handle);
            }
        }
    }
}

/// Marks every flow (when the loop starts).
///
/// # Safety
/// `ctx` is live.
pub(crate) unsafe fn mark_all(ctx: *mut Ctx) {
    // SAFETY: ctx is live; short borrows.
    unsafe {
        let ids: Vec<u64> = (*ctx).flows.keys().copied().collect();
        for id in ids {
            (*ctx).mark(id);
        }
    }
}

/// Looks up a live, not closed flow.
unsafe fn lookup(ctx: *mut Ctx, id: u64) -> Option<*mut Flow> {
    // SAFETY: ctx is live.
    unsafe { (*ctx).flows.get(&id).copied() }
}

unsafe fn apply(ctx: *mut Ctx, id: u64, ev: Event) {
    // SAFETY: ctx is live; flows found in the map are live.
    unsafe {
        let Some(flow) = lookup(ctx, id) else { return };
        (*ctx).ready.insert(id);
        match ev {
            Event::Connected(info) => {
                {
                    let f = &mut *flow;
                    if f.state != State::Opening {
                        return;
                    }
                    f.state = State::Open;
                    f.peer.info = Some(info);
                    f.ops.transport_protocol = info.stack;
                }
                call(flow, Cb::Connected, NEAT_OK);
                // NEAT: the client's first on_writable (and on_all_written) in the same
                // dispatch as on_connected.
                if writable(&*flow) {
                    call(flow, Cb::Writable, NEAT_OK);
                }
                all_written(flow);
            }
            Event::Accepted {
                id: nid,
                info,
                shared,
            } => {
                let nf = {
                    let l = &*flow;
                    let mut f = Flow::new(ctx, nid);
                    f.ops = l.ops;
                    f.ops.on_all_written = None;
                    f.ops.transport_protocol = info.stack;
                    f.state = State::Open;
                    f.peer.info = Some(info);
                    f.has_task = true;
                    f.shared = shared;
                    f.props = l.props.clone();
                    f.peer.host = info.remote.ip().to_string();
                    f.peer.port = info.remote.port();
                    let nf = Box::into_raw(Box::new(f));
                    (*ctx).flows.insert(nid, nf);
                    (*ctx).ready.insert(nid);
                    nf
                };
                call(nf, Cb::Connected, NEAT_OK);
            }
            Event::Data(d) => {
                let f = &mut *flow;
                if f.state == State::Open {
                    f.io.inbound.push_back(d);
                }
            }
            Event::Written(n) => {
                {
                    let f = &mut *flow;
                    f.io.unsent = f.io.unsent.saturating_sub(n);
                }
                all_written(flow);
            }
            Event::Eof => {
                let f = &mut *flow;
                f.io.eof = true;
                if f.peer.info.is_some_and(|i| i.stack == NEAT_STACK_SCTP) {
                    f.io.zero_read = ZeroRead::Due;
                }
            }
            Event::Error(code, msg) => {
                (*ctx).log(NEAT_LOG_ERROR, format_args!("flow {id}: {msg}"));
                let f = &mut *flow;
                if matches!(f.state, State::Opening | State::Listening) {
                    f.state = State::Failed;
                } else if f.state == State::Open {
                    // The connection is gone: what was read can still be read, then
                    // on_close as after an orderly end.
                    f.io.eof = true;
                }
                call(flow, Cb::Error, code);
            }
        }
    }
}

/// on_all_written, once, when everything written reached the kernel.
unsafe fn all_written(flow: *mut Flow) {
    // SAFETY: flow is live.
    unsafe {
        let f = &mut *flow;
        if f.state == State::Open
            && f.io.drain_pending
            && f.io.unsent == 0
            && f.ops.on_all_written.is_some()
        {
            f.io.drain_pending = false;
            call(flow, Cb::AllWritten, NEAT_OK);
        }
    }
}

/// The level-triggered callbacks of one flow, once.
unsafe fn level(ctx: *mut Ctx, id: u64) {
    // SAFETY: ctx is live; the flow is re-looked-up after every callback.
    unsafe {
        let Some(flow) = lookup(ctx, id) else { return };
        if (*flow).state != State::Open {
            return;
        }
        if (*flow).ops.on_readable.is_some() && !(*flow).io.inbound.is_empty() {
            call(flow, Cb::Readable, NEAT_OK);
        }
        let Some(flow) = lookup(ctx, id) else { return };
        {
            let f = &*flow;
            if f.state == State::Open
                && f.io.eof
                && (f.io.inbound.is_empty() || f.ops.on_readable.is_none())
            {
                if f.io.zero_read == ZeroRead::Due && f.ops.on_readable.is_some() {
                    (*flow).io.zero_read = ZeroRead::Offered;
                    call(flow, Cb::Readable, NEAT_OK);
                    return;
                }
                close(flow, false);
                return;
            }
        }
        if writable(&*flow) {
            call(flow, Cb::Writable, NEAT_OK);
        }
        if lookup(ctx, id).is_some() {
            all_written(flow);
        }
    }
}

/// Reports an error on a flow at the next dispatch (NEAT reports them asynchronously).
pub(crate) fn post_error(ctx: &Ctx, id: u64, code: NeatError, msg: String) {
    ctx.shared.post(id, Event::Error(code, msg));
}
