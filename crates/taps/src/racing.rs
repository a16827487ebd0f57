//! Executes a [`taps_core::race::Race`] on tokio: feeds it DNS answers, attempt outcomes
//! and timer expiries; starts and drops attempts as it says.
//!
//! Attempts are futures owned by this task, not spawned tasks: cancelling one is
//! dropping it, which closes its socket at once. When the winner is returned, every
//! other attempt has already been dropped, so nothing of a loser outlives the race.
//! Each wake-up polls the few live attempts (bounded by `max_alive`).
//!
//! Logs: each race runs in a `race` span (a race id, the remote endpoint) and each attempt
//! in an `attempt` span inside it (attempt id, stack, remote address, interface), so its
//! events (DNS answers, started, connected or failed with the cause, won, cancelled) say
//! which flow they belong to. Spans and their fields are built only when a subscriber
//! listens at `info`; otherwise a race pays a few relaxed atomic loads.
//!
//! A race to an address literal that gives one candidate takes the core's
//! [`SingleRace`](taps_core::race::SingleRace) instead ([`single`]): the same decisions and
//! report, one attempt awaited against the deadline, without this driver's event loop.
//!
//! Time comes from tokio's clock ([`tokio::time::Instant`]), so a test with a paused
//! runtime clock runs a whole race over real sockets in virtual time.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Instant;

use std::net::IpAddr;
use taps_core::candidates::{Candidate, Plan, PrunedCandidate};
use taps_core::failure::AttemptCause;
use taps_core::properties::{Properties, Protocol};
use taps_core::race::{
    Action, AttemptId, DnsSource, FailureKind, Race, RaceConfig, RaceError, RaceReport,
};
use taps_core::{Security, Stack};

use smallvec::SmallVec;
use taps_core::{DnsFailure, Family, Interface, InterfaceKind, ServiceInfo};
use tracing::{Instrument, Span};

use crate::context::Context;
use crate::endpoint::RemoteEndpoint;
use crate::error::{Error, EstablishError};
use crate::resolver::{DnsAnswer, Resolution, ResolutionEvent};
use crate::scoring::{AnswerCache, ScoreFor};
use crate::security::ClientSecurity;
use crate::transport::{self, AttemptError, Established, Milestone, SocketOptions};

mod single;

type Attempt = Pin<Box<dyn Future<Output = Result<Established, AttemptError>> + Send>>;

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
}

/// The largest driver glibc's malloc serves as a small block (requests up to 1,008 bytes:
/// chunks under 1 KiB, its small bins and per-thread cache). A larger one takes the
/// large-bin path, which also consolidates the freed small blocks first: ~500
/// instructions more per race (callgrind), as when a second copy of the race's config
/// made it 1,048 bytes. Checked when this file compiles.
const DRIVER_SIZE_LIMIT: usize = 1008;
const _: () = assert!(
    std::mem::size_of::<Driver<'static>>() <= DRIVER_SIZE_LIMIT,
    "the race driver outgrew a small malloc block: box a large field"
);

/// Numbers races for the logs (taken only when the race's span is enabled).
static RACE_IDS: AtomicU64 = AtomicU64::new(1);

/// Races the candidates for the remote and returns the winner, inside a `race` span when
/// a subscriber listens (the span's fields are built only then).
///
/// Not an `async fn`: the driver is built here and moved once into the returned future,
/// which holds it (boxed), the span and `drive`'s state (an `async fn` would also keep
/// its arguments and every moved-from local beside them).
///
/// `config` is passed beside `input`, not in it: the driver keeps `input` for the whole
/// race and the race keeps the config, so one copy is enough (see [`DRIVER_SIZE_LIMIT`]).
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
    // An address literal with one candidate takes the core's one-candidate race, unless
    // a subscriber listens (the general driver logs every step).
    let one = if span.is_disabled() {
        single::start(input, &config, start)
    } else {
        Err(input)
    };
    let way = match one {
        Ok(one) => Way::One(one),
        // Boxed on its own: the driver (at most `DRIVER_SIZE_LIMIT`, checked at compile
        // time) and the future awaiting `drive` (~0.6 KB) are each a small block for
        // glibc's malloc (small bins, and its per-thread cache), where one 1.6 KB block
        // went through its large bins: 340 instructions fewer per race (callgrind,
        // `connect_many taps 256 8`).
        Err(input) => Way::General(Box::new(
            span.in_scope(|| Driver::new(input, config, start)),
        )),
    };
    async move {
        match way {
            Way::One(one) => one.run().await,
            Way::General(mut driver) => match driver.drive(start).await {
                Decided::Won(id) => driver.finish_won(id),
                Decided::Failed(err) => Err(driver.finish_failed(err)),
            },
        }
    }
    .instrument(span)
}

/// Which executor a race takes.
enum Way<'a> {
    /// The core's one-candidate race ([`single`]).
    One(Box<single::One<'a>>),
    /// The general race's driver.
    General(Box<Driver<'a>>),
}

impl<'a> Driver<'a> {
    /// A driver for `input`'s race starting at `start`: the race state machine, with the
    /// name's lookups already under way.
    fn new(input: RaceInput<'a>, mut config: RaceConfig, start: Instant) -> Driver<'a> {
        // Properties that admit one family only: its records alone are asked for and
        // awaited (no AAAA query, nor RFC 8305's resolution delay, for an IPv4-only race).
        let only = input.plan.only_family();
        if let Some(family) = only.or_else(|| input.ctx.cib().best_family(&input.key, start)) {
            config.awaited_family = family;
        }
        // HEv3: a secure race looks up the name's HTTPS records beside A and AAAA.
        // (The preconnection set up `security` exactly when the plan has secure stacks.)
        let resolution = input.ctx.resolver().resolve_families(
            &input.remote.host,
            only,
            input.security.is_some(),
        );
        config.await_service = resolution.service_pending();
        tracing::debug!(
            awaited = %config.awaited_family,
            https = config.await_service,
            "resolving"
        );
        Driver {
            race: Race::new(config, start),
            resolution,
            service: None,
            answered: [false; 2],
            early: Vec::new(),
            addresses_done: false,
            dns_done: false,
            attempts: SmallVec::new(),
            connected: SmallVec::new(),
            dns_causes: Vec::new(),
            pruned: Vec::new(),
            any_address: false,
            milestones: Milestones(None),
            interfaces: input.ctx.interface_changes(),
            watching: false,
            spans: Vec::new(),
            input,
        }
    }
}

/// Where attempts report milestones before they finish (SCTP's INIT-ACK, TCP up under
/// TLS, a DTLS server's first answer); made when the first attempt of such a stack
/// starts (a race that ends on a plain TCP attempt allocates none). An attempt
/// runs inside the race's own future (`next_outcome` polls it), so it reports during
/// that poll and the driver takes the report right after, in the same pass: no channel
/// and no wake-up. (A channel woke the race's own task from inside its poll, which tokio's
/// multi-thread scheduler handles as a yield, waking an idle worker to share the work.)
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

/// One race in progress: the core's state machine and the I/O it asked for.
struct Driver<'a> {
    input: RaceInput<'a>,
    race: Race,
    resolution: Resolution,
    /// What the HTTPS records said (port, hints), once they answered.
    service: Option<ServiceInfo>,
    /// The families whose A/AAAA answer came (hints stand in for the others).
    /// Indexed by [`family_index`] (no allocation per race).
    answered: [bool; 2],
    /// Address answers that came while the HTTPS answer was outstanding.
    early: Vec<(Family, Vec<IpAddr>)>,
    /// Every address lookup answered.
    addresses_done: bool,
    /// Every lookup (addresses, HTTPS) answered.
    dns_done: bool,
    /// Live attempts. Few entries (bounded by the attempts alive at once): vectors, not
    /// maps; the first two inline (a race that connects at once allocates no list).
    attempts: SmallVec<[(AttemptId, Attempt); 2]>,
    /// Attempts that connected, until the race names the winner (one inline).
    connected: SmallVec<[(AttemptId, Established); 1]>,
    /// Kept to turn a race with nothing to try into the error that explains it.
    dns_causes: Vec<(Family, DnsFailure)>,
    /// Candidates the properties ruled out, kept as data: put into words only if nothing
    /// else was left to try, and only when shown.
    pruned: Vec<PrunedCandidate>,
    any_address: bool,
    milestones: Milestones,
    /// The interface list as the context's watcher sees it change, if it has one.
    interfaces: Option<tokio::sync::watch::Receiver<Arc<Vec<Interface>>>>,
    /// Whether an attempt that an interface change can fail was started: only then is
    /// the watcher polled (polling registers a waiter on a channel every race shares; a
    /// change made before is still seen, the receiver compares versions).
    watching: bool,
    /// The live attempts' spans, only while a subscriber listens (empty otherwise).
    spans: Vec<(AttemptId, Span)>,
}

/// How the race ended.
enum Decided {
    Won(AttemptId),
    Failed(RaceError),
}

/// What woke the driver.
enum Wake {
    Dns(Option<DnsAnswer>),
    Service(Result<ServiceInfo, DnsFailure>),
    Attempt(AttemptId, Result<Established, AttemptError>),
    Milestone(AttemptId, Milestone),
    Interfaces(Arc<Vec<Interface>>),
    Timer,
}

impl Driver<'_> {
    /// Executes the race's actions and feeds it events until it decides.
    async fn drive(&mut self, start: Instant) -> Decided {
        // One timer for the whole race, moved only when the race's next deadline changes:
        // registering a tokio timer takes the timer wheel's lock (and may wake the
        // driver), so a fresh one per wake-up would cost every flow a few contended locks.
        // It is armed only when the race is about to wait: each pass first takes what is
        // ready without it (a literal's answer, a finished attempt), and only a pass that
        // finds nothing arms it and waits. Arming costs the wheel's lock and, when the
        // timer is the runtime's earliest, a wake-up of its driver (an eventfd write):
        // once per wait instead of once per change of deadline (3 per TCP race before).
        let timer = tokio::time::sleep_until(start.into());
        tokio::pin!(timer);
        let mut armed: Option<Instant> = None;
        let mut waiting = false;
        loop {
            while let Some(action) = self.race.poll_action() {
                if let Some(decided) = self.execute(action) {
                    return decided;
                }
            }
            if waiting {
                let deadline = self.race.poll_timeout();
                if deadline != armed {
                    if let Some(d) = deadline {
                        timer.as_mut().reset(d.into());
                    }
                    armed = deadline;
                }
            }
            // Biased, in causal order: answers before what they started, an attempt's
            // milestone before its outcome (a milestone from the poll that also ended the
            // attempt is fed first, below), the timer after every event.
            let wake = tokio::select! {
                biased;
                Some(event) = self.resolution.next_event(), if !self.dns_done => Some(match event {
                    ResolutionEvent::Addresses(answer) => Wake::Dns(Some(answer)),
                    ResolutionEvent::AddressesDone => Wake::Dns(None),
                    ResolutionEvent::Service(answer) => Wake::Service(answer),
                }),
                (id, r) = next_outcome(&mut self.attempts), if !self.attempts.is_empty() => {
                    Some(Wake::Attempt(id, r))
                }
                // What the attempts just reported while still running (polled after them:
                // a report is only made during their poll, so nothing waits here unseen).
                (id, m) = poll_fn(|_| self.milestones.take().map_or(Poll::Pending, Poll::Ready)),
                    if self.milestones.0.is_some() => Some(Wake::Milestone(id, m)),
                Some(list) = interfaces_changed(&mut self.interfaces), if self.watching => {
                    Some(Wake::Interfaces(list))
                }
                _ = &mut timer, if waiting && armed.is_some() => {
                    // Fired: re-armed when the race next waits, if it still has a deadline.
                    armed = None;
                    Some(Wake::Timer)
                }
                // Nothing was ready: the next pass arms the timer and waits.
                () = std::future::ready(()), if !waiting => None,
            };
            match wake {
                Some(wake) => {
                    waiting = false;
                    let now = now();
                    // A milestone passed before the outcome that ended the same poll.
                    while let Some((id, m)) = self.milestones.take() {
                        self.feed(Wake::Milestone(id, m), now);
                    }
                    self.feed(wake, now);
                }
                None => waiting = true,
            }
        }
    }

    /// Carries out one action; returns the decision when the race made one.
    fn execute(&mut self, action: Action) -> Option<Decided> {
        match action {
            Action::Start { id, candidate } => self.start_attempt(id, candidate),
            Action::Cancel { id } => {
                // Dropping the attempt's future closes its socket.
                self.attempts.retain(|(i, _)| *i != id);
                self.connected.retain(|(i, _)| *i != id);
                self.in_attempt(id, || tracing::debug!("cancelled"));
                self.spans.retain(|(i, _)| *i != id);
            }
            Action::Won { id } => return Some(Decided::Won(id)),
            Action::Failed(err) => return Some(Decided::Failed(err)),
            _ => {}
        }
        None
    }

    /// Starts connecting `candidate` as attempt `id` (polled from the next wake-up on).
    fn start_attempt(&mut self, id: AttemptId, candidate: Candidate) {
        // A loopback remote can always be reached (see `can_leave`).
        self.watching |= !candidate.remote.ip().is_loopback();
        let opts = self.input.opts.clone();
        let security = self.input.security.clone();
        let milestones = self.milestones.sink(&candidate.stack);
        let progress = move |m: Milestone| {
            if let Some(list) = &milestones {
                list.lock().unwrap_or_else(|e| e.into_inner()).push((id, m));
            }
        };
        let span = tracing::info_span!(
            "attempt",
            id = id.0,
            stack = %candidate.stack,
            remote = %candidate.remote,
            interface = candidate
                .local
                .as_ref()
                .map(|l| tracing::field::display(&l.interface)),
        );
        let attempt = async move {
            let security = security.as_deref();
            transport::connect_signalling(&candidate, &opts, security, progress).await
        };
        if span.is_disabled() {
            self.attempts.push((id, Box::pin(attempt)));
        } else {
            span.in_scope(|| tracing::debug!("started"));
            self.spans.push((id, span.clone()));
            self.attempts.push((id, Box::pin(attempt.instrument(span))));
        }
    }

    /// Runs `event` inside attempt `id`'s span; nothing when no subscriber listens.
    fn in_attempt(&self, id: AttemptId, event: impl FnOnce()) {
        if let Some((_, span)) = self.spans.iter().find(|(i, _)| *i == id) {
            span.in_scope(event);
        }
    }

    /// Hands one event to the race.
    fn feed(&mut self, wake: Wake, now: Instant) {
        match wake {
            Wake::Dns(None) => {
                self.addresses_done = true;
                if !self.resolution.service_pending() {
                    self.dns_done = true;
                    self.race.on_dns_complete(now);
                }
            }
            Wake::Dns(Some(answer)) => self.on_dns_answer(answer, now),
            Wake::Service(answer) => {
                self.on_service(answer, now);
                if self.addresses_done {
                    self.dns_done = true;
                    self.race.on_dns_complete(now);
                }
            }
            Wake::Attempt(id, result) => {
                self.attempts.retain(|(i, _)| *i != id);
                match result {
                    Ok(est) => {
                        self.in_attempt(id, || tracing::info!("connected"));
                        self.connected.push((id, est));
                        self.race.on_attempt_connected(id, now);
                    }
                    Err(e) => {
                        let cause = AttemptCause::from(e);
                        self.in_attempt(id, || tracing::info!(%cause, "failed"));
                        self.spans.retain(|(i, _)| *i != id);
                        self.race.on_attempt_failed(id, cause, now);
                    }
                }
            }
            Wake::Milestone(id, Milestone::Reachable) => {
                self.in_attempt(id, || tracing::debug!("reachable"));
                self.race.on_attempt_reachable(id, now)
            }
            Wake::Milestone(id, Milestone::TransportUp) => {
                self.in_attempt(id, || tracing::debug!("transport up"));
                self.race.on_attempt_transport_up(id, now)
            }
            Wake::Interfaces(list) => self.on_interfaces(&list, now),
            Wake::Timer => self.race.handle_timeout(now),
        }
    }

    /// One family's DNS answer: its candidates join the race (scored once per answer
    /// and preconnection, see `Preconnection`), or its failure is kept for the error.
    fn on_dns_answer(&mut self, answer: DnsAnswer, now: Instant) {
        self.answered[family_index(answer.family)] = true;
        match answer.result {
            Ok(addrs) => {
                tracing::debug!(family = %answer.family, addresses = ?addrs, "DNS answer");
                self.add_addresses(answer.family, &addrs, DnsSource::Answer, now);
                if self.resolution.service_pending() {
                    // Kept to be gathered again if the HTTPS records name another port.
                    self.early.push((answer.family, addrs));
                }
            }
            Err(e) => {
                tracing::debug!(family = %answer.family, cause = %e, "DNS lookup failed");
                self.race.on_dns_failed(answer.family, e.clone(), now);
                self.dns_causes.push((answer.family, e));
            }
        }
    }

    /// Candidates for `addrs` of `family` join the race, on the HTTPS records' port if
    /// they name one; `source` says where the addresses came from.
    fn add_addresses(&mut self, family: Family, addrs: &[IpAddr], source: DnsSource, now: Instant) {
        self.any_address = true;
        let input = &self.input;
        let port = self
            .service
            .as_ref()
            .and_then(ServiceInfo::port)
            .unwrap_or(input.remote.port);
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
        self.race
            .on_candidates_from(family, gathered.candidates, source, now);
    }

    /// The interface list changed: an attempt whose local address (or, unbound, whose
    /// family) no interface that is up offers any more fails at once as unreachable —
    /// its packets have no way out — instead of waiting for the race's timeout. (New
    /// interfaces add no candidates to a running race.)
    fn on_interfaces(&mut self, list: &[Interface], now: Instant) {
        let report = self.race.report();
        let gone: Vec<AttemptId> = self
            .attempts
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| {
                report
                    .attempt(*id)
                    .is_some_and(|a| !can_leave(list, &a.candidate))
            })
            .collect();
        for id in gone {
            // Dropping the attempt's future closes its socket.
            self.attempts.retain(|(i, _)| *i != id);
            self.in_attempt(id, || tracing::info!("failed: its interface went down"));
            self.spans.retain(|(i, _)| *i != id);
            self.race
                .on_attempt_failed(id, AttemptCause::Unreachable, now);
        }
    }

    /// The HTTPS answer: the race learns it (QUIC kept only with h3), and its address
    /// hints stand in for the families whose A/AAAA answer has not come yet (HEv3).
    fn on_service(&mut self, answer: Result<ServiceInfo, DnsFailure>, now: Instant) {
        match &answer {
            Ok(info) => tracing::debug!(records = ?info, "HTTPS records"),
            Err(cause) => tracing::debug!(%cause, "no HTTPS records"),
        }
        if let Ok(info) = &answer {
            self.service = Some(info.clone());
            // Addresses that came before the records were gathered on the origin's port:
            // they join again on the records' port before the race reads the answer
            // (which then drops what is queued for another port).
            if info.port().is_some_and(|p| p != self.input.remote.port) {
                for (family, addrs) in std::mem::take(&mut self.early) {
                    self.add_addresses(family, &addrs, DnsSource::ServicePort, now);
                }
            }
        }
        self.race.on_service(answer, now);
        let Some(info) = self.service.clone() else {
            return;
        };
        for family in [Family::V6, Family::V4] {
            let hints = info.hints(family);
            if !hints.is_empty() && !self.answered[family_index(family)] {
                self.add_addresses(family, &hints, DnsSource::Hint, now);
            }
        }
    }

    /// The race named `id` the winner: every other attempt is dropped here, the CIB
    /// learns every outcome, and the winner's connection is handed on.
    fn finish_won(mut self, id: AttemptId) -> Result<Won, Error> {
        self.in_attempt(id, || tracing::info!("won"));
        for (_, span) in self.spans.iter().filter(|(i, _)| *i != id) {
            span.in_scope(|| tracing::debug!("cancelled"));
        }
        self.attempts.clear();
        let established = take(&mut self.connected, id);
        self.connected.clear();
        let report = self.race.into_report();
        self.input.ctx.learn(&self.input.key, report.learned());
        let stack = report
            .won()
            .filter(|a| a.id == id)
            .map(|a| a.candidate.stack);
        match (established, stack) {
            (Some(established), Some(stack)) => Ok(Won {
                established,
                stack,
                report,
            }),
            // The core names only a connected attempt it reported as the winner.
            _ => Err(Error::Io(std::io::Error::other(format!(
                "race named {id} the winner but it did not connect"
            )))),
        }
    }

    /// The race failed: the CIB learns every outcome, and the error says why in the
    /// most telling terms (the name did not resolve, every candidate was ruled out, or
    /// each attempt's cause).
    fn finish_failed(mut self, err: RaceError) -> Error {
        tracing::info!(error = %err, "race failed");
        self.attempts.clear();
        self.input
            .ctx
            .learn(&self.input.key, err.report().learned());
        let host = || self.input.remote.host.clone();
        let nothing_tried = err.kind() == FailureKind::NoCandidates;
        if nothing_tried && !self.any_address {
            let causes = std::mem::take(&mut self.dns_causes);
            return EstablishError::Resolve {
                host: host(),
                causes,
            }
            .into();
        }
        if nothing_tried && err.attempts().next().is_none() && !self.pruned.is_empty() {
            let pruned = std::mem::take(&mut self.pruned);
            return EstablishError::NoCandidates {
                host: host(),
                pruned,
            }
            .into();
        }
        err.into()
    }
}

/// `family`'s slot in [`Driver::answered`].
fn family_index(family: Family) -> usize {
    usize::from(family == Family::V4)
}

/// Removes and returns the entry for `id`.
fn take<T, A: smallvec::Array<Item = (AttemptId, T)>>(
    v: &mut SmallVec<A>,
    id: AttemptId,
) -> Option<T> {
    let i = v.iter().position(|(i, _)| *i == id)?;
    Some(v.swap_remove(i).1)
}

/// Resolves when any live attempt finishes.
async fn next_outcome(
    attempts: &mut [(AttemptId, Attempt)],
) -> (AttemptId, Result<Established, AttemptError>) {
    poll_fn(|cx| {
        for (id, fut) in attempts.iter_mut() {
            if let Poll::Ready(r) = fut.as_mut().poll(cx) {
                return Poll::Ready((*id, r));
            }
        }
        Poll::Pending
    })
    .await
}

/// The next interface list when the watcher changes it; pending forever without a
/// watcher (or once the watcher is gone).
async fn interfaces_changed(
    rx: &mut Option<tokio::sync::watch::Receiver<Arc<Vec<Interface>>>>,
) -> Option<Arc<Vec<Interface>>> {
    let Some(r) = rx else {
        return std::future::pending().await;
    };
    if r.changed().await.is_err() {
        *rx = None;
        return std::future::pending().await;
    }
    Some(r.borrow_and_update().clone())
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
