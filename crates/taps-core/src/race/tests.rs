//! Deterministic tests on virtual time: a scripted network and DNS drive the race, and
//! the dual-stack study's scenarios are checked to the millisecond. The simulator
//! ([`Sim::run`]) checks the race's invariants on every script it plays, the hand-written
//! ones here and the generated ones of `proptests.rs`.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;

use std::time::Duration;

use super::commit::commit_grace;
use super::*;
use crate::candidates::LocalBinding;
use crate::policy::{Cib, History};
use crate::properties::Protocol;
use crate::{Stack, Unavailable};

const PORT: u16 = 80;

pub(super) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(super) fn addr(ip: &str) -> SocketAddr {
    SocketAddr::new(ip.parse().unwrap(), PORT)
}

pub(super) fn cand(ip: &str) -> Candidate {
    Candidate {
        stack: Stack::plain(Protocol::Tcp),
        remote: addr(ip),
        local: None,
        score: 0.0,
        history: History::Unknown,
        reasons: Vec::new().into(),
        unavailable: None,
    }
}

fn cands(ips: &[&str]) -> Vec<Candidate> {
    ips.iter().map(|ip| cand(ip)).collect()
}

/// How a remote address behaves when an attempt starts.
#[derive(Debug, Clone)]
pub(super) enum Path {
    /// Connects after this many ms.
    Connects(u64),
    /// Refuses after this many ms.
    Refused(u64),
    /// Never answers.
    Blackhole,
    /// Reports reachable after `.0` ms, then behaves as `.1` (times from the start).
    Reachable(u64, Box<Path>),
}

#[derive(Debug, Clone)]
pub(super) enum Input {
    Answer(Family, Vec<Candidate>),
    DnsFailed(Family, DnsFailure),
    DnsComplete,
    Reachable(AttemptId),
    Connected(AttemptId),
    Failed(AttemptId, AttemptCause),
}

impl Input {
    fn attempt(&self) -> Option<AttemptId> {
        match self {
            Input::Reachable(id) | Input::Connected(id) | Input::Failed(id, _) => Some(*id),
            _ => None,
        }
    }
}

/// A scripted network and resolver.
pub(super) struct Sim {
    pub(super) config: RaceConfig,
    pub(super) expect: Option<Family>,
    pub(super) net: HashMap<SocketAddr, Path>,
    /// Inputs at virtual times; inputs at the same time go in this order.
    pub(super) script: Vec<(Duration, Input)>,
}

/// What happened, in virtual milliseconds since the start.
#[derive(Debug)]
pub(super) struct Run {
    pub(super) base: Instant,
    pub(super) race: Race,
    pub(super) starts: Vec<(Duration, AttemptId, Candidate)>,
    pub(super) cancels: Vec<(Duration, AttemptId)>,
    pub(super) failures: Vec<(Duration, AttemptId)>,
    pub(super) won: Option<(Duration, AttemptId)>,
    pub(super) failed: Option<(Duration, RaceError)>,
    pub(super) max_alive_seen: usize,
}

impl Run {
    fn start_times(&self) -> Vec<u64> {
        self.starts
            .iter()
            .map(|(t, _, _)| t.as_millis() as u64)
            .collect()
    }

    fn started(&self) -> Vec<String> {
        self.starts
            .iter()
            .map(|(_, _, c)| c.remote.ip().to_string())
            .collect()
    }

    fn won_at(&self) -> (u64, String) {
        let (t, id) = self.won.expect("a winner");
        let c = &self.starts.iter().find(|(_, i, _)| *i == id).unwrap().2;
        (t.as_millis() as u64, c.remote.ip().to_string())
    }

    fn failed_at(&self) -> (u64, &RaceError) {
        let (t, e) = self.failed.as_ref().expect("a failure");
        (t.as_millis() as u64, e)
    }
}

pub(super) fn sim() -> Sim {
    Sim {
        // The scripted checks stagger by the configured delays; the DNS-time estimate
        // (which changes them mid-race) has tests of its own.
        config: RaceConfig {
            rtt_from_dns: false,
            ..RaceConfig::default()
        },
        expect: None,
        net: HashMap::new(),
        script: Vec::new(),
    }
}

/// What makes two candidates the same for the race (the duplicate check).
type Key = (Stack, SocketAddr, Option<LocalBinding>);

fn key(c: &Candidate) -> Key {
    (c.stack, c.remote, c.local.clone())
}

/// A DNS input as the gate model needs it.
#[derive(Debug, Clone, Copy)]
enum DnsIn {
    /// An answer; whether it held a candidate the race can start (first seen available).
    Answer(Family, bool),
    Failed(Family),
    Complete,
}

/// The input of one simulation step, as the checks of the actions it caused need it.
#[derive(Debug, Default)]
struct Step {
    /// Attempts alive just before the input.
    alive_before: usize,
    /// Candidates queued just before the input.
    queued_before: usize,
    /// The input was an attempt failure (the next start may be immediate).
    failure: bool,
    /// The input was this attempt's connection.
    connected: Option<AttemptId>,
    /// The input was a reachable report the race must commit to, and the other attempts
    /// alive then (which it must cancel).
    commit: Option<(AttemptId, Vec<AttemptId>)>,
}

/// The simulator's own account of the race, kept from the inputs it gave and the actions
/// it saw; the race is checked against it.
#[derive(Debug, Default)]
struct Watch {
    /// Every candidate key an answer gave, with whether its first occurrence could be
    /// started (not `unavailable`): the race keeps the first and ignores repeats.
    seen: HashMap<Key, bool>,
    /// Keys in the order first seen.
    seen_order: Vec<Key>,
    /// DNS inputs delivered, in order.
    dns: Vec<(Duration, DnsIn)>,
    /// Started and not yet ended, in start order.
    alive: Vec<AttemptId>,
    /// The attempt the race committed to (reachable) while it is alive and committed.
    leader: Option<AttemptId>,
    /// When that commitment lapses (`commit_grace` after the peer answered).
    leader_until: Option<Duration>,
    /// Attempts cancelled because the race committed to another one.
    commit_cancelled: HashSet<AttemptId>,
    /// The latest start: its time and candidate.
    last_start: Option<(Duration, Candidate)>,
    /// The largest attempt id seen.
    last_id: u32,
    /// Failures delivered, with their causes.
    failed: HashMap<AttemptId, AttemptCause>,
    /// Families that answered or failed.
    answered: HashSet<Family>,
    /// `on_dns_complete` was called.
    complete: bool,
    /// When each attempt ended (failure delivered, cancelled, won).
    ended: HashMap<AttemptId, Duration>,
}

impl Watch {
    /// Records an answer's candidates; returns whether one of them can be started.
    fn answer(&mut self, candidates: &[Candidate]) -> bool {
        for c in candidates {
            let k = key(c);
            if !self.seen.contains_key(&k) {
                self.seen.insert(k.clone(), c.unavailable.is_none());
                self.seen_order.push(k);
            }
        }
        candidates.iter().any(|c| self.seen[&key(c)])
    }

    /// No more DNS answers are expected.
    fn dns_done(&self) -> bool {
        self.complete || self.answered.len() == 2
    }

    fn end(&mut self, id: AttemptId, now: Duration) {
        let i = self.alive.iter().position(|a| *a == id);
        let i = i.unwrap_or_else(|| panic!("{id} ended but was not alive"));
        self.alive.remove(i);
        self.ended.insert(id, now);
        if self.leader == Some(id) {
            self.leader = None;
            self.leader_until = None;
        }
    }

    /// The commitment ends at its time if candidates wait (checked where the race
    /// would: when it starts one, or with candidates still queued).
    fn lapse(&mut self, now: Duration, waiting: bool) {
        if waiting && self.leader_until.is_some_and(|u| now >= u) {
            self.leader = None;
            self.leader_until = None;
        }
    }
}

/// When the race may make its first start, by the Resolution Delay rule: as soon as a
/// startable candidate is known and the awaited family answered (or failed), or DNS is
/// complete, or the Resolution Delay after the other family's first answer is over.
/// `None`: never, on these inputs.
fn gate_time(dns: &[(Duration, DnsIn)], awaited: Family, delay: Duration) -> Option<Duration> {
    let (mut startable, mut awaited_done, mut complete) = (false, false, false);
    let mut other_at: Option<Duration> = None;
    for &(t, e) in dns {
        // The Resolution Delay may run out before this input.
        if let Some(a) = other_at {
            if startable && !awaited_done && !complete && a + delay <= t {
                return Some(a + delay);
            }
        }
        let mut answered = |family: Family| {
            if family == awaited {
                awaited_done = true;
            } else if !awaited_done && other_at.is_none() {
                other_at = Some(t);
            }
        };
        match e {
            DnsIn::Answer(family, can) => {
                answered(family);
                startable |= can;
            }
            DnsIn::Failed(family) => answered(family),
            DnsIn::Complete => complete = true,
        }
        let over = other_at.is_some_and(|a| t >= a + delay);
        if startable && (awaited_done || complete || over) {
            return Some(t);
        }
    }
    other_at.filter(|_| startable).map(|a| a + delay)
}

impl Sim {
    /// The family the CIB says connected fastest (see `RaceConfig::awaited_family`).
    fn expect(mut self, family: Family) -> Sim {
        self.expect = Some(family);
        self
    }

    fn config(mut self, f: impl FnOnce(&mut RaceConfig)) -> Sim {
        f(&mut self.config);
        self
    }

    fn path(mut self, ip: &str, path: Path) -> Sim {
        self.net.insert(addr(ip), path);
        self
    }

    fn aaaa(mut self, at: u64, c: Vec<Candidate>) -> Sim {
        self.script.push((ms(at), Input::Answer(Family::V6, c)));
        self
    }

    fn a(mut self, at: u64, c: Vec<Candidate>) -> Sim {
        self.script.push((ms(at), Input::Answer(Family::V4, c)));
        self
    }

    fn dns_fail(mut self, at: u64, family: Family, cause: &str) -> Sim {
        self.script.push((
            ms(at),
            Input::DnsFailed(
                family,
                DnsFailure::Other(crate::LayerError::new(std::io::Error::other(cause))),
            ),
        ));
        self
    }

    fn complete(mut self, at: u64) -> Sim {
        self.script.push((ms(at), Input::DnsComplete));
        self
    }

    /// Runs until the race finishes; checks the invariants on the way and at the end
    /// (panics with the race's trace when one does not hold):
    ///
    /// - Time never goes back, the race always finishes, and nothing comes after its end.
    /// - Every start is of a candidate some answer gave, not `unavailable` (its first
    ///   occurrence decides); a candidate (stack, remote, local) starts again only after
    ///   a commit to another attempt cancelled it; ids grow.
    /// - Nothing starts while the race is committed to a reachable attempt; at most one
    ///   start per input; each start after the first waits `delay_after` the previous
    ///   one, unless an attempt just failed or nothing was alive.
    /// - The first start is exactly when the Resolution Delay rule allows it
    ///   ([`gate_time`]), or none if that is not before the deadline.
    /// - After each input the race's timer is in the future (it did everything due),
    ///   and it is the next staggered start (or the deadline) whenever a start could
    ///   follow; a failure with candidates queued starts one at once; a queued candidate
    ///   never waits while nothing is alive; with DNS done, nothing queued and nothing
    ///   alive, the race is over.
    /// - At most `max_alive` attempts alive; the race's count matches the simulator's.
    /// - Cancels only of alive attempts, and only when the race decides (then every
    ///   other alive attempt) or commits to a reachable one (then every other alive one).
    /// - Won iff an attempt connected (by the deadline); it is the attempt whose
    ///   connection was reported in that step. Nothing is left alive at the end.
    /// - On failure: `TimedOut` iff it ended at the deadline, `NoCandidates` iff nothing
    ///   started, else `Exhausted` (both only once DNS is done); `attempts()` lists every failed attempt with its
    ///   cause (timed-out ones with the time they ran) and every skipped candidate;
    ///   `not_started` is every startable candidate not attempted (or cancelled by a
    ///   commit and not restarted).
    /// - The report: total = the decision time, every started attempt's outcome, start
    ///   and end as the simulator saw them, every candidate first seen unavailable
    ///   skipped once, one DNS entry per answer or failure.
    pub(super) fn run(self) -> Run {
        let base = Instant::now();
        let mut config = self.config;
        if let Some(f) = self.expect {
            config.awaited_family = f;
        }
        let mut race = Race::new(config, base);
        let config = race.config().clone();
        let max = config.max_alive;
        let deadline = config.timeout;
        // (time, sequence, input): ties go in script order, then in scheduling order.
        let mut events: Vec<(Duration, usize, Input)> = self
            .script
            .into_iter()
            .enumerate()
            .map(|(i, (t, input))| (t, i, input))
            .collect();
        let mut seq = events.len();
        let mut run = Run {
            base,
            race: Race::new(RaceConfig::default(), base),
            starts: Vec::new(),
            cancels: Vec::new(),
            failures: Vec::new(),
            won: None,
            failed: None,
            max_alive_seen: 0,
        };
        let mut w = Watch::default();
        let mut step = Step::default();
        let mut now = Duration::ZERO;
        let mut finished = false;
        for _ in 0..100_000 {
            let mut started = 0;
            let mut cancelled = Vec::new();
            while let Some(action) = race.poll_action() {
                let trace = || race.report().trace();
                assert!(!finished, "{action:?} after the end");
                match action {
                    Action::Start { id, candidate } => {
                        assert!(id.0 > w.last_id, "{id} after #{}", w.last_id);
                        w.last_id = id.0;
                        assert!(candidate.unavailable.is_none(), "started {candidate}");
                        let k = key(&candidate);
                        assert_eq!(w.seen.get(&k), Some(&true), "started {candidate}");
                        if let Some((_, prev, _)) =
                            run.starts.iter().rev().find(|(_, _, c)| key(c) == k)
                        {
                            assert!(
                                w.commit_cancelled.contains(prev),
                                "{candidate} started again as {id} after {prev}: {}",
                                trace()
                            );
                        }
                        w.lapse(now, true);
                        assert!(w.leader.is_none(), "{id} started while committed");
                        started += 1;
                        assert_eq!(started, 1, "two starts at once: {}", trace());
                        if let Some((t, c)) = &w.last_start {
                            let stagger = now - *t >= config.delay_after(c);
                            let immediate = step.failure || step.alive_before == 0;
                            assert!(stagger || immediate, "{id} early: {}", trace());
                        }
                        w.alive.push(id);
                        w.last_start = Some((now, candidate.clone()));
                        let mut path = self.net.get(&candidate.remote).cloned();
                        let mut schedule = |after: u64, input: Input| {
                            events.push((now + ms(after), seq, input));
                            seq += 1;
                        };
                        while let Some(p) = path.take() {
                            match p {
                                Path::Connects(t) => schedule(t, Input::Connected(id)),
                                Path::Refused(t) => {
                                    schedule(t, Input::Failed(id, AttemptCause::Refused))
                                }
                                Path::Blackhole => {}
                                Path::Reachable(t, then) => {
                                    schedule(t, Input::Reachable(id));
                                    path = Some(*then);
                                }
                            }
                        }
                        run.starts.push((now, id, candidate));
                    }
                    Action::Cancel { id } => {
                        w.end(id, now);
                        // The caller drops the attempt: nothing more comes from it.
                        events.retain(|(_, _, e)| e.attempt() != Some(id));
                        run.cancels.push((now, id));
                        cancelled.push(id);
                    }
                    Action::Won { id } => {
                        assert_eq!(step.connected, Some(id), "won: {}", trace());
                        assert!(now <= deadline, "won after the deadline");
                        w.end(id, now);
                        run.won = Some((now, id));
                        finished = true;
                    }
                    Action::Failed(e) => {
                        run.failed = Some((now, e));
                        finished = true;
                    }
                }
            }
            if let Some(id) = step.connected {
                // The first connection (of an alive attempt) wins at once.
                let won = run.won.map(|(_, w)| w);
                assert_eq!(won, Some(id), "connected: {}", race.report().trace());
            }
            if let Some((leader, others)) = step.commit.take() {
                // The commit cancels every other alive attempt (a timeout in the same
                // step may cancel the leader too).
                let mut by_commit: Vec<AttemptId> =
                    cancelled.iter().copied().filter(|c| *c != leader).collect();
                by_commit.sort();
                assert_eq!(
                    by_commit,
                    others,
                    "commit to {leader}: {}",
                    race.report().trace()
                );
                w.commit_cancelled.extend(others);
                cancelled.retain(|c| *c == leader);
            }
            assert!(
                cancelled.is_empty() || finished,
                "cancelled {cancelled:?} without a decision: {}",
                race.report().trace()
            );
            if finished {
                assert!(w.alive.is_empty(), "{:?} left alive", w.alive);
            }
            assert!(race.alive() <= max, "{} alive", race.alive());
            assert_eq!(race.alive(), w.alive.len(), "{}", race.report().trace());
            run.max_alive_seen = run.max_alive_seen.max(race.alive());
            if race.is_finished() {
                assert!(finished, "finished without Won or Failed");
                break;
            }
            let timer = race.poll_timeout().map(|t| t - base);
            let timer = timer.expect("a running race has a timer");
            assert!(timer <= deadline, "timer {timer:?} after the deadline");
            // The race did everything due now.
            assert!(timer > now, "timer {timer:?} not after {now:?}");
            if step.failure && step.queued_before > 0 {
                // A failure starts the next candidate at once.
                assert_eq!(
                    started,
                    1,
                    "no start after a failure: {}",
                    race.report().trace()
                );
            }
            if w.dns_done() && race.queued() == 0 {
                assert!(race.alive() > 0, "nothing left: {}", race.report().trace());
            }
            w.lapse(now, race.queued() > 0);
            if let Some((t, c)) = &w.last_start {
                assert!(
                    race.queued() == 0 || race.alive() > 0,
                    "queued but nothing alive: {}",
                    race.report().trace()
                );
                let may_start = race.queued() > 0 && race.alive() < max;
                let expected = match (may_start, w.leader_until) {
                    (true, None) => (*t + config.delay_after(c)).min(deadline),
                    (true, Some(until)) => until.min(deadline),
                    (false, _) => deadline,
                };
                assert_eq!(timer, expected, "timer: {}", race.report().trace());
            }
            let next_event = events.iter().map(|(t, s, _)| (*t, *s)).min();
            let t = match next_event {
                Some((e, _)) => e.min(timer),
                None => timer,
            };
            assert!(t >= now, "time went back: {t:?} < {now:?}");
            now = t;
            let at = base + now;
            step = Step {
                alive_before: race.alive(),
                queued_before: race.queued(),
                ..Step::default()
            };
            match next_event {
                Some((e, s)) if e <= now => {
                    let i = events.iter().position(|(_, q, _)| *q == s).unwrap();
                    let (_, _, input) = events.remove(i);
                    match input {
                        Input::Answer(f, c) => {
                            w.answered.insert(f);
                            let startable = w.answer(&c);
                            w.dns.push((now, DnsIn::Answer(f, startable)));
                            race.on_candidates(f, c, at)
                        }
                        Input::DnsFailed(f, cause) => {
                            w.answered.insert(f);
                            w.dns.push((now, DnsIn::Failed(f)));
                            race.on_dns_failed(f, cause, at)
                        }
                        Input::DnsComplete => {
                            w.complete = true;
                            w.dns.push((now, DnsIn::Complete));
                            race.on_dns_complete(at)
                        }
                        Input::Reachable(id) => {
                            if w.leader.is_none() && w.alive.contains(&id) {
                                w.leader = Some(id);
                                let started = run.starts.iter().find(|(_, a, _)| *a == id);
                                let reached = now - started.map_or(now, |(t, _, _)| *t);
                                let grace = commit_grace(reached, config.attempt_delay);
                                w.leader_until = Some(now + grace);
                                let mut others: Vec<AttemptId> =
                                    w.alive.iter().copied().filter(|a| *a != id).collect();
                                others.sort();
                                step.commit = Some((id, others));
                            }
                            race.on_attempt_reachable(id, at)
                        }
                        Input::Connected(id) => {
                            step.connected = Some(id);
                            race.on_attempt_connected(id, at)
                        }
                        Input::Failed(id, cause) => {
                            run.failures.push((now, id));
                            w.end(id, now);
                            w.failed.insert(id, cause.clone());
                            step.failure = true;
                            race.on_attempt_failed(id, cause, at)
                        }
                    }
                }
                _ => race.handle_timeout(at),
            }
        }
        assert!(race.is_finished(), "race did not finish");
        assert!(race.poll_timeout().is_none());
        // Nothing is left alive: every started attempt won, failed or was cancelled.
        assert_eq!(race.alive(), 0);
        for (_, id, c) in &run.starts {
            assert!(w.ended.contains_key(id), "{id} {c} left alive");
        }
        let end = run.won.map(|w| w.0).or(run.failed.as_ref().map(|f| f.0));
        let end = end.expect("an end");
        check_end(&run, &race, &w, end, &config);
        run.race = race;
        run
    }
}

/// The invariants on a finished race (see [`Sim::run`]).
fn check_end(run: &Run, race: &Race, w: &Watch, end: Duration, config: &RaceConfig) {
    let deadline = config.timeout;
    let report = match &run.failed {
        Some((_, err)) => err.report(),
        None => race.report(),
    };
    let trace = report.trace();
    assert_eq!(report.total, Some(end), "total: {trace}");
    assert_eq!(report.winner, run.won.map(|(_, id)| id), "winner: {trace}");
    let answers = w.dns.iter();
    let answers = answers
        .filter(|(_, d)| !matches!(d, DnsIn::Complete))
        .count();
    assert_eq!(report.dns.len(), answers, "DNS entries: {trace}");
    // The first start is when the Resolution Delay rule allows it.
    let gate = gate_time(&w.dns, config.awaited_family, config.resolution_delay);
    match (gate, run.starts.first()) {
        (Some(g), Some((t, _, _))) => assert_eq!(*t, g, "first start: {trace}"),
        (Some(g), None) => assert!(g >= deadline && end == deadline, "no start: {trace}"),
        (None, Some(_)) => panic!("a start without a startable answer: {trace}"),
        (None, None) => {}
    }
    // Every attempt as the simulator saw it; ids index the list.
    let mut skipped = HashSet::new();
    for (i, a) in report.attempts.iter().enumerate() {
        assert_eq!(a.id, AttemptId(i as u32 + 1), "{trace}");
        if let AttemptOutcome::Skipped(why) = a.outcome {
            assert_eq!(Some(why), a.candidate.unavailable, "{trace}");
            assert_eq!(w.seen.get(&key(&a.candidate)), Some(&false), "{trace}");
            assert!(skipped.insert(key(&a.candidate)), "skipped twice: {trace}");
            continue;
        }
        let start = run.starts.iter().find(|(_, id, _)| *id == a.id);
        let (started, _, c) = start.unwrap_or_else(|| panic!("{} not started: {trace}", a.id));
        assert_eq!(key(c), key(&a.candidate), "{trace}");
        assert_eq!(a.start, *started, "{trace}");
        assert_eq!(a.end, w.ended.get(&a.id).copied(), "{trace}");
        let expected = if run.won.is_some_and(|(_, id)| id == a.id) {
            AttemptOutcome::Won
        } else if let Some(cause) = w.failed.get(&a.id) {
            AttemptOutcome::Failed(cause.clone())
        } else if w.commit_cancelled.contains(&a.id) || run.won.is_some() {
            AttemptOutcome::Cancelled
        } else {
            // Cut off by the establishment timeout.
            AttemptOutcome::Failed(AttemptCause::TimedOut {
                after: Some(end - *started),
            })
        };
        assert_eq!(a.outcome, expected, "outcome of {}: {trace}", a.id);
    }
    let unavailable = w.seen.values().filter(|ok| !**ok).count();
    assert_eq!(skipped.len(), unavailable, "skipped: {trace}");
    let Some((_, err)) = &run.failed else {
        assert!(end <= deadline);
        return;
    };
    let expected_kind = if end >= deadline {
        FailureKind::TimedOut {
            after: config.timeout,
        }
    } else if run.starts.is_empty() {
        FailureKind::NoCandidates
    } else {
        FailureKind::Exhausted
    };
    assert_eq!(err.kind(), expected_kind, "kind: {trace}");
    if end < deadline {
        // Given up before the deadline only when no more answers can come.
        assert!(w.dns_done(), "failed before DNS was done: {trace}");
    }
    assert_eq!(end.min(deadline), end, "ended after the deadline: {trace}");
    // The error lists every failed attempt and skipped candidate, in id order.
    let listed: Vec<(AttemptId, AttemptCause)> =
        err.attempts().map(|a| (a.id, a.cause.clone())).collect();
    let expected: Vec<(AttemptId, AttemptCause)> = report
        .attempts
        .iter()
        .filter_map(|a| match &a.outcome {
            AttemptOutcome::Failed(c) => Some((a.id, c.clone())),
            AttemptOutcome::Skipped(why) => Some((a.id, AttemptCause::Unavailable(*why))),
            _ => None,
        })
        .collect();
    assert_eq!(listed, expected, "error's attempts: {trace}");
    for a in err.attempts() {
        let entry = report
            .attempt(a.id)
            .expect("listed attempts are in the report");
        assert_eq!(key(a.candidate), key(&entry.candidate));
    }
    // Not started: every startable candidate never attempted, or cancelled by a commit
    // and not restarted (none unless the race timed out).
    let last_start = |k: &Key| run.starts.iter().rev().find(|(_, _, c)| key(c) == *k);
    let waiting: Vec<&Key> = w
        .seen_order
        .iter()
        .filter(|k| w.seen[*k])
        .filter(|k| last_start(k).is_none_or(|(_, id, _)| w.commit_cancelled.contains(id)))
        .collect();
    let mut not_started: Vec<Key> = err.not_started().iter().map(key).collect();
    let mut waiting: Vec<Key> = waiting.into_iter().cloned().collect();
    let order = |k: &Key| format!("{k:?}");
    not_started.sort_by_key(order);
    waiting.sort_by_key(order);
    assert_eq!(not_started, waiting, "not started: {trace}");
    if !matches!(expected_kind, FailureKind::TimedOut { .. }) {
        assert!(err.not_started().is_empty(), "not started: {trace}");
    }
}

// --- The dual-stack study's cases -------------------------------------------------------

#[test]
fn rd_both_up_ipv6_wins_at_its_rtt() {
    let run = sim()
        .path("2001:db8::69:72", Path::Connects(40))
        .path("192.0.2.81", Path::Connects(50))
        .aaaa(0, cands(&["2001:db8::69:72"]))
        .a(0, cands(&["192.0.2.81"]))
        .run();
    assert_eq!(run.won_at(), (40, "2001:db8::69:72".into()));
    assert_eq!(run.start_times(), [0]);
    assert!(run.cancels.is_empty());
    let r = run.race.report();
    assert_eq!(r.attempts.len(), 1);
    assert_eq!(r.winner, Some(AttemptId(1)));
    assert_eq!(r.total, Some(ms(40)));
}

#[test]
fn rd_a_delivered_first_in_the_same_instant_still_prefers_ipv6() {
    let run = sim()
        .path("2001:db8::69:72", Path::Connects(40))
        .path("192.0.2.81", Path::Connects(50))
        .a(0, cands(&["192.0.2.81"]))
        .aaaa(0, cands(&["2001:db8::69:72"]))
        .run();
    assert_eq!(run.won_at(), (40, "2001:db8::69:72".into()));
    assert_eq!(run.started(), ["2001:db8::69:72"]);
}

#[test]
fn rx_dead_ipv6_falls_back_after_one_attempt_delay_and_is_cancelled() {
    let run = sim()
        .path("2001:db8::69:dead", Path::Blackhole)
        .path("192.0.2.81", Path::Connects(50))
        .aaaa(0, cands(&["2001:db8::69:dead"]))
        .a(0, cands(&["192.0.2.81"]))
        .run();
    assert_eq!(run.start_times(), [0, 250]);
    assert_eq!(run.won_at(), (300, "192.0.2.81".into()));
    assert_eq!(run.cancels, [(ms(300), AttemptId(1))]);
    let r = run.race.report();
    assert_eq!(r.attempts[0].outcome, AttemptOutcome::Cancelled);
    assert_eq!(r.attempts[0].end, Some(ms(300)));
    assert_eq!(r.attempts[1].outcome, AttemptOutcome::Won);
    assert_eq!(r.attempts[1].duration(), Some(ms(50)));
}

#[test]
fn rxxx_three_dead_ipv6_ipv4_is_the_second_attempt() {
    let run = sim()
        .path("2001:db8::69:dead", Path::Blackhole)
        .path("2001:db8::69:deae", Path::Blackhole)
        .path("2001:db8::69:deaf", Path::Blackhole)
        .path("192.0.2.81", Path::Connects(50))
        .aaaa(
            0,
            cands(&[
                "2001:db8::69:dead",
                "2001:db8::69:deae",
                "2001:db8::69:deaf",
            ]),
        )
        .a(0, cands(&["192.0.2.81"]))
        .run();
    assert_eq!(run.started(), ["2001:db8::69:dead", "192.0.2.81"]);
    assert_eq!(run.won_at(), (250 + 50, "192.0.2.81".into()));
    assert_eq!(run.cancels, [(ms(300), AttemptId(1))]);
    // The other two never started, so they are not in the report.
    assert_eq!(run.race.report().attempts.len(), 2);
}

#[test]
fn rxz4_dead_ipv6_dead_ipv4_then_live_ipv4() {
    // Interleaving: [v6 dead, v4 dead, v4 live] (the resolver order is kept within a
    // family), so the live address is the third start, at 2 x 250 ms.
    let run = sim()
        .path("2001:db8::69:dead", Path::Blackhole)
        .path("192.0.2.1", Path::Blackhole)
        .path("192.0.2.81", Path::Connects(50))
        .aaaa(0, cands(&["2001:db8::69:dead"]))
        .a(0, cands(&["192.0.2.1", "192.0.2.81"]))
        .run();
    assert_eq!(
        run.started(),
        ["2001:db8::69:dead", "192.0.2.1", "192.0.2.81"]
    );
    assert_eq!(run.start_times(), [0, 250, 500]);
    assert_eq!(run.won_at(), (2 * 250 + 50, "192.0.2.81".into()));
    assert_eq!(
        run.cancels,
        [(ms(550), AttemptId(1)), (ms(550), AttemptId(2))]
    );
}

#[test]
fn everything_dead_fails_exactly_at_the_timeout_with_every_cause() {
    let run = sim()
        .config(|c| c.timeout = ms(2000))
        .path("2001:db8::1", Path::Blackhole)
        .path("2001:db8::2", Path::Blackhole)
        .path("192.0.2.1", Path::Blackhole)
        .path("192.0.2.2", Path::Blackhole)
        .aaaa(0, cands(&["2001:db8::1", "2001:db8::2"]))
        .a(0, cands(&["192.0.2.1", "192.0.2.2"]))
        .run();
    assert_eq!(run.start_times(), [0, 250, 500, 750]);
    let (at, err) = run.failed_at();
    assert_eq!(at, 2000);
    assert_eq!(err.kind(), FailureKind::TimedOut { after: ms(2000) });
    assert_eq!(run.cancels.len(), 4);
    let causes: Vec<(String, AttemptCause)> = err
        .attempts()
        .map(|a| (a.candidate.remote.to_string(), a.cause))
        .collect();
    let timed_out = |after| AttemptCause::TimedOut {
        after: Some(ms(after)),
    };
    assert_eq!(
        causes,
        [
            ("[2001:db8::1]:80".to_string(), timed_out(2000)),
            ("192.0.2.1:80".to_string(), timed_out(1750)),
            ("[2001:db8::2]:80".to_string(), timed_out(1500)),
            ("192.0.2.2:80".to_string(), timed_out(1250)),
        ]
    );
    assert_eq!(timed_out(1750).to_string(), "timed out after 1750 ms");
    let text = err.to_string();
    assert!(text.starts_with("timed out after 2000 ms: "), "{text}");
    for c in [
        "TCP [2001:db8::1]:80",
        "TCP 192.0.2.1:80",
        "TCP [2001:db8::2]:80",
        "TCP 192.0.2.2:80",
    ] {
        assert!(text.contains(c), "{text}");
    }
    // The error's report is the final one.
    assert_eq!(err.report().total, Some(ms(2000)));
    let report = err.report();
    let (_, last) = report.timeline_text().last().unwrap();
    assert!(last.to_string().starts_with("race failed"));
}

#[test]
fn default_timeout_is_thirty_seconds() {
    let run = sim()
        .path("2001:db8::1", Path::Blackhole)
        .aaaa(0, cands(&["2001:db8::1"]))
        .complete(0)
        .run();
    assert_eq!(run.failed_at().0, 30_000);
    assert_eq!(
        run.failed_at().1.to_string(),
        "timed out after 30000 ms: TCP [2001:db8::1]:80: timed out after 30000 ms"
    );
}

#[test]
fn all_refused_quickly_fails_without_any_attempt_delay() {
    let run = sim()
        .path("2001:db8::1", Path::Refused(1))
        .path("2001:db8::2", Path::Refused(1))
        .path("192.0.2.1", Path::Refused(1))
        .path("192.0.2.2", Path::Refused(1))
        .aaaa(0, cands(&["2001:db8::1", "2001:db8::2"]))
        .a(0, cands(&["192.0.2.1", "192.0.2.2"]))
        .run();
    assert_eq!(run.start_times(), [0, 1, 2, 3]);
    let (at, err) = run.failed_at();
    assert_eq!(at, 4);
    assert_eq!(err.kind(), FailureKind::Exhausted);
    assert_eq!(
        err.to_string(),
        "all 4 attempts failed: TCP [2001:db8::1]:80: connection refused; \
         TCP 192.0.2.1:80: connection refused; TCP [2001:db8::2]:80: connection refused; \
         TCP 192.0.2.2:80: connection refused"
    );
    assert!(run.cancels.is_empty());
}

#[test]
fn slow_aaaa_does_not_hold_ipv4_beyond_the_resolution_delay() {
    let run = sim()
        .path("2001:db8::1", Path::Connects(40))
        .path("192.0.2.1", Path::Connects(50))
        .a(10, cands(&["192.0.2.1"]))
        .aaaa(300, cands(&["2001:db8::1"]))
        .run();
    assert_eq!(run.start_times(), [60]);
    assert_eq!(run.won_at(), (110, "192.0.2.1".into()));
    let trace = run.race.report().trace();
    assert!(trace.contains("waiting up to 50 ms for AAAA"), "{trace}");
    assert!(trace.contains("no AAAA after 50 ms"), "{trace}");
}

#[test]
fn slow_aaaa_joins_a_race_whose_ipv4_hangs() {
    let run = sim()
        .path("2001:db8::1", Path::Connects(40))
        .path("192.0.2.1", Path::Blackhole)
        .a(10, cands(&["192.0.2.1"]))
        .aaaa(300, cands(&["2001:db8::1"]))
        .run();
    // IPv4 at 60; AAAA at 300 joins; the stagger timer (60 + 250) starts it at 310.
    assert_eq!(run.start_times(), [60, 310]);
    assert_eq!(run.won_at(), (350, "2001:db8::1".into()));
    assert_eq!(run.cancels, [(ms(350), AttemptId(1))]);
}

#[test]
fn aaaa_within_the_resolution_delay_goes_first() {
    let run = sim()
        .path("2001:db8::1", Path::Connects(40))
        .path("192.0.2.1", Path::Connects(10))
        .a(0, cands(&["192.0.2.1"]))
        .aaaa(20, cands(&["2001:db8::1"]))
        .run();
    assert_eq!(run.started(), ["2001:db8::1"]);
    assert_eq!(run.won_at(), (60, "2001:db8::1".into()));
}

#[test]
fn cib_knowing_ipv4_is_faster_makes_an_early_aaaa_wait_for_a() {
    // A second connection to an `rx` host: the CIB says IPv4 connected and IPv6 was
    // overtaken. AAAA answers first; the race waits for A (5 ms later), ranks the known
    // good IPv4 address first, and connects in one RTT.
    let mut dead = cand("2001:db8::1");
    dead.history = History::Failed {
        cause: AttemptCause::Overtaken { silent: ms(300) },
        age: ms(1000),
    };
    let mut good = cand("192.0.2.1");
    good.history = History::Succeeded {
        rtt: ms(50),
        age: ms(1000),
    };
    let run = sim()
        .expect(Family::V4)
        .path("2001:db8::1", Path::Blackhole)
        .path("192.0.2.1", Path::Connects(50))
        .aaaa(0, vec![dead.clone()])
        .a(5, vec![good.clone()])
        .run();
    assert_eq!(run.started(), ["192.0.2.1"]);
    assert_eq!(run.won_at(), (55, "192.0.2.1".into()));
    // If A never comes, AAAA waits only the Resolution Delay.
    let run = sim()
        .expect(Family::V4)
        .path("2001:db8::1", Path::Connects(20))
        .aaaa(0, vec![dead])
        .run();
    assert_eq!(run.start_times(), [50]);
    // Without the hint, AAAA starts at once (RFC 8305) and IPv4 waits its turn.
    let run = sim()
        .path("2001:db8::1", Path::Blackhole)
        .path("192.0.2.1", Path::Connects(50))
        .aaaa(0, cands(&["2001:db8::1"]))
        .a(5, vec![good])
        .run();
    assert_eq!(run.start_times(), [0, 250]);
}

#[test]
fn aaaa_failing_or_empty_within_the_resolution_delay_starts_ipv4_at_once() {
    for failing in [true, false] {
        let s = sim()
            .path("192.0.2.1", Path::Connects(10))
            .a(0, cands(&["192.0.2.1"]));
        let s = if failing {
            s.dns_fail(20, Family::V6, "SERVFAIL")
        } else {
            s.aaaa(20, vec![])
        };
        let run = s.run();
        assert_eq!(run.start_times(), [20], "failing={failing}");
        assert_eq!(run.won_at(), (30, "192.0.2.1".into()));
    }
}

#[test]
fn a_lookup_failure_does_not_stall_ipv6() {
    let run = sim()
        .path("2001:db8::1", Path::Connects(40))
        .dns_fail(5, Family::V4, "SERVFAIL")
        .aaaa(30, cands(&["2001:db8::1"]))
        .run();
    assert_eq!(run.start_times(), [30]);
    assert_eq!(run.won_at(), (70, "2001:db8::1".into()));
    // And with the A lookup hanging (never answering), IPv6 still wins at its RTT.
    let run = sim()
        .path("2001:db8::1", Path::Connects(40))
        .aaaa(0, cands(&["2001:db8::1"]))
        .run();
    assert_eq!(run.won_at(), (40, "2001:db8::1".into()));
}

#[test]
fn no_candidates_at_all_says_so_with_the_dns_causes() {
    let run = sim()
        .aaaa(0, vec![])
        .dns_fail(10, Family::V4, "SERVFAIL")
        .run();
    let (at, err) = run.failed_at();
    assert_eq!(at, 10);
    assert_eq!(err.kind(), FailureKind::NoCandidates);
    assert_eq!(
        err.to_string(),
        "no candidate to race: no AAAA record; A lookup failed: SERVFAIL"
    );
    assert!(run.starts.is_empty());
}

#[test]
fn a_new_dns_answer_joins_the_race() {
    // IPv6 hangs; the A answer comes at 100 ms and its candidate starts on the timer.
    let run = sim()
        .path("2001:db8::1", Path::Blackhole)
        .path("192.0.2.1", Path::Connects(50))
        .aaaa(0, cands(&["2001:db8::1"]))
        .a(100, cands(&["192.0.2.1"]))
        .run();
    assert_eq!(run.start_times(), [0, 250]);
    assert_eq!(run.won_at(), (300, "192.0.2.1".into()));

    // IPv6 refused before A answers: nothing alive, so A's candidate starts at once.
    let run = sim()
        .path("2001:db8::1", Path::Refused(10))
        .path("192.0.2.1", Path::Connects(50))
        .aaaa(0, cands(&["2001:db8::1"]))
        .a(100, cands(&["192.0.2.1"]))
        .run();
    assert_eq!(run.start_times(), [0, 100]);
    assert_eq!(run.won_at(), (150, "192.0.2.1".into()));
}

#[test]
fn joining_candidates_are_reranked_and_duplicates_ignored() {
    let base = Instant::now();
    let mut race = Race::new(RaceConfig::default(), base);
    race.on_candidates(Family::V6, cands(&["2001:db8::1", "2001:db8::2"]), base);
    race.on_candidates(Family::V4, cands(&["192.0.2.1", "192.0.2.2"]), base + ms(1));
    // A repeated answer adds nothing.
    race.on_candidates(Family::V4, cands(&["192.0.2.1"]), base + ms(2));
    assert_eq!(race.queued(), 3);
    let mut order = Vec::new();
    let mut t = base;
    while let Some(next) = race.poll_timeout() {
        while let Some(a) = race.poll_action() {
            if let Action::Start { candidate, .. } = a {
                order.push(candidate.remote.ip().to_string());
            }
        }
        if race.queued() == 0 {
            break;
        }
        t = next.max(t);
        race.handle_timeout(t);
    }
    while let Some(Action::Start { candidate, .. }) = race.poll_action() {
        order.push(candidate.remote.ip().to_string());
    }
    assert_eq!(
        order,
        ["2001:db8::1", "192.0.2.1", "2001:db8::2", "192.0.2.2"]
    );
}

#[test]
fn adaptive_delay_uses_the_known_connect_time() {
    let mut known = cand("2001:db8::1");
    known.history = History::Succeeded {
        rtt: ms(20),
        age: Duration::from_secs(60),
    };
    let script = |adaptive: bool| {
        sim()
            .config(|c| c.adaptive_delay = adaptive)
            .path("2001:db8::1", Path::Blackhole)
            .path("192.0.2.1", Path::Connects(30))
            .aaaa(0, vec![known.clone()])
            .a(0, cands(&["192.0.2.1"]))
            .run()
    };
    // 2 x 20 ms + 10 ms.
    let run = script(true);
    assert_eq!(run.start_times(), [0, 50]);
    assert_eq!(run.won_at(), (80, "192.0.2.1".into()));
    let trace = run.race.report().trace();
    assert!(
        trace.contains("(next in 50 ms: connected 60 s ago in 20.0 ms)"),
        "{trace}"
    );
    let run = script(false);
    assert_eq!(run.start_times(), [0, 250]);
}

#[test]
fn adaptive_delay_is_bounded_by_the_configured_delay_and_10_ms() {
    let config = RaceConfig::default();
    let with = |rtt: u64| {
        let mut c = cand("192.0.2.1");
        c.history = History::Succeeded {
            rtt: ms(rtt),
            age: Duration::ZERO,
        };
        config.delay_after(&c)
    };
    assert_eq!(with(0), ms(10));
    assert_eq!(with(1), ms(12));
    assert_eq!(with(100), ms(210));
    assert_eq!(with(500), ms(250));
    assert_eq!(config.delay_after(&cand("192.0.2.1")), ms(250));
}

#[test]
fn config_is_clamped() {
    let c = RaceConfig {
        attempt_delay: ms(1),
        first_family_count: 0,
        max_alive: 0,
        ..RaceConfig::default()
    }
    .clamped();
    assert_eq!(c.attempt_delay, ms(10));
    assert_eq!(c.first_family_count, 1);
    assert_eq!(c.max_alive, 1);
    let c = RaceConfig {
        attempt_delay: Duration::from_secs(10),
        ..RaceConfig::default()
    };
    assert_eq!(
        Race::new(c, Instant::now()).config().attempt_delay,
        ms(2000)
    );
}

#[test]
fn max_alive_bounds_twenty_blackholed_candidates() {
    let v6: Vec<String> = (1..=10).map(|i| format!("2001:db8::{i}")).collect();
    let v4: Vec<String> = (1..=10).map(|i| format!("192.0.2.{i}")).collect();
    let mut s = sim().config(|c| c.timeout = ms(5000));
    for ip in v6.iter().chain(&v4) {
        s = s.path(ip, Path::Blackhole);
    }
    let refs = |v: &[String]| v.iter().map(|s| cand(s)).collect::<Vec<_>>();
    let run = s.aaaa(0, refs(&v6)).a(0, refs(&v4)).run();
    assert_eq!(run.max_alive_seen, 8);
    assert_eq!(
        run.start_times(),
        [0, 250, 500, 750, 1000, 1250, 1500, 1750]
    );
    let (at, err) = run.failed_at();
    assert_eq!(at, 5000);
    assert_eq!(err.attempts().count(), 8);
    assert_eq!(err.not_started().len(), 12);
    assert!(
        err.to_string()
            .ends_with("; 12 more candidates not attempted"),
        "{err}"
    );
}

#[test]
fn max_alive_queued_candidates_start_when_a_slot_frees() {
    let ips = [
        "2001:db8::1",
        "192.0.2.1",
        "2001:db8::2",
        "192.0.2.2",
        "2001:db8::3",
    ];
    let mut s = sim().config(|c| c.max_alive = 2);
    for ip in ips {
        s = s.path(ip, Path::Refused(1000));
    }
    let run = s
        .aaaa(0, cands(&["2001:db8::1", "2001:db8::2", "2001:db8::3"]))
        .a(0, cands(&["192.0.2.1", "192.0.2.2"]))
        .run();
    assert_eq!(run.max_alive_seen, 2);
    assert_eq!(run.started(), ips);
    // 0, 250; the 500 ms start waits for a slot; each failure starts the next at once.
    assert_eq!(run.start_times(), [0, 250, 1000, 1250, 2000]);
    assert_eq!(run.failed_at().0, 3000);
    assert_eq!(run.failed_at().1.attempts().count(), 5);
}

#[test]
fn reachable_attempt_wins_the_race_against_a_later_connect() {
    // SCTP-like: INIT-ACK at 280 ms (one RTT), COOKIE-ACK at 330 ms. TCP-like IPv4 starts
    // at 250 ms and would connect at 300 ms. The INIT-ACK is the fair finish line.
    let run = sim()
        .path(
            "2001:db8::1",
            Path::Reachable(280, Box::new(Path::Connects(330))),
        )
        .path("192.0.2.1", Path::Connects(50))
        .aaaa(0, cands(&["2001:db8::1"]))
        .a(0, cands(&["192.0.2.1"]))
        .run();
    assert_eq!(run.start_times(), [0, 250]);
    assert_eq!(run.cancels.len(), 1);
    assert_eq!(run.cancels[0].0, ms(280));
    assert_eq!(run.won_at(), (330, "2001:db8::1".into()));

    // If the committed attempt then fails, the cancelled candidate restarts at once.
    let run = sim()
        .path(
            "2001:db8::1",
            Path::Reachable(280, Box::new(Path::Refused(320))),
        )
        .path("192.0.2.1", Path::Connects(50))
        .aaaa(0, cands(&["2001:db8::1"]))
        .a(0, cands(&["192.0.2.1"]))
        .run();
    assert_eq!(run.start_times(), [0, 250, 320]);
    assert_eq!(run.won_at(), (370, "192.0.2.1".into()));
}

#[test]
fn reachable_attempt_holds_the_next_start() {
    // Answered at 30 ms, connected at 200: within the commitment (until 30 + max(2 x 30
    // + 10, 250) = 280 ms), so nothing else starts.
    let run = sim()
        .path(
            "2001:db8::1",
            Path::Reachable(30, Box::new(Path::Connects(200))),
        )
        .path("192.0.2.1", Path::Connects(50))
        .aaaa(0, cands(&["2001:db8::1"]))
        .a(0, cands(&["192.0.2.1"]))
        .run();
    assert_eq!(run.start_times(), [0]);
    assert_eq!(run.won_at(), (200, "2001:db8::1".into()));

    // If it then fails, the next starts at once.
    let run = sim()
        .path(
            "2001:db8::1",
            Path::Reachable(30, Box::new(Path::Refused(200))),
        )
        .path("192.0.2.1", Path::Connects(50))
        .aaaa(0, cands(&["2001:db8::1"]))
        .a(0, cands(&["192.0.2.1"]))
        .run();
    assert_eq!(run.start_times(), [0, 200]);
    assert_eq!(run.won_at(), (250, "192.0.2.1".into()));
}

#[test]
fn a_commitment_lapses_when_the_handshake_stalls() {
    // Answered at 30 ms but never completes (a lost COOKIE-ECHO, a server that never
    // answers it): at 280 ms the commitment lapses and IPv4 starts beside it and wins,
    // instead of the race waiting for the establishment timeout.
    let run = sim()
        .path(
            "2001:db8::1",
            Path::Reachable(30, Box::new(Path::Blackhole)),
        )
        .path("192.0.2.1", Path::Connects(50))
        .aaaa(0, cands(&["2001:db8::1"]))
        .a(0, cands(&["192.0.2.1"]))
        .run();
    assert_eq!(run.start_times(), [0, 280]);
    assert_eq!(run.won_at(), (330, "192.0.2.1".into()));
    let lapsed = run.race.report().timeline.iter().any(|(at, e)| {
        *at == ms(280)
            && *e
                == RaceEvent::CommitmentLapsed {
                    id: AttemptId(1),
                    after: ms(250),
                }
    });
    assert!(lapsed, "{}", run.race.report().trace());

    // A slow path gets twice its answer time: answered at 400 ms (cancelling IPv4,
    // started at 250), the commitment holds until 1,210 ms, and the handshake done at
    // 800 ms wins without IPv4 starting again.
    let run = sim()
        .path(
            "2001:db8::1",
            Path::Reachable(400, Box::new(Path::Connects(800))),
        )
        .path("192.0.2.1", Path::Connects(600))
        .aaaa(0, cands(&["2001:db8::1"]))
        .a(0, cands(&["192.0.2.1"]))
        .run();
    assert_eq!(run.start_times(), [0, 250]);
    assert_eq!(run.won_at(), (800, "2001:db8::1".into()));
}

#[test]
fn a_late_answer_keeps_the_candidates_a_commit_requeued() {
    // #2 (IPv4) is cancelled when the race commits to #1 at 300 ms and queued again; an
    // AAAA answer at 350 ms re-ranks the queue and must keep it. #1 then fails at 400 ms:
    // IPv4 restarts at once, the new IPv6 address follows on the stagger, IPv4 connects.
    let run = sim()
        .path(
            "2001:db8::1",
            Path::Reachable(300, Box::new(Path::Refused(400))),
        )
        .path("2001:db8::2", Path::Blackhole)
        .path("192.0.2.1", Path::Connects(500))
        .aaaa(0, cands(&["2001:db8::1"]))
        .a(0, cands(&["192.0.2.1"]))
        .aaaa(350, cands(&["2001:db8::2"]))
        .run();
    assert_eq!(run.start_times(), [0, 250, 400, 650]);
    assert_eq!(
        run.started(),
        ["2001:db8::1", "192.0.2.1", "192.0.2.1", "2001:db8::2"]
    );
    assert_eq!(
        run.cancels,
        [(ms(300), AttemptId(2)), (ms(900), AttemptId(4))]
    );
    assert_eq!(run.won_at(), (900, "192.0.2.1".into()));
}

#[test]
fn reachable_hold_replaces_the_stagger_wakeup_with_the_commitments_end() {
    let base = Instant::now();
    let mut race = Race::new(RaceConfig::default(), base);
    race.on_candidates(Family::V6, cands(&["2001:db8::1"]), base);
    race.on_candidates(Family::V4, cands(&["192.0.2.1"]), base);
    assert_eq!(race.poll_timeout(), Some(base + ms(250)));
    race.on_attempt_reachable(AttemptId(1), base + ms(30));
    // Committed at 30 ms for max(2 x 30 + 10, 250) ms: no wake-up at the stagger.
    assert_eq!(race.poll_timeout(), Some(base + ms(280)));
    race.handle_timeout(base + ms(250));
    assert_eq!(race.alive(), 1);
    race.handle_timeout(base + ms(280));
    assert_eq!(race.alive(), 2);
}

#[test]
fn unavailable_candidates_are_skipped_and_reported() {
    let mut sctp = cand("2001:db8::1");
    sctp.stack = Stack::plain(Protocol::Sctp);
    sctp.unavailable = Some(Unavailable::NotBuilt);
    let run = sim()
        .path("2001:db8::1", Path::Connects(40))
        .aaaa(0, vec![sctp.clone(), cand("2001:db8::1")])
        .complete(0)
        .run();
    assert_eq!(run.started(), ["2001:db8::1"]);
    assert!(run
        .starts
        .iter()
        .all(|(_, _, c)| c.stack.protocol == Protocol::Tcp));
    let r = run.race.report();
    assert_eq!(r.attempts.len(), 2);
    let skipped = &r.attempts[0];
    assert_eq!(skipped.candidate.stack.protocol, Protocol::Sctp);
    assert_eq!(
        skipped.outcome,
        AttemptOutcome::Skipped(Unavailable::NotBuilt)
    );
    assert_eq!(r.winner, Some(r.attempts[1].id));
    assert!(r
        .trace()
        .contains("skipped SCTP [2001:db8::1]:80: not supported by this build"));

    // Only unavailable candidates: a clear error, nothing started.
    let run = sim().aaaa(0, vec![sctp]).complete(0).run();
    let (at, err) = run.failed_at();
    assert_eq!(at, 0);
    assert_eq!(err.kind(), FailureKind::NoCandidates);
    assert_eq!(
        err.to_string(),
        "no candidate to race: SCTP [2001:db8::1]:80: skipped: not supported by this build"
    );
}

/// The failure of `race`, once it failed.
fn failure(race: &mut Race) -> RaceError {
    std::iter::from_fn(|| race.poll_action())
        .find_map(|a| match a {
            Action::Failed(e) => Some(e),
            _ => None,
        })
        .expect("the race failed")
}

/// A secure race ranks DTLS/SCTP, which this build cannot run, beside TLS/TCP: its error
/// counts the attempts it lists and leaves the never-possible candidate out (the report
/// keeps it as skipped); a TLS handshake cut off by the timeout after TCP connected says
/// so, naming both layers and the address.
#[test]
fn failed_races_count_what_they_list_and_name_a_silent_handshake() {
    let secure = |stack: Stack, unavailable: Option<Unavailable>| Candidate {
        stack,
        unavailable,
        ..cand("192.0.2.1")
    };
    let dtls = secure(
        Stack::new(Protocol::Sctp, crate::Security::Dtls),
        Some(Unavailable::DtlsOverSctp),
    );
    let tls = secure(Stack::new(Protocol::Tcp, crate::Security::Tls), None);
    let base = Instant::now();
    let mut race = Race::new(RaceConfig::default(), base);
    race.on_candidates(Family::V4, vec![dtls.clone(), tls.clone()], base);
    race.on_dns_complete(base);
    race.on_attempt_failed(AttemptId(2), AttemptCause::Refused, base + ms(1));
    let err = failure(&mut race);
    assert_eq!(
        err.to_string(),
        "the only attempt failed: TLS/TCP 192.0.2.1:80: connection refused"
    );
    assert!(matches!(
        err.report().attempts[0].outcome,
        AttemptOutcome::Skipped(Unavailable::DtlsOverSctp)
    ));
    // TCP up after 3 ms, then nothing until the timeout.
    let mut race = Race::new(RaceConfig::default(), base);
    race.on_candidates(Family::V4, vec![dtls, tls], base);
    race.on_dns_complete(base);
    race.on_attempt_transport_up(AttemptId(2), base + ms(3));
    race.handle_timeout(base + RaceConfig::default().timeout);
    let err = failure(&mut race);
    let timeout = RaceConfig::default().timeout.as_millis();
    assert_eq!(
        err.to_string(),
        format!(
            "timed out after {timeout} ms: TLS/TCP 192.0.2.1:80: TCP connected to \
             192.0.2.1:80 in 3 ms, then the TLS handshake did not finish within {} ms",
            timeout - 3
        )
    );
    assert!(err.attempts().last().unwrap().cause.is_timeout());
}

#[test]
fn later_reports_from_losers_are_ignored() {
    let base = Instant::now();
    let mut race = Race::new(RaceConfig::default(), base);
    race.on_candidates(Family::V6, cands(&["2001:db8::1"]), base);
    race.on_candidates(Family::V4, cands(&["192.0.2.1"]), base);
    race.handle_timeout(base + ms(250));
    assert_eq!(race.alive(), 2);
    while race.poll_action().is_some() {}
    race.on_attempt_connected(AttemptId(2), base + ms(260));
    let actions: Vec<_> = std::iter::from_fn(|| race.poll_action()).collect();
    assert!(matches!(
        actions[..],
        [
            Action::Cancel { id: AttemptId(1) },
            Action::Won { id: AttemptId(2) }
        ]
    ));
    race.on_attempt_connected(AttemptId(1), base + ms(261));
    race.on_attempt_failed(
        AttemptId(1),
        AttemptCause::other(std::io::Error::other("late")),
        base + ms(262),
    );
    race.on_attempt_connected(AttemptId(7), base + ms(263));
    race.on_candidates(Family::V4, cands(&["192.0.2.9"]), base + ms(264));
    race.handle_timeout(base + ms(40_000));
    assert!(race.poll_action().is_none());
    let r = race.report();
    assert_eq!(r.winner, Some(AttemptId(2)));
    assert_eq!(r.attempts[0].outcome, AttemptOutcome::Cancelled);
    assert_eq!(r.total, Some(ms(260)));
    assert_eq!(race.alive(), 0);
}

#[test]
fn trace_reads_like_the_study_tables() {
    let run = sim()
        .path("::1", Path::Refused(0))
        .path("127.0.0.1", Path::Connects(0))
        .aaaa(0, cands(&["::1"]))
        .a(0, cands(&["127.0.0.1"]))
        .run();
    let lines: Vec<String> = run
        .race
        .report()
        .timeline_text()
        .map(|(_, t)| t.to_string())
        .collect();
    assert_eq!(
        lines,
        [
            "AAAA answered: 1 address",
            "start #1 TCP [::1]:80",
            "A answered: 1 address",
            "#1 failed: connection refused",
            "start #2 TCP 127.0.0.1:80",
            "#2 connected in 0 ms: won",
        ]
    );
    assert!(run
        .race
        .report()
        .trace()
        .starts_with("     0.0 ms  AAAA answered: 1 address\n"));
    let dns = &run.race.report().dns;
    assert_eq!(dns.len(), 2);
    assert_eq!((dns[0].family, dns[0].result.clone()), (Family::V6, Ok(1)));
}

#[test]
fn learned_outcomes_go_into_the_cib_as_successes_and_failures() {
    let endpoint: Arc<str> = "example.test:80".into();
    // IPv6 refused after 5 ms, IPv4 connects 50 ms after starting at once.
    let run = sim()
        .path("2001:db8::1", Path::Refused(5))
        .path("192.0.2.1", Path::Connects(50))
        .aaaa(0, cands(&["2001:db8::1"]))
        .a(0, cands(&["192.0.2.1"]))
        .run();
    assert_eq!(run.won_at(), (55, "192.0.2.1".into()));
    let mut cib = Cib::default();
    cib.learn(&endpoint, run.race.report().learned());
    assert_eq!(cib.len(), 2);
    let at = run.base + ms(55);
    let v6 = cand("2001:db8::1").outcome_key(&endpoint);
    let v4 = cand("192.0.2.1").outcome_key(&endpoint);
    assert_eq!(
        cib.history(&v6, at),
        History::Failed {
            cause: AttemptCause::Refused,
            age: ms(50)
        }
    );
    assert_eq!(
        cib.history(&v4, at),
        History::Succeeded {
            rtt: ms(50),
            age: Duration::ZERO
        }
    );

    // An attempt overtaken by a later one is recorded as failed: its head start did
    // not help, so the next race should not lead with it.
    let run = sim()
        .path("2001:db8::1", Path::Blackhole)
        .path("192.0.2.1", Path::Connects(50))
        .aaaa(0, cands(&["2001:db8::1"]))
        .a(0, cands(&["192.0.2.1"]))
        .run();
    let mut cib = Cib::default();
    cib.learn(&endpoint, run.race.report().learned());
    assert_eq!(cib.len(), 2);
    match cib.history(&v6, run.base + ms(300)) {
        History::Failed { cause, .. } => {
            assert_eq!(cause, AttemptCause::Overtaken { silent: ms(300) });
            assert_eq!(cause.to_string(), "no answer in 300 ms (overtaken)")
        }
        other => panic!("{other:?}"),
    }

    // An attempt cancelled after starting later than the winner says nothing about its
    // path and is not recorded.
    let run = sim()
        .path("2001:db8::1", Path::Connects(260))
        .path("192.0.2.1", Path::Connects(20))
        .aaaa(0, cands(&["2001:db8::1"]))
        .a(0, cands(&["192.0.2.1"]))
        .run();
    assert_eq!(run.won_at(), (260, "2001:db8::1".into()));
    let mut cib = Cib::default();
    cib.learn(&endpoint, run.race.report().learned());
    assert_eq!(cib.len(), 1, "{:?}", run.race.report().timeline);
    assert_eq!(cib.history(&v4, run.base + ms(300)), History::Unknown);
}

// --- Secure stacks: the handshake is the finish line (HEv3) -----------------------------

/// A TLS attempt whose TCP connects 30 ms before the next staggered start is due holds
/// that start back by 2 x its transport time + 10 ms, so a handshake about one more
/// round trip long can finish first; when it then connects it wins without a second
/// attempt. One whose transport came up early (far from the next start) changes nothing.
#[test]
fn transport_up_near_the_next_start_holds_it_for_the_handshake() {
    let base = Instant::now();
    let mut race = Race::new(RaceConfig::default(), base);
    race.on_candidates(Family::V6, cands(&["2001:db8::1"]), base);
    race.on_candidates(Family::V4, cands(&["192.0.2.1"]), base);
    let first = match race.poll_action() {
        Some(Action::Start { id, .. }) => id,
        other => panic!("{other:?}"),
    };
    assert_eq!(race.poll_timeout(), Some(base + ms(250)));
    // TCP up at 220 ms: the next start (250 ms) is due before the handshake can finish
    // (2 x 220 + 10 ms, bounded by the attempt delay): held until 220 + 250 ms.
    race.on_attempt_transport_up(first, base + ms(220));
    assert_eq!(race.poll_timeout(), Some(base + ms(470)));
    race.handle_timeout(base + ms(250));
    assert!(race.poll_action().is_none(), "nothing starts at 250 ms");
    race.on_attempt_connected(first, base + ms(300));
    assert!(matches!(race.poll_action(), Some(Action::Won { id }) if id == first));
    let events: Vec<String> = race
        .report()
        .timeline_text()
        .map(|(_, t)| t.to_string())
        .collect();
    assert!(
        events.contains(
            &"#1 transport up, security handshake running (next start held 250 ms for it)"
                .to_string()
        ),
        "{events:?}"
    );

    // Transport up at 20 ms: 2 x 20 + 10 = 50 ms ends well before 250 ms: no change.
    let mut race = Race::new(RaceConfig::default(), base);
    race.on_candidates(Family::V6, cands(&["2001:db8::1"]), base);
    race.on_candidates(Family::V4, cands(&["192.0.2.1"]), base);
    let Some(Action::Start { id, .. }) = race.poll_action() else {
        panic!("no start")
    };
    race.on_attempt_transport_up(id, base + ms(20));
    assert_eq!(race.poll_timeout(), Some(base + ms(250)));
    // A handshake that never finishes does not win: the next attempt starts on time.
    race.handle_timeout(base + ms(250));
    assert!(matches!(race.poll_action(), Some(Action::Start { .. })));
}

#[test]
fn an_unproven_quic_gets_a_short_head_start_a_proven_one_its_rtt() {
    let config = RaceConfig::default();
    let mut quic = cand("192.0.2.1");
    quic.stack = Stack::new(Protocol::Quic, crate::stack::Security::QuicTls);
    assert_eq!(config.delay_after(&quic), UNPROVEN_QUIC_DELAY);
    quic.history = History::Succeeded {
        rtt: ms(30),
        age: ms(1000),
    };
    assert_eq!(config.delay_after(&quic), ms(70));
    // A plain candidate with no history waits the full attempt delay.
    assert_eq!(
        config.delay_after(&cand("192.0.2.1")),
        DEFAULT_ATTEMPT_DELAY
    );
}

// --- HTTPS records (HEv3) --------------------------------------------------------------

fn quic_and_tls(ip: &str) -> Vec<Candidate> {
    let mut quic = cand(ip);
    quic.stack = Stack::new(Protocol::Quic, crate::stack::Security::QuicTls);
    let mut tls = cand(ip);
    tls.stack = Stack::new(Protocol::Tcp, crate::stack::Security::Tls);
    vec![quic, tls]
}

fn service(alpn: &[&str]) -> crate::service::ServiceInfo {
    crate::service::ServiceInfo::new(vec![crate::service::ServiceRecord {
        priority: 1,
        target: ".".into(),
        alpn: alpn.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    }])
}

fn started(race: &mut Race) -> Vec<String> {
    std::iter::from_fn(|| race.poll_action())
        .filter_map(|a| match a {
            Action::Start { candidate, .. } => Some(candidate.stack.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_race_waits_for_the_https_answer_up_to_the_resolution_delay() {
    let base = Instant::now();
    let config = RaceConfig {
        await_service: true,
        ..RaceConfig::default()
    };
    // AAAA in at 0 ms, HTTPS at 10 ms: the first start waits for it.
    let mut race = Race::new(config.clone(), base);
    race.on_candidates(Family::V6, quic_and_tls("2001:db8::1"), base);
    assert!(started(&mut race).is_empty());
    assert_eq!(race.poll_timeout(), Some(base + ms(50)));
    race.on_service(Ok(service(&["h3", "h2"])), base + ms(10));
    assert_eq!(started(&mut race), ["QUIC"]);
    // No HTTPS answer: the start comes at the Resolution Delay.
    let mut race = Race::new(config.clone(), base);
    race.on_candidates(Family::V6, quic_and_tls("2001:db8::1"), base);
    race.handle_timeout(base + ms(50));
    assert_eq!(started(&mut race), ["QUIC"]);
    assert!(race
        .report()
        .trace()
        .contains("no HTTPS answer after 50 ms: starting without it"));
}

#[test]
fn an_https_answer_without_h3_drops_quic_candidates() {
    let base = Instant::now();
    let config = RaceConfig {
        await_service: true,
        ..RaceConfig::default()
    };
    let mut race = Race::new(config, base);
    race.on_candidates(Family::V6, quic_and_tls("2001:db8::1"), base);
    race.on_service(Ok(service(&["h2", "http/1.1"])), base + ms(5));
    // The A answer's QUIC candidate is dropped too.
    race.on_candidates(Family::V4, quic_and_tls("192.0.2.1"), base + ms(6));
    let mut stacks = started(&mut race);
    race.handle_timeout(base + ms(255));
    stacks.extend(started(&mut race));
    assert_eq!(stacks, ["TLS/TCP", "TLS/TCP"]);
    assert!(race
        .report()
        .trace()
        .contains("HTTPS answered: 1 . alpn=h2,http/1.1 (no h3: 1 QUIC candidates dropped)"));
}

#[test]
fn hint_addresses_are_traced_as_hints_and_the_real_answer_adds_only_what_is_new() {
    let base = Instant::now();
    let config = RaceConfig {
        await_service: true,
        ..RaceConfig::default()
    };
    let mut race = Race::new(config, base);
    race.on_service(Ok(service(&["h3", "h2"])), base + ms(2));
    race.on_candidates_from(
        Family::V4,
        quic_and_tls("192.0.2.1"),
        DnsSource::Hint,
        base + ms(2),
    );
    // No AAAA record: the hint starts the race.
    race.on_candidates(Family::V6, Vec::new(), base + ms(3));
    assert_eq!(started(&mut race), ["QUIC"]);
    // The A answer repeats the hinted address: nothing new joins.
    race.on_candidates(Family::V4, quic_and_tls("192.0.2.1"), base + ms(20));
    let trace = race.report().trace();
    assert!(
        trace.contains("HTTPS ipv4hint: 1 address (2 candidates)"),
        "{trace}"
    );
    assert!(trace.contains("A answered: 1 address"), "{trace}");
    let dns = &race.report().dns;
    assert_eq!(
        dns.iter().map(|d| d.source).collect::<Vec<_>>(),
        [DnsSource::Hint, DnsSource::Answer, DnsSource::Answer]
    );
    assert_eq!(race.report().attempts.len(), 1);
}

#[test]
fn a_known_path_rtt_staggers_first_contacts_by_twice_it() {
    // rx at 50 ms RTT, first contact: IPv6 dead, IPv4 after 2 x 50 + 10 ms, not 250.
    let run = sim()
        .config(|c| c.path_rtt = Some(ms(50)))
        .path("2001:db8::1", Path::Blackhole)
        .path("192.0.2.1", Path::Connects(50))
        .aaaa(0, cands(&["2001:db8::1"]))
        .a(0, cands(&["192.0.2.1"]))
        .run();
    assert_eq!(run.start_times(), [0, 110]);
    assert_eq!(run.won_at(), (160, "192.0.2.1".into()));
    // Never under 100 ms (HEv3's recommended minimum), never over the configured delay.
    assert_eq!(first_contact_delay(ms(1), ms(250)), ms(100));
    assert_eq!(first_contact_delay(ms(200), ms(250)), ms(250));
    assert_eq!(first_contact_delay(ms(1), ms(40)), ms(40));
}

/// Starts of a race with the default settings: AAAA (dead address) and A answer at
/// `dns_ms`; what has started by `at` ms.
fn starts_with_dns_time(dns_ms: u64, at: &[u64]) -> (Vec<usize>, String) {
    let base = Instant::now();
    let mut race = Race::new(RaceConfig::default(), base);
    race.on_candidates(Family::V6, cands(&["2001:db8::1"]), base + ms(dns_ms));
    race.on_candidates(Family::V4, cands(&["192.0.2.1"]), base + ms(dns_ms));
    let mut counts = vec![started(&mut race).len()];
    for t in at {
        race.handle_timeout(base + ms(*t));
        counts.push(counts.last().unwrap() + started(&mut race).len());
    }
    (counts, race.report().trace())
}

#[test]
fn the_first_lookups_time_estimates_the_rtt_of_a_first_contact() {
    // The lookup took 50 ms: the second start comes 110 ms after the first.
    let (counts, trace) = starts_with_dns_time(50, &[159, 160]);
    assert_eq!(counts, [1, 1, 2], "{trace}");
    assert!(
        trace.contains("the lookup took 50 ms: first contacts staggered by 110 ms"),
        "{trace}"
    );
    // A cached answer (under 20 ms) says nothing about the path: RFC 8305's 250 ms.
    let (counts, trace) = starts_with_dns_time(2, &[251, 252]);
    assert_eq!(counts, [1, 1, 2], "{trace}");
    assert!(!trace.contains("the lookup took"), "{trace}");
}

// --- One candidate (an address literal) ---------------------------------------------------

/// A literal's race begun at `t0`: its one answer (given `answer_ms` after the start)
/// and the end of DNS, then the attempt's end as `end` says; the decision, polled.
/// `last`: the answer comes as the final one (`on_final_candidates`), else as an
/// answer and then the end of DNS.
fn one_candidate_as(
    last: bool,
    t0: Instant,
    answer_ms: u64,
    end: Path,
) -> Result<RaceReport, RaceError> {
    let config = RaceConfig {
        timeout: Duration::from_secs(2),
        ..RaceConfig::default()
    };
    let at = t0 + ms(answer_ms);
    let mut race = Race::new(config, t0);
    let one = vec![cand("192.0.2.1")];
    if last {
        race.on_final_candidates(Family::V4, one, at);
    } else {
        race.on_candidates(Family::V4, one, at);
        race.on_dns_complete(at);
    }
    let id = match race.poll_action() {
        Some(Action::Start { id, .. }) => id,
        other => panic!("the candidate starts at once, not {other:?}"),
    };
    assert!(race.poll_action().is_none());
    match &end {
        Path::Connects(after) => race.on_attempt_connected(id, at + ms(*after)),
        Path::Refused(after) => race.on_attempt_failed(id, AttemptCause::Refused, at + ms(*after)),
        Path::Blackhole | Path::Reachable(..) => {
            let deadline = race.poll_timeout().expect("a deadline");
            assert_eq!(deadline, t0 + ms(2_000));
            race.handle_timeout(deadline);
        }
    }
    let silent = matches!(end, Path::Blackhole | Path::Reachable(..));
    let mut action = race.poll_action();
    if silent {
        // The timeout cuts the silent attempt off first.
        assert!(matches!(action, Some(Action::Cancel { id: c }) if c == id));
        action = race.poll_action();
    }
    match action {
        Some(Action::Won { id: won }) if won == id => Ok(race.into_report()),
        Some(Action::Failed(err)) => Err(err),
        other => panic!("decided, not {other:?}"),
    }
}

/// [`one_candidate_as`] both ways: they decide and report alike, but for the trace (an
/// answer known to be the last waits for no other family).
fn one_candidate(answer_ms: u64, end: Path) -> (Instant, Result<RaceReport, RaceError>) {
    let t0 = Instant::now();
    let split = one_candidate_as(false, t0, answer_ms, end.clone());
    let last = one_candidate_as(true, t0, answer_ms, end);
    let untraced = |r: &Result<RaceReport, RaceError>| {
        let report = r.as_ref().unwrap_or_else(|e| e.report());
        let mut report = report.clone();
        let trace = report.trace();
        report.timeline.clear();
        let text = format!("{report:?} {:?}", r.as_ref().err().map(|e| e.kind()));
        (text, trace.contains("waiting up to"))
    };
    let (split, split_waits) = untraced(&split);
    let (text, waits) = untraced(&last);
    assert_eq!(text, split);
    assert!(split_waits && !waits);
    (t0, last)
}

/// The rules for one candidate: it starts with the answer; the first outcome decides; a
/// connection wins, even one reported past the deadline before the timeout was handled;
/// a failure fails the race as exhausted, or as timed out at or past the deadline; the
/// deadline cuts a silent attempt off as timed out. The report has one DNS event and
/// one attempt, ended when the race was.
#[test]
fn one_candidate_decides_by_the_general_rules() {
    for answer_ms in [0, 7] {
        for after in [0, 40, 2_500] {
            let (t0, won) = one_candidate(answer_ms, Path::Connects(after));
            let report = won.expect("a connection wins");
            assert_eq!(report.winner, Some(AttemptId(1)));
            assert_eq!(report.dns.len(), 1);
            assert_eq!(report.dns[0].result, Ok(1));
            let a = &report.attempts[..];
            assert_eq!(a.len(), 1);
            assert_eq!(a[0].outcome, AttemptOutcome::Won);
            assert_eq!(a[0].started_at, t0 + ms(answer_ms));
            assert_eq!(a[0].ended_at, Some(t0 + ms(answer_ms + after)));
            assert_eq!(report.total, Some(ms(answer_ms + after)));
            assert_eq!(report.learned().count(), 1);
        }
        for (after, exhausted) in [(3, true), (2_000 - answer_ms, false), (2_600, false)] {
            let (_, failed) = one_candidate(answer_ms, Path::Refused(after));
            let err = failed.expect_err("a refusal fails the race");
            let kind = if exhausted {
                FailureKind::Exhausted
            } else {
                FailureKind::TimedOut {
                    after: Duration::from_secs(2),
                }
            };
            assert_eq!(err.kind(), kind, "refused after {after} ms");
            let causes: Vec<_> = err.attempts().map(|a| a.cause).collect();
            assert_eq!(causes, [AttemptCause::Refused]);
            assert_eq!(err.report().total, Some(ms(answer_ms + after)));
        }
        let (_, failed) = one_candidate(answer_ms, Path::Blackhole);
        let err = failed.expect_err("silence times out");
        let ran = ms(2_000 - answer_ms);
        let causes: Vec<_> = err.attempts().map(|a| a.cause).collect();
        assert_eq!(causes, [AttemptCause::TimedOut { after: Some(ran) }]);
        assert_eq!(err.report().learned().count(), 1);
    }
}
