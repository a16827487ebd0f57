//! Test support for taps: a real, controllable DNS server on loopback, socket helpers
//! ([`open_sockets`], [`Blackhole`]) for leak and dead-path tests, and a throw-away PKI
//! ([`TestPki`]) for TLS tests.
//!
//! [`DnsServer`] is an authoritative hickory-server instance on `127.0.0.1` (UDP and TCP,
//! same ephemeral port) serving a small in-memory zone. Tests point the resolver at
//! [`DnsServer::addr`] so they never read `/etc/resolv.conf` or leave the host, and can
//! delay the answers of one record type ([`DnsServer::set_delay`]) to emulate a slow AAAA.
//! [`DnsServer::start_on`] serves the same zone on sockets bound elsewhere (netlab binds
//! them inside a network namespace).
//!
//! ```no_run
//! # async fn demo() {
//! use std::time::Duration;
//! use taps_testkit::DnsServer;
//! use taps_core::{Family, ServiceRecord};
//! let dns = DnsServer::start("test.", &[("both", [192, 0, 2, 1].into())]);
//! dns.set_delay(Family::V6, Duration::from_millis(300));
//! println!("serving on {}", dns.addr());
//! # }
//! ```

pub mod binaries;
pub mod caddy;
pub mod ngtcp2;
pub mod openssl;
mod pki;
mod skip;
mod sockets;
pub use pki::{TestPki, Validity};
pub use skip::{is_root, skip, skip_by_chance, skips_must_fail};
pub use sockets::{free_port, open_sockets, Blackhole};

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_server::net::runtime::Time;
use hickory_server::proto::op::{Header, HeaderCounts, Metadata, ResponseCode};
use hickory_server::proto::rr::rdata::svcb::{Alpn, IpHint, SvcParamKey, SvcParamValue, SVCB};
use hickory_server::proto::rr::rdata::{A, AAAA, HTTPS, SOA};
use hickory_server::proto::rr::{Name, RData, Record};
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;
use hickory_server::Server;
use taps_core::{Family, ServiceRecord};

pub use hickory_server::proto::rr::RecordType;

/// TTL of every record served by [`DnsServer::start`], in seconds.
pub const DEFAULT_TTL: u32 = 60;

/// How long an idle TCP connection to the server may stay open.
const TCP_TIMEOUT: Duration = Duration::from_secs(5);

/// Outgoing responses buffered per TCP connection.
const TCP_RESPONSE_BUFFER: usize = 64;

/// A query type the server counts and delays: a [`Family`] stands for its address record
/// type (`V4` → A, `V6` → AAAA), a [`RecordType`] for itself.
pub trait QueryType: Copy {
    /// The DNS record type this stands for.
    fn record_type(self) -> RecordType;
}

impl QueryType for Family {
    fn record_type(self) -> RecordType {
        match self {
            Family::V4 => RecordType::A,
            Family::V6 => RecordType::AAAA,
        }
    }
}

impl QueryType for RecordType {
    fn record_type(self) -> RecordType {
        self
    }
}

/// An authoritative DNS server with an in-memory zone, running in the current tokio
/// runtime until dropped: on `127.0.0.1` ([`DnsServer::start`]) or on sockets the caller
/// bound ([`DnsServer::start_on`]).
///
/// Semantics: a name with records answers them (`NOERROR`, authoritative); a name that
/// exists (it has records of another type, is the zone apex, or has names below it)
/// answers `NOERROR` with no answer and the zone's SOA; any other name, inside the zone or
/// not, answers `NXDOMAIN` with the SOA. Every request is handled in its own task, so a
/// delayed AAAA answer does not hold back the A answer.
///
/// Dropping it aborts the server's tasks, which closes its sockets.
pub struct DnsServer {
    /// The UDP addresses, in the order given; never empty.
    addrs: Vec<SocketAddr>,
    state: Arc<State>,
    zone: Name,
    // Owns the JoinSet of the UDP and TCP tasks: dropping it aborts them.
    server: Server<Handler>,
}

/// What the handler and the owner share: the delay knobs and query counters.
#[derive(Default)]
struct State {
    /// Answer delay per query type; absent means none.
    delays: Mutex<HashMap<RecordType, Duration>>,
    /// Queries received per query type.
    queries: Mutex<HashMap<RecordType, usize>>,
    /// Requests received, well-formed or not.
    total: AtomicUsize,
    /// HTTPS records per lower-case FQDN ([`DnsServer::set_https`]).
    https: Mutex<HashMap<Name, Vec<Record>>>,
}

impl DnsServer {
    /// Starts a server for `zone` (e.g. `"test."`) answering `records`, on an ephemeral
    /// UDP and TCP port of `127.0.0.1`. Must be called inside a tokio runtime; spawns two
    /// tasks and binds two sockets, nothing else.
    ///
    /// Record names are relative to the zone (`"www"` → `www.test.`, `"@"` → the apex)
    /// unless they end with a dot or already end with the zone's name. An IPv4 address
    /// gives an A record, an IPv6 address an AAAA record; repeat a name for several.
    /// Records have a TTL of [`DEFAULT_TTL`].
    ///
    /// # Panics
    /// If a name is invalid or the sockets cannot be bound (see [`DnsServer::try_start`]).
    pub fn start(zone: &str, records: &[(&str, IpAddr)]) -> DnsServer {
        DnsServer::try_start(zone, records).expect("start the test DNS server")
    }

    /// Like [`DnsServer::start`], returning an error instead of panicking.
    pub fn try_start(zone: &str, records: &[(&str, IpAddr)]) -> io::Result<DnsServer> {
        // UDP and TCP on the same ephemeral port; retry if another process holds the TCP
        // side of the port the kernel picked for UDP.
        let (udp, tcp) = bind_pair()?;
        DnsServer::start_on(zone, records, DEFAULT_TTL, vec![udp], vec![tcp])
    }

    /// Serves `zone` with `records` (as in [`DnsServer::start`]), each with a TTL of `ttl`
    /// seconds, on already-bound sockets: every UDP socket in `udp` and every listener in
    /// `tcp` (made non-blocking here). Must be called inside a tokio runtime; spawns one
    /// task per socket.
    ///
    /// # Errors
    /// `InvalidInput` if a name is invalid or `udp` is empty; any error registering a
    /// socket with the runtime.
    pub fn start_on<S: AsRef<str>>(
        zone: &str,
        records: &[(S, IpAddr)],
        ttl: u32,
        udp: Vec<std::net::UdpSocket>,
        tcp: Vec<std::net::TcpListener>,
    ) -> io::Result<DnsServer> {
        if udp.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the DNS server needs at least one UDP socket",
            ));
        }
        let state = Arc::new(State::default());
        let handler = Handler::new(zone, records, ttl, state.clone())?;
        let zone = handler.zone.clone();
        let mut server = Server::new(handler);
        let mut addrs = Vec::with_capacity(udp.len());
        for socket in udp {
            socket.set_nonblocking(true)?;
            addrs.push(socket.local_addr()?);
            server.register_socket(tokio::net::UdpSocket::from_std(socket)?);
        }
        for listener in tcp {
            listener.set_nonblocking(true)?;
            server.register_listener(
                tokio::net::TcpListener::from_std(listener)?,
                TCP_TIMEOUT,
                TCP_RESPONSE_BUFFER,
            );
        }
        Ok(DnsServer {
            addrs,
            state,
            zone,
            server,
        })
    }

    /// The (first) UDP address the server listens on; for [`DnsServer::start`], the UDP
    /// and TCP address (`127.0.0.1:port`). Free.
    pub fn addr(&self) -> SocketAddr {
        self.addrs[0]
    }

    /// Every UDP address the server listens on, in the order given. Free.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The zone's name, fully qualified (e.g. `test.`). Free.
    pub fn zone(&self) -> String {
        self.zone.to_string()
    }

    /// Delays every answer to queries of `qtype` (a [`Family`]: `V4` for A, `V6` for AAAA;
    /// or any [`RecordType`]) by `delay` from now on (`Duration::ZERO` to stop). Requests
    /// already waiting keep their delay. Takes a lock, nothing else.
    pub fn set_delay(&self, qtype: impl QueryType, delay: Duration) {
        let mut delays = lock(&self.state.delays);
        if delay.is_zero() {
            delays.remove(&qtype.record_type());
        } else {
            delays.insert(qtype.record_type(), delay);
        }
    }

    /// Serves `records` as the HTTPS (RFC 9460) records of `name` (relative to the zone,
    /// or absolute), replacing what it had; an empty list removes them. ServiceMode only
    /// (priority 1 and up); the target `.` means the owner name. TTL 1 s.
    pub fn set_https(&self, name: &str, records: &[ServiceRecord]) -> io::Result<()> {
        let zone = parse_name(&self.zone(), None)?;
        let owner = parse_name(name, Some(&zone))?.to_lowercase();
        let mut rrs = Vec::new();
        for r in records {
            let target = if r.target == "." {
                Name::root()
            } else {
                parse_name(&r.target, Some(&zone))?
            };
            let mut params = Vec::new();
            if !r.alpn.is_empty() {
                params.push((SvcParamKey::Alpn, SvcParamValue::Alpn(Alpn(r.alpn.clone()))));
            }
            if r.no_default_alpn {
                params.push((SvcParamKey::NoDefaultAlpn, SvcParamValue::NoDefaultAlpn));
            }
            if let Some(port) = r.port {
                params.push((SvcParamKey::Port, SvcParamValue::Port(port)));
            }
            let v4: Vec<A> = r
                .hints
                .iter()
                .filter_map(|ip| match *ip {
                    IpAddr::V4(v4) => Some(A(v4)),
                    IpAddr::V6(_) => None,
                })
                .collect();
            if !v4.is_empty() {
                params.push((SvcParamKey::Ipv4Hint, SvcParamValue::Ipv4Hint(IpHint(v4))));
            }
            let v6: Vec<AAAA> = r
                .hints
                .iter()
                .filter_map(|ip| match *ip {
                    IpAddr::V6(v6) => Some(AAAA(v6)),
                    IpAddr::V4(_) => None,
                })
                .collect();
            if !v6.is_empty() {
                params.push((SvcParamKey::Ipv6Hint, SvcParamValue::Ipv6Hint(IpHint(v6))));
            }
            let rdata = RData::HTTPS(HTTPS(SVCB::new(r.priority.max(1), target, params)));
            rrs.push(Record::from_rdata(owner.clone(), 1, rdata));
        }
        lock(&self.state.https).insert(owner, rrs);
        Ok(())
    }

    /// Removes every delay. Takes a lock, nothing else.
    pub fn clear_delays(&self) {
        lock(&self.state.delays).clear();
    }

    /// How many queries of `qtype` (a [`Family`] or a [`RecordType`]) the server has
    /// received so far, over UDP and TCP. Takes a lock, nothing else.
    pub fn queries(&self, qtype: impl QueryType) -> usize {
        lock(&self.state.queries)
            .get(&qtype.record_type())
            .copied()
            .unwrap_or(0)
    }

    /// How many requests the server has received so far, of any query type (malformed
    /// ones included). An atomic load.
    pub fn total_queries(&self) -> usize {
        self.state.total.load(Ordering::SeqCst)
    }
}

impl std::fmt::Debug for DnsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DnsServer")
            .field("addrs", &self.addrs)
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
            Ok(tcp) => return Ok((udp, tcp)),
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

impl Handler {
    /// Builds the zone: `records` (see [`DnsServer::start`]) with a TTL of `ttl`, and its SOA.
    fn new<S: AsRef<str>>(
        zone: &str,
        records: &[(S, IpAddr)],
        ttl: u32,
        state: Arc<State>,
    ) -> io::Result<Handler> {
        let zone = parse_name(zone, None)?;
        let mut by_name: HashMap<Name, Vec<Record>> = HashMap::new();
        let mut existing = HashSet::from([zone.clone()]);
        for (name, ip) in records {
            let name = parse_name(name.as_ref(), Some(&zone))?;
            let rdata = match ip {
                IpAddr::V4(v4) => RData::A(A(*v4)),
                IpAddr::V6(v6) => RData::AAAA(AAAA(*v6)),
            };
            // The name and every ancestor down to the zone apex exist (empty
            // non-terminals answer NOERROR, not NXDOMAIN).
            let mut ancestor = name.clone();
            while zone.zone_of(&ancestor) && existing.insert(ancestor.clone()) {
                ancestor = ancestor.base_name();
            }
            by_name
                .entry(name.clone())
                .or_default()
                .push(Record::from_rdata(name, ttl, rdata));
        }
        let soa = Record::from_rdata(
            zone.clone(),
            ttl,
            RData::SOA(SOA::new(
                parse_name("ns", Some(&zone))?,
                parse_name("hostmaster", Some(&zone))?,
                1,
                3600,
                600,
                86400,
                // Negative-caching TTL: tests change nothing but keep it low.
                1,
            )),
        );
        Ok(Handler {
            zone,
            soa,
            records: by_name,
            existing,
            state,
        })
    }
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
        self.state.total.fetch_add(1, Ordering::SeqCst);
        let Ok(info) = request.request_info() else {
            // Not exactly one query.
            let response = builder.error_msg(&request.metadata, ResponseCode::FormErr);
            return send(&mut response_handle, response, metadata).await;
        };
        let query = info.query.original();
        let qtype = query.query_type();
        *lock(&self.state.queries).entry(qtype).or_insert(0) += 1;
        let delay = lock(&self.state.delays).get(&qtype).copied();
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }

        let mut qname = query.name().to_lowercase();
        qname.set_fqdn(true);
        let in_zone = self.zone.zone_of(&qname);
        metadata.authoritative = in_zone;
        let https = (qtype == RecordType::HTTPS)
            .then(|| lock(&self.state.https).get(&qname).cloned())
            .flatten();
        let answers: Vec<Record> = if qtype == RecordType::SOA && qname == self.zone {
            vec![self.soa.clone()]
        } else if let Some(records) = https {
            records
                .into_iter()
                .map(|mut r| {
                    r.name = query.name().clone();
                    r
                })
                .collect()
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
