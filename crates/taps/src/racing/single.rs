//! Executes a [`SingleRace`]: a race to an address literal that gives one candidate (what
//! `taps connect 192.0.2.1 …` with one protocol, and most connections to an address,
//! run). The core decides as its general race would (its tests compare the two); this
//! side runs the one attempt against the deadline and, for a remote off this host, the
//! interface watcher, without the general driver's event loop, action queue and boxed
//! attempt: about 4 k instructions less per connection (callgrind, `connect_many`).
//!
//! Taken only when no subscriber listens to the race's span (the general driver logs every
//! step; with logs on it runs instead).

use std::time::Instant;

use taps_core::failure::AttemptCause;
use taps_core::race::{DnsSource, RaceConfig, SingleRace};
use taps_core::Family;

use super::{can_leave, interfaces_changed, now, reports_milestones, RaceInput, Won};
use crate::error::Error;
use crate::scoring::ScoreFor;
use crate::transport::{self, AttemptError, Established};

/// A one-candidate race and what it needs from its preconnection. Boxed: the attempt's
/// future then holds a pointer to it, and the race's future stays a small block for
/// glibc's malloc, as the general driver's (see `DRIVER_SIZE_LIMIT`).
pub(super) struct One<'a> {
    input: RaceInput<'a>,
    race: SingleRace,
}

/// The one-candidate race for `input`, its attempt due to start now; `input` back when
/// the general race must run: the remote is a name (or `localhost`), the plan allows
/// several stacks (checked before gathering, so a race of several candidates gathers them
/// once, in the general driver) or one that reports milestones (SCTP, secure stacks), the
/// literal's candidates are not exactly one this build can run, or the config keeps a
/// timeline. Cost: gathering the literal's candidates (which the general race would do).
pub(super) fn start<'a>(
    input: RaceInput<'a>,
    config: &RaceConfig,
    started: Instant,
) -> Result<Box<One<'a>>, RaceInput<'a>> {
    let one_plain_stack = matches!(input.plan.stacks(), [only] if !reports_milestones(&only.stack));
    let ip = match input.literal {
        Some(ip) if one_plain_stack && !config.timeline => ip,
        _ => return Err(input),
    };
    let family = Family::of(&ip);
    let now = now();
    let on = ScoreFor {
        plan: input.plan,
        endpoint: &input.key,
        port: input.remote.port,
    };
    let mut gathered = input.scored.gather(&on, input.ctx, family, &[ip], now);
    // One stack can still give several candidates (a policy binding several interfaces).
    let one = match gathered.candidates.pop() {
        Some(c) if gathered.candidates.is_empty() => c,
        _ => return Err(input),
    };
    match SingleRace::start(config, started, family, DnsSource::Answer, one, now) {
        Some(race) => Ok(Box::new(One { input, race })),
        None => Err(input),
    }
}

/// How the attempt's wait ended.
enum Ended<T> {
    Attempt(T),
    /// No interface that is up can carry its packets any more.
    Stranded,
    Deadline,
}

impl One<'_> {
    /// Runs the attempt until it connects, fails or the deadline passes; the CIB learns
    /// the outcome, as after any race.
    pub(super) async fn run(self: Box<Self>) -> Result<Won, Error> {
        let ended = self.attempt().await;
        let One { input, race } = *self;
        let stack = race.candidate().stack;
        let now = now();
        let err = match ended {
            Ended::Attempt(Ok(established)) => {
                let report = race.connected(now);
                input.ctx.learn(&input.key, report.learned());
                return Ok(Won {
                    established,
                    stack,
                    report,
                });
            }
            Ended::Attempt(Err(e)) => race.failed(AttemptCause::from(e), now),
            Ended::Stranded => race.failed(AttemptCause::Unreachable, now),
            Ended::Deadline => race.timed_out(now),
        };
        input.ctx.learn(&input.key, err.report().learned());
        Err(err.into())
    }

    /// Waits for the attempt's outcome, an interface change that strands it, or the
    /// deadline, whichever comes first; the attempt (and a socket that did not connect)
    /// is dropped on return.
    async fn attempt(&self) -> Ended<Result<Established, AttemptError>> {
        let candidate = self.race.candidate();
        let input = &self.input;
        // As the general driver: a loopback remote can always be reached, so only another
        // one watches the interfaces (from now on: changes before are not this race's).
        let mut interfaces = if candidate.remote.ip().is_loopback() {
            None
        } else {
            input.ctx.interface_changes()
        };
        let watching = interfaces.is_some();
        let attempt =
            transport::connect_signalling(candidate, input.opts, input.security.as_deref(), |_| {});
        tokio::pin!(attempt);
        let deadline = tokio::time::sleep_until(self.race.deadline().into());
        tokio::pin!(deadline);
        loop {
            // Biased as the general driver: the outcome before an interface change, both
            // before the deadline.
            tokio::select! {
                biased;
                r = &mut attempt => return Ended::Attempt(r),
                Some(list) = interfaces_changed(&mut interfaces), if watching => {
                    if !can_leave(&list, candidate) {
                        return Ended::Stranded;
                    }
                }
                () = &mut deadline => return Ended::Deadline,
            }
        }
    }
}
