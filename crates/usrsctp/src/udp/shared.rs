//! A listener's shared UDP socket: one per local address, demultiplexed by remote UDP
//! address, each remote its own conn address.

use super::*;
use crate::packet::{checksum_ok, has_chunk};

struct Remote {
    addr: ConnAddr,
    /// Local address this remote sends to (only learned on a socket bound to the unspecified
    /// address); replies go out from it.
    dst: Option<IpAddr>,
    claims: usize,
    last_seen: Instant,
    heard: Heard,
}

/// The handshake heard from a remote since its last accept: another association from its
/// UDP address (a NAT, a just-freed port reused) may be under way, so the end of its last
/// accepted one deregisters the remote only if nothing was heard.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Heard {
    Nothing,
    /// An INIT: a handshake may be under way.
    Init,
    /// A COOKIE ECHO: an association may be waiting for `accept`.
    CookieEcho,
}

impl Heard {
    /// What `pkt` says of a handshake. INIT stands alone in its packet and COOKIE ECHO
    /// comes first in its: the first chunk's type tells (one load, for every packet).
    fn in_packet(pkt: &[u8]) -> Heard {
        match pkt.get(12) {
            Some(&INIT) => Heard::Init,
            Some(&COOKIE_ECHO) => Heard::CookieEcho,
            _ => Heard::Nothing,
        }
    }
}

/// SCTP chunk types that open a handshake (RFC 9260 section 3.2).
const INIT: u8 = 0x01;
const COOKIE_ECHO: u8 = 0x0a;

#[derive(Default)]
pub(crate) struct RemoteTable {
    by_addr: HashMap<SocketAddr, Remote>,
    by_id: HashMap<usize, SocketAddr>,
    /// Remotes with no claim (handshakes not yet accepted), kept equal to the count of
    /// `by_addr` entries with `claims == 0`.
    unclaimed: usize,
}

impl RemoteTable {
    /// Removes `addr`'s entry (keeping the unclaimed count); the caller drops it outside
    /// the lock.
    fn remove(&mut self, addr: &SocketAddr) -> Option<Remote> {
        let r = self.by_addr.remove(addr)?;
        self.by_id.remove(&r.addr.id);
        if r.claims == 0 {
            self.unclaimed -= 1;
        }
        Some(r)
    }
}

/// One UDP socket on an encapsulation port, shared (refcounted) by every listener and
/// accepted association using that local address. Each remote UDP address gets its own conn
/// address so usrsctp keeps the peers apart.
pub(crate) struct SharedUdp {
    pub(crate) local: SocketAddr,
    table: Arc<Mutex<RemoteTable>>,
    /// The sending half (replies to injected datagrams go out on it).
    pub(super) send: Arc<StdUdp>,
    task: JoinHandle<()>,
    /// Its key in [`READERS`].
    reader_key: usize,
}

impl SharedUdp {
    /// The conn address of remote `from`, if it is known here.
    pub(super) fn conn_of(&self, from: &SocketAddr) -> Option<usize> {
        lock(&self.table).by_addr.get(from).map(|r| r.addr.id)
    }
}

impl Drop for SharedUdp {
    fn drop(&mut self) {
        lock(&READERS).remove(&self.reader_key);
        self.task.abort();
        let drained: Vec<Remote> = {
            let mut t = lock(&self.table);
            t.by_id.clear();
            t.by_addr.drain().map(|(_, r)| r).collect()
        };
        drop(drained); // deregisters, outside our lock
        let mut map = lock(&SHARED);
        if map.get(&self.local).is_some_and(|w| w.strong_count() == 0) {
            map.remove(&self.local);
        }
    }
}

impl SharedUdp {
    /// Returns the shared socket for `local`, binding it if nobody holds it yet.
    pub(crate) fn get(local: SocketAddr) -> Result<Arc<SharedUdp>> {
        let mut map = lock(&SHARED);
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
        let pktinfo = bound.ip().is_unspecified() && enable_pktinfo(&s, bound);
        // ICMP errors with what they quote: a remote whose port is refused loses its
        // associations (`refusal`).
        enable_recverr(&s, bound.is_ipv6());
        let (send, recv) = split(s)?;
        let table = Arc::new(Mutex::new(RemoteTable::default()));
        let task = tokio::spawn(shared_reader(
            recv,
            send.clone(),
            table.clone(),
            UdpCount::new(),
            pktinfo,
        ));
        let reader_key = global().next_id();
        let shared = Arc::new(SharedUdp {
            local: bound,
            table,
            send,
            task,
            reader_key,
        });
        lock(&READERS).insert(reader_key, Reader::Shared(Arc::downgrade(&shared)));
        // Keyed by the bound address only: a request for port 0 always gets a fresh socket.
        map.retain(|_, w| w.strong_count() > 0);
        map.insert(bound, Arc::downgrade(&shared));
        Ok(shared)
    }

    /// Stops the reader and returns once its task, and with it the socket, is gone, if
    /// `this` is the last holder; otherwise (accepted associations still use the socket)
    /// only drops this reference.
    pub(crate) async fn close(this: Arc<SharedUdp>) {
        if let Some(mut me) = Arc::into_inner(this) {
            me.task.abort();
            let _ = (&mut me.task).await;
            // `me` drops here: the remotes are deregistered and the sending half closed.
        }
    }

    /// Handles `pkt` as if it had arrived on this socket from `from`: the reader task's
    /// demultiplexing, then `conninput`, on the calling thread (fuzzing).
    #[cfg(fuzzing)]
    pub(crate) fn inject(&self, from: SocketAddr, pkt: &[u8]) {
        if let Some(id) = lookup_or_create(&self.table, &self.send, from, None, pkt) {
            conninput(id, pkt);
        }
    }

    /// Handles an ICMP port unreachable for a datagram carrying `quoted` that this socket
    /// sent to `to`, as the reader task does with one from the error queue (the ABORT it
    /// stands for goes to usrsctp from `to`'s conn address, on the calling thread).
    pub(crate) fn inject_refusal(&self, to: SocketAddr, quoted: &[u8]) {
        let conn = lock(&self.table).by_addr.get(&to).map(|r| r.addr.id);
        if let (Some(conn), Some(abort)) = (conn, abort_for(quoted)) {
            conninput(conn, &abort);
        }
    }

    /// Marks the remote behind conn address `id` as used by an accepted association;
    /// returns its UDP address.
    pub(crate) fn claim(&self, id: usize) -> Option<SocketAddr> {
        let mut t = lock(&self.table);
        let addr = *t.by_id.get(&id)?;
        let mut was_unclaimed = false;
        if let Some(r) = t.by_addr.get_mut(&addr) {
            was_unclaimed = r.claims == 0;
            r.claims += 1;
            r.heard = Heard::Nothing;
        }
        if was_unclaimed {
            t.unclaimed -= 1;
        }
        Some(addr)
    }

    /// Releases a claim; the remote's conn address is deregistered when no association uses
    /// it: at once, unless a handshake came from the same UDP address since the last
    /// accept ([`Heard`]); then it is kept, and forgotten, as a handshake not yet accepted.
    pub(crate) fn unclaim(&self, remote: SocketAddr) {
        let removed = {
            let mut t = lock(&self.table);
            let (last, keep) = match t.by_addr.get_mut(&remote) {
                Some(r) if r.claims > 0 => {
                    r.claims -= 1;
                    let keep = r.heard != Heard::Nothing;
                    if r.claims == 0 && keep {
                        r.last_seen = Instant::now();
                    }
                    (r.claims == 0, keep)
                }
                _ => (false, false),
            };
            if last {
                // Unclaimed from now on (for the moment it takes to remove it, if not kept).
                t.unclaimed += 1;
            }
            if last && !keep {
                t.remove(&remote)
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
    pktinfo: bool,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut tick = tokio::time::interval(HANDSHAKE_IDLE / 2);
    loop {
        tokio::select! {
            r = sock.ready(Interest::READABLE | Interest::ERROR) => match r {
                Ok(ready) => {
                    if ready.is_error() {
                        shared_refusals(&sock, &table);
                    }
                    if ready.is_readable() || ready.is_read_closed() {
                        if let Err(e) = read_some(&sock, &send, &table, pktinfo, &mut buf) {
                            tracing::debug!("usrsctp shared UDP recv: {e}");
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        // Let other tasks run between batches.
                        tokio::task::yield_now().await;
                    }
                }
                Err(e) => {
                    tracing::debug!("usrsctp shared UDP readiness: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = tick.tick() => expire(&table),
        }
    }
}

/// Reads up to [`READ_BATCH`] + 1 datagram reads (until nothing is queued) and hands them
/// to usrsctp: under a burst of new peers the socket would otherwise overflow between
/// trips through the scheduler. A refusal taken as the pending error is skipped (the
/// error queue has it for [`shared_refusals`]); another error ends the batch.
fn read_some(
    sock: &UdpSocket,
    send: &Arc<StdUdp>,
    table: &Mutex<RemoteTable>,
    pktinfo: bool,
    buf: &mut [u8],
) -> io::Result<()> {
    for _ in 0..=READ_BATCH {
        match try_recv(sock, pktinfo, buf) {
            Ok(got) => input(table, send, &got, buf),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Takes the shared socket's queued ICMP errors: a port unreachable from a known remote
/// ends the association the quoted packet belongs to ([`crate::refusal`]); errors for
/// unknown remotes are dropped. Reading the queue to its end clears the readiness and the
/// socket's pending error (so the next send does not take it).
fn shared_refusals(sock: &UdpSocket, table: &Mutex<RemoteTable>) {
    let _ = sock.try_io(Interest::ERROR, || {
        let taken = take_refusals(sock, |to| lock(table).by_addr.get(&to).map(|r| r.addr.id));
        if let Err(e) = taken {
            tracing::debug!("usrsctp shared UDP error queue: {e}");
        }
        Err::<(), _>(io::ErrorKind::WouldBlock.into())
    });
}

/// Hands the datagrams of one read (several with GRO) to usrsctp, each as from its remote's
/// conn address.
fn input(table: &Mutex<RemoteTable>, send: &Arc<StdUdp>, got: &Received, buf: &[u8]) {
    // The datagrams of one read (several with GRO) are looked up first, then handed to
    // usrsctp in one hold of its lock, so what they release (data after SACKs, SACKs after
    // data) leaves as one GSO send. The table is not locked inside that hold: a thread
    // registering a remote holds the table while calling usrsctp.
    const AT_ONCE: usize = 64;
    let mut pkts = got.datagrams(buf);
    loop {
        let mut found: [(usize, &[u8]); AT_ONCE] = [(0, &[]); AT_ONCE];
        let mut n = 0;
        for pkt in pkts.by_ref() {
            if let Some(id) = lookup_or_create(table, send, got.from, got.dst, pkt) {
                found[n] = (id, pkt);
                n += 1;
                if n == AT_ONCE {
                    break;
                }
            }
        }
        if n == 0 {
            return;
        }
        crate::ffi::batch(|| {
            for &(id, pkt) in &found[..n] {
                conninput(id, pkt);
            }
        });
        if n < AT_ONCE {
            return;
        }
    }
}

/// One read without waiting: with `pktinfo` or GRO, `recvmsg` also yielding the
/// destination address and segment size; otherwise plain `recv_from`. `WouldBlock` when
/// nothing is queued (which clears the socket's read readiness).
fn try_recv(sock: &UdpSocket, pktinfo: bool, buf: &mut [u8]) -> io::Result<Received> {
    if pktinfo || GRO.load(Ordering::Relaxed) {
        sock.try_io(Interest::READABLE, || recv_with_dst(sock, buf))
    } else {
        let (len, from) = sock.try_recv_from(buf)?;
        Ok(Received::one(len, from))
    }
}

fn lookup_or_create(
    table: &Mutex<RemoteTable>,
    send: &Arc<StdUdp>,
    from: SocketAddr,
    dst: Option<IpAddr>,
    pkt: &[u8],
) -> Option<usize> {
    if pkt.len() < 12 {
        return None;
    }
    let mut t = lock(table);
    if let Some(r) = t.by_addr.get_mut(&from) {
        r.last_seen = Instant::now();
        r.heard = r.heard.max(Heard::in_packet(pkt));
        if dst.is_some() && dst != r.dst {
            // The remote now sends to another of our addresses (rare): answer from that one.
            r.dst = dst;
            r.addr.set_source(dst);
        }
        return Some(r.addr.id);
    }
    // Only an INIT or COOKIE ECHO with a right checksum may open state for a new remote;
    // stray and corrupt packets are dropped.
    if !(has_chunk(pkt, INIT) || has_chunk(pkt, COOKIE_ECHO)) || !checksum_ok(pkt) {
        return None;
    }
    let evicted = if t.unclaimed >= MAX_UNCLAIMED {
        let oldest = t
            .by_addr
            .iter()
            .filter(|(_, r)| r.claims == 0)
            .min_by_key(|(_, r)| r.last_seen)
            .map(|(a, _)| *a);
        oldest.and_then(|a| t.remove(&a))
    } else {
        None
    };
    // A listener's socket exists, so the library is loaded: this cannot fail.
    let addr = ConnAddr::register(Route {
        sock: send.clone(),
        remote: Some(from),
        src: dst,
        refused: None,
        bytes: Default::default(),
    })
    .ok()?;
    let id = addr.id;
    t.by_id.insert(id, from);
    t.by_addr.insert(
        from,
        Remote {
            addr,
            dst,
            claims: 0,
            last_seen: Instant::now(),
            // Checked above: the packet carries an INIT or a COOKIE ECHO.
            heard: Heard::in_packet(pkt).max(Heard::Init),
        },
    );
    t.unclaimed += 1;
    drop(t);
    drop(evicted); // deregisters, outside our lock
    Some(id)
}

fn expire(table: &Mutex<RemoteTable>) {
    let now = Instant::now();
    let gone: Vec<Remote> = {
        let mut t = lock(table);
        let stale: Vec<SocketAddr> = t
            .by_addr
            .iter()
            .filter(|(_, r)| {
                let idle = now.duration_since(r.last_seen);
                r.claims == 0
                    && (idle > REMOTE_IDLE
                        || (r.heard != Heard::CookieEcho && idle > HANDSHAKE_IDLE))
            })
            .map(|(a, _)| *a)
            .collect();
        stale.into_iter().filter_map(|a| t.remove(&a)).collect()
    };
    drop(gone);
}
