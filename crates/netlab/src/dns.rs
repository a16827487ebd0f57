//! The lab's DNS server: an authoritative hickory-server instance serving a small
//! in-memory zone, with a per-record-type answer delay (to emulate a slow AAAA).
//!
//! Semantics: a name with records of the asked type answers them; a name that exists
//! otherwise (other types, the apex, or names below it) answers `NOERROR` with the SOA;
//! any other name answers `NXDOMAIN`. Each request is handled in its own task, so a
//! delayed AAAA answer does not hold back the A answer.

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_server::net::runtime::Time;
use hickory_server::proto::op::{Header, HeaderCounts, Metadata, ResponseCode};
use hickory_server::proto::rr::rdata::{A, AAAA, SOA};
use hickory_server::proto::rr::{Name, RData, Record};
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;
use hickory_server::Server;

pub use hickory_server::proto::rr::RecordType;

/// TTL of every record, in seconds (short: scenarios change nothing, but keep it low).
const TTL: u32 = 5;

/// What the server and its owner share.
#[derive(Default)]
struct State {
    delays: Mutex<HashMap<RecordType, Duration>>,
    queries: Mutex<HashMap<RecordType, u64>>,
    total: AtomicU64,
}

/// A running DNS server (UDP and TCP on the given addresses). Stops when dropped.
pub struct DnsServer {
    addrs: Vec<SocketAddr>,
    state: Arc<State>,
    server: Server<Handler>,
}

impl std::fmt::Debug for DnsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DnsServer")
            .field("addrs", &self.addrs)
            .finish_non_exhaustive()
    }
}

impl DnsServer {
    /// Serves `zone` (e.g. `"netlab.test."`) with `records` (names relative to the zone,
    /// an IPv4 address gives an A record, IPv6 an AAAA record) on already-bound sockets.
    /// Must be called within a tokio runtime (it registers the sockets and spawns tasks).
    pub fn start(
        zone: &str,
        records: &[(String, IpAddr)],
        udp: Vec<std::net::UdpSocket>,
        tcp: Vec<std::net::TcpListener>,
    ) -> io::Result<DnsServer> {
        let zone_name = parse_name(zone, None)?;
        let mut by_name: HashMap<Name, Vec<Record>> = HashMap::new();
        let mut existing = HashSet::from([zone_name.clone()]);
        for (name, ip) in records {
            let name = parse_name(name, Some(&zone_name))?;
            let rdata = match ip {
                IpAddr::V4(v4) => RData::A(A(*v4)),
                IpAddr::V6(v6) => RData::AAAA(AAAA(*v6)),
            };
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
                1,
            )),
        );
        let state = Arc::new(State::default());
        let mut server = Server::new(Handler {
            zone: zone_name,
            soa,
            records: by_name,
            existing,
            state: state.clone(),
        });
        let mut addrs = Vec::new();
        for s in udp {
            s.set_nonblocking(true)?;
            addrs.push(s.local_addr()?);
            server.register_socket(tokio::net::UdpSocket::from_std(s)?);
        }
        for l in tcp {
            l.set_nonblocking(true)?;
            server.register_listener(
                tokio::net::TcpListener::from_std(l)?,
                Duration::from_secs(5),
                64,
            );
        }
        Ok(DnsServer {
            addrs,
            state,
            server,
        })
    }

    /// The addresses it answers on (UDP; TCP uses the same).
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Delays every later answer to queries of `rtype` by `delay` (`ZERO` to stop).
    pub fn set_delay(&self, rtype: RecordType, delay: Duration) {
        let mut d = lock(&self.state.delays);
        if delay.is_zero() {
            d.remove(&rtype);
        } else {
            d.insert(rtype, delay);
        }
    }

    /// Removes every delay.
    pub fn clear_delays(&self) {
        lock(&self.state.delays).clear();
    }

    /// How many queries of `rtype` arrived so far.
    pub fn queries(&self, rtype: RecordType) -> u64 {
        lock(&self.state.queries).get(&rtype).copied().unwrap_or(0)
    }

    /// How many queries of any type arrived so far.
    pub fn total_queries(&self) -> u64 {
        self.state.total.load(Ordering::Relaxed)
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.server.shutdown_token().cancel();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Parses `name`, relative to `zone` unless it ends with a dot or lies within `zone`.
fn parse_name(name: &str, zone: Option<&Name>) -> io::Result<Name> {
    let invalid = |e: &dyn std::fmt::Display| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad DNS name {name:?}: {e}"),
        )
    };
    if let (Some(zone), "@") = (zone, name) {
        return Ok(zone.clone());
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

struct Handler {
    zone: Name,
    soa: Record,
    records: HashMap<Name, Vec<Record>>,
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
        self.state.total.fetch_add(1, Ordering::Relaxed);
        let Ok(info) = request.request_info() else {
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
        Err(_) => {
            let mut metadata = metadata;
            metadata.response_code = ResponseCode::ServFail;
            ResponseInfo::from(Header {
                metadata,
                counts: HeaderCounts::default(),
            })
        }
    }
}
