//! A race of one candidate (sans-IO): what [`Race`](super::Race) decides when the only
//! DNS answer (an address literal) gives exactly one candidate that this build can run,
//! and no timeline is kept, without the general race's queue, ranking, gate, action list
//! and attempt bookkeeping.
//!
//! With one candidate the rules of the general race come down to: start it at once; the
//! first outcome decides; a connection wins (even one reported after the deadline but
//! before the timeout was handled); a failure fails the race as exhausted, or as timed out
//! when it came at or after the deadline; at the deadline the attempt is cut off as timed
//! out. The reports and errors are the general race's, field for field (the tests below
//! play the same inputs into both and compare them).
//!
//! The caller (taps' tokio driver) starts [`SingleRace::candidate`] at once, waits for
//! its outcome until [`SingleRace::deadline`] and hands the first of the two back.

use std::time::Instant;

use super::report::{AttemptOutcome, AttemptReport, DnsEvent, DnsSource, FailureKind};
use super::{AttemptId, RaceConfig, RaceError, RaceReport};
use crate::candidates::Candidate;
use crate::failure::AttemptCause;
use crate::net::Family;

/// The id of the one attempt (the first a race gives out).
const ID: AttemptId = AttemptId(1);

/// A race of one candidate, its attempt started. Memory: its report (one DNS event, one
/// attempt).
#[derive(Debug)]
pub struct SingleRace {
    report: RaceReport,
    deadline: Instant,
    timeout: std::time::Duration,
}

impl SingleRace {
    /// The race that began at `started` with `config`, whose only DNS answer (`family`,
    /// from `source`) came at `now` and gave `candidate` alone: the attempt starts at
    /// `now`. `None` when the general race must run instead: a candidate this build cannot
    /// run (that race lists it as skipped), or a config that keeps a timeline. Cost: two
    /// small allocations (the report's lists).
    pub fn start(
        config: &RaceConfig,
        started: Instant,
        family: Family,
        source: DnsSource,
        candidate: Candidate,
        now: Instant,
    ) -> Option<SingleRace> {
        if config.timeline || candidate.unavailable.is_some() {
            return None;
        }
        // As `Race::new`'s deadline (clamping leaves the timeout as it is).
        let timeout = config.timeout;
        let mut report = RaceReport::new(started, false);
        let at = report.offset(now);
        report.dns.push(DnsEvent {
            family,
            at,
            result: Ok(1),
            source,
        });
        report.attempts.reserve_exact(1);
        report.attempts.push(AttemptReport {
            id: ID,
            start: at,
            end: None,
            started_at: now,
            ended_at: None,
            candidate,
            outcome: AttemptOutcome::Pending,
        });
        Some(SingleRace {
            report,
            deadline: started + timeout,
            timeout,
        })
    }

    /// What to connect.
    pub fn candidate(&self) -> &Candidate {
        &self.attempt().candidate
    }

    /// The attempt's id (what the report names it).
    pub fn id(&self) -> AttemptId {
        ID
    }

    /// When the establishment timeout cuts the attempt off ([`timed_out`](Self::timed_out)).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The attempt connected at `now`: it won. Returns the race's report.
    pub fn connected(mut self, now: Instant) -> RaceReport {
        self.end(AttemptOutcome::Won, now);
        self.report.winner = Some(ID);
        self.report.total = Some(self.report.offset(now));
        self.report
    }

    /// The attempt failed at `now` with `cause`: the race failed (exhausted, or timed out
    /// if `now` is at or past the deadline).
    pub fn failed(mut self, cause: AttemptCause, now: Instant) -> RaceError {
        self.end(AttemptOutcome::Failed(cause), now);
        let kind = if now >= self.deadline {
            FailureKind::TimedOut {
                after: self.timeout,
            }
        } else {
            FailureKind::Exhausted
        };
        self.fail(kind, now)
    }

    /// The deadline passed at `now` with the attempt still running: it is cut off (the
    /// caller drops it) and the race timed out.
    pub fn timed_out(mut self, now: Instant) -> RaceError {
        let ran = now.saturating_duration_since(self.attempt().started_at);
        let cause = AttemptCause::TimedOut { after: Some(ran) };
        self.end(AttemptOutcome::Failed(cause), now);
        let kind = FailureKind::TimedOut {
            after: self.timeout,
        };
        self.fail(kind, now)
    }

    fn attempt(&self) -> &AttemptReport {
        &self.report.attempts[0]
    }

    fn end(&mut self, outcome: AttemptOutcome, now: Instant) {
        let end = self.report.offset(now);
        let a = &mut self.report.attempts[0];
        a.outcome = outcome;
        a.end = Some(end);
        a.ended_at = Some(now);
    }

    fn fail(mut self, kind: FailureKind, now: Instant) -> RaceError {
        self.report.total = Some(self.report.offset(now));
        RaceError::new(kind, self.report, Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::tests::{cand, ms};
    use super::super::{Action, Race};
    use super::*;

    /// How the one attempt ends, `at` ms after the answer.
    #[derive(Clone, Copy, Debug)]
    enum End {
        Connects(u64),
        Refused(u64),
        /// Never answers: the timeout ends it.
        Silent,
    }

    /// The general race's outcome for a literal's one candidate answered `answer_ms` after
    /// the start `t0`: `Ok(report)` or `Err(error)`, as Debug text (every field).
    fn general(
        config: &RaceConfig,
        t0: Instant,
        answer_ms: u64,
        end: End,
    ) -> Result<String, String> {
        let at = t0 + ms(answer_ms);
        let mut race = Race::new(config.clone(), t0);
        race.on_candidates_from(Family::V4, vec![cand("192.0.2.1")], DnsSource::Answer, at);
        race.on_dns_complete(at);
        let mut id = None;
        while let Some(a) = race.poll_action() {
            if let Action::Start { id: i, .. } = a {
                id = Some(i);
            }
        }
        let id = id.expect("the candidate started");
        match end {
            End::Connects(after) => race.on_attempt_connected(id, at + ms(after)),
            End::Refused(after) => {
                race.on_attempt_failed(id, AttemptCause::Refused, at + ms(after))
            }
            End::Silent => {
                let deadline = race.poll_timeout().expect("a deadline");
                race.handle_timeout(deadline);
            }
        }
        let mut decided = None;
        while let Some(a) = race.poll_action() {
            match a {
                Action::Won { .. } => decided = Some(Ok(format!("{:?}", race.report()))),
                Action::Failed(e) => decided = Some(Err(format!("{e:?}"))),
                _ => {}
            }
        }
        decided.expect("the race decided")
    }

    /// The same inputs played into a [`SingleRace`].
    fn single(
        config: &RaceConfig,
        t0: Instant,
        answer_ms: u64,
        end: End,
    ) -> Result<String, String> {
        let at = t0 + ms(answer_ms);
        let one = cand("192.0.2.1");
        let race = SingleRace::start(config, t0, Family::V4, DnsSource::Answer, one, at)
            .expect("runnable");
        match end {
            End::Connects(after) => Ok(format!("{:?}", race.connected(at + ms(after)))),
            End::Refused(after) => {
                let e = race.failed(AttemptCause::Refused, at + ms(after));
                Err(format!("{e:?}"))
            }
            End::Silent => {
                let deadline = race.deadline();
                Err(format!("{:?}", race.timed_out(deadline)))
            }
        }
    }

    fn untraced() -> RaceConfig {
        RaceConfig {
            timeline: false,
            timeout: Duration::from_secs(2),
            ..RaceConfig::default()
        }
    }

    #[test]
    fn decides_and_reports_as_the_general_race_does() {
        let config = untraced();
        let t0 = Instant::now();
        for end in [
            End::Connects(0),
            End::Connects(40),
            // After the deadline, before the timeout was handled: still the winner.
            End::Connects(2_500),
            End::Refused(3),
            // A failure at or past the deadline fails the race as timed out.
            End::Refused(2_000),
            End::Refused(2_600),
            End::Silent,
        ] {
            for answer_ms in [0, 7] {
                let (g, s) = (
                    general(&config, t0, answer_ms, end),
                    single(&config, t0, answer_ms, end),
                );
                assert_eq!(g, s, "{end:?}, answer after {answer_ms} ms");
            }
        }
    }

    #[test]
    fn a_timeline_or_an_unavailable_candidate_takes_the_general_race() {
        let t0 = Instant::now();
        let traced = RaceConfig::default();
        assert!(traced.timeline);
        let one = cand("192.0.2.1");
        assert!(SingleRace::start(&traced, t0, Family::V4, DnsSource::Answer, one, t0).is_none());
        let mut skipped = cand("192.0.2.1");
        skipped.unavailable = Some("not in this build");
        let config = untraced();
        assert!(
            SingleRace::start(&config, t0, Family::V4, DnsSource::Answer, skipped, t0).is_none()
        );
    }

    #[test]
    fn the_deadline_is_the_clamped_timeout_after_the_start() {
        let t0 = Instant::now();
        let config = untraced();
        let race = SingleRace::start(
            &config,
            t0,
            Family::V4,
            DnsSource::Answer,
            cand("192.0.2.1"),
            t0 + ms(5),
        )
        .unwrap();
        assert_eq!(race.deadline(), t0 + config.timeout);
        assert_eq!(race.id(), AttemptId(1));
        assert_eq!(race.candidate().remote, "192.0.2.1:80".parse().unwrap());
    }
}
