//! The [`Context`]: what every flow shares and nobody pays for twice — the resolver,
//! the PIB, the CIB with the interface list (kept current by a netlink watcher), the
//! link to the host's policy manager (`taps pm`) when one runs, and the set of stacks
//! this build can run.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use rustls::client::ClientSessionMemoryCache;
use taps_core::candidates::Availability;
use taps_core::policy::{AttemptRecord, Cib, CibConfig, History, Outcome, OutcomeKey, Pib};
use taps_core::properties::Protocol;
use taps_core::{Security, Stack, Unavailable};

use crate::interfaces::InterfaceWatcher;
use crate::pm::client::{PmClient, SharedCib, SharedPib};
use crate::pm::{PmStats, PolicyManager};
use crate::resolver::{NameServers, Resolver, ResolverConfig};
use crate::sctp_flow::FlowMap;
use crate::security::quic::QuicClientSocket;
use crate::Error;

/// TLS sessions kept for resumption per context (rustls' default per configuration).
const TLS_SESSIONS: usize = 256;

/// Shared state for all connections of an application. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
}

struct Inner {
    resolver: Resolver,
    /// Replaced whole when the policy manager says its PIB directory changed.
    pib: SharedPib,
    cib: SharedCib,
    cib_file: Option<PathBuf>,
    /// The host's policy manager, when one answered at build.
    pm: Option<PmClient>,
    availability: Availability,
    /// `availability` with SCTP's library checked (loaded): made by the first plan
    /// that would run SCTP.
    availability_sctp_checked: std::sync::OnceLock<Availability>,
    sctp_udp_port: u16,
    flow_mapping: bool,
    flows: FlowMap,
    /// TLS sessions for resumption, shared by every preconnection of the context; made
    /// on the first secure race (a context that never runs TLS does not pay for it).
    tls_sessions: std::sync::OnceLock<Arc<ClientSessionMemoryCache>>,
    /// The UDP socket QUIC attempts and connections share (made on the first one).
    quic: Arc<QuicClientSocket>,
    _watcher: Option<InterfaceWatcher>,
}

/// Builds a [`Context`].
#[derive(Default)]
pub struct ContextBuilder {
    resolver: ResolverConfig,
    pib_dir: Option<PathBuf>,
    no_builtin_pib: bool,
    cib_file: Option<PathBuf>,
    cib_config: CibConfig,
    watch_interfaces: Option<bool>,
    sctp_udp_port: Option<u16>,
    no_flow_mapping: bool,
    policy_manager: Option<PolicyManager>,
}

impl ContextBuilder {
    /// Resolve names with these DNS servers instead of the system's (`/etc/resolv.conf`).
    pub fn name_servers(mut self, servers: Vec<std::net::SocketAddr>) -> Self {
        self.resolver.name_servers = NameServers::Custom(servers);
        self
    }

    /// Full resolver configuration.
    pub fn resolver_config(mut self, config: ResolverConfig) -> Self {
        self.resolver = config;
        self
    }

    /// Load PIB profiles and policies from a directory in NEAT's layout, on top of the
    /// built-in PIB.
    pub fn pib_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.pib_dir = Some(dir.into());
        self
    }

    /// Start from an empty PIB instead of the built-in one.
    pub fn without_builtin_pib(mut self) -> Self {
        self.no_builtin_pib = true;
        self
    }

    /// Keep the CIB's outcome cache in this file: loaded at build (a corrupt, truncated,
    /// foreign or over-[`MAX_FILE_BYTES`](taps_core::policy::MAX_FILE_BYTES) file is
    /// ignored with a `tracing` warning) and written by [`Context::save_cib`]. A context
    /// with its own file does not use the policy manager unless
    /// [`policy_manager`](Self::policy_manager) says so.
    pub fn cib_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.cib_file = Some(path.into());
        self
    }

    /// CIB limits (lifetime of outcomes, size bound).
    pub fn cib_config(mut self, config: CibConfig) -> Self {
        self.cib_config = config;
        self
    }

    /// Whether to follow interface changes with a netlink watcher (default: yes when
    /// inside a tokio runtime). Without it the list is read once.
    pub fn watch_interfaces(mut self, watch: bool) -> Self {
        self.watch_interfaces = Some(watch);
        self
    }

    /// The UDP port SCTP is encapsulated in (RFC 6951), for connecting and listening.
    /// Default 9899. One process can listen on a given UDP port once; tests pick others.
    pub fn sctp_udp_port(mut self, port: u16) -> Self {
        self.sctp_udp_port = Some(port);
        self
    }

    /// Transparent flow mapping (default on): a new SCTP connection to a remote endpoint
    /// that already has an association from a preconnection with the same properties
    /// becomes a new stream of it instead of a new association.
    pub fn flow_mapping(mut self, on: bool) -> Self {
        self.no_flow_mapping = !on;
        self
    }

    /// Whether and where to reach the host's policy manager (`taps pm`). Default
    /// [`PolicyManager::Auto`]: the socket `TAPS_PM_SOCKET` names, else the per-user
    /// default, when a daemon listens there (and the context has no CIB file of its
    /// own); [`PolicyManager::Off`] keeps the CIB in-process only (tests that need
    /// isolation). Used only when built inside a tokio runtime. Cost at build without a
    /// daemon: one failed `connect`; with one, reading its snapshot (at most
    /// [`SNAPSHOT_BUDGET`](crate::pm::SNAPSHOT_BUDGET), blocking the calling thread).
    pub fn policy_manager(mut self, pm: PolicyManager) -> Self {
        self.policy_manager = Some(pm);
        self
    }

    /// Builds the context: reads interfaces once, loads PIB and CIB files, and connects
    /// to the policy manager if one runs.
    pub fn build(self) -> Result<Context, Error> {
        let resolver = Resolver::new(self.resolver).map_err(Error::config)?;
        // The built-in PIB is parsed once per process and shared by every context.
        let pib = match (&self.pib_dir, self.no_builtin_pib) {
            (None, false) => Pib::shared_builtin(),
            (None, true) => Arc::new(Pib::empty()),
            (Some(dir), no_builtin) => {
                let base = if no_builtin {
                    Pib::empty()
                } else {
                    Pib::builtin()
                };
                Arc::new(base.load_dir(dir).map_err(Error::config)?)
            }
        };
        let mut cib = Cib::new(self.cib_config);
        let in_runtime = tokio::runtime::Handle::try_current().is_ok();
        let watcher = if self.watch_interfaces.unwrap_or(in_runtime) && in_runtime {
            InterfaceWatcher::spawn().ok()
        } else {
            None
        };
        match &watcher {
            Some(w) => cib.set_interfaces(w.current()),
            None => {
                if let Ok(list) = crate::interfaces::read_interfaces() {
                    cib.set_interfaces(Arc::new(list));
                }
            }
        }
        if let Some(path) = &self.cib_file {
            crate::pm::store::load_or_warn(&mut cib, path);
        }
        let rx = watcher.as_ref().map(InterfaceWatcher::subscribe);
        let cib = Arc::new(Mutex::new(cib));
        let pib = Arc::new(Mutex::new(pib));
        let pm_mode = match (self.policy_manager, &self.cib_file) {
            (Some(mode), _) => mode,
            (None, Some(_)) => PolicyManager::Off,
            (None, None) => PolicyManager::Auto,
        };
        // Only a context on the built-in PIB follows the daemon's PIB directory.
        let follow_pib = self.pib_dir.is_none() && !self.no_builtin_pib;
        let pm = match pm_mode.socket() {
            Some(socket) if in_runtime => {
                PmClient::connect(&socket, &cib, follow_pib.then_some(&pib))
            }
            _ => None,
        };
        let inner = Arc::new(Inner {
            tls_sessions: std::sync::OnceLock::new(),
            quic: Arc::default(),
            resolver,
            pib,
            cib,
            cib_file: self.cib_file,
            pm,
            availability: availability(),
            availability_sctp_checked: std::sync::OnceLock::new(),
            sctp_udp_port: self.sctp_udp_port.unwrap_or(usrsctp::DEFAULT_UDP_PORT),
            flow_mapping: !self.no_flow_mapping,
            flows: FlowMap::default(),
            _watcher: watcher,
        });
        if let Some(rx) = rx {
            follow_interfaces(Arc::downgrade(&inner), rx);
        }
        Ok(Context { inner })
    }
}

/// Keeps the CIB's interface list current from the watcher's channel. The task holds
/// only a weak reference and ends with the context.
fn follow_interfaces(
    weak: std::sync::Weak<Inner>,
    mut rx: tokio::sync::watch::Receiver<Arc<Vec<taps_core::Interface>>>,
) {
    tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let list = rx.borrow_and_update().clone();
            let Some(inner) = weak.upgrade() else { break };
            inner
                .cib
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .set_interfaces(list);
        }
    });
}

impl Context {
    /// A context with the system resolver, the built-in PIB and an in-memory CIB.
    pub fn new() -> Result<Context, Error> {
        Context::builder().build()
    }

    /// Starts configuring a context.
    pub fn builder() -> ContextBuilder {
        ContextBuilder::default()
    }

    /// The resolver.
    pub fn resolver(&self) -> &Resolver {
        &self.inner.resolver
    }

    /// The PIB (immutable; replaced whole when the policy manager's PIB directory
    /// changes, which preconnections made after that see). Cost: a lock and an `Arc`
    /// clone.
    pub fn pib(&self) -> Arc<Pib> {
        self.inner
            .pib
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The UDP encapsulation port of SCTP.
    pub fn sctp_udp_port(&self) -> u16 {
        self.inner.sctp_udp_port
    }

    /// Whether SCTP flows are mapped onto existing associations.
    pub fn flow_mapping(&self) -> bool {
        self.inner.flow_mapping
    }

    pub(crate) fn flows(&self) -> &FlowMap {
        &self.inner.flows
    }

    /// A receiver of the interface list, each time the netlink watcher sees it change
    /// (`None` without a watcher). A race holds one while it runs. Cost: an Arc clone.
    pub(crate) fn interface_changes(
        &self,
    ) -> Option<tokio::sync::watch::Receiver<Arc<Vec<taps_core::Interface>>>> {
        self.inner._watcher.as_ref().map(|w| {
            let mut rx = w.subscribe();
            // Only changes from now on wake the race.
            rx.mark_unchanged();
            rx
        })
    }

    /// Locks the CIB. Hold it briefly: every race records into it.
    pub(crate) fn cib(&self) -> MutexGuard<'_, Cib> {
        self.inner.cib.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the CIB knows of candidate `key` at `now`: its last outcome while fresh. One
    /// lock, held for the lookup.
    pub fn cib_history(&self, key: &OutcomeKey, now: Instant) -> History {
        self.cib().history(key, now)
    }

    /// How many candidates' outcomes the CIB holds. One lock.
    pub fn cib_len(&self) -> usize {
        self.cib().len()
    }

    /// A copy of every outcome the CIB holds, by candidate. One lock, held while copying
    /// (for tests, tools and diagnostics, not a race's path).
    pub fn cib_outcomes(&self) -> Vec<(OutcomeKey, Outcome)> {
        self.cib()
            .outcomes()
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect()
    }

    /// The TLS session store for resumption, made on first use.
    pub(crate) fn tls_sessions(&self) -> &Arc<ClientSessionMemoryCache> {
        self.inner
            .tls_sessions
            .get_or_init(|| Arc::new(ClientSessionMemoryCache::new(TLS_SESSIONS)))
    }

    /// The context's QUIC client socket.
    pub(crate) fn quic_socket(&self) -> &Arc<QuicClientSocket> {
        &self.inner.quic
    }

    /// QUIC connections of this context still open, attempts in their handshake
    /// included (what a leak check counts: none should outlive a cancelled attempt for
    /// longer than it takes to close). No I/O.
    pub fn open_quic_connections(&self) -> usize {
        self.inner.quic.open_connections()
    }

    /// Which stacks this build can run. SCTP is listed without its library being loaded
    /// (a plan that would run SCTP checks that it loads, and leaves SCTP out if not).
    pub fn availability(&self) -> &Availability {
        &self.inner.availability
    }

    /// Which stacks this process can run: `availability`, with SCTP marked
    /// unavailable when libusrsctp cannot be loaded. Loads libusrsctp on the first call
    /// in the process (~0.3 M instructions; what SCTP's first use would cost anyway);
    /// later calls of this context: one atomic load. Used by every plan that would run
    /// SCTP, so such a plan neither offers nor races a stack that cannot start.
    pub(crate) fn availability_checked(&self) -> &Availability {
        self.inner.availability_sctp_checked.get_or_init(|| {
            match usrsctp::SctpStack::global().availability() {
                Ok(()) => self.inner.availability.clone(),
                Err(e) => {
                    tracing::debug!("SCTP unavailable: {e}");
                    self.inner.availability.clone().without(
                        Stack::plain(Protocol::Sctp),
                        Unavailable::SctpLibraryMissing,
                    )
                }
            }
        })
    }

    /// Learns what a race found out: into this context's CIB at once, and to the
    /// policy manager (if connected) through a bounded queue, never waiting on it.
    /// Cost without a daemon: the CIB update; with one, plus collecting the records into
    /// a `Vec` and a channel send.
    pub(crate) fn learn(&self, endpoint: &Arc<str>, records: impl Iterator<Item = AttemptRecord>) {
        match self.inner.pm.as_ref().filter(|pm| pm.is_connected()) {
            None => self.cib().learn(endpoint, records),
            Some(pm) => {
                let records: Vec<AttemptRecord> = records.collect();
                self.cib().learn(endpoint, records.iter().cloned());
                pm.send(endpoint, records);
            }
        }
    }

    /// Waits at most `within` until the policy manager has applied every outcome this
    /// context sent it: what a short-lived program calls before it exits (`taps connect`
    /// gives it 100 ms). `true` when the daemon confirmed; `false` at once without a
    /// daemon, or when it did not answer in time (the outcomes may still arrive).
    pub async fn flush_policy_manager(&self, within: Duration) -> bool {
        match &self.inner.pm {
            Some(pm) => pm.flush(within).await,
            None => false,
        }
    }

    /// The link to the policy manager: `None` when none answered at build.
    pub fn policy_manager_stats(&self) -> Option<PmStats> {
        self.inner.pm.as_ref().map(PmClient::stats)
    }

    /// Writes the CIB's outcome cache to the configured file, atomically and owner-only
    /// (see [`save_cib_file`](crate::pm::save_cib_file)). Does nothing without a file.
    pub fn save_cib(&self) -> std::io::Result<()> {
        let Some(path) = &self.inner.cib_file else {
            return Ok(());
        };
        let text = self.cib().to_json(Instant::now(), SystemTime::now());
        crate::pm::store::write_atomic(path, text.as_bytes())
    }
}

/// The stacks this build cannot run yet, and why.
fn availability() -> Availability {
    let mut a = Availability::all();
    for stack in Stack::ALL {
        let reason = match (stack.protocol, stack.security) {
            (
                Protocol::Tcp | Protocol::Mptcp | Protocol::Udp | Protocol::UdpLite,
                Security::None,
            ) => continue,
            (Protocol::Sctp, Security::None) => continue, // usrsctp over UDP, everywhere
            (Protocol::Quic, Security::QuicTls) => continue, // quinn
            (Protocol::Quic, _) => Unavailable::QuicIsTls,
            (Protocol::Tcp | Protocol::Mptcp, Security::Tls) => continue, // rustls
            (_, Security::Tls) => Unavailable::TlsNeedsStream,
            (Protocol::Udp | Protocol::UdpLite, Security::Dtls) => continue, // dimpl
            (_, _) => Unavailable::DtlsOverSctp,
        };
        a = a.without(stack, reason);
    }
    a
}
