//! Executes a [`taps_core::race::Race`] on tokio: feeds it DNS answers, attempt outcomes
//! and timer expiries; starts and drops attempts as it says. One driver runs every race,
//! an address literal's one candidate as much as a name's dozen, whether or not anyone
//! listens to the logs: a subscriber changes what is said, never what runs.
//!
//! The race's future is one poll function ([`Driver::poll_decided`], in `steps`), built
//! like quinn's connection driver: small steps, each taking one kind of input, run in
//! causal order until the race decides or none of them has anything for it. Carrying out
//! the race's actions comes first, then a DNS answer, an attempt's milestones and
//! outcome, an interface change, and the race's timer last. A literal's answer needs no
//! step: the driver feeds it to the race when it is made, and no lookup runs.
//!
//! The race ends in one place, [`Driver::finish`]: the CIB learns the race's records
//! (one lock of the context's CIB, and one message to the policy manager when one
//! runs), then the winner's connection or the error goes to the caller.
//!
//! Attempts are futures owned by this task, not spawned tasks: cancelling one is
//! dropping it, which closes its socket at once. When the winner is returned, every
//! other attempt has already been dropped, so nothing of a loser outlives the race.
//! Each wake-up polls the few live attempts (bounded by `max_alive`). The first attempt
//! runs pinned in the race's own future, so a race decided by its first attempt (most
//! are) allocates nothing for it; later ones are boxed.
//!
//! Logs: each race runs in a `race` span (a race id, the remote endpoint) and each attempt
//! in an `attempt` span inside it (attempt id, stack, remote address, interface), so its
//! events (DNS answers, started, connected or failed with the cause, won, cancelled) say
//! which flow they belong to. Spans and their fields are built only when a subscriber
//! listens at `info`; otherwise a race pays a few relaxed atomic loads.
//!
//! Time comes from tokio's clock ([`tokio::time::Instant`]), so a test with a paused
//! runtime clock runs a whole race over real sockets in virtual time.

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use std::net::IpAddr;
use taps_core::candidates::{Candidate, Plan, PrunedCandidate};
use taps_core::properties::{Properties, Protocol};
use taps_core::race::{AttemptId, DnsSource, FailureKind, Race, RaceConfig, RaceError, RaceReport};
use taps_core::{Security, Stack};

use smallvec::SmallVec;
use taps_core::{DnsFailure, Family, Interface, InterfaceKind, ServiceInfo};
use tracing::{Instrument, Span};

use crate::context::Context;
use crate::endpoint::RemoteEndpoint;
use crate::error::{Error, EstablishError, InternalError};
use crate::resolver::Resolution;
use crate::scoring::{AnswerCache, ScoreFor};
use crate::security::ClientSecurity;
use crate::transport::{self, AttemptError, Established, Milestone, SocketOptions};

mod steps;
use steps::{Change, InPlace};

type Attempt = Pin<Box<dyn Future<Output = Result<Established, AttemptError>> + Send>>;

/// The interface list as the context's watcher sees it change.
type InterfaceWatch = tokio::sync::watch::Receiver<Arc<Vec<Interface>>>;

/// What a won race hands to the connection.
pub(crate) struct Won {
    pub(crate) established: Established,
    /// The winner's stack (its candidate is the report's winning attempt).
    pub(crate) stack: Stack,
    pub(crate) report: RaceReport,
}

/// Now, on tokio's clock (virtual when the runtime's clock is paused).
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// The race settings for a property set.
pub(crate) fn race_config(props: &Properties) -> RaceConfig {
    let c = props.compiled();
    let mut config = RaceConfig::default();
    if let Some(d) = c.attempt_delay {
        config.attempt_delay = d;
        // The application chose the stagger: no estimate shortens it.
        config.rtt_from_dns = false;
    }
    if let Some(t) = c.timeout {
        config.timeout = t;
    }
    config
}

/// What one race needs from its preconnection.
pub(crate) struct RaceInput<'a> {
    pub(crate) ctx: &'a Context,
    pub(crate) remote: &'a RemoteEndpoint,
    /// The remote's CIB key (`host:port`).
    pub(crate) key: Arc<str>,
    /// The remote's address, when its host is an address literal.
    pub(crate) literal: Option<IpAddr>,
    pub(crate) plan: &'a Arc<Plan>,
    /// The preconnection's last scored answer.
    pub(crate) scored: &'a AnswerCache,
    pub(crate) opts: &'a Arc<SocketOptions>,
    /// The TLS configuration, when the plan has secure stacks.
    pub(crate) security: Option<Arc<ClientSecurity>>,
    /// Told when the first attempt starts.
    pub(crate) began: Option<&'a tokio::sync::Notify>,
}

/// Numbers races for the logs (taken only when the race's span is enabled).
static RACE_IDS: AtomicU64 = AtomicU64::new(1);

/// Races the candidates for the remote and returns the winner, inside a `race` span when
/// a subscriber listens (the span's fields are built only then).
///
/// Not an `async fn`: the driver is built here (in its own box) and moved into the
/// returned future, which holds it, the race's timer and its first attempt (pinned where
/// they are, so they live across wake-ups without an allocation of their own) and
/// nothing else: an `async fn` would also keep its arguments beside them. `config` is
/// passed beside `input`, not in it, since the race keeps the only copy it needs.
pub(crate) fn race<'a>(
    input: RaceInput<'a>,
    config: RaceConfig,
) -> impl Future<Output = Result<Won, Error>> + 'a {
    let span = tracing::info_span!(
        "race",
        id = RACE_IDS.fetch_add(1, Ordering::Relaxed),
        remote = %input.remote,
    );
    let start = now();
    let mut driver = span.in_scope(|| Driver::new(input, config, start));
    async move {
        let mut timer = pin!(None);
        let mut first = pin!(None);
        let decided = poll_fn(|cx| {
            let mut in_place = InPlace {
                timer: timer.as_mut(),
                first: first.as_mut(),
                attempt,
            };
            driver.poll_decided(cx, &mut in_place)
        })
        .await;
        // The first attempt goes with the others, before the result is handed on.
        first.set(None);
        driver.finish(decided)
    }
    .instrument(span)
}

/// One race in progress: the core's state machine and the I/O it asked for.
struct Driver<'a> {
    input: RaceInput<'a>,
    race: Race,
    /// The name's lookups and what they said (none for an address literal: its answer
    /// is fed to the race when the driver is made).
    lookups: Option<Box<Lookups>>,
    /// The race's first attempt, while it runs in place (see `InPlace`).
    first: Option<AttemptId>,
    /// Whether an attempt was started (the first one runs in place, later ones here).
    started: bool,
    /// Live attempts after the first, in start order. Few entries (bounded by the
    /// attempts alive at once): a vector, not a map; the first two inline.
    attempts: SmallVec<[(AttemptId, Attempt); 2]>,
    /// The attempt that connected, until the race names it the winner (in the same
    /// pass) or cancels it.
    connected: Option<(AttemptId, Established)>,
    /// Candidates the properties ruled out, kept as data: put into words only if nothing
    /// else was left to try, and only when shown.
    pruned: Vec<PrunedCandidate>,
    /// Whether any lookup gave an address (a literal's race has one).
    any_address: bool,
    milestones: Milestones,
    /// The interface list's receiver, if the context has a watcher, while no wait for
    /// its next change holds it.
    interfaces: Option<InterfaceWatch>,
    /// The wait for the interface list's next change, while one runs (boxed: only a
    /// race to a remote off this host waits, and the race's own future stays small).
    watch: Option<Pin<Box<dyn Future<Output = Change> + Send>>>,
    /// Whether an attempt that an interface change can fail was started: only then is
    /// the watcher waited on (a waiter on a channel every race shares; a change made
    /// before is still seen, the receiver compares versions).
    watching: bool,
    /// The deadline the race's timer is set to, while set.
    armed: Option<Instant>,
    /// The live attempts' spans, only while a subscriber listens (empty otherwise).
    spans: Vec<(AttemptId, Span)>,
}

/// What a race to a name keeps of its lookups.
struct Lookups {
    /// The lookups, while any is to answer.
    resolution: Option<Resolution>,
    /// What the HTTPS records said (port, hints), once they answered.
    service: Option<ServiceInfo>,
    /// The families whose A/AAAA answer came (hints stand in for the others).
    /// Indexed by [`family_index`].
    answered: [bool; 2],
    /// Address answers that came while the HTTPS answer was outstanding.
    early: Vec<(Family, Vec<IpAddr>)>,
    /// Every address lookup answered.
    addresses_done: bool,
    /// Kept to turn a race with nothing to try into the error that explains it.
    dns_causes: Vec<(Family, DnsFailure)>,
}

impl Lookups {
    /// The port candidates use: the HTTPS records' if they name one, else `origin`'s.
    fn port(&self, origin: u16) -> u16 {
        self.service
            .as_ref()
            .and_then(ServiceInfo::port)
            .unwrap_or(origin)
    }
}

/// How the race ended.
enum Decided {
    Won(AttemptId),
    Failed(RaceError),
}

impl<'a> Driver<'a> {
    /// A driver for `input`'s race starting at `start`: the race state machine, with an
    /// address literal's answer fed to it, or the name's lookups under way.
    fn new(input: RaceInput<'a>, mut config: RaceConfig, start: Instant) -> Box<Driver<'a>> {
        let lookups = match input.literal {
            // No lookup runs: none to take the path's round trip from.
            Some(_) => {
                config.rtt_from_dns = false;
                None
            }
            None => Some(Box::new(Lookups {
                resolution: Some(resolve(&input, &mut config, start)),
                service: None,
                answered: [false; 2],
                early: Vec::new(),
                addresses_done: false,
                dns_causes: Vec::new(),
            })),
        };
        let literal = input.literal;
        let mut driver = Box::new(Driver {
            race: Race::new(config, start),
            lookups,
            first: None,
            started: false,
            attempts: SmallVec::new(),
            connected: None,
            pruned: Vec::new(),
            any_address: false,
            milestones: Milestones(None),
            interfaces: input.ctx.interface_changes(),
            watch: None,
            watching: false,
            armed: None,
            spans: Vec::new(),
            input,
        });
        if let Some(ip) = literal {
            // The literal is the whole answer, of its own family; DNS is over.
            let family = Family::of(&ip);
            tracing::debug!(%family, address = %ip, "address literal");
            let port = driver.input.remote.port;
            let candidates = driver.gather(family, &[ip], port, start);
            driver.race.on_final_candidates(family, candidates, start);
        }
        driver
    }

    /// Candidates for `addrs` of `family` on `port` join the race; `source` says where
    /// the addresses came from.
    fn add_addresses(
        &mut self,
        family: Family,
        addrs: &[IpAddr],
        source: DnsSource,
        port: u16,
        now: Instant,
    ) {
        let candidates = self.gather(family, addrs, port, now);
        self.race
            .on_candidates_from(family, candidates, source, now);
    }

    /// The candidates for `addrs` of `family` on `port`, in race order with their CIB
    /// histories; the ones the properties rule out are kept for the error.
    fn gather(
        &mut self,
        family: Family,
        addrs: &[IpAddr],
        port: u16,
        now: Instant,
    ) -> Vec<Candidate> {
        self.any_address = true;
        let input = &self.input;
        let on = ScoreFor {
            plan: input.plan,
            endpoint: &input.key,
            port,
        };
        let mut gathered = input.scored.gather(&on, input.ctx, family, addrs, now);
        tracing::trace!(
            %family,
            port,
            candidates = gathered.candidates.len(),
            ruled_out = gathered.pruned.len(),
            "candidates gathered"
        );
        self.pruned.append(&mut gathered.pruned);
        gathered.candidates
    }

    /// The race decided: every attempt still running is dropped, the CIB learns what
    /// the race found out (its records, applied here and nowhere else), and the winner's
    /// connection, or the error in its most telling terms, goes to the caller.
    fn finish(&mut self, decided: Decided) -> Result<Won, Error> {
        // Dropping an attempt's future closes its socket.
        self.attempts.clear();
        let input = &self.input;
        let id = match decided {
            Decided::Won(id) => id,
            Decided::Failed(err) => {
                input.ctx.learn(&input.key, err.report().learned());
                tracing::info!(error = %err, "race failed");
                return Err(self.explain_failure(err));
            }
        };
        let report = self.race.take_report();
        input.ctx.learn(&input.key, report.learned());
        for (i, span) in &self.spans {
            if *i == id {
                span.in_scope(|| tracing::info!("won"));
            } else {
                span.in_scope(|| tracing::debug!("cancelled"));
            }
        }
        let established = self.connected.take().filter(|(i, _)| *i == id);
        let stack = report
            .won()
            .filter(|a| a.id == id)
            .map(|a| a.candidate.stack);
        match (established, stack) {
            (Some((_, established)), Some(stack)) => Ok(Won {
                established,
                stack,
                report,
            }),
            // The core names only an attempt it was told connected, and reports it won.
            _ => Err(InternalError::WinnerWithoutConnection(id).into()),
        }
    }

    /// A failed race's error in the most telling terms: the name did not resolve, every
    /// candidate was ruled out, or each attempt's cause.
    fn explain_failure(&mut self, err: RaceError) -> Error {
        let host = || self.input.remote.host.clone();
        let nothing_tried = err.kind() == FailureKind::NoCandidates;
        if nothing_tried && !self.any_address {
            let causes = self
                .lookups
                .as_mut()
                .map(|l| std::mem::take(&mut l.dns_causes));
            return EstablishError::Resolve {
                host: host(),
                causes: causes.unwrap_or_default(),
            }
            .into();
        }
        if nothing_tried && err.attempts().next().is_none() && !self.pruned.is_empty() {
            return EstablishError::NoCandidates {
                host: host(),
                pruned: std::mem::take(&mut self.pruned),
            }
            .into();
        }
        err.into()
    }
}

/// Where attempts report milestones before they finish (SCTP's INIT-ACK, TCP up under
/// TLS, a DTLS server's first answer); made when the first attempt of such a stack
/// starts (a race that ends on a plain TCP attempt makes none). An attempt runs inside
/// the race's own future, so it reports while the driver polls it, and the driver takes
/// the report right after, in the same pass: no channel, and no wake-up of the race's
/// own task from inside its poll (which tokio's multi-thread scheduler would treat as a
/// yield, waking an idle worker to share the work).
struct Milestones(Option<Arc<Reports>>);

/// Whether an attempt of `stack` reports milestones.
fn reports_milestones(stack: &Stack) -> bool {
    stack.protocol == Protocol::Sctp || stack.security != Security::None
}

/// The milestones reported and not yet taken, oldest first.
type Reports = Mutex<SmallVec<[(AttemptId, Milestone); 2]>>;

impl Milestones {
    /// What an attempt of `stack` reports through: a handle to the list, made on the
    /// first such attempt (none for a stack that reports nothing).
    fn sink(&mut self, stack: &Stack) -> Option<Arc<Reports>> {
        if !reports_milestones(stack) {
            return None;
        }
        Some(self.0.get_or_insert_with(Default::default).clone())
    }

    /// The oldest milestone reported and not yet taken.
    fn take(&self) -> Option<(AttemptId, Milestone)> {
        let mut list = self.0.as_ref()?.lock().unwrap_or_else(|e| e.into_inner());
        (!list.is_empty()).then(|| list.remove(0))
    }
}

/// `family`'s slot in [`Lookups::answered`].
fn family_index(family: Family) -> usize {
    usize::from(family == Family::V4)
}

/// Starts the lookups of `input`'s name, and sets what `config` awaits of them.
fn resolve(input: &RaceInput<'_>, config: &mut RaceConfig, start: Instant) -> Resolution {
    // Properties that admit one family only: its records alone are asked for and
    // awaited (no AAAA query, nor RFC 8305's resolution delay, for an IPv4-only race).
    let only = input.plan.only_family();
    if let Some(family) = only.or_else(|| input.ctx.cib().best_family(&input.key, start)) {
        config.awaited_family = family;
    }
    // HEv3: a secure race looks up the name's HTTPS records beside A and AAAA. (The
    // preconnection set up `security` exactly when the plan has secure stacks.)
    let resolution =
        input
            .ctx
            .resolver()
            .resolve_families(&input.remote.host, only, input.security.is_some());
    config.await_service = resolution.service_pending();
    tracing::debug!(
        awaited = %config.awaited_family,
        https = config.await_service,
        "resolving"
    );
    resolution
}

/// What one attempt needs to run, apart from the race.
struct AttemptSpec {
    id: AttemptId,
    candidate: Candidate,
    opts: Arc<SocketOptions>,
    security: Option<Arc<ClientSecurity>>,
    /// Where it reports milestones, if its stack has any.
    milestones: Option<Arc<Reports>>,
}

/// The future of one attempt: connects `spec`'s candidate, reporting its milestones.
/// (The driver enters the attempt's span, when there is one, around each poll.)
fn attempt(spec: AttemptSpec) -> impl Future<Output = Result<Established, AttemptError>> + Send {
    let AttemptSpec {
        id,
        candidate,
        opts,
        security,
        milestones,
    } = spec;
    let progress = move |m: Milestone| {
        if let Some(list) = &milestones {
            list.lock().unwrap_or_else(|e| e.into_inner()).push((id, m));
        }
    };
    transport::connect_signalling(candidate, opts, security, progress)
}

/// The interface list's next change, with the receiver back; `(None, None)` once the
/// watcher is gone.
async fn next_change(mut rx: InterfaceWatch) -> Change {
    if rx.changed().await.is_err() {
        return (None, None);
    }
    let list = rx.borrow_and_update().clone();
    (Some(rx), Some(list))
}

/// Whether `candidate`'s packets can still leave through `list`: its bound address is on
/// an interface that is up, or (unbound) some up interface other than loopback has a
/// routable address of its family (loopback remotes always can).
fn can_leave(list: &[Interface], candidate: &Candidate) -> bool {
    let remote = candidate.remote.ip();
    if remote.is_loopback() {
        return true;
    }
    match &candidate.local {
        Some(b) => list
            .iter()
            .any(|i| i.up && i.addresses.iter().any(|a| a.addr == b.addr)),
        None => list.iter().any(|i| {
            i.up && i.kind != InterfaceKind::Loopback
                && i.addresses_of(Family::of(&remote)).any(|a| match a {
                    IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 != 0xfe80,
                    IpAddr::V4(v4) => !v4.is_link_local(),
                })
        }),
    }
}
