//! [`Listener`]: accepts connections on every stack and family the properties allow,
//! on one port.
//!
//! One task per listening socket feeds accepted connections into a channel. Datagram
//! stacks have no handshake: the first datagram from a new peer address makes a new
//! connection, and later datagrams from that peer are routed to it. Dropping the
//! listener stops every task and closes every listening socket.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use taps_core::candidates::Stack;
use taps_core::properties::Protocol;

use crate::connection::{Connection, Io};
use crate::transport::{self, SocketOptions};
use crate::{Error, Preconnection};

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

    pub(crate) async fn start(pre: &Preconnection) -> Result<Listener, Error> {
        let plan = pre.plan()?;
        let local = pre.local.ok_or(Error::Usage(
            "listen needs a local endpoint (address or port)",
        ))?;
        let addrs: Vec<SocketAddr> = if local.ip().is_unspecified() {
            vec![
                SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), local.port()),
                SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), local.port()),
            ]
        } else {
            vec![local]
        };
        let opts = Arc::new(SocketOptions::from_properties(pre.properties()));
        let runnable: Vec<Stack> = plan
            .stacks()
            .iter()
            .filter(|s| s.unavailable.is_none())
            .map(|s| s.stack)
            .collect();
        let has = |p: Protocol| runnable.iter().any(|s| s.protocol == p);
        let (tx, rx) = mpsc::channel(BACKLOG);
        let mut tasks = Vec::new();
        let mut bound = Vec::new();
        let mut errors = Vec::new();
        for addr in &addrs {
            // One MPTCP listener also accepts plain TCP clients.
            if has(Protocol::Tcp) || has(Protocol::Mptcp) {
                match transport::listen_tcp(*addr, has(Protocol::Mptcp), &opts) {
                    Ok(l) => {
                        let stack = Stack::plain(if has(Protocol::Mptcp) {
                            Protocol::Mptcp
                        } else {
                            Protocol::Tcp
                        });
                        bound.push((stack, l.local_addr()?));
                        tasks.push(tokio::spawn(accept_stream(l, tx.clone())));
                    }
                    Err(e) => errors.push(format!("TCP {addr}: {e}")),
                }
            }
            for (p, lite) in [(Protocol::Udp, false), (Protocol::UdpLite, true)] {
                if !has(p) {
                    continue;
                }
                match transport::bind_udp(*addr, lite, &opts) {
                    Ok(s) => {
                        bound.push((Stack::plain(p), s.local_addr()?));
                        tasks.push(tokio::spawn(accept_datagrams(
                            Arc::new(s),
                            Stack::plain(p),
                            tx.clone(),
                        )));
                    }
                    Err(e) => errors.push(format!("{p} {addr}: {e}")),
                }
            }
        }
        if bound.is_empty() {
            let stacks: Vec<String> = plan
                .stacks()
                .iter()
                .map(|s| match s.unavailable {
                    Some(why) => format!("{} ({why})", s.stack),
                    None => s.stack.to_string(),
                })
                .collect();
            return Err(Error::Config(format!(
                "nothing to listen on: allowed stacks {}; {}",
                stacks.join(", "),
                if errors.is_empty() {
                    "none of them can listen in this build".to_string()
                } else {
                    errors.join("; ")
                }
            )));
        }
        Ok(Listener { rx, tasks, bound })
    }
}

async fn accept_stream(listener: TcpListener, tx: mpsc::Sender<Result<Connection, Error>>) {
    loop {
        let conn = match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                let mptcp = transport::is_mptcp(&stream);
                let stack = Stack::plain(if mptcp == Some(true) {
                    Protocol::Mptcp
                } else {
                    Protocol::Tcp
                });
                Connection::new(Io::Stream(stream), stack, mptcp, None, None).map_err(Error::from)
            }
            Err(e) => Err(Error::Io(e)),
        };
        if tx.send(conn).await.is_err() {
            return;
        }
    }
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
