//! [`Listener`]: accepts connections on every stack and family the properties allow,
//! on one port.
//!
//! One task per listening socket feeds accepted connections into a channel; a listener
//! whose only socket is plain TCP accepts in [`Listener::accept`] itself (no task hop
//! per connection, the same limits). Datagram
//! stacks have no handshake: the first datagram from a new peer address makes a new
//! connection, and later datagrams from that peer are routed to it; DTLS demultiplexes
//! the same way and hands a peer's flow on once its handshake is done; when QUIC is allowed
//! too, both share the UDP port (quinn reads it and passes DTLS datagrams on,
//! [`crate::security::shared_port`]). SCTP listens on the
//! same port number (the SCTP port, inside UDP on the context's encapsulation port): an
//! accepted association is a connection on stream 0, and every further stream the peer
//! opens (flow mapping) is one more connection. Dropping the listener stops every
//! accept task and closes every listening socket; accepted connections live on.
//!
//! Limits ([`ListenerOptions`]): at most `max_connections` accepted connections live at
//! once (each holds a slot until it is dropped; at the limit the accept loops pause and
//! the kernel's backlog, then SYN drops, hold new clients back; a datagram from a new
//! peer is dropped), `backlog` for the kernel's and usrsctp's accept queues and the
//! connections waiting for [`Listener::accept`], and a TLS handshake must finish within
//! `handshake_timeout` (a silent client cannot hold a slot forever). Running out of file
//! descriptors pauses accepting for a moment (no busy loop) and is reported once per
//! pause. A stack that cannot listen (port in use, kernel without the protocol) is
//! never dropped silently: it is logged as a warning and listed by
//! [`Listener::missing`], or, with `every_stack`, fails [`Preconnection::listen`].
//!
//! [`Preconnection::listen`]: crate::Preconnection::listen

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use taps_core::candidates::Plan;
use taps_core::properties::Protocol;
use taps_core::{Security, Stack};

mod direct;
mod sctp;
mod secure;

use direct::{accepted_kind, DirectTcp};
use sctp::accept_sctp;

use crate::connection::{Connection, Io, Slot};
use crate::security::ServerSecurity;
use crate::transport;
use crate::transport::{SocketOptions, Stream};
use crate::{ConfigError, Error, ListenFailure, MissingStack};

/// Datagrams queued per accepted datagram flow before new ones are dropped.
const FLOW_QUEUE: usize = 256;
/// How long accepting pauses when the process is out of file descriptors (or the
/// kernel out of memory for sockets).
const RESOURCE_PAUSE: Duration = Duration::from_millis(100);

/// Limits of a listener, with safe defaults ([`Default`]); pass them to
/// [`Preconnection::listen_with`](crate::Preconnection::listen_with). Plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerOptions {
    /// Accepted connections alive at once (default 16,384): at the limit accepting
    /// pauses until one is dropped. Each SCTP stream and QUIC stream the peer opens
    /// counts as one. Keep it below the process's file descriptor limit.
    pub max_connections: usize,
    /// The kernel's TCP accept queue and usrsctp's listen queue, and how many accepted
    /// connections may wait for [`Listener::accept`] (default 1,024).
    pub backlog: u32,
    /// Time a client has to finish its TLS handshake (default 10 s); a client that takes
    /// longer is dropped and frees its slot.
    pub handshake_timeout: Duration,
    /// Fail instead of warning when one of the stacks the properties allow cannot listen
    /// (default false: the listener runs with the others and lists the missing ones in
    /// [`Listener::missing`]).
    pub every_stack: bool,
}

impl Default for ListenerOptions {
    fn default() -> Self {
        ListenerOptions {
            max_connections: 16_384,
            backlog: 1024,
            handshake_timeout: Duration::from_secs(10),
            every_stack: false,
        }
    }
}

/// A set of listening sockets, one per allowed stack and family.
pub struct Listener {
    rx: mpsc::Receiver<Result<Connection, Error>>,
    /// A lone plain TCP socket is accepted from here, in `accept`, without a task.
    direct: Option<DirectTcp>,
    tasks: AcceptTasks,
    bound: Vec<(Stack, SocketAddr)>,
    missing: Vec<MissingStack>,
    live: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("bound", &self.bound)
            .field("missing", &self.missing)
            .field("connections", &self.connections())
            .finish_non_exhaustive()
    }
}

impl Listener {
    /// The next accepted connection; `None` once every listening socket failed.
    /// Cancel-safe: a connection is never lost by dropping the future.
    pub async fn accept(&mut self) -> Option<Result<Connection, Error>> {
        match &mut self.direct {
            Some(d) => d.accept().await,
            None => self.rx.recv().await,
        }
    }

    /// What is listening where.
    pub fn local_addrs(&self) -> &[(Stack, SocketAddr)] {
        &self.bound
    }

    /// The stacks the properties allow that could not listen, and why (each was also
    /// logged as a warning). Empty when every stack listens. Free.
    pub fn missing(&self) -> &[MissingStack] {
        &self.missing
    }

    /// Accepted connections alive now (each holds a slot until dropped). One atomic load.
    pub fn connections(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Stops listening (same as dropping): the sockets close when the runtime next runs
    /// the accept tasks, so an immediate `listen` on the same port can still find it in
    /// use; [`Listener::close`] waits for that.
    pub fn stop(self) {}

    /// Stops listening and returns once every listening socket is closed, so the same
    /// port can be listened on again at once. Connections already accepted live on;
    /// SCTP's UDP encapsulation socket stays open while an accepted association uses it.
    /// Costs a wake-up of each accept task.
    pub async fn close(self) {
        drop(self.direct);
        self.tasks.close().await;
    }

    /// Listens on `local` with every runnable stack of `plan` and both families when
    /// `local` is unspecified. Port 0: the first socket bound picks the port and every
    /// other stack and family listens on that same port, so a client can race them all
    /// to it; if some other socket holds that port for one of the other protocols or
    /// families, the listener is set up again on a new port (at most
    /// [`PORT_ZERO_TRIES`] times).
    pub(crate) async fn start(
        local: SocketAddr,
        plan: &Plan,
        opts: Arc<SocketOptions>,
        security: Option<Arc<ServerSecurity>>,
        limits: &ListenerOptions,
    ) -> Result<Listener, Error> {
        let mut tries = 1;
        loop {
            let (b, rx) = Listener::bind(local, plan, opts.clone(), security.clone(), limits)?;
            if local.port() == 0 && b.port_in_use && tries < PORT_ZERO_TRIES {
                // Dropped, the binder stops what it started and closes its sockets.
                tries += 1;
                continue;
            }
            return b.finish(plan, rx);
        }
    }

    /// Binds every stack of one try of [`Listener::start`].
    fn bind(
        local: SocketAddr,
        plan: &Plan,
        opts: Arc<SocketOptions>,
        security: Option<Arc<ServerSecurity>>,
        limits: &ListenerOptions,
    ) -> Result<(Binder, mpsc::Receiver<Result<Connection, Error>>), Error> {
        let addrs: Vec<SocketAddr> = if local.ip().is_unspecified() {
            vec![
                SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), local.port()),
                SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), local.port()),
            ]
        } else {
            vec![local]
        };
        let runnable: Vec<Stack> = plan
            .stacks()
            .iter()
            .filter(|s| s.unavailable.is_none())
            .map(|s| s.stack)
            .collect();
        let has = |p: Protocol| runnable.iter().any(|s| s.protocol == p);
        let (tx, rx) = mpsc::channel((limits.backlog as usize).max(1));
        let max_connections = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS);
        let mut b = Binder {
            opts,
            security,
            tx,
            slots: Arc::new(Semaphore::new(max_connections)),
            live: Arc::new(AtomicUsize::new(0)),
            limits: limits.clone(),
            tasks: AcceptTasks::default(),
            direct: None,
            bound: Vec::new(),
            missing: Vec::new(),
            port_in_use: false,
        };
        for (i, ip) in addrs.iter().map(SocketAddr::ip).enumerate() {
            // Where the next socket binds: `local`'s port, or with port 0 the port the
            // first socket got.
            let at = |b: &Binder| SocketAddr::new(ip, b.port_taken(local.port()));
            // One MPTCP listener also accepts plain TCP clients.
            if has(Protocol::Tcp) || has(Protocol::Mptcp) {
                b.stream(at(&b), has(Protocol::Mptcp))?;
            }
            // One dual-stack SCTP listener (its UDP socket takes IPv4 too).
            if has(Protocol::Sctp) && i == 0 {
                b.sctp(at(&b));
            }
            // QUIC and DTLS over UDP share the port when both are allowed.
            let dtls_udp = runnable.contains(&Stack::new(Protocol::Udp, Security::Dtls));
            match (has(Protocol::Quic), dtls_udp) {
                (true, true) => b.quic_and_dtls(at(&b))?,
                (true, false) => b.quic(at(&b))?,
                _ => {}
            }
            for (p, lite) in [(Protocol::Udp, false), (Protocol::UdpLite, true)] {
                if runnable.contains(&Stack::plain(p)) {
                    b.datagrams(at(&b), p, lite)?;
                }
                let shared = p == Protocol::Udp && has(Protocol::Quic);
                if runnable.contains(&Stack::new(p, Security::Dtls)) && !shared {
                    b.dtls(at(&b), p, lite)?;
                }
            }
        }
        Ok((b, rx))
    }
}

/// How many times [`Listener::start`] sets up a port-0 listener on a new port when the
/// port its first socket got is taken for another protocol or family.
const PORT_ZERO_TRIES: usize = 8;

/// Binds one listener after another, collecting their accept tasks, what is bound where
/// and why anything could not be bound.
struct Binder {
    opts: Arc<SocketOptions>,
    security: Option<Arc<ServerSecurity>>,
    tx: mpsc::Sender<Result<Connection, Error>>,
    slots: Arc<Semaphore>,
    live: Arc<AtomicUsize>,
    limits: ListenerOptions,
    /// Dropped with the binder when the listener fails to come up (an error part way, or
    /// `every_stack`): the tasks started so far stop instead of holding their ports.
    tasks: AcceptTasks,
    /// The first plain TCP socket: accepted from directly if it is the only socket.
    direct: Option<DirectTcp>,
    bound: Vec<(Stack, SocketAddr)>,
    missing: Vec<MissingStack>,
    /// A socket could not be bound because its address was in use.
    port_in_use: bool,
}

/// A listener's accept tasks and how they stop. Dropped, it aborts the tasks that own
/// their sockets and tells the graceful ones to stop; [`AcceptTasks::close`] also waits
/// until every one has ended (and so closed its sockets).
#[derive(Default)]
struct AcceptTasks {
    /// Tasks that own their sockets: aborted to stop.
    aborted: Vec<JoinHandle<()>>,
    /// Tasks that close their sockets themselves once `stop` is cancelled (SCTP: its UDP
    /// socket closes when usrsctp's reader task has ended, which an abort would not wait
    /// for).
    graceful: Vec<JoinHandle<()>>,
    stop: CancellationToken,
}

impl AcceptTasks {
    /// Runs `task`, stopped by aborting it.
    fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.aborted.push(tokio::spawn(task));
    }

    /// Runs the task `make` builds around the stop token; it must end soon after the
    /// token is cancelled.
    fn spawn_graceful<F: Future<Output = ()> + Send + 'static>(
        &mut self,
        make: impl FnOnce(CancellationToken) -> F,
    ) {
        self.graceful.push(tokio::spawn(make(self.stop.clone())));
    }

    fn is_empty(&self) -> bool {
        self.aborted.is_empty() && self.graceful.is_empty()
    }

    /// Stops every task and waits until each has ended.
    async fn close(mut self) {
        self.stop.cancel();
        let aborted = std::mem::take(&mut self.aborted);
        let graceful = std::mem::take(&mut self.graceful);
        for t in &aborted {
            t.abort();
        }
        for t in aborted.into_iter().chain(graceful) {
            let _ = t.await;
        }
    }
}

impl Drop for AcceptTasks {
    fn drop(&mut self) {
        self.stop.cancel();
        for t in &self.aborted {
            t.abort();
        }
    }
}

impl Binder {
    /// Records that `stack` could not listen on `addr`.
    fn miss(&mut self, stack: Stack, addr: SocketAddr, reason: ListenFailure) {
        // Not SCTP's encapsulation port: a new port for the listener does not change it.
        self.port_in_use |= reason.address_in_use();
        self.missing.push(MissingStack {
            stack,
            addr,
            reason,
        });
    }

    /// `port`, or when it is 0 the port of the first socket bound with a port of its
    /// own (SCTP's listener has none: it is inside the encapsulation port).
    fn port_taken(&self, port: u16) -> u16 {
        if port != 0 {
            return port;
        }
        self.bound
            .iter()
            .filter(|(stack, _)| stack.protocol != Protocol::Sctp)
            .map(|(_, at)| at.port())
            .next()
            .unwrap_or(0)
    }

    /// What an accept task needs: the channel, the slots, the limits.
    fn accepting(&self) -> Accepting {
        Accepting {
            tx: self.tx.clone(),
            slots: self.slots.clone(),
            live: self.live.clone(),
            handshake_timeout: self.limits.handshake_timeout,
        }
    }

    /// TCP (or MPTCP, which takes plain TCP clients too), with TLS if secured.
    fn stream(&mut self, addr: SocketAddr, mptcp: bool) -> Result<(), Error> {
        let protocol = if mptcp {
            Protocol::Mptcp
        } else {
            Protocol::Tcp
        };
        let stack = match &self.security {
            Some(_) => Stack::new(protocol, Security::Tls),
            None => Stack::plain(protocol),
        };
        let backlog = self.limits.backlog.min(i32::MAX as u32) as i32;
        match transport::listen_tcp_backlog(addr, mptcp, &self.opts, backlog) {
            Ok(l) => {
                let bound = l.local_addr()?;
                self.bound.push((stack, bound));
                // Bound to one address, every accepted socket's local address is this one:
                // no getsockname per connection.
                let local = (!bound.ip().is_unspecified()).then_some(bound);
                if self.security.is_none() && self.direct.is_none() {
                    self.direct = Some(DirectTcp {
                        listener: l,
                        local,
                        mptcp,
                        acc: self.accepting(),
                        paused_until: None,
                    });
                } else {
                    let task =
                        accept_stream(l, local, mptcp, self.security.clone(), self.accepting());
                    self.tasks.spawn(task);
                }
            }
            Err(e) => self.miss(stack, addr, ListenFailure::socket(e)),
        }
        Ok(())
    }

    /// SCTP over UDP: one dual-stack listener.
    fn sctp(&mut self, addr: SocketAddr) {
        let stack = Stack::plain(Protocol::Sctp);
        let port = self.opts.sctp_udp_port;
        match transport::sctp::listen(addr.ip(), addr.port(), &self.opts, self.limits.backlog) {
            Ok(l) => {
                let udp = l.local_addr();
                let at = SocketAddr::new(udp.ip(), addr.port());
                self.bound.push((stack, at));
                let acc = self.accepting();
                self.tasks.spawn_graceful(|stop| accept_sctp(l, acc, stop));
            }
            Err(e) => {
                let error = Arc::new(io::Error::from(e));
                let reason = if error.kind() == io::ErrorKind::AddrInUse {
                    ListenFailure::SctpPortInUse { port, error }
                } else {
                    ListenFailure::Sctp { port, error }
                };
                self.miss(stack, addr, reason);
            }
        }
    }

    /// UDP or UDP-Lite: one flow per remote endpoint.
    fn datagrams(&mut self, addr: SocketAddr, p: Protocol, lite: bool) -> Result<(), Error> {
        match transport::bind_udp(addr, lite, &self.opts) {
            Ok(s) => {
                self.bound.push((Stack::plain(p), s.local_addr()?));
                let task = accept_datagrams(Arc::new(s), Stack::plain(p), self.accepting());
                self.tasks.spawn(task);
            }
            Err(e) => self.miss(Stack::plain(p), addr, ListenFailure::socket(e)),
        }
        Ok(())
    }

    /// The listener, or why nothing (or, with `every_stack`, not everything) could
    /// listen. Each missing stack is logged as a warning.
    fn finish(
        mut self,
        plan: &Plan,
        rx: mpsc::Receiver<Result<Connection, Error>>,
    ) -> Result<Listener, Error> {
        // Accepted from in `Listener::accept` only when nothing else listens; otherwise
        // in a task feeding the channel like every other socket.
        let direct = match self.direct.take() {
            Some(d) if !self.tasks.is_empty() => {
                let task = accept_stream(d.listener, d.local, d.mptcp, None, d.acc);
                self.tasks.spawn(task);
                None
            }
            d => d,
        };
        if self.bound.is_empty() {
            let allowed = plan
                .stacks()
                .iter()
                .map(|s| (s.stack, s.unavailable))
                .collect();
            return Err(Error::config(ConfigError::NothingToListenOn {
                allowed,
                missing: std::mem::take(&mut self.missing),
            }));
        }
        if self.limits.every_stack && !self.missing.is_empty() {
            return Err(Error::config(ConfigError::NotEveryStackListens(
                std::mem::take(&mut self.missing),
            )));
        }
        for m in &self.missing {
            tracing::warn!("listening without {m}");
        }
        Ok(Listener {
            rx,
            direct,
            tasks: self.tasks,
            bound: self.bound,
            missing: self.missing,
            live: self.live,
        })
    }
}

/// What every accept task shares: where connections go, the connection slots, and the
/// handshake time limit.
#[derive(Clone)]
struct Accepting {
    tx: mpsc::Sender<Result<Connection, Error>>,
    slots: Arc<Semaphore>,
    live: Arc<AtomicUsize>,
    handshake_timeout: Duration,
}

impl Accepting {
    /// Waits for a free connection slot; `None` when the listener is gone.
    async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        if self.tx.is_closed() {
            return None;
        }
        // Under the limit (the usual case): no waiter registered on the channel.
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Some(permit);
        }
        tokio::select! {
            permit = self.slots.clone().acquire_owned() => permit.ok(),
            _ = self.tx.closed() => None,
        }
    }

    /// Hands `conn` (holding `slot`) to [`Listener::accept`]; false when the listener
    /// is gone.
    async fn hand_on(&self, conn: io::Result<Connection>, slot: OwnedSemaphorePermit) -> bool {
        self.tx.send(self.adopt(conn, slot)).await.is_ok()
    }

    /// `conn` holding `slot`, counted as live.
    fn adopt(
        &self,
        conn: io::Result<Connection>,
        slot: OwnedSemaphorePermit,
    ) -> Result<Connection, Error> {
        let live = self.live.clone();
        conn.map(|c| {
            live.fetch_add(1, Ordering::Relaxed);
            c.with_slot(Slot { permit: slot, live })
        })
        .map_err(Error::from)
    }
}

/// Whether an accept error means the process or the kernel is out of resources (file
/// descriptors, socket memory): retrying at once would spin.
fn out_of_resources(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Accepts stream connections; with `security`, each one's TLS handshake runs in a task
/// of its own (a slow or silent client holds up no one; one that takes longer than the
/// handshake timeout is dropped) and only a finished handshake is handed on; a failed
/// one is logged and dropped. Out of file descriptors, it reports the error once and
/// pauses instead of spinning. `local` is the listener's address when it is not a
/// wildcard (then no accepted socket is asked for it); only an MPTCP listener (`mptcp`)
/// asks each accepted socket which protocol it runs. Cost per plain TCP connection:
/// accept4, TCP_NODELAY, getsockname only on a wildcard listener, a channel send.
async fn accept_stream(
    listener: TcpListener,
    local: Option<SocketAddr>,
    mptcp: bool,
    security: Option<Arc<ServerSecurity>>,
    acc: Accepting,
) {
    loop {
        let Some(slot) = acc.slot().await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) if out_of_resources(&e) => {
                tracing::warn!("accepting paused for {RESOURCE_PAUSE:?}: {e}");
                if acc.tx.send(Err(Error::Io(e))).await.is_err() {
                    return;
                }
                tokio::time::sleep(RESOURCE_PAUSE).await;
                continue;
            }
            // A connection that died in the queue (ECONNABORTED) and the like.
            Err(e) => {
                tracing::debug!("accept: {e}");
                continue;
            }
        };
        let (mptcp, protocol) = accepted_kind(&stream, mptcp);
        let Some(security) = &security else {
            let conn = Connection::accepted(stream, Stack::plain(protocol), mptcp, local, peer);
            if !acc.hand_on(conn, slot).await {
                return;
            }
            continue;
        };
        let (security, acc) = (security.clone(), acc.clone());
        tokio::spawn(async move {
            let handshake = tokio::time::timeout(acc.handshake_timeout, security.handshake(stream));
            let (tls, info) = match handshake.await {
                Ok(Ok(done)) => done,
                Ok(Err(cause)) => {
                    tracing::debug!(%peer, %cause, "TLS handshake with a client failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake with a client timed out");
                    return;
                }
            };
            let stack = Stack::new(protocol, Security::Tls);
            let io = Io::Stream(Stream::Tls(Box::new(tls.into())));
            let conn = Connection::new(io, stack, mptcp, None).map(|mut c| {
                c.set_security(info);
                c
            });
            acc.hand_on(conn, slot).await;
        });
    }
}

/// Accepts QUIC connections; each one's handshake, then the streams the client opens
/// on it (one taps connection each, handed on when the client first sends on it), run
/// in a task of its own.
async fn accept_quic(endpoint: quinn::Endpoint, acc: Accepting) {
    let Ok(local) = endpoint.local_addr() else {
        return;
    };
    while let Some(incoming) = endpoint.accept().await {
        let acc = acc.clone();
        tokio::spawn(async move {
            let peer = incoming.remote_address();
            let accept = crate::security::quic::accept(incoming, local);
            let shared = match tokio::time::timeout(acc.handshake_timeout, accept).await {
                Ok(Ok(shared)) => shared,
                Ok(Err(cause)) => {
                    tracing::debug!(%peer, %cause, "QUIC connection from a client failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "QUIC handshake with a client timed out");
                    return;
                }
            };
            loop {
                let Some(slot) = acc.slot().await else {
                    return;
                };
                let Some(stream) = crate::security::quic::accept_stream(&shared).await else {
                    return;
                };
                let stack = Stack::new(Protocol::Quic, Security::QuicTls);
                let info = shared.info.clone();
                let io = Io::Stream(Stream::Quic(Box::new(stream)));
                let conn = Connection::new(io, stack, None, None).map(|mut c| {
                    c.set_security(info);
                    c
                });
                if !acc.hand_on(conn, slot).await {
                    return;
                }
            }
        });
    }
}

/// Turns the DTLS sessions `serve` accepted into connections.
async fn accept_dtls(
    mut accepted: mpsc::Receiver<crate::security::dtls::Accepted>,
    stack: Stack,
    acc: Accepting,
) {
    loop {
        let Some(slot) = acc.slot().await else {
            return;
        };
        let Some((flow, info)) = accepted.recv().await else {
            return;
        };
        let conn = Connection::new(Io::Dtls(flow), stack, None, None).map(|mut c| {
            c.set_security(info);
            c
        });
        if !acc.hand_on(conn, slot).await {
            return;
        }
    }
}

/// Demultiplexes datagrams by peer address: a new peer is a new connection while a
/// connection slot is free (its datagram is dropped otherwise).
async fn accept_datagrams(socket: Arc<UdpSocket>, stack: Stack, acc: Accepting) {
    let mut flows: HashMap<SocketAddr, mpsc::Sender<Vec<u8>>> = HashMap::new();
    let mut swept_at = 64;
    let mut buf = vec![0u8; 65536];
    loop {
        let (n, peer) = match socket.recv_from(&mut buf).await {
            Ok(x) => x,
            Err(_) => continue, // ICMP errors from earlier sends; keep serving
        };
        let datagram = buf[..n].to_vec();
        if let Some(flow) = flows.get(&peer) {
            match flow.try_send(datagram) {
                Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => continue,
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    flows.remove(&peer);
                    continue;
                }
            }
        }
        let Ok(slot) = acc.slots.clone().try_acquire_owned() else {
            continue; // at the connection limit: a new peer's datagram is dropped
        };
        // Forget the flows of peers that went quiet after their connection was dropped
        // (whenever the table has doubled since the last sweep): it stays bounded.
        if flows.len() >= swept_at * 2 {
            flows.retain(|_, f| !f.is_closed());
            flows.shrink_to_fit();
            swept_at = flows.len().max(64);
        }
        let (ftx, frx) = mpsc::channel(FLOW_QUEUE);
        let _ = ftx.try_send(datagram);
        flows.insert(peer, ftx);
        let io = Io::Accepted {
            socket: socket.clone(),
            peer,
            rx: frx,
            pending: None,
        };
        let conn = Connection::new(io, stack, None, None);
        if !acc.hand_on(conn, slot).await {
            return;
        }
    }
}
