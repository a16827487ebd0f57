//! [`Preconnection`]: endpoints plus properties, before anything is connected
//! (RFC 9622 section 6). The candidate plan is computed once, on first use, and shared by
//! every connection initiated from it.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use taps_core::candidates::{Gathered, Plan, Unsatisfiable};
use taps_core::properties::Properties;
use taps_core::Family;
use taps_core::Stack;

use crate::connection::Io;
use crate::endpoint::RemoteEndpoint;
use crate::error::EstablishError;
use crate::racing::RaceInput;
use crate::resolver::{parse_literal, DnsFailure, ResolutionEvent};
use crate::scoring::AnswerCache;
use crate::sctp_flow::SctpFlow;
use crate::security::{runs_secure, ClientSecurity, SecurityParameters, ServerSecurity};
use crate::transport::SocketOptions;
use crate::{racing, Connection, Context, Error, Listener, ListenerOptions, UsageError};
use taps_core::properties::Protocol;
use taps_core::ServiceInfo;

/// Endpoints and properties, ready to initiate or listen.
pub struct Preconnection {
    pub(crate) ctx: Context,
    pub(crate) remote: Option<RemoteEndpoint>,
    pub(crate) local: Option<SocketAddr>,
    pub(crate) props: Properties,
    plan: OnceLock<Result<Arc<Plan>, Unsatisfiable>>,
    socket_options: OnceLock<Arc<SocketOptions>>,
    /// The remote's CIB key and whether it is an address literal, worked out once.
    remote_facts: OnceLock<RemoteFacts>,
    /// The last scored DNS answer, shared by this preconnection's races.
    scored: AnswerCache,
    /// Security parameters (defaults when unset).
    security: SecurityParameters,
    /// The TLS client configuration (`None` for a plan without secure stacks), decided
    /// on the first race and shared by every race after.
    client_security: OnceLock<Option<Arc<ClientSecurity>>>,
    /// Whether races keep a timeline ([`Preconnection::race_timeline`]).
    race_timeline: bool,
}

/// The outcome of resolving and ranking without connecting ([`Preconnection::candidates`]).
#[derive(Debug)]
pub struct CandidateListing {
    /// The stack plan (allowed and pruned stacks).
    pub plan: Arc<Plan>,
    /// Each family's DNS answer: addresses or the error.
    pub dns: Vec<(Family, Result<Vec<IpAddr>, DnsFailure>)>,
    /// The HTTPS records (looked up when the plan has secure stacks): which candidates
    /// they keep (no h3: no QUIC), their port and address hints.
    pub service: Option<Result<ServiceInfo, DnsFailure>>,
    /// Ranked and pruned candidates.
    pub gathered: Gathered,
}

/// A preconnection's remote as its races use it.
struct RemoteFacts {
    /// The CIB key (`host:port`).
    key: Arc<str>,
    /// The address, when the host is an address literal.
    literal: Option<IpAddr>,
}

impl Preconnection {
    /// A preconnection in `ctx` with compiled `props` (shared, not copied).
    pub fn new(ctx: &Context, props: Properties) -> Preconnection {
        Preconnection {
            ctx: ctx.clone(),
            remote: None,
            local: None,
            props,
            plan: OnceLock::new(),
            socket_options: OnceLock::new(),
            remote_facts: OnceLock::new(),
            scored: AnswerCache::default(),
            security: SecurityParameters::default(),
            client_security: OnceLock::new(),
            race_timeline: false,
        }
    }

    /// Whether each race keeps a timeline of what it did, step by step (DNS answers,
    /// starts, the stagger, wins, cancellations, with their offsets): the report's
    /// `timeline`, which [`RaceReport::trace`](taps_core::race::RaceReport::trace)
    /// prints (`taps connect --trace`). Off by default: a race still reports every
    /// attempt with its candidate, times and outcome, the DNS answers, the winner and
    /// its total time (in [`ConnectionInfo::race`](crate::ConnectionInfo::race), or in
    /// the error of a failed race), but not the steps, each a timestamp and an entry
    /// kept as long as the connection (about five per connection).
    pub fn race_timeline(mut self, keep: bool) -> Preconnection {
        self.race_timeline = keep;
        self
    }

    /// Sets the remote endpoint.
    pub fn remote(mut self, remote: RemoteEndpoint) -> Preconnection {
        self.remote = Some(remote);
        self.remote_facts = OnceLock::new();
        self.client_security = OnceLock::new();
        self
    }

    /// Sets the security parameters (trust, server name, ALPN, identity): used by secure
    /// stacks, which the properties select (`security` required or preferred). Without
    /// this call, secure stacks verify against the system's trust store and the remote's
    /// host name.
    pub fn security(mut self, params: SecurityParameters) -> Preconnection {
        self.security = params;
        self.client_security = OnceLock::new();
        self
    }

    /// The TLS client configuration for `remote`, if the plan can run secure stacks:
    /// built on first use (CA files read then), shared by every race after.
    fn client_security(
        &self,
        plan: &Plan,
        remote: &RemoteEndpoint,
    ) -> Result<Option<Arc<ClientSecurity>>, Error> {
        if let Some(sec) = self.client_security.get() {
            return Ok(sec.clone());
        }
        if !runs_secure(plan) {
            return Ok(self.client_security.get_or_init(|| None).clone());
        }
        let quic = plan
            .stacks()
            .iter()
            .any(|s| s.unavailable.is_none() && s.stack.protocol == Protocol::Quic)
            .then(|| self.ctx.quic_socket().clone());
        let sec = Arc::new(ClientSecurity::new(
            &self.security,
            &remote.host,
            self.ctx.tls_sessions(),
            quic,
            self.socket_options().user_timeout,
        )?);
        Ok(self.client_security.get_or_init(|| Some(sec)).clone())
    }

    /// What every race to `remote` needs of its name, worked out on first use.
    fn remote_facts(&self, remote: &RemoteEndpoint) -> &RemoteFacts {
        self.remote_facts.get_or_init(|| RemoteFacts {
            key: remote.key(),
            literal: parse_literal(&remote.host),
        })
    }

    /// The remote's CIB key (`host:port`).
    fn remote_key(&self, remote: &RemoteEndpoint) -> Arc<str> {
        self.remote_facts(remote).key.clone()
    }

    /// Sets the local endpoint (address and port to bind or listen on).
    pub fn local(mut self, local: SocketAddr) -> Preconnection {
        self.local = Some(local);
        self
    }

    /// The properties.
    pub fn properties(&self) -> &Properties {
        &self.props
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The candidate plan: PIB profiles applied and every stack evaluated. Computed on
    /// first call, then shared (an `Arc` clone).
    pub fn plan(&self) -> Result<Arc<Plan>, Error> {
        self.plan
            .get_or_init(|| {
                let plan = Plan::new(&self.props, self.ctx.pib().clone(), self.ctx.availability())?;
                // SCTP's library is loaded on first use: a plan that would run SCTP finds
                // out now whether it can, and is made again without it if not.
                let runs_sctp = plan
                    .stacks()
                    .iter()
                    .any(|s| s.unavailable.is_none() && s.stack == Stack::plain(Protocol::Sctp));
                if runs_sctp
                    && self
                        .ctx
                        .availability_checked()
                        .reason(Stack::plain(Protocol::Sctp))
                        .is_some()
                {
                    return Plan::new(
                        &self.props,
                        self.ctx.pib().clone(),
                        self.ctx.availability_checked(),
                    )
                    .map(Arc::new);
                }
                Ok(Arc::new(plan))
            })
            .clone()
            .map_err(Error::from)
    }

    /// Builds now what every race of this preconnection shares and that can fail before
    /// any I/O: the candidate plan and, when the plan has secure stacks, the TLS
    /// configuration (CA and identity files are read here). `initiate` does it on first
    /// use otherwise; calling it first turns a bad file into an error before any flow.
    pub fn prepare(&self) -> Result<(), Error> {
        let plan = self.plan()?;
        if let Some(remote) = &self.remote {
            self.client_security(&plan, remote)?;
        }
        Ok(())
    }

    /// Resolves the remote name (both families, waiting for both) and ranks every
    /// candidate, without connecting: what `taps candidates` prints.
    pub async fn candidates(&self) -> Result<CandidateListing, Error> {
        let remote = self
            .remote
            .as_ref()
            .ok_or(Error::usage(UsageError::CandidatesWithoutRemote))?;
        let plan = self.plan()?;
        let mut resolution = if runs_secure(&plan) {
            self.ctx.resolver().resolve_with_service(&remote.host)
        } else {
            self.ctx.resolver().resolve(&remote.host)
        };
        let mut dns = Vec::new();
        let mut addrs = Vec::new();
        let mut service = None;
        while let Some(event) = resolution.next_event().await {
            match event {
                ResolutionEvent::Addresses(answer) => {
                    if let Ok(a) = &answer.result {
                        addrs.extend(a.iter().copied());
                    }
                    dns.push((answer.family, answer.result));
                }
                ResolutionEvent::Service(answer) => service = Some(answer),
                ResolutionEvent::AddressesDone => {}
            }
        }
        let info = service.as_ref().and_then(|s| s.as_ref().ok());
        let port = info.and_then(ServiceInfo::port).unwrap_or(remote.port);
        if addrs.is_empty() {
            return Err(EstablishError::Resolve {
                host: remote.host.clone(),
                causes: dns
                    .into_iter()
                    .map(|(f, r)| (f, r.err().unwrap_or(DnsFailure::NoRecords)))
                    .collect(),
            }
            .into());
        }
        let mut gathered = {
            let cib = self.ctx.cib();
            plan.gather(&self.remote_key(remote), port, &addrs, &cib, Instant::now())
        };
        if info.is_some_and(|s| !s.allows_quic()) {
            gathered
                .candidates
                .retain(|c| c.stack.protocol != Protocol::Quic);
        }
        Ok(CandidateListing {
            plan,
            dns,
            service,
            gathered,
        })
    }

    /// Races the candidates for the remote endpoint (Happy Eyeballs) and returns the
    /// winner. Every losing attempt is closed before this returns; every outcome is
    /// recorded in the CIB.
    pub async fn initiate(&self) -> Result<Connection, Error> {
        self.initiate_telling(None).await
    }

    /// [`initiate`](Self::initiate), telling `began` (once) when the race starts its
    /// first attempt, after the lookups it waited for.
    pub(crate) async fn initiate_telling(
        &self,
        began: Option<&tokio::sync::Notify>,
    ) -> Result<Connection, Error> {
        let remote = self
            .remote
            .as_ref()
            .ok_or(Error::usage(UsageError::InitiateWithoutRemote))?;
        let plan = self.plan()?;
        let streams = plan.stacks().iter().any(|s| {
            s.unavailable.is_none() && matches!(s.stack.protocol, Protocol::Sctp | Protocol::Quic)
        });
        let maps = self.ctx.flow_mapping() && streams;
        if !maps {
            return self.race(remote, &plan, began).await;
        }
        // Flow mapping: one race per remote endpoint and property set at a time; while it
        // runs, other flows to the same key wait, then become streams of its SCTP
        // association or QUIC connection.
        let slot = self
            .ctx
            .flows()
            .slot(&self.remote_key(remote), self.props.id());
        let waiting_since = Instant::now();
        let mut slot = slot.lock().await;
        if let Some(shared) = slot.association.upgrade() {
            // Not taken (its last flow just closed it, or every stream is in use): race
            // for a new association below. Boxed, like the QUIC sibling below: inline,
            // the largest of these awaits would size every initiate future, the plain
            // race's too.
            if let Ok(flow) = Box::pin(SctpFlow::open_sibling(&shared)).await? {
                drop(slot);
                return Ok(Connection::new(
                    Io::Sctp(flow),
                    taps_core::Stack::plain(Protocol::Sctp),
                    None,
                    None,
                )?);
            }
        }
        if let Some(shared) = slot.quic.upgrade() {
            // Closing, or no stream credit from the peer: race for a new connection below.
            if let Some(conn) = Box::pin(Connection::quic_sibling(&shared)).await? {
                return Ok(conn);
            }
        }
        // The race this flow waited for failed: it tried the candidates this flow would
        // try, so the flow fails with its error at once (racing again, one waiting flow
        // after another, made N flows to a peer that never answers take N establishment
        // timeouts).
        if let Some((at, e)) = &slot.failed {
            if *at >= waiting_since {
                return Err(e.clone().into());
            }
        }
        if slot.unmappable {
            drop(slot);
            return self.race(remote, &plan, began).await;
        }
        let conn = match self.race(remote, &plan, began).await {
            Ok(conn) => conn,
            Err(e) => {
                // Only the race's own failures: a setup or socket error is not news about
                // the remote (and fails at once for each flow anyway).
                if let Error::Establish(failure) = &e {
                    slot.failed = Some((Instant::now(), failure.clone()));
                }
                return Err(e);
            }
        };
        match (conn.sctp_flow(), conn.quic_shared()) {
            (Some(flow), _) => slot.association = Arc::downgrade(flow.shared()),
            (None, Some(quic)) => slot.quic = Arc::downgrade(quic),
            (None, None) => slot.unmappable = true,
        }
        Ok(conn)
    }

    /// One race, and the connection its winner makes.
    async fn race(
        &self,
        remote: &RemoteEndpoint,
        plan: &Arc<Plan>,
        began: Option<&tokio::sync::Notify>,
    ) -> Result<Connection, Error> {
        let opts = self.socket_options();
        let mut config = racing::race_config(&self.props);
        config.timeline = self.race_timeline;
        let facts = self.remote_facts(remote);
        let security = self.client_security(plan, remote)?;
        // Boxed: the race's state (the driver's box, the timer, the first attempt) lives
        // on the heap for the race only, so a caller's future (and the task it is spawned
        // in) stays small, and moving or spawning it copies a few hundred bytes.
        let input = RaceInput {
            ctx: &self.ctx,
            remote,
            key: facts.key.clone(),
            literal: facts.literal,
            plan,
            scored: &self.scored,
            opts: &opts,
            security,
            began,
        };
        let won = Box::pin(racing::race(input, config)).await?;
        Ok(Connection::from_established(
            won.established,
            won.stack,
            Some(won.report),
        )?)
    }

    /// Listens on the local endpoint with every stack and family the properties allow,
    /// with the default [`ListenerOptions`] (connection limit, backlog, handshake time).
    /// With port 0 every stack and family listens on one port, the one the first socket
    /// got ([`Listener::local_addrs`] says which).
    pub async fn listen(&self) -> Result<Listener, Error> {
        self.listen_with(&ListenerOptions::default()).await
    }

    /// [`listen`](Self::listen) with explicit limits. Costs what `listen` costs.
    pub async fn listen_with(&self, limits: &ListenerOptions) -> Result<Listener, Error> {
        let plan = self.plan()?;
        let local = self
            .local
            .ok_or(Error::usage(UsageError::ListenWithoutLocal))?;
        let security = if runs_secure(&plan) {
            Some(Arc::new(ServerSecurity::new(&self.security)?))
        } else {
            None
        };
        Listener::start(local, &plan, self.socket_options(), security, limits).await
    }

    pub(crate) fn socket_options(&self) -> Arc<SocketOptions> {
        self.socket_options
            .get_or_init(|| {
                Arc::new(SocketOptions {
                    sctp_udp_port: self.ctx.sctp_udp_port(),
                    ..SocketOptions::from_properties(&self.props)
                })
            })
            .clone()
    }
}
