//! The Happy Eyeballs race state machine (sans-IO).
//!
//! [`Race`] decides when to start which candidate, when to give up, and which attempt
//! wins; the caller does the I/O. Like quinn-proto, it has no clock and no sockets:
//! every input carries `now`, outputs are polled ([`Race::poll_action`]), and the
//! caller sleeps until [`Race::poll_timeout`] and then calls [`Race::handle_timeout`].
//!
//! The rules (RFC 8305, with the behaviour the issue trackers asked for):
//!
//! - Start as soon as the first family answers with candidates, except that an A answer
//!   arriving while AAAA is outstanding waits up to the Resolution Delay for it. When
//!   the CIB says this endpoint last connected fastest over IPv4
//!   ([`RaceConfig::awaited_family`]), the roles swap: an AAAA answer waits up to the
//!   Resolution Delay for A, so a second connection does not begin with the address
//!   that was dead a moment ago just because its lookup returned first.
//! - Later answers join the race: their candidates are merged into the queue of
//!   not-yet-started ones, which is re-ranked with [`order`](crate::candidates::order).
//! - Start the next candidate every Connection Attempt Delay; when the candidate just
//!   started connected before (CIB history), wait only `2 × rtt + 10 ms` (bounded by the
//!   configured delay): a path that connected in `rtt` before very likely connects again
//!   within twice that, so the others need not wait the full delay.
//! - When an attempt fails, start the next one at once and restart the stagger timer.
//! - An attempt whose peer has answered but whose handshake needs more round trips
//!   ([`Race::on_attempt_reachable`]: SCTP's INIT-ACK, one round trip, like TCP's
//!   SYN-ACK) counts as having reached the finish line: the race commits to it, cancels
//!   every other attempt and starts nothing more. Without this, SCTP (two round trips to
//!   COOKIE-ACK) loses to any TCP attempt started less than one round trip after it
//!   (thesis ch. 7). If the committed attempt then fails, the cancelled candidates are
//!   queued again in front and the race resumes at once; if it has not connected
//!   `max(2 × its answer time + 10 ms, attempt delay)` after its peer answered, they
//!   start again by the usual rules beside it (a stalled handshake costs that, not the
//!   establishment timeout).
//! - For a secure stack the finish line is the end of the security handshake, not the
//!   transport's (HEv3: a middlebox can complete TCP while TLS never answers). When an
//!   attempt's transport is up but its handshake still runs
//!   ([`Race::on_attempt_transport_up`]), the next staggered start is pushed back to
//!   leave the handshake `clamp(2 × transport time + 10 ms, 10 ms, attempt_delay)`:
//!   the handshake needs about one more round trip of the kind the transport just took.
//! - At most [`RaceConfig::max_alive`] attempts are alive at once.
//! - The first attempt to connect wins; every other alive attempt is cancelled in the
//!   same step, and nothing is started afterwards.
//! - The race fails when every family has answered, nothing is queued and nothing is
//!   alive, or when the establishment timeout expires; the error lists every cause.
//! - Candidates with `unavailable` set are never started; the report lists them as skipped.
//!
//! One race serves every case: an address literal that gives one candidate is a race
//! whose first answer is also its last ([`Race::on_dns_complete`] right after it).

mod commit;
use commit::Commitment;
mod answers;
mod config;
mod gate;
mod outbox;
use outbox::{Outbox, Pending};
#[cfg(test)]
mod proptests;
mod report;
#[cfg(test)]
mod tests;

pub use config::{
    first_contact_delay, RaceConfig, DEFAULT_ATTEMPT_DELAY, DEFAULT_MAX_ALIVE,
    DEFAULT_RESOLUTION_DELAY, DEFAULT_TIMEOUT, DNS_RTT_MIN, FIRST_CONTACT_MIN_DELAY,
    MAX_ATTEMPT_DELAY, MIN_ATTEMPT_DELAY, UNPROVEN_QUIC_DELAY,
};
pub use report::{
    AttemptFailure, AttemptOutcome, AttemptReport, DnsEvent, DnsSource, EventText, FailureKind,
    RaceError, RaceEvent, RaceReport,
};

use std::fmt;
use std::time::{Duration, Instant};

use crate::candidates::Candidate;
use crate::failure::{AttemptCause, DnsFailure};
use crate::net::Family;
use crate::properties::Protocol;
use crate::service::ServiceInfo;

/// Identifies one attempt of a race (1, 2, ... in start order; shown as `#1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AttemptId(pub u32);

impl fmt::Display for AttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// What the race asks the caller to do. Every action must be carried out: dropping a
/// `Start` leaves the race waiting for an attempt that never runs. Exhaustive on
/// purpose: a new action is an API change that breaks every match on this type, so no
/// driver can drop one silently in a catch-all arm.
#[derive(Debug, Clone)]
#[must_use]
pub enum Action {
    /// Start connecting `candidate`; report its progress with `id`
    /// (`on_attempt_reachable`, `on_attempt_connected`, `on_attempt_failed`).
    Start {
        /// The attempt's id.
        id: AttemptId,
        /// What to connect.
        candidate: Candidate,
    },
    /// Abandon attempt `id` now (close its socket); its outcome no longer matters.
    Cancel {
        /// The attempt.
        id: AttemptId,
    },
    /// Attempt `id` won: use its connection. Every other attempt was cancelled before.
    Won {
        /// The winner.
        id: AttemptId,
    },
    /// The race failed; the error lists every cause and holds the race's report (the race
    /// itself keeps an empty one). Alive attempts were cancelled before.
    Failed(RaceError),
}

/// Per-family DNS state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lookup {
    Pending,
    Done,
}

/// The race state machine. Memory: the candidates, one report entry per attempt and a
/// timeline line per event. Each input costs O(candidates) at most, except a DNS answer,
/// which re-ranks (a sort of every candidate seen) and checks for duplicates
/// (O(new × known)).
#[derive(Debug)]
pub struct Race {
    config: RaceConfig,
    deadline: Instant,
    v6: Lookup,
    v4: Lookup,
    /// The family whose answer is worth waiting for (IPv6 unless the CIB knows better).
    awaited: Family,
    /// When the other family answered while the awaited one was outstanding (starts
    /// the Resolution Delay).
    other_answered_at: Option<Instant>,
    dns_complete: bool,
    /// Whether starting is allowed (the Resolution Delay, if any, is over).
    gate_open: bool,
    /// The HTTPS/SVCB lookup (`Done` from the start when none runs).
    service: Lookup,
    /// What it said, once it answered: QUIC candidates are kept only if it allows QUIC.
    service_info: Option<ServiceInfo>,
    /// When the first candidates arrived (starts the wait for the service answer).
    first_candidates_at: Option<Instant>,
    queue: Vec<Candidate>,
    /// Earliest time of the next staggered start (`None`: nothing started yet).
    next_start: Option<Instant>,
    /// Starts owed at once because attempts failed.
    owed: usize,
    /// The attempt the race committed to when its peer answered (see
    /// [`Race::on_attempt_reachable`]); nothing starts while the commitment holds.
    leader: Option<Commitment>,
    alive: usize,
    next_id: u32,
    finished: bool,
    /// The actions decided and not yet polled.
    outbox: Outbox,
    /// A failure's error, from the decision until it is polled.
    failure: Option<RaceError>,
    report: RaceReport,
}

impl Race {
    /// A race that has not started anything yet; `now` is time zero of the report and
    /// the start of the establishment timeout. `config` is [`clamped`](RaceConfig::clamped).
    pub fn new(config: RaceConfig, now: Instant) -> Race {
        let config = config.clamped();
        let mut report = RaceReport::new(now, config.timeline);
        // The one event logged before the race exists, so not through `Race::log`:
        // gated the same way.
        if config.timeline && config.awaited_family != Family::V6 {
            report.log(now, RaceEvent::ExpectFamily(config.awaited_family));
        }
        let service = if config.await_service {
            Lookup::Pending
        } else {
            Lookup::Done
        };
        Race {
            deadline: now + config.timeout,
            awaited: config.awaited_family,
            config,
            v6: Lookup::Pending,
            v4: Lookup::Pending,
            other_answered_at: None,
            service,
            service_info: None,
            first_candidates_at: None,
            dns_complete: false,
            gate_open: false,
            queue: Vec::new(),
            next_start: None,
            owed: 0,
            leader: None,
            alive: 0,
            next_id: 1,
            finished: false,
            outbox: Outbox::new(),
            failure: None,
            report,
        }
    }

    /// The settings in force (after clamping).
    pub fn config(&self) -> &RaceConfig {
        &self.config
    }

    /// Adds `event` to the report's timeline at `now`, when the config keeps one.
    fn log(&mut self, now: Instant, event: RaceEvent) {
        if self.config.timeline {
            self.report.log(now, event);
        }
    }

    /// The lookup for `family` failed; `cause` is kept for the report and the error.
    /// Cost: constant (plus whatever starts it allows).
    pub fn on_dns_failed(&mut self, family: Family, cause: DnsFailure, now: Instant) {
        if self.finished {
            return;
        }
        self.set_lookup(family, now);
        self.log(
            now,
            RaceEvent::Dns {
                index: self.report.dns.len(),
                candidates: 0,
                waiting_for: None,
            },
        );
        self.report.dns.push(DnsEvent {
            family,
            at: self.report.offset(now),
            result: Err(cause),
            source: DnsSource::Answer,
        });
        self.drive(now);
    }

    /// The HTTPS/SVCB lookup answered (`Ok`, possibly with no record) or failed. When its
    /// records name application protocols and none is HTTP/3, QUIC candidates are dropped
    /// (queued ones now, later ones as they come): the service says it has no QUIC. When
    /// the records name a port, queued candidates for another port are dropped; the
    /// caller gathers on the records' port and adds their address hints.
    /// Ignored after the first call. Cost: a scan of the queue.
    pub fn on_service(&mut self, answer: Result<ServiceInfo, DnsFailure>, now: Instant) {
        if self.finished || self.report.service.is_some() {
            return;
        }
        self.service = Lookup::Done;
        let records = answer.as_ref().map_or(0, |s| s.records.len());
        let mut quic_dropped = 0;
        if let Ok(info) = &answer {
            if !info.allows_quic() {
                let before = self.queue.len();
                self.queue.retain(|c| c.stack.protocol != Protocol::Quic);
                quic_dropped = before - self.queue.len();
            }
            // The records name the service's port: candidates for another (the origin's,
            // gathered before this answer) are not its endpoints.
            if let Some(port) = info.port() {
                self.queue.retain(|c| c.remote.port() == port);
            }
            self.service_info = Some(info.clone());
        }
        self.report.service = Some(answer);
        self.log(
            now,
            RaceEvent::Service {
                records,
                quic_dropped,
            },
        );
        self.drive(now);
    }

    /// No more DNS answers will come (literal addresses, or only one family looked up):
    /// stop waiting for the families that have not answered. Cost: constant.
    pub fn on_dns_complete(&mut self, now: Instant) {
        if self.finished || self.dns_complete {
            return;
        }
        self.dns_complete = true;
        self.log(now, RaceEvent::DnsComplete);
        self.drive(now);
    }

    /// Attempt `id`'s transport is up (TCP connected) but its security handshake still
    /// runs: it has not won yet. If the next staggered start is due before the handshake
    /// can be expected to finish, it is pushed back to `now + clamp(2 × t + 10 ms, 10 ms,
    /// attempt_delay)`, `t` being how long the transport took (HEv3's extension of the
    /// attempt timer over the TLS handshake). Ignored for unknown or ended ids. Cost:
    /// constant.
    pub fn on_attempt_transport_up(&mut self, id: AttemptId, now: Instant) {
        if self.finished || !self.is_alive(id) {
            return;
        }
        let mut took = Duration::ZERO;
        if let Some(a) = self.report.attempt_mut(id) {
            took = now.saturating_duration_since(a.started_at);
            a.transport_up = Some(took);
        }
        let floor = MIN_ATTEMPT_DELAY.min(self.config.attempt_delay);
        let allowance =
            (took.saturating_mul(2) + MIN_ATTEMPT_DELAY).clamp(floor, self.config.attempt_delay);
        let extended = match self.next_start {
            Some(next) if next > now && next < now + allowance && !self.queue.is_empty() => {
                self.next_start = Some(now + allowance);
                Some(allowance)
            }
            _ => None,
        };
        self.log(now, RaceEvent::TransportUp { id, extended });
    }

    /// Attempt `id` connected. If it is the first, it wins: every other alive attempt
    /// is cancelled, then [`Action::Won`] is queued. Later calls (and unknown ids) are
    /// ignored. A connection reported at or after the deadline but before the timeout
    /// was handled still wins. Cost: O(attempts).
    pub fn on_attempt_connected(&mut self, id: AttemptId, now: Instant) {
        if self.finished || !self.is_alive(id) {
            return;
        }
        let at = self.end(id, AttemptOutcome::Won, now);
        self.log(now, RaceEvent::Connected(id));
        let losers = if self.alive > 0 {
            self.pending()
        } else {
            Vec::new()
        };
        for loser in losers {
            self.end(loser, AttemptOutcome::Cancelled, now);
            self.log(now, RaceEvent::Cancelled(loser));
            self.outbox.push(Pending::Cancel(loser));
        }
        self.report.winner = Some(id);
        self.report.total = Some(at);
        self.finished = true;
        self.queue.clear();
        self.outbox.push(Pending::Won(id));
    }

    /// Attempt `id` failed with `cause`: the next candidate starts at once. Unknown or
    /// ended ids are ignored. Cost: O(alive) plus the start.
    pub fn on_attempt_failed(&mut self, id: AttemptId, cause: AttemptCause, now: Instant) {
        if self.finished || !self.is_alive(id) {
            return;
        }
        self.end(id, AttemptOutcome::Failed(cause), now);
        self.log(now, RaceEvent::Failed(id));
        self.owed += 1;
        self.drive(now);
    }

    /// Runs whatever timers expired by `now` (resolution delay, stagger, establishment
    /// timeout). Calling it early is harmless. Cost: like the starts it makes.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.drive(now);
    }

    /// When [`handle_timeout`](Self::handle_timeout) must be called next; `None` once
    /// finished. Cost: constant.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.finished {
            return None;
        }
        let mut t = self.deadline;
        if self.queue.is_empty() {
            return Some(t);
        }
        if !self.gate_open {
            if let Some(at) = self.gate_deadline() {
                t = t.min(at);
            }
        } else if self.alive < self.config.max_alive {
            match self.leader {
                None => {
                    if let Some(next) = self.next_start {
                        t = t.min(next);
                    }
                }
                Some(c) => t = t.min(c.until),
            }
        }
        Some(t)
    }

    /// The next thing for the caller to do, in order. Cost: constant, and a copy of the
    /// candidate for a start.
    pub fn poll_action(&mut self) -> Option<Action> {
        while let Some(pending) = self.outbox.pop() {
            let action = match pending {
                Pending::Start(id) => {
                    // Started attempts stay in the report (or in the failure's: a start
                    // queued before the failure is polled before it).
                    let report = self.failure.as_ref().map_or(&self.report, |e| e.report());
                    match report.attempt(id) {
                        Some(a) => Action::Start {
                            id,
                            candidate: a.candidate.clone(),
                        },
                        None => continue,
                    }
                }
                Pending::Cancel(id) => Action::Cancel { id },
                Pending::Won(id) => Action::Won { id },
                Pending::Failed => match self.failure.take() {
                    Some(err) => Action::Failed(err),
                    None => continue,
                },
            };
            return Some(action);
        }
        None
    }

    /// What happened so far (final once [`is_finished`](Self::is_finished); after a
    /// failure the report has moved into the [`RaceError`] of [`Action::Failed`] and
    /// this one is empty, as after [`take_report`](Self::take_report)).
    pub fn report(&self) -> &RaceReport {
        &self.report
    }

    /// The report, by value, for a finished race (no copy). Cost: a move, and an in-place
    /// shrink of a list with much spare capacity.
    pub fn into_report(mut self) -> RaceReport {
        self.take_report()
    }

    /// The report, by value, taken out of a finished race, which keeps an empty one (as
    /// after a failure): what a caller that holds the race in place (not by value) hands
    /// on. Cost: as [`into_report`](Self::into_report).
    pub fn take_report(&mut self) -> RaceReport {
        let started = self.report.started;
        let mut report = std::mem::replace(&mut self.report, RaceReport::placeholder(started));
        // The report lives as long as the connection: give back spare capacity when it
        // is worth a (copy-free, in-place) shrink.
        fn trim<T>(v: &mut Vec<T>) {
            if v.capacity() > 2 * v.len() + 2 {
                v.shrink_to_fit();
            }
        }
        trim(&mut report.attempts);
        trim(&mut report.timeline);
        trim(&mut report.dns);
        report
    }

    /// Whether the race has decided (won or failed). The deciding actions may still be
    /// waiting in [`poll_action`](Self::poll_action).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Attempts started and not yet ended or cancelled.
    pub fn alive(&self) -> usize {
        self.alive
    }

    /// Candidates waiting to be started.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    fn new_id(&mut self) -> AttemptId {
        let id = AttemptId(self.next_id);
        self.next_id += 1;
        id
    }

    fn is_alive(&self, id: AttemptId) -> bool {
        self.report
            .attempt(id)
            .is_some_and(|a| a.outcome == AttemptOutcome::Pending)
    }

    fn lookup(&mut self, family: Family) -> &mut Lookup {
        match family {
            Family::V6 => &mut self.v6,
            Family::V4 => &mut self.v4,
        }
    }

    fn set_lookup(&mut self, family: Family, now: Instant) {
        let awaited = self.awaited;
        if family != awaited
            && *self.lookup(family) == Lookup::Pending
            && *self.lookup(awaited) == Lookup::Pending
        {
            self.other_answered_at = Some(now);
        }
        *self.lookup(family) = Lookup::Done;
    }

    fn dns_done(&self) -> bool {
        self.dns_complete || (self.v4 == Lookup::Done && self.v6 == Lookup::Done)
    }

    /// Marks an alive attempt ended with `outcome` at `now`; `now`'s offset in the report.
    fn end(&mut self, id: AttemptId, outcome: AttemptOutcome, now: Instant) -> Duration {
        let offset = self.report.offset(now);
        let pending = |a: &&mut AttemptReport| a.outcome == AttemptOutcome::Pending;
        if let Some(a) = self.report.attempt_mut(id).filter(pending) {
            a.outcome = outcome;
            a.end = Some(offset);
            a.ended_at = Some(now);
            self.alive -= 1;
        }
        if self.leader.is_some_and(|c| c.id == id) {
            self.leader = None;
        }
        offset
    }

    /// Applies every rule at `now`: timeout, gate, starts, exhaustion.
    fn drive(&mut self, now: Instant) {
        if self.finished {
            return;
        }
        if now >= self.deadline {
            self.time_out(now);
            return;
        }
        self.update_gate(now);
        self.lapse_commitment(now);
        while self.gate_open
            && self.leader.is_none()
            && !self.queue.is_empty()
            && self.alive < self.config.max_alive
        {
            let immediate = self.owed > 0 || self.alive == 0;
            let staggered = self.next_start.is_none_or(|t| t <= now);
            if !immediate && !staggered {
                break;
            }
            self.owed = self.owed.saturating_sub(1);
            self.start_next(now);
        }
        if self.queue.is_empty() {
            self.owed = 0;
            if self.alive == 0 && self.dns_done() {
                let kind = if self
                    .report
                    .attempts
                    .iter()
                    .any(|a| !matches!(a.outcome, AttemptOutcome::Skipped(_)))
                {
                    FailureKind::Exhausted
                } else {
                    FailureKind::NoCandidates
                };
                self.fail(kind, now);
            }
        }
    }

    fn start_next(&mut self, now: Instant) {
        let candidate = self.queue.remove(0);
        let id = self.new_id();
        let delay = self.config.delay_after(&candidate);
        self.next_start = Some(now + delay);
        let next = (delay != self.config.attempt_delay).then_some(delay);
        self.log(now, RaceEvent::Started { id, next });
        self.report.attempts.push(AttemptReport {
            id,
            start: self.report.offset(now),
            end: None,
            started_at: now,
            ended_at: None,
            candidate,
            outcome: AttemptOutcome::Pending,
            transport_up: None,
        });
        self.alive += 1;
        self.outbox.push(Pending::Start(id));
    }

    /// The attempts still alive, in start order.
    fn pending(&self) -> Vec<AttemptId> {
        self.report
            .attempts
            .iter()
            .filter(|a| a.outcome == AttemptOutcome::Pending)
            .map(|a| a.id)
            .collect()
    }

    fn time_out(&mut self, now: Instant) {
        for id in self.pending() {
            let (ran, transport_up) = self
                .report
                .attempt(id)
                .map(|a| (now.saturating_duration_since(a.started_at), a.transport_up))
                .unwrap_or_default();
            let cause = match transport_up {
                // What the attempt passed: its transport came up, its handshake did not
                // finish.
                Some(transport_up) => AttemptCause::SecurityTimedOut {
                    transport_up,
                    after: ran,
                },
                None => AttemptCause::TimedOut { after: Some(ran) },
            };
            self.end(id, AttemptOutcome::Failed(cause), now);
            self.log(now, RaceEvent::TimedOut(id));
            self.outbox.push(Pending::Cancel(id));
        }
        self.fail(
            FailureKind::TimedOut {
                after: self.config.timeout,
            },
            now,
        );
    }

    fn fail(&mut self, kind: FailureKind, now: Instant) {
        self.finished = true;
        self.report.total = Some(self.report.offset(now));
        let not_started = std::mem::take(&mut self.queue);
        self.log(
            now,
            RaceEvent::RaceFailed {
                kind,
                not_started: not_started.len(),
            },
        );
        // The report moves into the error: a failed race is over, nothing reads it here.
        let started = self.report.started;
        let report = std::mem::replace(&mut self.report, RaceReport::placeholder(started));
        self.failure = Some(RaceError::new(kind, report, not_started));
        self.outbox.push(Pending::Failed);
    }
}
