//! The lab's DNS server: [`taps_testkit::DnsServer`] (an authoritative hickory-server
//! instance serving a small in-memory zone) started on sockets bound in the server
//! namespace, with a per-record-type answer delay (to emulate a slow AAAA).
//!
//! Semantics: a name with records of the asked type answers them; a name that exists
//! otherwise (other types, the apex, or names below it) answers `NOERROR` with the SOA;
//! any other name answers `NXDOMAIN`. Each request is handled in its own task, so a
//! delayed AAAA answer does not hold back the A answer.
//!
//! [`FaultDns`] is a second, deliberately broken server for the `dns-faults` scenario:
//! per name it answers `SERVFAIL`, never answers, truncates its UDP answers (the records
//! come only over TCP), or answers AAAA with `NXDOMAIN` while A has records.

#![forbid(unsafe_code)]

pub use taps_testkit::{DnsServer, QueryType, RecordType};

/// TTL of every record of the lab's zone, in seconds (short: scenarios change nothing,
/// but keep it low).
pub const TTL: u32 = 5;

/// What [`FaultDns`] does with the queries for one name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DnsFault {
    /// Answers `SERVFAIL` to every query, over UDP and TCP.
    ServFail,
    /// Never answers (UDP queries are dropped; TCP connections are read, never answered).
    Silent,
    /// Over UDP: an empty answer with the TC (truncated) bit, so the resolver must ask
    /// again over TCP; over TCP: the records.
    Truncated,
    /// A: the records; AAAA: `NXDOMAIN` (an inconsistent server: the name exists for A).
    NxAaaa,
}

/// The names [`FaultDns`] serves, under [`FAULT_ZONE`], with the fault of each.
pub const FAULT_NAMES: &[(&str, DnsFault)] = &[
    ("servfail", DnsFault::ServFail),
    ("silent", DnsFault::Silent),
    ("tc", DnsFault::Truncated),
    ("nx6", DnsFault::NxAaaa),
];

/// The zone [`FaultDns`] answers for (any other name: `REFUSED`).
pub const FAULT_ZONE: &str = "faults.netlab.test.";

/// A small DNS server with faults per name ([`FAULT_NAMES`]): UDP and TCP on one address
/// and port, one thread each (and one per TCP connection), blocking sockets. The
/// records it answers (for [`DnsFault::Truncated`] over TCP and the A of
/// [`DnsFault::NxAaaa`]) are the addresses it was given. Stops when dropped (within
/// [`POLL`]).
#[derive(Debug)]
pub struct FaultDns {
    addr: std::net::SocketAddr,
    shared: std::sync::Arc<FaultShared>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// How often the server's threads look at the stop flag.
pub const POLL: std::time::Duration = std::time::Duration::from_millis(50);

#[derive(Debug, Default)]
struct FaultShared {
    stop: std::sync::atomic::AtomicBool,
    /// Queries received over UDP, and over TCP.
    udp: std::sync::atomic::AtomicUsize,
    tcp: std::sync::atomic::AtomicUsize,
    records: Vec<std::net::IpAddr>,
}

impl FaultDns {
    /// Serves on `udp` and `tcp` (bound to the same address and port), answering
    /// `records` where a fault answers records. Spawns two threads.
    pub fn start(
        udp: std::net::UdpSocket,
        tcp: std::net::TcpListener,
        records: Vec<std::net::IpAddr>,
    ) -> std::io::Result<FaultDns> {
        let addr = udp.local_addr()?;
        udp.set_read_timeout(Some(POLL))?;
        tcp.set_nonblocking(true)?;
        let shared = std::sync::Arc::new(FaultShared {
            records,
            ..FaultShared::default()
        });
        let s = shared.clone();
        let u = std::thread::Builder::new()
            .name("netlab-dns-udp".into())
            .spawn(move || fault_udp(&udp, &s))?;
        let s = shared.clone();
        let t = std::thread::Builder::new()
            .name("netlab-dns-tcp".into())
            .spawn(move || fault_tcp(&tcp, &s))?;
        Ok(FaultDns {
            addr,
            shared,
            threads: vec![u, t],
        })
    }

    /// The address and port it serves on.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Queries received so far over UDP and over TCP.
    pub fn queries(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.shared.udp.load(Relaxed), self.shared.tcp.load(Relaxed))
    }
}

impl Drop for FaultDns {
    fn drop(&mut self) {
        self.shared
            .stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn fault_udp(sock: &std::net::UdpSocket, shared: &FaultShared) {
    use std::sync::atomic::Ordering::Relaxed;
    let mut buf = [0u8; 4096];
    while !shared.stop.load(Relaxed) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        shared.udp.fetch_add(1, Relaxed);
        if let Some(reply) = fault_answer(&buf[..n], false, &shared.records) {
            let _ = sock.send_to(&reply, from);
        }
    }
}

fn fault_tcp(listener: &std::net::TcpListener, shared: &std::sync::Arc<FaultShared>) {
    use std::sync::atomic::Ordering::Relaxed;
    let mut conns = Vec::new();
    while !shared.stop.load(Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let s = shared.clone();
                conns.push(std::thread::spawn(move || fault_tcp_conn(stream, &s)));
            }
            Err(_) => std::thread::sleep(POLL / 5),
        }
        conns.retain(|c: &std::thread::JoinHandle<()>| !c.is_finished());
    }
    for c in conns {
        let _ = c.join();
    }
}

/// Answers length-prefixed queries on one TCP connection until the peer closes, the
/// server stops or nothing arrives for 5 s.
fn fault_tcp_conn(mut stream: std::net::TcpStream, shared: &FaultShared) {
    use std::io::{Read, Write};
    use std::sync::atomic::Ordering::Relaxed;
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(POLL));
    let mut pending: Vec<u8> = Vec::new();
    let mut idle = std::time::Instant::now();
    let mut buf = [0u8; 4096];
    while !shared.stop.load(Relaxed) && idle.elapsed() < std::time::Duration::from_secs(5) {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                pending.extend_from_slice(&buf[..n]);
                idle = std::time::Instant::now();
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
        while pending.len() >= 2 {
            let len = usize::from(u16::from_be_bytes([pending[0], pending[1]]));
            if pending.len() < 2 + len {
                break;
            }
            let query: Vec<u8> = pending.drain(..2 + len).skip(2).collect();
            shared.tcp.fetch_add(1, Relaxed);
            if let Some(reply) = fault_answer(&query, true, &shared.records) {
                let mut framed = (reply.len() as u16).to_be_bytes().to_vec();
                framed.extend_from_slice(&reply);
                if stream.write_all(&framed).is_err() {
                    return;
                }
            }
        }
    }
}

/// The answer to `query` (`None`: no answer, or not a query): by the fault of its name.
fn fault_answer(query: &[u8], over_tcp: bool, records: &[std::net::IpAddr]) -> Option<Vec<u8>> {
    use hickory_proto::op::{Message, ResponseCode};
    use hickory_proto::rr::rdata::{A, AAAA};
    use hickory_proto::rr::{RData, Record};
    let request = Message::from_vec(query).ok()?;
    let q = request.queries.first()?.clone();
    let mut reply = Message::response(request.metadata.id, request.metadata.op_code);
    reply.metadata.recursion_desired = request.metadata.recursion_desired;
    reply.metadata.authoritative = true;
    reply.add_query(q.clone());
    let name = q.name().to_lowercase().to_string();
    let label = name
        .strip_suffix(FAULT_ZONE)
        .and_then(|l| l.strip_suffix('.'));
    let fault = FAULT_NAMES
        .iter()
        .find(|(n, _)| Some(*n) == label)
        .map(|(_, f)| *f);
    let answer_records = |reply: &mut Message| {
        for ip in records {
            let rdata = match (ip, q.query_type()) {
                (std::net::IpAddr::V4(a), RecordType::A) => RData::A(A(*a)),
                (std::net::IpAddr::V6(a), RecordType::AAAA) => RData::AAAA(AAAA(*a)),
                _ => continue,
            };
            reply.add_answer(Record::from_rdata(q.name().clone(), TTL, rdata));
        }
    };
    match fault {
        None => reply.metadata.response_code = ResponseCode::Refused,
        Some(DnsFault::Silent) => return None,
        Some(DnsFault::ServFail) => reply.metadata.response_code = ResponseCode::ServFail,
        Some(DnsFault::Truncated) if !over_tcp => reply.metadata.truncation = true,
        Some(DnsFault::Truncated) => answer_records(&mut reply),
        Some(DnsFault::NxAaaa) if q.query_type() == RecordType::AAAA => {
            reply.metadata.response_code = ResponseCode::NXDomain
        }
        Some(DnsFault::NxAaaa) => answer_records(&mut reply),
    }
    reply.to_vec().ok()
}
