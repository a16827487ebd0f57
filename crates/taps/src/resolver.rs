//! Name resolution for racing: separate, concurrent A and AAAA lookups whose answers are
//! handed over one by one as they arrive, so a connection attempt can start on the first
//! family without waiting for the other (Happy Eyeballs v2, RFC 8305 §3).
//!
//! Built on hickory-resolver. One [`Resolver`] is built per [`Context`](crate::Context)
//! (it reads `/etc/resolv.conf` and `/etc/hosts` once and keeps a response cache);
//! [`Resolver::resolve`] then costs two spawned tasks and, on a cache miss, two queries.
//!
//! ```no_run
//! # async fn demo() -> Result<(), taps::resolver::ResolverConfigError> {
//! use taps::resolver::{Resolver, ResolverConfig};
//! let resolver = Resolver::new(ResolverConfig::default())?;
//! let mut resolution = resolver.resolve("example.org");
//! while let Some(answer) = resolution.next().await {
//!     println!("{}: {:?}", answer.family, answer.result);
//! }
//! # Ok(()) }
//! ```

use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hickory_resolver::config::{
    NameServerConfig, ResolveHosts, ResolverConfig as HickoryConfig, ResolverOpts,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::NetError;
use hickory_resolver::proto::rr::rdata::svcb::{SvcParamValue, SVCB};
use hickory_resolver::proto::rr::{RData, RecordType};
use hickory_resolver::TokioResolver;
pub use taps_core::DnsFailure;
use taps_core::{Family, LayerError, ServiceInfo, ServiceRecord};
use tokio::task::{Id, JoinHandle, JoinSet};

/// Where DNS queries go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NameServers {
    /// The servers, search list and `ndots` of `/etc/resolv.conf`, read once, on the
    /// resolver's first name lookup. Without a usable file, `127.0.0.1:53` and `[::1]:53` (what
    /// glibc falls back to).
    #[default]
    System,
    /// These servers (UDP, falling back to TCP for truncated answers), no search list.
    Custom(Vec<SocketAddr>),
}

/// How a [`Resolver`] is set up. Plain data; [`Default`] is the system's name servers,
/// `/etc/hosts` honoured, 5 s timeout, 2 attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolverConfig {
    /// Where queries go.
    pub name_servers: NameServers,
    /// Answer from `/etc/hosts` (read once, on the first name lookup) before asking DNS.
    pub use_hosts_file: bool,
    /// How long to wait for one server's answer to one query. Overrides `options timeout:`
    /// of `/etc/resolv.conf`.
    pub timeout: Duration,
    /// How many times a failed query is retried. Overrides `options attempts:` of
    /// `/etc/resolv.conf`.
    pub attempts: usize,
}

impl Default for ResolverConfig {
    fn default() -> Self {
        ResolverConfig {
            name_servers: NameServers::System,
            use_hosts_file: true,
            timeout: Duration::from_secs(5),
            attempts: 2,
        }
    }
}

/// Why a [`Resolver`] could not be built from its configuration (not a lookup failure:
/// those are [`DnsFailure`]s).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ResolverConfigError {
    /// [`NameServers::Custom`] with an empty list.
    #[error("no name servers configured")]
    NoNameServers,
}

/// Turns hickory's error into the typed cause the race and the errors carry.
fn dns_failure(err: &NetError) -> DnsFailure {
    if err.is_nx_domain() {
        DnsFailure::NxDomain
    } else if err.is_no_records_found() {
        DnsFailure::NoRecords
    } else if matches!(err, NetError::Timeout) {
        DnsFailure::Timeout
    } else {
        DnsFailure::Other(LayerError::new(err.clone()))
    }
}

/// A lookup that failed outside hickory's own answer: the resolver could not be set up,
/// or a lookup task died. Kept inside [`DnsFailure::Other`].
#[derive(Debug, thiserror::Error)]
enum LookupFailure {
    /// hickory could not build the resolver.
    #[error("cannot set up the resolver: {0}")]
    Setup(NetError),
    /// The task of an A or AAAA lookup panicked or was cancelled.
    #[error("lookup task failed: {0}")]
    AddressTask(tokio::task::JoinError),
    /// The task of the HTTPS record lookup panicked or was cancelled.
    #[error("HTTPS lookup task failed: {0}")]
    ServiceTask(tokio::task::JoinError),
}

/// One family's answer to a [`Resolver::resolve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsAnswer {
    /// Which lookup this answers: `V4` for A, `V6` for AAAA (for a literal address, its
    /// family).
    pub family: Family,
    /// The addresses, in the server's order without duplicates (never empty), or why
    /// there are none.
    pub result: Result<Vec<IpAddr>, DnsFailure>,
}

/// A DNS resolver shared by all flows of a context. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct Resolver {
    inner: Arc<LazyResolver>,
}

/// The resolver's configuration, and the hickory resolver built from it on the first name
/// lookup: contexts that only ever connect to address literals never pay for it (reading
/// `/etc/resolv.conf` and `/etc/hosts`, setting up caches).
struct LazyResolver {
    config: ResolverConfig,
    built: OnceLock<Result<Arc<TokioResolver>, LayerError>>,
}

impl LazyResolver {
    fn get(&self) -> Result<Arc<TokioResolver>, DnsFailure> {
        self.built
            .get_or_init(|| build(&self.config))
            .clone()
            .map_err(DnsFailure::Other)
    }
}

/// The hickory resolver for `config` (checked by [`Resolver::new`]).
fn build(config: &ResolverConfig) -> Result<Arc<TokioResolver>, LayerError> {
    let (hickory_config, mut opts) = match &config.name_servers {
        NameServers::System => system_config(),
        NameServers::Custom(servers) => {
            let servers = servers.iter().map(|s| name_server(*s)).collect();
            (
                HickoryConfig::from_parts(None, Vec::new(), servers),
                ResolverOpts::default(),
            )
        }
    };
    opts.timeout = config.timeout;
    opts.attempts = config.attempts;
    opts.use_hosts_file = if config.use_hosts_file {
        ResolveHosts::Always
    } else {
        ResolveHosts::Never
    };
    TokioResolver::builder_with_config(hickory_config, TokioRuntimeProvider::default())
        .with_options(opts)
        .build()
        .map(Arc::new)
        .map_err(|e| LayerError::new(LookupFailure::Setup(e)))
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver").finish_non_exhaustive()
    }
}

impl Resolver {
    /// Makes a resolver: checks `config` and keeps it. Reads no file and opens no socket;
    /// the resolver proper (`/etc/resolv.conf` for [`NameServers::System`], `/etc/hosts`
    /// if `use_hosts_file`, its cache) is set up on the first name lookup, so contexts
    /// that only connect to address literals never pay for it. Needs no tokio runtime.
    pub fn new(config: ResolverConfig) -> Result<Resolver, ResolverConfigError> {
        if config.name_servers == NameServers::Custom(Vec::new()) {
            return Err(ResolverConfigError::NoNameServers);
        }
        Ok(Resolver {
            inner: Arc::new(LazyResolver {
                config,
                built: OnceLock::new(),
            }),
        })
    }

    /// Starts separate, concurrent A and AAAA lookups; answers arrive as each completes.
    ///
    /// A literal address (`192.0.2.1`, `2001:db8::1`, `[2001:db8::1]`) skips DNS and gives
    /// exactly one answer, of its family. `localhost` and names under it answer `::1` and
    /// `127.0.0.1` at once, without any query or task (RFC 6761 §6.3). Otherwise this
    /// spawns two tokio tasks (so it must be called within a runtime) that consult
    /// `/etc/hosts` (if enabled), the cache, then the name servers. Dropping the
    /// [`Resolution`] aborts whatever is still running.
    ///
    /// # Panics
    /// If called outside a tokio runtime with a name that is neither a literal address
    /// nor a localhost name.
    pub fn resolve(&self, host: &str) -> Resolution {
        self.resolve_families(host, None, false)
    }

    /// [`resolve`](Self::resolve), narrowed and widened: with `only`, just that family's
    /// records are asked for (one task, not two; localhost answers just that family; a
    /// literal address is given as it is, whatever its family); with `https`, the name's
    /// HTTPS records too, as [`resolve_with_service`](Self::resolve_with_service). What a
    /// race uses when its properties admit one family only.
    ///
    /// # Panics
    /// As [`resolve`](Self::resolve).
    pub fn resolve_families(&self, host: &str, only: Option<Family>, https: bool) -> Resolution {
        let wanted = |family: Family| only.is_none_or(|f| f == family);
        let ready = |answers: [Option<(Family, IpAddr)>; 2]| Resolution {
            ready: answers.map(|a| {
                a.map(|(family, ip)| DnsAnswer {
                    family,
                    result: Ok(vec![ip]),
                })
            }),
            tasks: None,
            families: Vec::new(),
            service: None,
            addresses_done: false,
        };
        if let Some(ip) = parse_literal(host) {
            return ready([Some((Family::of(&ip), ip)), None]);
        }
        if is_localhost(host) {
            return ready([
                wanted(Family::V6).then_some((Family::V6, IpAddr::V6(Ipv6Addr::LOCALHOST))),
                wanted(Family::V4)
                    .then_some((Family::V4, IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))),
            ]);
        }
        let mut tasks = JoinSet::new();
        let mut families = Vec::with_capacity(2);
        for family in [Family::V6, Family::V4].into_iter().filter(|f| wanted(*f)) {
            let resolver = self.inner.clone();
            let name = host.to_owned();
            let handle = tasks.spawn(async move {
                let result = match resolver.get() {
                    Ok(r) => lookup(&r, &name, family).await,
                    Err(e) => Err(e),
                };
                DnsAnswer { family, result }
            });
            families.push((handle.id(), family));
        }
        let service = https.then(|| {
            let resolver = self.inner.clone();
            let name = host.to_owned();
            tokio::spawn(async move {
                match resolver.get() {
                    Ok(r) => lookup_service(&r, &name).await,
                    Err(e) => Err(e),
                }
            })
        });
        Resolution {
            ready: [None, None],
            tasks: Some(tasks),
            families,
            service,
            addresses_done: false,
        }
    }

    /// [`resolve`](Self::resolve), plus the name's HTTPS records (RFC 9460) looked up
    /// beside A and AAAA (a third task), read with [`Resolution::next_event`]. Literal
    /// addresses and localhost names have none (no query).
    pub fn resolve_with_service(&self, host: &str) -> Resolution {
        self.resolve_families(host, None, true)
    }
}

/// The HTTPS records of `name` in ServiceMode, following AliasMode records (at most 4
/// hops). No record is `Ok` with none (the name exists, nothing is known about its
/// services).
async fn lookup_service(resolver: &TokioResolver, name: &str) -> Result<ServiceInfo, DnsFailure> {
    let mut name = name.to_string();
    for _ in 0..4 {
        let lookup = match resolver.lookup(name.as_str(), RecordType::HTTPS).await {
            Ok(l) => l,
            Err(e) => {
                return match dns_failure(&e) {
                    DnsFailure::NoRecords => Ok(ServiceInfo::default()),
                    other => Err(other),
                }
            }
        };
        let mut records = Vec::new();
        let mut alias = None;
        for record in lookup.answers() {
            let RData::HTTPS(https) = &record.data else {
                continue;
            };
            if https.svc_priority == 0 {
                alias = Some(https.target_name.to_string());
                continue;
            }
            records.push(service_record(https));
        }
        match alias {
            Some(target) if records.is_empty() => name = target,
            _ => return Ok(ServiceInfo::new(records)),
        }
    }
    Ok(ServiceInfo::default())
}

/// One ServiceMode record as taps reads it (public only to the fuzz target, through
/// `taps::fuzzing`). No I/O: a few small copies.
#[cfg_attr(not(fuzzing), allow(unreachable_pub))]
pub fn service_record(svcb: &SVCB) -> ServiceRecord {
    let mut r = ServiceRecord {
        priority: svcb.svc_priority,
        target: svcb.target_name.to_string(),
        ..ServiceRecord::default()
    };
    for (_, value) in &svcb.svc_params {
        match value {
            SvcParamValue::Alpn(a) => r.alpn = a.0.clone(),
            SvcParamValue::NoDefaultAlpn => r.no_default_alpn = true,
            SvcParamValue::Port(p) => r.port = Some(*p),
            SvcParamValue::Ipv4Hint(h) => r.hints.extend(h.0.iter().map(|a| IpAddr::V4(a.0))),
            SvcParamValue::Ipv6Hint(h) => r.hints.extend(h.0.iter().map(|a| IpAddr::V6(a.0))),
            SvcParamValue::EchConfigList(_) => r.ech = true,
            _ => {}
        }
    }
    r
}

/// The answers of one [`Resolver::resolve`], in arrival order. Dropping it aborts the
/// lookups still running (their tasks are cancelled, nothing leaks).
#[derive(Debug)]
pub struct Resolution {
    /// Answers known without DNS (a literal address; both families of localhost), in
    /// the order they are given out.
    ready: [Option<DnsAnswer>; 2],
    /// One task per family still looking up (`None` for a literal: no set to allocate).
    tasks: Option<JoinSet<DnsAnswer>>,
    /// Which family each task looks up, to name a task that panicked.
    families: Vec<(Id, Family)>,
    /// The HTTPS lookup, while it runs (`resolve_with_service`).
    service: Option<JoinHandle<Result<ServiceInfo, DnsFailure>>>,
    /// [`ResolutionEvent::AddressesDone`] was given out.
    addresses_done: bool,
}

impl Drop for Resolution {
    fn drop(&mut self) {
        if let Some(task) = &self.service {
            task.abort();
        }
    }
}

/// What a [`Resolution`] delivers, in arrival order ([`Resolution::next_event`]).
#[derive(Debug)]
pub enum ResolutionEvent {
    /// One family's A or AAAA answer.
    Addresses(DnsAnswer),
    /// Every family has answered.
    AddressesDone,
    /// The HTTPS answer (`resolve_with_service` only).
    Service(Result<ServiceInfo, DnsFailure>),
}

impl Resolution {
    /// Whether an HTTPS lookup is still to answer.
    pub fn service_pending(&self) -> bool {
        self.service.is_some()
    }

    /// The next answer of any kind: addresses (then [`ResolutionEvent::AddressesDone`]
    /// once) and the HTTPS answer, as they come; `None` when all are in. Cancel-safe.
    pub async fn next_event(&mut self) -> Option<ResolutionEvent> {
        if let Some(answer) = self.ready.iter_mut().find_map(Option::take) {
            return Some(ResolutionEvent::Addresses(answer));
        }
        if !self.addresses_done && self.tasks.as_ref().is_none_or(|t| t.is_empty()) {
            self.addresses_done = true;
            return Some(ResolutionEvent::AddressesDone);
        }
        if self.addresses_done && self.service.is_none() {
            return None;
        }
        let addresses_pending = !self.addresses_done;
        let service_pending = self.service.is_some();
        let service = async {
            match &mut self.service {
                Some(task) => task.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            answer = next_from(&mut self.tasks, &self.families), if addresses_pending => {
                Some(match answer {
                    Some(a) => ResolutionEvent::Addresses(a),
                    None => {
                        self.addresses_done = true;
                        ResolutionEvent::AddressesDone
                    }
                })
            }
            result = service, if service_pending => {
                self.service = None;
                let answer = result.unwrap_or_else(|e| {
                    Err(DnsFailure::Other(LayerError::new(LookupFailure::ServiceTask(e))))
                });
                Some(ResolutionEvent::Service(answer))
            }
        }
    }

    /// Next answer, in arrival order; None once every family has answered.
    ///
    /// Cancel-safe: if the future is dropped before it completes (e.g. in `select!`), no
    /// answer is lost. Costs nothing beyond waiting.
    pub async fn next(&mut self) -> Option<DnsAnswer> {
        if let Some(answer) = self.ready.iter_mut().find_map(Option::take) {
            return Some(answer);
        }
        next_from(&mut self.tasks, &self.families).await
    }
}

/// The next answer of the address lookups, in arrival order; `None` when all are in.
async fn next_from(
    tasks: &mut Option<JoinSet<DnsAnswer>>,
    families: &[(Id, Family)],
) -> Option<DnsAnswer> {
    match tasks.as_mut()?.join_next_with_id().await? {
        Ok((_, answer)) => Some(answer),
        Err(err) => {
            let family = families
                .iter()
                .find(|(id, _)| *id == err.id())
                .map_or(Family::V4, |(_, f)| *f);
            Some(DnsAnswer {
                family,
                result: Err(DnsFailure::Other(LayerError::new(
                    LookupFailure::AddressTask(err),
                ))),
            })
        }
    }
}

/// One family's lookup: A or AAAA only, never both (unlike hickory's `lookup_ip`).
async fn lookup(
    resolver: &TokioResolver,
    name: &str,
    family: Family,
) -> Result<Vec<IpAddr>, DnsFailure> {
    let record_type = match family {
        Family::V4 => RecordType::A,
        Family::V6 => RecordType::AAAA,
    };
    let lookup = resolver
        .lookup(name, record_type)
        .await
        .map_err(|e| dns_failure(&e))?;
    let mut addrs: Vec<IpAddr> = Vec::new();
    for record in lookup.answers() {
        let ip = match &record.data {
            RData::A(a) if family == Family::V4 => IpAddr::V4(a.0),
            RData::AAAA(a) if family == Family::V6 => IpAddr::V6(a.0),
            // CNAMEs of the chain, and anything else.
            _ => continue,
        };
        if !addrs.contains(&ip) {
            addrs.push(ip);
        }
    }
    if addrs.is_empty() {
        return Err(DnsFailure::NoRecords);
    }
    Ok(addrs)
}

/// Whether `host` is `localhost` or a name under it (`a.localhost`), with or without the
/// final dot, in any case (RFC 6761 §6.3: always the loopback addresses, never DNS).
fn is_localhost(host: &str) -> bool {
    let name = host.strip_suffix('.').unwrap_or(host).as_bytes();
    let tail = b"localhost";
    name.len() >= tail.len()
        && name[name.len() - tail.len()..].eq_ignore_ascii_case(tail)
        && (name.len() == tail.len() || name[name.len() - tail.len() - 1] == b'.')
}

/// `host` as an address literal: dotted IPv4, IPv6, or IPv6 in brackets.
pub(crate) fn parse_literal(host: &str) -> Option<IpAddr> {
    match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(inner) => inner.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
        None => host.parse().ok(),
    }
}

fn name_server(addr: SocketAddr) -> NameServerConfig {
    let mut config = NameServerConfig::udp_and_tcp(addr.ip());
    for connection in &mut config.connections {
        connection.port = addr.port();
    }
    config
}

/// `/etc/resolv.conf`, or glibc's fallback (a server on the local host) when it is
/// missing, unreadable or lists no server.
fn system_config() -> (HickoryConfig, ResolverOpts) {
    match hickory_resolver::system_conf::read_system_conf() {
        Ok(pair) => pair,
        Err(error) => {
            tracing::warn!(%error, "cannot use /etc/resolv.conf; asking a local name server");
            let servers = [
                SocketAddr::from(([127, 0, 0, 1], 53)),
                SocketAddr::from((Ipv6Addr::LOCALHOST, 53)),
            ];
            (
                HickoryConfig::from_parts(None, Vec::new(), servers.map(name_server).to_vec()),
                ResolverOpts::default(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        assert_eq!(parse_literal("192.0.2.1"), Some([192, 0, 2, 1].into()));
        assert_eq!(parse_literal("::1"), Some(Ipv6Addr::LOCALHOST.into()));
        assert_eq!(parse_literal("[::1]"), Some(Ipv6Addr::LOCALHOST.into()));
        assert_eq!(parse_literal("[192.0.2.1]"), None);
        assert_eq!(parse_literal("[::1"), None);
        assert_eq!(parse_literal("example.org"), None);
        assert_eq!(parse_literal("1.2.3"), None);
    }

    #[test]
    fn localhost_names() {
        for name in ["localhost", "LocalHost.", "a.localhost", "x.y.LOCALHOST."] {
            assert!(is_localhost(name), "{name}");
        }
        for name in ["notlocalhost", "localhost.example", "local", "", "."] {
            assert!(!is_localhost(name), "{name}");
        }
    }

    #[test]
    fn messages() {
        assert_eq!(DnsFailure::NxDomain.to_string(), "name does not exist");
        assert_eq!(DnsFailure::NoRecords.to_string(), "no record of that type");
        assert_eq!(DnsFailure::Timeout.to_string(), "timed out");
    }

    #[test]
    fn empty_custom_is_an_error() {
        let config = ResolverConfig {
            name_servers: NameServers::Custom(Vec::new()),
            ..ResolverConfig::default()
        };
        assert!(matches!(
            Resolver::new(config),
            Err(ResolverConfigError::NoNameServers)
        ));
    }
}
