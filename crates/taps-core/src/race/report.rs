//! What a race did: per-attempt outcomes, DNS events, a timeline for `--trace`, and the
//! error returned when no attempt won.

use std::fmt;
use std::time::{Duration, Instant};

use super::AttemptId;
use crate::candidates::Candidate;
use crate::failure::{AttemptCause, DnsFailure, Ms, Unavailable};
use crate::net::Family;
use crate::policy::AttemptRecord;
use crate::service::ServiceInfo;
use crate::stack::Security;

/// How one attempt (or skipped candidate) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// It connected first and was chosen.
    Won,
    /// It failed with this cause ([`AttemptCause::TimedOut`] with the time it ran when
    /// the race's establishment timeout cut it off).
    Failed(AttemptCause),
    /// Another attempt won, so it was cancelled.
    Cancelled,
    /// Never started: this build cannot run its stack, for this reason.
    Skipped(Unavailable),
    /// Started and not ended yet.
    Pending,
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttemptOutcome::Won => f.write_str("won"),
            AttemptOutcome::Failed(cause) => write!(f, "failed: {cause}"),
            AttemptOutcome::Cancelled => f.write_str("cancelled"),
            AttemptOutcome::Skipped(why) => write!(f, "skipped: {why}"),
            AttemptOutcome::Pending => f.write_str("pending"),
        }
    }
}

/// One attempt of a race, or one candidate the race skipped.
#[derive(Debug, Clone)]
pub struct AttemptReport {
    /// Its id (the one in [`Action::Start`](super::Action::Start); skipped candidates
    /// get one too, so every entry is unique).
    pub id: AttemptId,
    /// What was attempted.
    pub candidate: Candidate,
    /// When it started (for skipped candidates: when they were skipped), since the race began.
    pub start: Duration,
    /// When it ended, since the race began; `None` while pending.
    pub end: Option<Duration>,
    /// The same start as an `Instant`.
    pub started_at: Instant,
    /// The same end as an `Instant`.
    pub ended_at: Option<Instant>,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// How long after its start its transport came up, for a secure stack whose
    /// handshake runs after it (TCP connected under TLS; DTLS: the server's first
    /// answer); `None` before (and for other stacks).
    pub transport_up: Option<Duration>,
}

impl AttemptReport {
    /// How long it ran (end - start), if it ended.
    pub fn duration(&self) -> Option<Duration> {
        self.end.map(|e| e.saturating_sub(self.start))
    }
}

/// One DNS answer (or lookup failure) as the race saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsEvent {
    /// The family looked up (AAAA for IPv6, A for IPv4).
    pub family: Family,
    /// When the race was told, since it began.
    pub at: Duration,
    /// Number of distinct addresses answered (0: no record of this family), or why the
    /// lookup failed.
    pub result: Result<usize, DnsFailure>,
    /// Where the addresses came from: the lookup, the HTTPS records' hints, or earlier
    /// answers gathered again on the records' port.
    pub source: DnsSource,
}

/// Where a [`DnsEvent`]'s addresses came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DnsSource {
    /// The A or AAAA lookup's answer (or failure).
    Answer,
    /// The HTTPS records' `ipv4hint`/`ipv6hint`, standing in for this family's answer
    /// until it comes (HEv3).
    Hint,
    /// Addresses answered before the HTTPS records, gathered again on the port the
    /// records name.
    ServicePort,
}

impl fmt::Display for DnsEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rr = record_type(self.family);
        let (what, rr) = match self.source {
            DnsSource::Answer => ("", rr),
            DnsSource::Hint => ("HTTPS ", hint_name(self.family)),
            DnsSource::ServicePort => ("on the HTTPS port: ", rr),
        };
        if self.source != DnsSource::Answer {
            return match &self.result {
                Ok(1) => write!(f, "{what}{rr}: 1 address"),
                Ok(n) => write!(f, "{what}{rr}: {n} addresses"),
                Err(e) => write!(f, "{what}{rr} failed: {e}"),
            };
        }
        match &self.result {
            Ok(0) => write!(f, "no {rr} record"),
            Ok(1) => write!(f, "{rr} answered: 1 address"),
            Ok(n) => write!(f, "{rr} answered: {n} addresses"),
            Err(e) => write!(f, "{rr} lookup failed: {e}"),
        }
    }
}

/// The SvcParam that hints addresses of `family`.
fn hint_name(family: Family) -> &'static str {
    match family {
        Family::V4 => "ipv4hint",
        Family::V6 => "ipv6hint",
    }
}

/// Everything a race did, in a form for traces, JSON output and the CIB. Built as the
/// race runs; [`Race::report`](super::Race::report) borrows it at any time.
#[derive(Debug, Clone)]
pub struct RaceReport {
    /// When the race began (`Race::new`'s `now`); every offset is relative to it.
    pub started: Instant,
    /// Every started attempt and every skipped candidate, in id order. Candidates still
    /// queued when the race ended are not listed (see [`RaceError::not_started`]).
    pub attempts: Vec<AttemptReport>,
    /// DNS answers and failures, in arrival order.
    pub dns: Vec<DnsEvent>,
    /// The HTTPS/SVCB answer, when one was looked up and came in.
    pub service: Option<Result<ServiceInfo, DnsFailure>>,
    /// The winning attempt.
    pub winner: Option<AttemptId>,
    /// Time from the start to the win or the failure; `None` while running.
    pub total: Option<Duration>,
    /// What happened, with offsets since the start, in order. Plain data while the race
    /// runs (no formatting on the connect path); [`RaceReport::describe`] and
    /// [`RaceReport::trace`] turn it into text for `--trace`. Empty when the race kept
    /// no timeline ([`RaceConfig::timeline`](super::RaceConfig::timeline) off).
    pub timeline: Vec<(Duration, RaceEvent)>,
}

/// One timeline entry of a race. Attempt ids index [`RaceReport::attempts`], where the
/// candidate, its outcome and its times are; [`RaceReport::describe`] renders an event
/// with them.
#[derive(Debug, Clone, PartialEq)]
pub enum RaceEvent {
    /// The CIB says this family connected fastest before: its lookup is awaited first.
    ExpectFamily(Family),
    /// DNS event `index` of [`RaceReport::dns`] arrived and gave `candidates` candidates;
    /// `waiting_for`: the family the race now waits for, and for how long at most
    /// (Resolution Delay).
    Dns {
        /// Index into [`RaceReport::dns`].
        index: usize,
        /// Candidates made of the answer.
        candidates: usize,
        /// The family still awaited and the Resolution Delay, if the race waits.
        waiting_for: Option<(Family, Duration)>,
    },
    /// No more DNS answers will come.
    DnsComplete,
    /// The first address answer took `rtt` since the race began: taken as the network's
    /// round-trip time, it sets the stagger after first contacts to `delay`.
    PathRttFromDns {
        /// The lookup's round trip.
        rtt: Duration,
        /// The stagger it gives (see `RaceConfig::path_rtt`).
        delay: Duration,
    },
    /// The awaited family did not answer within the Resolution Delay: starting without it.
    ResolutionDelayOver {
        /// The family that did not answer.
        family: Family,
        /// The Resolution Delay.
        after: Duration,
    },
    /// The HTTPS/SVCB answer came in (see [`RaceReport::service`]): `records` ServiceMode
    /// records; `quic_dropped` queued QUIC candidates dropped because none serves h3.
    Service {
        /// Records in the answer (0 for none or a failed lookup).
        records: usize,
        /// Queued QUIC candidates dropped.
        quic_dropped: usize,
    },
    /// The HTTPS/SVCB answer did not come within the Resolution Delay: starting without.
    ServiceDelayOver {
        /// The Resolution Delay.
        after: Duration,
    },
    /// A candidate was skipped (its attempt entry says why).
    Skipped(AttemptId),
    /// An attempt started; `next`: the delay before the next start when the CIB changed
    /// it from the configured attempt delay.
    Started {
        /// The attempt.
        id: AttemptId,
        /// The delay before the next start, if not the configured one.
        next: Option<Duration>,
    },
    /// The attempt's peer answered (SCTP INIT-ACK): the race commits to it.
    Reachable(AttemptId),
    /// The attempt the race committed to had not connected `after` its peer answered:
    /// the other candidates start again (it stays in the race).
    CommitmentLapsed {
        /// The attempt.
        id: AttemptId,
        /// How long the commitment held.
        after: Duration,
    },
    /// The attempt's transport is up and its security handshake runs; `extended`: the
    /// next start was pushed back to leave the handshake this long.
    TransportUp {
        /// The attempt.
        id: AttemptId,
        /// The handshake allowance, if the next start was pushed back for it.
        extended: Option<Duration>,
    },
    /// The attempt connected first and won.
    Connected(AttemptId),
    /// The attempt failed (its entry has the cause).
    Failed(AttemptId),
    /// The attempt was cut off by the establishment timeout.
    TimedOut(AttemptId),
    /// The attempt was cancelled.
    Cancelled(AttemptId),
    /// The race failed: why, and how many candidates were still queued (the attempts,
    /// their causes and the DNS events are in the report).
    RaceFailed {
        /// Why the race ended.
        kind: FailureKind,
        /// Candidates never attempted.
        not_started: usize,
    },
}

/// A [`RaceEvent`] in words, rendered against the report it belongs to (see
/// [`RaceReport::describe`]).
pub struct EventText<'a> {
    report: &'a RaceReport,
    event: &'a RaceEvent,
}

impl fmt::Display for EventText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.report;
        let attempt = |id: &AttemptId| r.attempt(*id);
        match self.event {
            RaceEvent::ExpectFamily(family) => write!(
                f,
                "CIB: {family} connected fastest before; waiting for {} first",
                record_type(*family)
            ),
            RaceEvent::Dns {
                index,
                candidates,
                waiting_for,
            } => write_dns(f, r, *index, *candidates, *waiting_for),
            RaceEvent::DnsComplete => f.write_str("DNS complete"),
            RaceEvent::PathRttFromDns { rtt, delay } => write!(
                f,
                "the lookup took {}: first contacts staggered by {} (2 x RTT + 10 ms, 100 ms at least)",
                Ms(*rtt),
                Ms(*delay)
            ),
            RaceEvent::Service {
                records,
                quic_dropped,
            } => write_service(f, r, *records, *quic_dropped),
            RaceEvent::ServiceDelayOver { after } => {
                write!(
                    f,
                    "no HTTPS answer after {}: starting without it",
                    Ms(*after)
                )
            }
            RaceEvent::ResolutionDelayOver { family, after } => write!(
                f,
                "no {} after {}: starting without it",
                record_type(*family),
                Ms(*after)
            ),
            RaceEvent::Skipped(id) => match attempt(id) {
                Some(a) => match &a.outcome {
                    AttemptOutcome::Skipped(why) => {
                        write!(f, "{id} skipped {}: {why}", a.candidate)
                    }
                    _ => write!(f, "{id} skipped {}", a.candidate),
                },
                None => write!(f, "{id} skipped"),
            },
            RaceEvent::Started { id, next } => {
                write!(f, "start {id}")?;
                if let Some(a) = attempt(id) {
                    write!(f, " {}", a.candidate)?;
                    if let Some(delay) = next {
                        write!(f, " (next in {}: {})", Ms(*delay), a.candidate.history)?;
                    }
                }
                Ok(())
            }
            RaceEvent::Reachable(id) => {
                write!(f, "{id} reachable (peer answered): committing to it")
            }
            RaceEvent::CommitmentLapsed { id, after } => write!(
                f,
                "{id} not connected {} after its peer answered: the others start again",
                Ms(*after)
            ),
            RaceEvent::TransportUp { id, extended } => {
                write!(f, "{id} transport up, security handshake running")?;
                if let Some(d) = extended {
                    write!(f, " (next start held {} for it)", Ms(*d))?;
                }
                Ok(())
            }
            RaceEvent::Connected(id) => {
                let took = attempt(id).and_then(|a| a.duration()).unwrap_or_default();
                write!(f, "{id} connected in {}: won", Ms(took))
            }
            RaceEvent::Failed(id) => write_ended(f, r, *id, false),
            RaceEvent::TimedOut(id) => write_ended(f, r, *id, true),
            RaceEvent::Cancelled(id) => write!(f, "cancel {id}"),
            RaceEvent::RaceFailed { kind, not_started } => {
                f.write_str("race failed: ")?;
                write_failure(f, *kind, r, *not_started)
            }
        }
    }
}

/// A DNS event of the timeline: the answer, the candidates made of it if more than its
/// addresses, and what the race still waits for.
fn write_dns(
    f: &mut fmt::Formatter<'_>,
    r: &RaceReport,
    index: usize,
    candidates: usize,
    waiting_for: Option<(Family, Duration)>,
) -> fmt::Result {
    let Some(event) = r.dns.get(index) else {
        return f.write_str("DNS event");
    };
    write!(f, "{event}")?;
    if let Ok(addresses) = event.result {
        if candidates > addresses {
            write!(f, " ({candidates} candidates)")?;
        }
    }
    if let Some((family, delay)) = waiting_for {
        write!(
            f,
            "; waiting up to {} for {}",
            Ms(delay),
            record_type(family)
        )?;
    }
    Ok(())
}

impl RaceReport {
    /// An empty report of a race starting at `started`; room for a timeline only if
    /// one is `kept`.
    pub(crate) fn new(started: Instant, kept: bool) -> RaceReport {
        let mut report = RaceReport::placeholder(started);
        // One answer per family at most, for most races.
        report.dns.reserve_exact(2);
        if kept {
            // A one-candidate race logs about five events.
            report.timeline.reserve_exact(6);
        }
        report
    }

    /// An empty report with nothing allocated: what stands in a finished race's place
    /// once its report has moved out.
    pub(crate) fn placeholder(started: Instant) -> RaceReport {
        RaceReport {
            started,
            attempts: Vec::new(),
            dns: Vec::new(),
            service: None,
            winner: None,
            total: None,
            timeline: Vec::new(),
        }
    }

    /// Offset of `now` from the start of the race.
    pub(crate) fn offset(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.started)
    }

    /// Adds a timeline event at `now`. Cost: a push of a small value.
    pub(crate) fn log(&mut self, now: Instant, event: RaceEvent) {
        let at = self.offset(now);
        self.timeline.push((at, event));
    }

    /// `event` (one of this report's) in words, e.g. `"start #1 TCP [::1]:7400"`.
    /// Formats only when displayed.
    pub fn describe<'a>(&'a self, event: &'a RaceEvent) -> EventText<'a> {
        EventText {
            report: self,
            event,
        }
    }

    /// The timeline in words: offsets since the start and event texts, in order.
    pub fn timeline_text(&self) -> impl Iterator<Item = (Duration, EventText<'_>)> + '_ {
        self.timeline
            .iter()
            .map(move |(at, event)| (*at, self.describe(event)))
    }

    /// The attempt with `id`, if any. O(1): ids index the list.
    pub fn attempt(&self, id: AttemptId) -> Option<&AttemptReport> {
        let a = self.attempts.get((id.0 as usize).checked_sub(1)?)?;
        (a.id == id).then_some(a)
    }

    pub(crate) fn attempt_mut(&mut self, id: AttemptId) -> Option<&mut AttemptReport> {
        let a = self.attempts.get_mut((id.0 as usize).checked_sub(1)?)?;
        (a.id == id).then_some(a)
    }

    /// The winning attempt's entry, if one won.
    pub fn won(&self) -> Option<&AttemptReport> {
        self.winner.and_then(|id| self.attempt(id))
    }

    /// The timeline as text, one event a line, offsets in milliseconds
    /// (`"     0.1 ms  start #1 TCP [::1]:7400"`). Allocates the whole text. Empty when
    /// the race kept no timeline ([`RaceConfig::timeline`](super::RaceConfig::timeline)
    /// off; in taps, unless the preconnection asked for one).
    pub fn trace(&self) -> String {
        use fmt::Write as _;
        let mut out = String::new();
        for (at, text) in self.timeline_text() {
            let _ = writeln!(out, "{:>8.1} ms  {text}", at.as_secs_f64() * 1e3);
        }
        out
    }

    /// What this race learned, for the CIB ([`Cib::learn`](crate::policy::Cib::learn)):
    /// each attempt that won is a success with connect time end - start, each that
    /// failed its cause, both stamped with the attempt's end. An attempt cancelled because
    /// one started after it connected first counts as failed
    /// ([`AttemptCause::Overtaken`]): its head start was not enough, so the next race
    /// should not lead with it. Other cancelled, skipped and pending attempts say nothing
    /// about their path and yield nothing. Cost: no allocation; the causes are cloned
    /// (at most an `Arc`).
    pub fn learned(&self) -> impl Iterator<Item = AttemptRecord> + '_ {
        let winner_started = self
            .winner
            .and_then(|w| self.attempt(w))
            .map(|w| w.started_at);
        self.attempts.iter().filter_map(move |a| {
            let ended_at = a.ended_at?;
            let ran = ended_at.saturating_duration_since(a.started_at);
            let result = match &a.outcome {
                AttemptOutcome::Won => Ok(ran),
                AttemptOutcome::Failed(cause) => Err(cause.clone()),
                // Started before the winner and still silent when it connected.
                AttemptOutcome::Cancelled if winner_started.is_some_and(|w| a.started_at < w) => {
                    Err(AttemptCause::Overtaken { silent: ran })
                }
                AttemptOutcome::Cancelled
                | AttemptOutcome::Skipped(_)
                | AttemptOutcome::Pending => return None,
            };
            Some(AttemptRecord {
                stack: a.candidate.stack,
                remote: a.candidate.remote,
                interface: a.candidate.local.as_ref().map(|l| l.interface.clone()),
                at: ended_at,
                result,
            })
        })
    }
}

/// Why a race ended without a winner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureKind {
    /// DNS gave nothing to race (or every candidate was skipped).
    NoCandidates,
    /// Every candidate was attempted and failed.
    Exhausted,
    /// The establishment timeout expired first.
    TimedOut {
        /// The timeout.
        after: Duration,
    },
}

/// One candidate that did not connect, and why (a view into the race's report).
#[derive(Debug, Clone)]
pub struct AttemptFailure<'a> {
    /// Its attempt id.
    pub id: AttemptId,
    /// The candidate.
    pub candidate: &'a Candidate,
    /// The cause; [`AttemptCause::Unavailable`] for a candidate this build cannot run.
    pub cause: AttemptCause,
}

/// A race that ended without a winner, with every cause. Display lists each attempt as
/// `<candidate>: <cause>` and the DNS failures, so one message explains the whole race.
/// Holds the race's report (moved, not copied, when the race failed).
#[derive(Debug, Clone)]
pub struct RaceError {
    kind: FailureKind,
    not_started: Vec<Candidate>,
    report: Box<RaceReport>,
}

impl RaceError {
    pub(crate) fn new(kind: FailureKind, report: RaceReport, not_started: Vec<Candidate>) -> Self {
        RaceError {
            kind,
            not_started,
            report: Box::new(report),
        }
    }

    /// Why the race ended.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// Every failed attempt and skipped candidate, in id order, with its typed cause.
    /// Cost: a scan of the report; causes are cloned (at most an `Arc`).
    pub fn attempts(&self) -> impl Iterator<Item = AttemptFailure<'_>> + '_ {
        self.report.attempts.iter().filter_map(|a| {
            let cause = match &a.outcome {
                AttemptOutcome::Failed(c) => c.clone(),
                AttemptOutcome::Skipped(why) => AttemptCause::Unavailable(*why),
                _ => return None,
            };
            Some(AttemptFailure {
                id: a.id,
                candidate: &a.candidate,
                cause,
            })
        })
    }

    /// Candidates still queued when the race ended (never attempted).
    pub fn not_started(&self) -> &[Candidate] {
        &self.not_started
    }

    /// Every DNS event (answers with their counts, and failures).
    pub fn dns(&self) -> &[DnsEvent] {
        &self.report.dns
    }

    /// The full report of the failed race.
    pub fn report(&self) -> &RaceReport {
        &self.report
    }
}

impl fmt::Display for RaceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_failure(f, self.kind, &self.report, self.not_started.len())
    }
}

impl std::error::Error for RaceError {}

/// The text of a failed race: the kind, then each failed attempt or skipped candidate
/// with its cause, the candidates not attempted, and the DNS failures.
fn write_failure(
    f: &mut fmt::Formatter<'_>,
    kind: FailureKind,
    report: &RaceReport,
    not_started: usize,
) -> fmt::Result {
    match kind {
        FailureKind::NoCandidates => f.write_str("no candidate to race")?,
        FailureKind::Exhausted => {
            let tried = report
                .attempts
                .iter()
                .filter(|a| matches!(a.outcome, AttemptOutcome::Failed(_)))
                .count();
            match tried {
                1 => f.write_str("the only attempt failed")?,
                n => write!(f, "all {n} attempts failed")?,
            }
        }
        FailureKind::TimedOut { after } => write!(f, "timed out after {}", Ms(after))?,
    }
    // Candidates no host could run with this build are no attempts: listed only when
    // nothing was tried (they are then the whole story).
    let tried = kind != FailureKind::NoCandidates;
    let mut sep = ": ";
    for a in &report.attempts {
        match &a.outcome {
            AttemptOutcome::Failed(cause) => {
                write!(f, "{sep}{}: ", a.candidate)?;
                write_cause(f, &a.candidate, cause)?;
            }
            AttemptOutcome::Skipped(why) if !(tried && why.is_build_limit()) => {
                write!(f, "{sep}{}: skipped: {why}", a.candidate)?;
            }
            _ => continue,
        }
        sep = "; ";
    }
    if not_started > 0 {
        let s = if not_started == 1 { "" } else { "s" };
        write!(f, "{sep}{not_started} more candidate{s} not attempted")?;
        sep = "; ";
    }
    for d in &report.dns {
        // Empty answers only matter when nothing could be raced.
        let show = d.result.is_err() || (kind == FailureKind::NoCandidates && d.result == Ok(0));
        if show {
            write!(f, "{sep}{d}")?;
            sep = "; ";
        }
    }
    Ok(())
}

/// An attempt's cause in words; a security handshake cut off after its transport came
/// up names both layers and the address, which the cause alone does not know.
fn write_cause(f: &mut fmt::Formatter<'_>, c: &Candidate, cause: &AttemptCause) -> fmt::Result {
    let AttemptCause::SecurityTimedOut {
        transport_up,
        after,
    } = cause
    else {
        return write!(f, "{cause}");
    };
    let (up, silent) = (Ms(*transport_up), Ms(after.saturating_sub(*transport_up)));
    match c.stack.security {
        Security::Tls => write!(
            f,
            "{} connected to {} in {up}, then the TLS handshake did not finish within {silent}",
            c.stack.protocol, c.remote
        ),
        Security::Dtls => write!(
            f,
            "{} at {} answered in {up}, then the DTLS handshake did not finish within {silent}",
            c.stack.protocol, c.remote
        ),
        _ => write!(f, "{cause}"),
    }
}

/// A failed or timed-out attempt in words, with its cause.
fn write_ended(
    f: &mut fmt::Formatter<'_>,
    r: &RaceReport,
    id: AttemptId,
    timed_out: bool,
) -> fmt::Result {
    let cause = r.attempt(id).and_then(|a| match &a.outcome {
        AttemptOutcome::Failed(c) => Some(c),
        _ => None,
    });
    match (timed_out, cause) {
        (true, Some(c)) => write!(f, "{id} {c}: cancel"),
        (true, None) => write!(f, "{id} timed out: cancel"),
        (false, Some(c)) => write!(f, "{id} failed: {c}"),
        (false, None) => write!(f, "{id} failed"),
    }
}

/// The HTTPS answer in words.
fn write_service(
    f: &mut fmt::Formatter<'_>,
    r: &RaceReport,
    records: usize,
    quic_dropped: usize,
) -> fmt::Result {
    match &r.service {
        Some(Err(e)) => write!(f, "HTTPS lookup failed: {e}")?,
        Some(Ok(info)) if records > 0 => {
            f.write_str("HTTPS answered: ")?;
            for (i, rec) in info.records.iter().enumerate() {
                write!(f, "{}{rec}", if i == 0 { "" } else { "; " })?;
            }
        }
        _ => f.write_str("no HTTPS record")?,
    }
    if quic_dropped > 0 {
        write!(f, " (no h3: {quic_dropped} QUIC candidates dropped)")?;
    }
    Ok(())
}

/// `AAAA` or `A`.
fn record_type(family: Family) -> &'static str {
    match family {
        Family::V6 => "AAAA",
        Family::V4 => "A",
    }
}
