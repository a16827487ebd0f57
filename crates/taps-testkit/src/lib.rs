//! Test support for taps: a real, controllable DNS server on loopback, and socket
//! helpers ([`open_sockets`], [`Blackhole`]) for leak and dead-path tests.
//!
//! [`DnsServer`] is an authoritative hickory-server instance on `127.0.0.1` (UDP and TCP,
//! same ephemeral port) serving a small in-memory zone. Tests point the resolver at
//! [`DnsServer::addr`] so they never read `/etc/resolv.conf` or leave the host, and can
//! delay the answers of one record type ([`DnsServer::set_delay`]) to emulate a slow AAAA.
//!
//! ```no_run
//! # async fn demo() {
//! use std::time::Duration;
//! use taps_testkit::DnsServer;
//! use taps_core::Family;
//! let dns = DnsServer::start("test.", &[("both", [192, 0, 2, 1].into())]);
//! dns.set_delay(Family::V6, Duration::from_millis(300));
//! println!("serving on {}", dns.addr());
//! # }
//! ```

mod sockets;
pub use sockets::{open_sockets, Blackhole};

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_server::net::runtime::Time;
use hickory_server::proto::op::{Header, HeaderCounts, Metadata, ResponseCode};
use hickory_server::proto::rr::rdata::{A, AAAA, SOA};
use hickory_server::proto::rr::{Name, RData, Record, RecordType};
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;
use hickory_server::Server;
use taps_core::Family;

/// TTL of every served record, in seconds.
const TTL: u32 = 60;

/// An authoritative DNS server on `127.0.0.1` with an in-memory zone, running in the
/// current tokio runtime until dropped.
///
/// Semantics: a name with records answers them (`NOERROR`, authoritative); a name that
/// exists (it has records of another type, is the zone apex, or has names below it)
/// answers `NOERROR` with no answer and the zone's SOA; any other name, inside the zone or
/// not, answers `NXDOMAIN` with the SOA. Every request is handled in its own task, so a
/// delayed AAAA answer does not hold back the A answer.
///
/// Dropping it aborts the server's tasks, which closes its sockets.
pub struct DnsServer {
    addr: SocketAddr,
    state: Arc<State>,
    zone: Name,
    // Owns the JoinSet of the UDP and TCP tasks: dropping it aborts them.
    server: Server<Handler>,
}

/// What the handler and the owner share: the delay knob and query counters.
#[derive(Default)]
struct State {
    /// Answer delay for A (index 0) and AAAA (index 1) queries.
    delays: Mutex<[Duration; 2]>,
    /// Queries received for A (index 0) and AAAA (index 1).
    queries: [AtomicUsize; 2],
    /// Queries of any other type.
    other_queries: AtomicUsize,
}

fn slot(family: Family) -> usize {
    match family {
        Family::V4 => 0,
        Family::V6 => 1,
    }
}

impl DnsServer {
    /// Starts a server for `zone` (e.g. `"test."`) answering `records`, on an ephemeral
    /// UDP and TCP port of `127.0.0.1`. Must be called inside a tokio runtime; spawns two
    /// tasks and binds two sockets, nothing else.
    ///
    /// Record names are relative to the zone (`"www"` → `www.test.`, `"@"` → the apex)
    /// unless they end with a dot or already end with the zone's name. An IPv4 address
    /// gives an A record, an IPv6 address an AAAA record; repeat a name for several.
    ///
    /// # Panics
    /// If a name is invalid or the sockets cannot be bound (see [`DnsServer::try_start`]).
    pub fn start(zone: &str, records: &[(&str, IpAddr)]) -> DnsServer {
        DnsServer::try_start(zone, records).expect("start the test DNS server")
    }

    /// Like [`DnsServer::start`], returning an error instead of panicking.
    pub fn try_start(zone: &str, records: &[(&str, IpAddr)]) -> io::Result<DnsServer> {
        let zone_name = parse_name(zone, None)?;
        let mut by_name: HashMap<Name, Vec<Record>> = HashMap::new();
        let mut existing: HashSet<Name> = HashSet::new();
        existing.insert(zone_name.clone());
        for (name, ip) in records {
            let name = parse_name(name, Some(&zone_name))?;
            let rdata = match ip {
                IpAddr::V4(v4) => RData::A(A(*v4)),
                IpAddr::V6(v6) => RData::AAAA(AAAA(*v6)),
            };
            // The name and every ancestor down to the zone apex exist (empty
            // non-terminals answer NOERROR, not NXDOMAIN).
            let mut ancestor = name.clone();
            while zone_name.zone_of(&ancestor) && existing.insert(ancestor.clone()) {
                ancestor = ancestor.base_name();
            }
            by_name
                .entry(name.clone())
                .or_default()
                .push(Record::from_rdata(name, TTL, rdata));
        }
        let soa = Record::from_rdata(
            zone_name.clone(),
            TTL,
            RData::SOA(SOA::new(
                parse_name("ns", Some(&zone_name))?,
                parse_name("hostmaster", Some(&zone_name))?,
                1,
                3600,
                600,
                86400,
                // Negative-caching TTL: short, tests change nothing but keep it low.
                1,
            )),
        );

        let state = Arc::new(State::default());
        let handler = Handler {
            zone: zone_name.clone(),
            soa,
            records: by_name,
            existing,
            state: state.clone(),
        };

        // UDP and TCP on the same ephemeral port; retry if another process holds the TCP
        // side of the port the kernel picked for UDP.
        let (udp, tcp) = bind_pair()?;
        let addr = udp.local_addr()?;
        let mut server = Server::new(handler);
        server.register_socket(tokio::net::UdpSocket::from_std(udp)?);
        server.register_listener(
            tokio::net::TcpListener::from_std(tcp)?,
            Duration::from_secs(5),
            32,
        );
        Ok(DnsServer {
            addr,
            state,
            zone: zone_name,
            server,
        })
    }

    /// The UDP and TCP address the server listens on (`127.0.0.1:port`). Free.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The zone's name, fully qualified (e.g. `test.`). Free.
    pub fn zone(&self) -> String {
        self.zone.to_string()
    }

    /// Delays every answer to A (`Family::V4`) or AAAA (`Family::V6`) queries by `delay`
    /// from now on (`Duration::ZERO` to stop). Requests already waiting keep their delay.
    /// Takes a lock, nothing else.
    pub fn set_delay(&self, family: Family, delay: Duration) {
        lock(&self.state.delays)[slot(family)] = delay;
    }

    /// How many A (`Family::V4`) or AAAA (`Family::V6`) queries the server has received
    /// so far, over UDP and TCP. An atomic load.
    pub fn queries(&self, family: Family) -> usize {
        self.state.queries[slot(family)].load(Ordering::SeqCst)
    }

    /// How many queries of any type the server has received so far. Three atomic loads.
    pub fn total_queries(&self) -> usize {
        self.queries(Family::V4)
            + self.queries(Family::V6)
            + self.state.other_queries.load(Ordering::SeqCst)
    }
}

impl std::fmt::Debug for DnsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DnsServer")
            .field("addr", &self.addr)
            .field("zone", &self.zone.to_string())
            .finish_non_exhaustive()
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        // Stop accepting at once; the JoinSet inside the server aborts the tasks when it
        // is dropped right after this.
        self.server.shutdown_token().cancel();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Parses `name`: absolute if it ends with a dot or lies within `zone`, else relative to
/// `zone` (`"@"` is the apex). The result is fully qualified and lower-case.
fn parse_name(name: &str, zone: Option<&Name>) -> io::Result<Name> {
    let invalid = |e: &dyn std::fmt::Display| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad DNS name {name:?}: {e}"),
        )
    };
    if name == "@" {
        if let Some(zone) = zone {
            return Ok(zone.clone());
        }
    }
    let mut parsed = Name::from_ascii(name.trim_end_matches('.')).map_err(|e| invalid(&e))?;
    parsed.set_fqdn(true);
    let parsed = match zone {
        Some(zone) if !name.ends_with('.') && !zone.zone_of(&parsed) => {
            parsed.set_fqdn(false);
            parsed.append_domain(zone).map_err(|e| invalid(&e))?
        }
        _ => parsed,
    };
    Ok(parsed.to_lowercase())
}

fn bind_pair() -> io::Result<(std::net::UdpSocket, std::net::TcpListener)> {
    let mut last_err = None;
    for _ in 0..16 {
        let udp = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
        let port = udp.local_addr()?.port();
        match std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
            Ok(tcp) => {
                udp.set_nonblocking(true)?;
                tcp.set_nonblocking(true)?;
                return Ok((udp, tcp));
            }
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.unwrap_or_else(|| io::Error::other("no free port pair")))
}

/// Answers from the in-memory zone, after the configured delay.
struct Handler {
    zone: Name,
    soa: Record,
    /// Lower-case FQDN → its A/AAAA records.
    records: HashMap<Name, Vec<Record>>,
    /// Every name that exists: owners of records, their ancestors within the zone, the apex.
    existing: HashSet<Name>,
    state: Arc<State>,
}

#[async_trait::async_trait]
impl RequestHandler for Handler {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        mut response_handle: R,
    ) -> ResponseInfo {
        let mut metadata = Metadata::response_from_request(&request.metadata);
        let builder = MessageResponseBuilder::from_message_request(request);
        let Ok(info) = request.request_info() else {
            // Not exactly one query.
            let response = builder.error_msg(&request.metadata, ResponseCode::FormErr);
            return send(&mut response_handle, response, metadata).await;
        };
        let query = info.query.original();
        let qtype = query.query_type();
        let family = match qtype {
            RecordType::A => Some(Family::V4),
            RecordType::AAAA => Some(Family::V6),
            _ => None,
        };
        match family {
            Some(f) => self.state.queries[slot(f)].fetch_add(1, Ordering::SeqCst),
            None => self.state.other_queries.fetch_add(1, Ordering::SeqCst),
        };
        let delay = family.map_or(Duration::ZERO, |f| lock(&self.state.delays)[slot(f)]);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }

        let mut qname = query.name().to_lowercase();
        qname.set_fqdn(true);
        let in_zone = self.zone.zone_of(&qname);
        metadata.authoritative = in_zone;
        let answers: Vec<Record> = if qtype == RecordType::SOA && qname == self.zone {
            vec![self.soa.clone()]
        } else {
            self.records
                .get(&qname)
                .into_iter()
                .flatten()
                .filter(|r| qtype == RecordType::ANY || r.record_type() == qtype)
                .map(|r| {
                    let mut r = r.clone();
                    // Echo the name as asked (case included).
                    r.name = query.name().clone();
                    r
                })
                .collect()
        };
        let soa: Vec<&Record> = if answers.is_empty() && in_zone {
            vec![&self.soa]
        } else {
            Vec::new()
        };
        metadata.response_code = if answers.is_empty() && !self.existing.contains(&qname) {
            ResponseCode::NXDomain
        } else {
            ResponseCode::NoError
        };
        let response = builder.build(metadata, answers.iter(), [], soa, []);
        send(&mut response_handle, response, metadata).await
    }
}

async fn send<'a, R: ResponseHandler>(
    handle: &mut R,
    response: hickory_server::zone_handler::MessageResponse<
        '_,
        'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
    >,
    metadata: Metadata,
) -> ResponseInfo {
    match handle.send_response(response).await {
        Ok(info) => info,
        Err(error) => {
            tracing::warn!(%error, "test DNS server failed to send a response");
            let mut metadata = metadata;
            metadata.response_code = ResponseCode::ServFail;
            ResponseInfo::from(Header {
                metadata,
                counts: HeaderCounts::default(),
            })
        }
    }
}
