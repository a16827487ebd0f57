//! The [`Context`]: what every flow shares and nobody pays for twice — the resolver,
//! the PIB, the CIB with the interface list (kept current by a netlink watcher), and the
//! set of stacks this build can run.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use rustls::client::ClientSessionMemoryCache;
use taps_core::candidates::{Availability, Security, Stack};
use taps_core::policy::{Cib, CibConfig, Pib};
use taps_core::properties::Protocol;

use crate::interfaces::InterfaceWatcher;
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
    pib: Arc<Pib>,
    cib: Mutex<Cib>,
    cib_file: Option<PathBuf>,
    availability: Availability,
    sctp_udp_port: u16,
    flow_mapping: bool,
    flows: FlowMap,
    /// TLS sessions for resumption, shared by every preconnection of the context.
    tls_sessions: Arc<ClientSessionMemoryCache>,
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

    /// Keep the CIB's outcome cache in this file: loaded at build (a corrupt or foreign
    /// file is ignored with a warning on stderr) and written by [`Context::save_cib`].
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

    /// Builds the context: reads interfaces once, loads PIB and CIB files.
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
            load_cib(&mut cib, path);
        }
        let rx = watcher.as_ref().map(InterfaceWatcher::subscribe);
        let inner = Arc::new(Inner {
            tls_sessions: Arc::new(ClientSessionMemoryCache::new(TLS_SESSIONS)),
            quic: Arc::default(),
            resolver,
            pib,
            cib: Mutex::new(cib),
            cib_file: self.cib_file,
            availability: availability(),
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

    /// The PIB (immutable once built).
    pub fn pib(&self) -> &Arc<Pib> {
        &self.inner.pib
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

    /// Locks the CIB. Hold it briefly: every race records into it.
    pub fn cib(&self) -> MutexGuard<'_, Cib> {
        self.inner.cib.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The TLS session store for resumption.
    pub(crate) fn tls_sessions(&self) -> &Arc<ClientSessionMemoryCache> {
        &self.inner.tls_sessions
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

    /// Which stacks this build can run.
    pub fn availability(&self) -> &Availability {
        &self.inner.availability
    }

    /// Writes the CIB's outcome cache to the configured file, atomically (temporary
    /// file + rename). Does nothing without a file.
    pub fn save_cib(&self) -> std::io::Result<()> {
        let Some(path) = &self.inner.cib_file else {
            return Ok(());
        };
        let text = self.cib().to_json(Instant::now(), SystemTime::now());
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    }
}

fn load_cib(cib: &mut Cib, path: &Path) {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            if let Err(e) = cib.load_json(&text, Instant::now(), SystemTime::now()) {
                eprintln!("taps: warning: ignoring CIB file {}: {e}", path.display());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => eprintln!(
            "taps: warning: cannot read CIB file {}: {e}",
            path.display()
        ),
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
            (Protocol::Quic, _) => "QUIC is always secured by TLS 1.3",
            (Protocol::Tcp | Protocol::Mptcp, Security::Tls) => continue, // rustls
            (_, Security::Tls) => "TLS runs over TCP and MPTCP only",
            (Protocol::Udp | Protocol::UdpLite, Security::Dtls) => continue, // dimpl
            (_, _) => "DTLS over SCTP is not implemented in this build yet",
        };
        a = a.without(stack, reason);
    }
    a
}
