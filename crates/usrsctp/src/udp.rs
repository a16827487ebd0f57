//! The UDP side: our own sockets carrying SCTP packets (RFC 6951 format), the tokio tasks
//! reading them into usrsctp, and the demultiplexing of a shared server socket by remote
//! UDP address.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, UdpSocket as StdUdp};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::sys::{conninput, global, lock, ConnAddr, Route};

/// Largest datagram we read.
const MAX_DATAGRAM: usize = 65536;
/// UDP socket buffers we ask for (the kernel caps them at rmem_max/wmem_max).
const UDP_BUFFER: usize = 2 * 1024 * 1024;
/// Unclaimed remotes (handshakes that never reached `accept`) are forgotten after this.
const REMOTE_IDLE: Duration = Duration::from_secs(60);
/// At most this many unclaimed remotes per shared socket (a bound against INIT floods).
const MAX_UNCLAIMED: usize = 4096;

/// Walks the chunks of an SCTP packet (12-byte common header, then type/flags/length chunks
/// padded to 4 bytes) and reports whether one has type `ty`. Never panics on bad input.
pub(crate) fn has_chunk(pkt: &[u8], ty: u8) -> bool {
    let mut off = 12usize;
    while off + 4 <= pkt.len() {
        let t = pkt[off];
        let len = u16::from_be_bytes([pkt[off + 2], pkt[off + 3]]) as usize;
        if t == ty {
            return true;
        }
        if len < 4 {
            return false;
        }
        off = match off.checked_add((len + 3) & !3) {
            Some(o) => o,
            None => return false,
        };
    }
    false
}

/// Counts a UDP socket we own while its reader task lives.
pub(crate) struct UdpCount;
impl UdpCount {
    pub(crate) fn new() -> UdpCount {
        global().live_udp.fetch_add(1, Ordering::SeqCst);
        UdpCount
    }
}
impl Drop for UdpCount {
    fn drop(&mut self) {
        global().live_udp.fetch_sub(1, Ordering::SeqCst);
    }
}

fn new_udp(bind: SocketAddr) -> Result<Socket> {
    let s = Socket::new(Domain::for_address(bind), Type::DGRAM, Some(Protocol::UDP))
        .map_err(|e| Error::udp("socket", e))?;
    let _ = s.set_recv_buffer_size(UDP_BUFFER);
    let _ = s.set_send_buffer_size(UDP_BUFFER);
    s.set_nonblocking(true)
        .map_err(|e| Error::udp("set_nonblocking", e))?;
    s.bind(&bind.into()).map_err(|e| Error::udp("bind", e))?;
    Ok(s)
}

/// Splits a socket into a std handle (for the output callback, any thread) and a tokio one
/// (for the reader task); both refer to the same kernel socket.
fn split(s: Socket) -> Result<(Arc<StdUdp>, UdpSocket)> {
    let send: StdUdp = s.try_clone().map_err(|e| Error::udp("dup", e))?.into();
    let recv = UdpSocket::from_std(s.into()).map_err(|e| Error::udp("register with tokio", e))?;
    Ok((Arc::new(send), recv))
}

/// Client side: a fresh UDP socket connected to the peer, its conn address and reader task.
pub(crate) struct ClientLink {
    pub(crate) addr: ConnAddr,
    pub(crate) local: SocketAddr,
    pub(crate) task: Option<JoinHandle<()>>,
}

impl Drop for ClientLink {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// What the client reader task reports.
pub(crate) trait ClientEvents: Send + Sync + 'static {
    /// An INIT ACK chunk arrived (called before the packet is given to usrsctp).
    fn init_ack(&self);
    /// The connected UDP socket reported ECONNREFUSED (ICMP port unreachable).
    fn refused(&self);
}

impl ClientLink {
    pub(crate) fn open(remote: SocketAddr) -> Result<(ClientLink, UdpSocket)> {
        let bind: SocketAddr = if remote.is_ipv4() {
            "0.0.0.0:0".parse()
        } else {
            "[::]:0".parse()
        }
        .map_err(|_| Error::udp("bind", io::Error::other("bad wildcard")))?;
        let s = new_udp(bind)?;
        s.connect(&remote.into())
            .map_err(|e| Error::udp("connect", e))?;
        let local = s
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .ok_or_else(|| Error::udp("local_addr", io::Error::other("not an inet address")))?;
        let (send, recv) = split(s)?;
        let addr = ConnAddr::register(Route {
            sock: send,
            remote: None,
        });
        Ok((
            ClientLink {
                addr,
                local,
                task: None,
            },
            recv,
        ))
    }

    pub(crate) fn start(&mut self, sock: UdpSocket, events: Arc<dyn ClientEvents>) {
        let id = self.addr.id;
        let count = UdpCount::new();
        self.task = Some(tokio::spawn(async move {
            let _count = count;
            let mut buf = vec![0u8; MAX_DATAGRAM];
            let mut seen_init_ack = false;
            loop {
                match sock.recv(&mut buf).await {
                    Ok(n) => {
                        let pkt = &buf[..n];
                        if !seen_init_ack && has_chunk(pkt, crate::ffi::SCTP_INITIATION_ACK) {
                            seen_init_ack = true;
                            events.init_ack();
                        }
                        conninput(id, pkt);
                    }
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => events.refused(),
                    Err(e) => {
                        tracing::debug!("usrsctp client UDP recv: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }));
    }
}

struct Remote {
    addr: ConnAddr,
    claims: usize,
    last_seen: Instant,
}

#[derive(Default)]
pub(crate) struct RemoteTable {
    by_addr: HashMap<SocketAddr, Remote>,
    by_id: HashMap<usize, SocketAddr>,
}

/// One UDP socket on an encapsulation port, shared (refcounted) by every listener and
/// accepted association using that local address. Each remote UDP address gets its own conn
/// address so usrsctp keeps the peers apart.
pub(crate) struct SharedUdp {
    pub(crate) local: SocketAddr,
    table: Arc<Mutex<RemoteTable>>,
    task: JoinHandle<()>,
}

impl Drop for SharedUdp {
    fn drop(&mut self) {
        self.task.abort();
        let drained: Vec<Remote> = {
            let mut t = lock(&self.table);
            t.by_id.clear();
            t.by_addr.drain().map(|(_, r)| r).collect()
        };
        drop(drained); // deregisters, outside our lock
        let mut map = lock(&global().shared_udp);
        if map.get(&self.local).is_some_and(|w| w.strong_count() == 0) {
            map.remove(&self.local);
        }
    }
}

impl SharedUdp {
    /// Returns the shared socket for `local`, binding it if nobody holds it yet.
    pub(crate) fn get(local: SocketAddr) -> Result<Arc<SharedUdp>> {
        let g = global();
        let mut map = lock(&g.shared_udp);
        if local.port() != 0 {
            if let Some(s) = map.get(&local).and_then(Weak::upgrade) {
                if !s.task.is_finished() {
                    return Ok(s);
                }
            }
        }
        let s = new_udp(local)?;
        let bound = s
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .ok_or_else(|| Error::udp("local_addr", io::Error::other("not an inet address")))?;
        let (send, recv) = split(s)?;
        let table = Arc::new(Mutex::new(RemoteTable::default()));
        let task = tokio::spawn(shared_reader(recv, send, table.clone(), UdpCount::new()));
        let shared = Arc::new(SharedUdp {
            local: bound,
            table,
            task,
        });
        // Keyed by the bound address only: a request for port 0 always gets a fresh socket.
        map.retain(|_, w| w.strong_count() > 0);
        map.insert(bound, Arc::downgrade(&shared));
        Ok(shared)
    }

    /// Marks the remote behind conn address `id` as used by an accepted association;
    /// returns its UDP address.
    pub(crate) fn claim(&self, id: usize) -> Option<SocketAddr> {
        let mut t = lock(&self.table);
        let addr = *t.by_id.get(&id)?;
        if let Some(r) = t.by_addr.get_mut(&addr) {
            r.claims += 1;
        }
        Some(addr)
    }

    /// Releases a claim; the remote's conn address is deregistered when no association uses it.
    pub(crate) fn unclaim(&self, remote: SocketAddr) {
        let removed = {
            let mut t = lock(&self.table);
            let gone = match t.by_addr.get_mut(&remote) {
                Some(r) => {
                    r.claims = r.claims.saturating_sub(1);
                    r.claims == 0
                }
                None => false,
            };
            if gone {
                let r = t.by_addr.remove(&remote);
                if let Some(r) = &r {
                    t.by_id.remove(&r.addr.id);
                }
                r
            } else {
                None
            }
        };
        drop(removed);
    }
}

async fn shared_reader(
    sock: UdpSocket,
    send: Arc<StdUdp>,
    table: Arc<Mutex<RemoteTable>>,
    _count: UdpCount,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            r = sock.recv_from(&mut buf) => match r {
                Ok((n, from)) => {
                    let pkt = &buf[..n];
                    if let Some(id) = lookup_or_create(&table, &send, from, pkt) {
                        conninput(id, pkt);
                    }
                }
                Err(e) => {
                    tracing::debug!("usrsctp shared UDP recv: {e}");
                    if e.kind() != io::ErrorKind::ConnectionRefused {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            },
            _ = tick.tick() => expire(&table),
        }
    }
}

fn lookup_or_create(
    table: &Mutex<RemoteTable>,
    send: &Arc<StdUdp>,
    from: SocketAddr,
    pkt: &[u8],
) -> Option<usize> {
    if pkt.len() < 12 {
        return None;
    }
    let mut t = lock(table);
    if let Some(r) = t.by_addr.get_mut(&from) {
        r.last_seen = Instant::now();
        return Some(r.addr.id);
    }
    // Only an INIT or COOKIE ECHO may open state for a new remote; stray packets are dropped.
    if !(has_chunk(pkt, 0x01) || has_chunk(pkt, 0x0a)) {
        return None;
    }
    if t.by_addr.values().filter(|r| r.claims == 0).count() >= MAX_UNCLAIMED {
        return None;
    }
    let addr = ConnAddr::register(Route {
        sock: send.clone(),
        remote: Some(from),
    });
    let id = addr.id;
    t.by_id.insert(id, from);
    t.by_addr.insert(
        from,
        Remote {
            addr,
            claims: 0,
            last_seen: Instant::now(),
        },
    );
    Some(id)
}

fn expire(table: &Mutex<RemoteTable>) {
    let now = Instant::now();
    let gone: Vec<Remote> = {
        let mut t = lock(table);
        let stale: Vec<SocketAddr> = t
            .by_addr
            .iter()
            .filter(|(_, r)| r.claims == 0 && now.duration_since(r.last_seen) > REMOTE_IDLE)
            .map(|(a, _)| *a)
            .collect();
        stale
            .into_iter()
            .filter_map(|a| {
                let r = t.by_addr.remove(&a)?;
                t.by_id.remove(&r.addr.id);
                Some(r)
            })
            .collect()
    };
    drop(gone);
}

#[cfg(test)]
mod tests {
    use super::has_chunk;

    #[test]
    fn chunk_walk() {
        let mut p = vec![0u8; 12];
        p.extend_from_slice(&[0x02, 0, 0, 5, 1, 0, 0, 0]);
        assert!(has_chunk(&p, 2));
        assert!(!has_chunk(&p, 1));
        let mut q = vec![0u8; 12];
        q.extend_from_slice(&[0x00, 0, 0, 6, 1, 2, 0, 0, 0x02, 0, 0, 4]);
        assert!(has_chunk(&q, 2));
        assert!(!has_chunk(&q[..14], 2));
        let mut bad = vec![0u8; 12];
        bad.extend_from_slice(&[0x00, 0, 0, 0]);
        assert!(!has_chunk(&bad, 2));
        assert!(!has_chunk(&[], 2));
    }
}
