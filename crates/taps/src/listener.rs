//! [`Listener`]: accepts connections on every stack and family the properties allow,
//! on one port.
//!
//! One task per listening socket feeds accepted connections into a channel. Datagram
//! stacks have no handshake: the first datagram from a new peer address makes a new
//! connection, and later datagrams from that peer are routed to it; DTLS demultiplexes
//! the same way and hands a peer's flow on once its handshake is done. SCTP listens on the
//! same port number (the SCTP port, inside UDP on the context's encapsulation port): an
//! accepted association is a connection on stream 0, and every further stream the peer
//! opens (flow mapping) is one more connection. Dropping the listener stops every
//! accept task and closes every listening socket; accepted connections live on.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use taps_core::candidates::{Plan, Security, Stack};
use taps_core::properties::Protocol;

use crate::connection::{Connection, Io};
use crate::sctp_flow::{SctpFlow, SharedAssociation};
use crate::security::ServerSecurity;
use crate::transport;
use crate::transport::{SocketOptions, Stream};
use crate::Error;

/// How many accepted connections may wait for [`Listener::accept`].
const BACKLOG: usize = 1024;
/// Datagrams queued per accepted datagram flow before new ones are dropped.
const FLOW_QUEUE: usize = 256;

/// A set of listening sockets, one per allowed stack and family.
pub struct Listener {
    rx: mpsc::Receiver<Result<Connection, Error>>,
    tasks: Vec<JoinHandle<()>>,
    bound: Vec<(Stack, SocketAddr)>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Listener {
    /// The next accepted connection; `None` once every listening socket failed.
    pub async fn accept(&mut self) -> Option<Result<Connection, Error>> {
        self.rx.recv().await
    }

    /// What is listening where.
    pub fn local_addrs(&self) -> &[(Stack, SocketAddr)] {
        &self.bound
    }

    /// Stops listening (same as dropping).
    pub fn stop(self) {}

    /// Listens on `local` with every runnable stack of `plan` and both families when
    /// `local` is unspecified.
    pub(crate) async fn start(
        local: SocketAddr,
        plan: &Plan,
        opts: Arc<SocketOptions>,
        security: Option<Arc<ServerSecurity>>,
    ) -> Result<Listener, Error> {
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
        let (tx, rx) = mpsc::channel(BACKLOG);
        let mut b = Binder {
            opts,
            security,
            tx,
            tasks: Vec::new(),
            bound: Vec::new(),
            errors: Vec::new(),
        };
        for (i, addr) in addrs.iter().enumerate() {
            // One MPTCP listener also accepts plain TCP clients.
            if has(Protocol::Tcp) || has(Protocol::Mptcp) {
                b.stream(*addr, has(Protocol::Mptcp))?;
            }
            // One dual-stack SCTP listener (its UDP socket takes IPv4 too).
            if has(Protocol::Sctp) && i == 0 {
                b.sctp(*addr);
            }
            if has(Protocol::Quic) {
                b.quic(*addr)?;
            }
            for (p, lite) in [(Protocol::Udp, false), (Protocol::UdpLite, true)] {
                if runnable.contains(&Stack::plain(p)) {
                    b.datagrams(*addr, p, lite)?;
                }
                // After QUIC: when both are allowed, QUIC holds the UDP port.
                if runnable.contains(&Stack::new(p, Security::Dtls)) {
                    b.dtls(*addr, p, lite)?;
                }
            }
        }
        b.finish(plan, rx)
    }
}

/// Binds one listener after another, collecting their accept tasks, what is bound where
/// and why anything could not be bound.
struct Binder {
    opts: Arc<SocketOptions>,
    security: Option<Arc<ServerSecurity>>,
    tx: mpsc::Sender<Result<Connection, Error>>,
    tasks: Vec<JoinHandle<()>>,
    bound: Vec<(Stack, SocketAddr)>,
    errors: Vec<String>,
}

impl Binder {
    /// TCP (or MPTCP, which takes plain TCP clients too), with TLS if secured.
    fn stream(&mut self, addr: SocketAddr, mptcp: bool) -> Result<(), Error> {
        match transport::listen_tcp(addr, mptcp, &self.opts) {
            Ok(l) => {
                let protocol = if mptcp {
                    Protocol::Mptcp
                } else {
                    Protocol::Tcp
                };
                let stack = match &self.security {
                    Some(_) => Stack::new(protocol, Security::Tls),
                    None => Stack::plain(protocol),
                };
                self.bound.push((stack, l.local_addr()?));
                let task = accept_stream(l, self.security.clone(), self.tx.clone());
                self.tasks.push(tokio::spawn(task));
            }
            Err(e) => self.errors.push(format!("TCP {addr}: {e}")),
        }
        Ok(())
    }

    /// SCTP over UDP: one dual-stack listener.
    fn sctp(&mut self, addr: SocketAddr) {
        match transport::sctp::listen(addr.ip(), addr.port(), &self.opts) {
            Ok(l) => {
                let udp = l.local_addr();
                let at = SocketAddr::new(udp.ip(), addr.port());
                self.bound.push((Stack::plain(Protocol::Sctp), at));
                self.tasks
                    .push(tokio::spawn(accept_sctp(l, self.tx.clone())));
            }
            Err(e) => self.errors.push(format!(
                "SCTP {addr} (UDP port {}): {e}",
                self.opts.sctp_udp_port
            )),
        }
    }

    /// QUIC on the same port (UDP), with the listener's identity.
    fn quic(&mut self, addr: SocketAddr) -> Result<(), Error> {
        let Some(security) = &self.security else {
            return Ok(());
        };
        match crate::security::quic::listen(addr, security.quic()) {
            Ok(endpoint) => {
                let stack = Stack::new(Protocol::Quic, Security::QuicTls);
                self.bound.push((stack, endpoint.local_addr()?));
                self.tasks
                    .push(tokio::spawn(accept_quic(endpoint, self.tx.clone())));
            }
            Err(e) => self.errors.push(format!("QUIC {addr}: {e}")),
        }
        Ok(())
    }

    /// UDP or UDP-Lite: one flow per remote endpoint.
    fn datagrams(&mut self, addr: SocketAddr, p: Protocol, lite: bool) -> Result<(), Error> {
        match transport::bind_udp(addr, lite, &self.opts) {
            Ok(s) => {
                self.bound.push((Stack::plain(p), s.local_addr()?));
                let task = accept_datagrams(Arc::new(s), Stack::plain(p), self.tx.clone());
                self.tasks.push(tokio::spawn(task));
            }
            Err(e) => self.errors.push(format!("{p} {addr}: {e}")),
        }
        Ok(())
    }

    /// DTLS over UDP or UDP-Lite, with the listener's identity: one flow per remote
    /// endpoint, handed on when its handshake is done.
    fn dtls(&mut self, addr: SocketAddr, p: Protocol, lite: bool) -> Result<(), Error> {
        let Some(security) = &self.security else {
            return Ok(());
        };
        let server = match security.dtls() {
            Ok(server) => server,
            Err(why) => {
                self.errors.push(format!("DTLS/{p} {addr}: {why}"));
                return Ok(());
            }
        };
        match transport::bind_udp(addr, lite, &self.opts) {
            Ok(s) => {
                let stack = Stack::new(p, Security::Dtls);
                self.bound.push((stack, s.local_addr()?));
                let (atx, arx) = mpsc::channel(BACKLOG);
                let serve = crate::security::dtls::serve(Arc::new(s), server, atx);
                self.tasks.push(tokio::spawn(serve));
                let task = accept_dtls(arx, stack, self.tx.clone());
                self.tasks.push(tokio::spawn(task));
            }
            Err(e) => self.errors.push(format!("DTLS/{p} {addr}: {e}")),
        }
        Ok(())
    }

    /// The listener, or why nothing could listen.
    fn finish(
        self,
        plan: &Plan,
        rx: mpsc::Receiver<Result<Connection, Error>>,
    ) -> Result<Listener, Error> {
        if self.bound.is_empty() {
            let stacks: Vec<String> = plan
                .stacks()
                .iter()
                .map(|s| match s.unavailable {
                    Some(why) => format!("{} ({why})", s.stack),
                    None => s.stack.to_string(),
                })
                .collect();
            return Err(Error::config(format!(
                "nothing to listen on: allowed stacks {}; {}",
                stacks.join(", "),
                if self.errors.is_empty() {
                    "none of them can listen in this build".to_string()
                } else {
                    self.errors.join("; ")
                }
            )));
        }
        Ok(Listener {
            rx,
            tasks: self.tasks,
            bound: self.bound,
        })
    }
}

/// Accepts stream connections; with `security`, each one's TLS handshake runs in a task
/// of its own (a slow or silent client holds up no one) and only a finished handshake is
/// handed on; a failed one is logged and dropped.
async fn accept_stream(
    listener: TcpListener,
    security: Option<Arc<ServerSecurity>>,
    tx: mpsc::Sender<Result<Connection, Error>>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                if tx.send(Err(Error::Io(e))).await.is_err() {
                    return;
                }
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let mptcp = transport::is_mptcp(&stream);
        let protocol = if mptcp == Some(true) {
            Protocol::Mptcp
        } else {
            Protocol::Tcp
        };
        let Some(security) = &security else {
            let conn = Connection::new(
                Io::Stream(Stream::Plain(stream)),
                Stack::plain(protocol),
                mptcp,
                None,
                None,
            );
            if tx.send(conn.map_err(Error::from)).await.is_err() {
                return;
            }
            continue;
        };
        let (security, tx) = (security.clone(), tx.clone());
        tokio::spawn(async move {
            let (tls, info) = match security.handshake(stream).await {
                Ok(done) => done,
                Err(cause) => {
                    tracing::debug!(%peer, %cause, "TLS handshake with a client failed");
                    return;
                }
            };
            let stack = Stack::new(protocol, Security::Tls);
            let io = Io::Stream(Stream::Tls(Box::new(tls.into())));
            let conn = Connection::new(io, stack, mptcp, None, None).map(|mut c| {
                c.set_security(info);
                c
            });
            let _ = tx.send(conn.map_err(Error::from)).await;
        });
    }
}

/// Accepts QUIC connections; each one's handshake, then the streams the client opens
/// on it (one taps connection each, handed on when the client first sends on it), run
/// in a task of its own.
async fn accept_quic(endpoint: quinn::Endpoint, tx: mpsc::Sender<Result<Connection, Error>>) {
    let Ok(local) = endpoint.local_addr() else {
        return;
    };
    while let Some(incoming) = endpoint.accept().await {
        let tx = tx.clone();
        tokio::spawn(async move {
            let peer = incoming.remote_address();
            let shared = match crate::security::quic::accept(incoming, local).await {
                Ok(shared) => shared,
                Err(cause) => {
                    tracing::debug!(%peer, %cause, "QUIC connection from a client failed");
                    return;
                }
            };
            while let Some(stream) = crate::security::quic::accept_stream(&shared).await {
                let stack = Stack::new(Protocol::Quic, Security::QuicTls);
                let info = shared.info.clone();
                let io = Io::Stream(Stream::Quic(Box::new(stream)));
                let conn = Connection::new(io, stack, None, None, None).map(|mut c| {
                    c.set_security(info);
                    c
                });
                if tx.send(conn.map_err(Error::from)).await.is_err() {
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
    tx: mpsc::Sender<Result<Connection, Error>>,
) {
    while let Some((flow, info)) = accepted.recv().await {
        let conn = Connection::new(Io::Dtls(flow), stack, None, None, None).map(|mut c| {
            c.set_security(info);
            c
        });
        if tx.send(conn.map_err(Error::from)).await.is_err() {
            return;
        }
    }
}

async fn accept_sctp(listener: usrsctp::SctpListener, tx: mpsc::Sender<Result<Connection, Error>>) {
    loop {
        let (association, _) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                let e = Error::Io(io::Error::other(e));
                if tx.send(Err(e)).await.is_err() {
                    return;
                }
                continue;
            }
        };
        let shared = SharedAssociation::accepted(association.clone());
        let first = association
            .stream(0)
            .map_err(io::Error::other)
            .and_then(|s| sctp_connection(SctpFlow::new(shared.clone(), s)));
        if tx.send(first.map_err(Error::from)).await.is_err() {
            return;
        }
        tokio::spawn(accept_sctp_streams(
            association,
            Arc::downgrade(&shared),
            tx.clone(),
        ));
    }
}

/// Turns every further stream the peer opens on `association` into a connection. Ends
/// with the association or when the listener is gone.
async fn accept_sctp_streams(
    association: usrsctp::Association,
    mut shared: std::sync::Weak<SharedAssociation>,
    tx: mpsc::Sender<Result<Connection, Error>>,
) {
    loop {
        let stream = tokio::select! {
            s = association.accept_stream() => match s {
                Ok(Some(s)) => s,
                _ => return,
            },
            // The listener is gone: stop holding the association open for new streams.
            _ = tx.closed() => return,
        };
        let shared = match shared.upgrade() {
            Some(s) => s,
            // Every connection of the association is gone; it serves the peer's new ones.
            None => {
                let s = SharedAssociation::accepted(association.clone());
                shared = Arc::downgrade(&s);
                s
            }
        };
        let conn = sctp_connection(SctpFlow::new(shared, stream)).map_err(Error::from);
        if tx.send(conn).await.is_err() {
            return;
        }
    }
}

fn sctp_connection(flow: SctpFlow) -> io::Result<Connection> {
    Connection::new(
        Io::Sctp(flow),
        Stack::plain(Protocol::Sctp),
        None,
        None,
        None,
    )
}

async fn accept_datagrams(
    socket: Arc<UdpSocket>,
    stack: Stack,
    tx: mpsc::Sender<Result<Connection, Error>>,
) {
    let mut flows: HashMap<SocketAddr, mpsc::Sender<Vec<u8>>> = HashMap::new();
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
        let (ftx, frx) = mpsc::channel(FLOW_QUEUE);
        let _ = ftx.try_send(datagram);
        flows.insert(peer, ftx);
        let io = Io::Accepted {
            socket: socket.clone(),
            peer,
            rx: frx,
            pending: None,
        };
        let conn = Connection::new(io, stack, None, None, None).map_err(Error::from);
        if tx.send(conn).await.is_err() {
            return;
        }
    }
}
