//! The driver's poll function and its steps, one per kind of input (see the parent
//! module). Each step feeds the race at most one event, or all the milestones its poll
//! found, and says whether it did; the poll function then carries out the race's actions
//! before any step runs again, so the race sees its inputs in causal order: answers
//! before what they started, an attempt's milestones before its outcome, the timer after
//! every event.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use taps_core::candidates::Candidate;
use taps_core::race::{Action, AttemptId, DnsSource};
use taps_core::AttemptCause;
use taps_core::{DnsFailure, Family, Interface, ServiceInfo};
use tokio::time::Sleep;
use tracing::Instrument;

use super::{
    can_leave, family_index, next_change, now, AttemptSpec, Decided, Driver, InterfaceWatch,
    Lookups,
};
use crate::resolver::{DnsAnswer, ResolutionEvent};
use crate::transport::{AttemptError, Established, Milestone};

/// What a wait for the interface list's next change gives: the receiver back (`None`
/// once the watcher is gone) and the new list.
pub(super) type Change = (Option<InterfaceWatch>, Option<Arc<Vec<Interface>>>);

/// What an attempt's future gives.
pub(super) type Outcome = Result<Established, AttemptError>;

/// The futures a race keeps where they are, pinned in its own future across wake-ups
/// (not boxed): the race's timer and its first attempt (later ones are boxed beside it,
/// in the driver); and how to make an attempt.
pub(super) struct InPlace<'p, A> {
    pub(super) timer: Pin<&'p mut Option<Sleep>>,
    pub(super) first: Pin<&'p mut Option<A>>,
    /// Makes an attempt's future.
    pub(super) attempt: fn(AttemptSpec) -> A,
}

impl Driver<'_> {
    /// Runs the steps until the race decides (ready) or none has anything for it
    /// (pending: every step polled what it waits on, so any of them wakes the task).
    pub(super) fn poll_decided<A>(
        &mut self,
        cx: &mut Context<'_>,
        p: &mut InPlace<'_, A>,
    ) -> Poll<Decided>
    where
        A: Future<Output = Outcome> + Send + 'static,
    {
        loop {
            if let Some(decided) = self.drive_actions(p) {
                return Poll::Ready(decided);
            }
            if self.drive_dns(cx)
                || self.drive_attempts(cx, p)
                || self.drive_interfaces(cx, p)
                || self.drive_timer(cx, p.timer.as_mut())
            {
                continue;
            }
            return Poll::Pending;
        }
    }

    /// Carries out the race's actions in order; the decision, when the race made one.
    fn drive_actions<A>(&mut self, p: &mut InPlace<'_, A>) -> Option<Decided>
    where
        A: Future<Output = Outcome> + Send + 'static,
    {
        while let Some(action) = self.race.poll_action() {
            match action {
                Action::Start { id, candidate } => self.start_attempt(id, candidate, p),
                Action::Cancel { id } => {
                    self.drop_attempt(id, p);
                    if self.connected.as_ref().is_some_and(|(i, _)| *i == id) {
                        self.connected = None;
                    }
                    self.in_attempt(id, || tracing::debug!("cancelled"));
                    self.spans.retain(|(i, _)| *i != id);
                }
                Action::Won { id } => return Some(Decided::Won(id)),
                Action::Failed(err) => return Some(Decided::Failed(err)),
            }
        }
        None
    }

    /// Drops attempt `id`'s future, which closes its socket.
    fn drop_attempt<A>(&mut self, id: AttemptId, p: &mut InPlace<'_, A>) {
        if self.first == Some(id) {
            self.first = None;
            p.first.set(None);
        } else {
            self.attempts.retain(|(i, _)| *i != id);
        }
    }

    /// The name's next DNS event, if one is in.
    fn drive_dns(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(mut lookups) = self.lookups.take() else {
            return false;
        };
        let fed = self.next_dns_event(cx, &mut lookups);
        self.lookups = Some(lookups);
        fed
    }

    /// Feeds the race the next event of `lookups`, if one is in.
    fn next_dns_event(&mut self, cx: &mut Context<'_>, lookups: &mut Lookups) -> bool {
        let Some(resolution) = lookups.resolution.as_mut() else {
            return false;
        };
        // The lookups keep the task's waker (a task set's and a join handle's), so a
        // wait made afresh on each poll loses nothing.
        let Poll::Ready(event) = pin!(resolution.next_event()).poll(cx) else {
            return false;
        };
        let service_pending = resolution.service_pending();
        let now = now();
        match event {
            Some(ResolutionEvent::Addresses(answer)) => self.on_dns_answer(lookups, answer, now),
            Some(ResolutionEvent::AddressesDone) => {
                lookups.addresses_done = true;
                if !service_pending {
                    self.dns_over(lookups, now);
                }
            }
            Some(ResolutionEvent::Service(answer)) => {
                self.on_service(lookups, answer, now);
                if lookups.addresses_done {
                    self.dns_over(lookups, now);
                }
            }
            // Not given before the events above; ends the wait for DNS all the same.
            None => self.dns_over(lookups, now),
        }
        true
    }

    /// Every lookup answered: the race stops waiting for DNS.
    fn dns_over(&mut self, lookups: &mut Lookups, now: Instant) {
        lookups.resolution = None;
        self.race.on_dns_complete(now);
    }

    /// The attempts' milestones and the first outcome among them, if any came: the
    /// milestones first, so one passed in the poll that also ended its attempt reaches
    /// the race before the outcome. The first attempt is polled first: the others
    /// started after it, and are polled in start order.
    fn drive_attempts<A>(&mut self, cx: &mut Context<'_>, p: &mut InPlace<'_, A>) -> bool
    where
        A: Future<Output = Outcome>,
    {
        let mut outcome = None;
        if let (Some(id), Some(first)) = (self.first, p.first.as_mut().as_pin_mut()) {
            let span = self.spans.iter().find(|(i, _)| *i == id);
            let _entered = span.map(|(_, span)| span.enter());
            if let Poll::Ready(r) = first.poll(cx) {
                self.first = None;
                p.first.set(None);
                outcome = Some((id, r));
            }
        }
        if outcome.is_none() {
            let ready = self
                .attempts
                .iter_mut()
                .enumerate()
                .find_map(|(i, (_, fut))| match fut.as_mut().poll(cx) {
                    Poll::Ready(r) => Some((i, r)),
                    Poll::Pending => None,
                });
            outcome = ready.map(|(i, r)| (self.attempts.remove(i).0, r));
        }
        let mut fed = false;
        let mut now = None;
        while let Some((id, m)) = self.milestones.take() {
            let now = *now.get_or_insert_with(super::now);
            self.on_milestone(id, m, now);
            fed = true;
        }
        if let Some((id, result)) = outcome {
            let now = now.unwrap_or_else(super::now);
            self.on_outcome(id, result, now);
            fed = true;
        }
        fed
    }

    /// An interface change, while an attempt that one can strand runs.
    fn drive_interfaces<A>(&mut self, cx: &mut Context<'_>, p: &mut InPlace<'_, A>) -> bool {
        if !self.watching {
            return false;
        }
        if self.watch.is_none() {
            let Some(rx) = self.interfaces.take() else {
                return false;
            };
            self.watch = Some(Box::pin(next_change(rx)));
        }
        let Some(pending) = self.watch.as_mut() else {
            return false;
        };
        let Poll::Ready((rx, list)) = pending.as_mut().poll(cx) else {
            return false;
        };
        self.watch = None;
        self.interfaces = rx;
        let Some(list) = list else {
            // The watcher is gone: nothing more to wait for.
            return false;
        };
        self.on_interfaces(&list, now(), p);
        true
    }

    /// The race's timer: set to the race's next deadline (moved only when that changes:
    /// each move takes the timer wheel's lock), and run when it passes.
    fn drive_timer(&mut self, cx: &mut Context<'_>, mut timer: Pin<&mut Option<Sleep>>) -> bool {
        let Some(deadline) = self.race.poll_timeout() else {
            return false;
        };
        match timer.as_mut().as_pin_mut() {
            Some(sleep) if self.armed != Some(deadline) => sleep.reset(deadline.into()),
            Some(_) => {}
            None => timer.set(Some(tokio::time::sleep_until(deadline.into()))),
        }
        self.armed = Some(deadline);
        let Some(sleep) = timer.as_pin_mut() else {
            return false;
        };
        if sleep.poll(cx).is_pending() {
            return false;
        }
        // Fired: set again when the race next waits for a deadline.
        self.armed = None;
        self.race.handle_timeout(now());
        true
    }

    /// Starts connecting `candidate` as attempt `id` (polled from the next step on): in
    /// place if it is the race's first, else boxed.
    fn start_attempt<A>(&mut self, id: AttemptId, candidate: Candidate, p: &mut InPlace<'_, A>)
    where
        A: Future<Output = Outcome> + Send + 'static,
    {
        // A loopback remote can always be reached (see `can_leave`).
        self.watching |= !candidate.remote.ip().is_loopback();
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
        let logged = !span.is_disabled();
        if logged {
            span.in_scope(|| tracing::debug!("started"));
            self.spans.push((id, span.clone()));
        }
        let attempt = (p.attempt)(AttemptSpec {
            id,
            milestones: self.milestones.sink(&candidate.stack),
            candidate,
            opts: self.input.opts.clone(),
            security: self.input.security.clone(),
        });
        if p.first.is_none() && !self.started {
            // Polled inside its span by `drive_attempts`.
            self.first = Some(id);
            p.first.set(Some(attempt));
        } else if logged {
            self.attempts.push((id, Box::pin(attempt.instrument(span))));
        } else {
            self.attempts.push((id, Box::pin(attempt)));
        }
        if !self.started {
            if let Some(began) = self.input.began {
                began.notify_one();
            }
        }
        self.started = true;
    }

    /// Runs `event` inside attempt `id`'s span; nothing when no subscriber listens.
    fn in_attempt(&self, id: AttemptId, event: impl FnOnce()) {
        if let Some((_, span)) = self.spans.iter().find(|(i, _)| *i == id) {
            span.in_scope(event);
        }
    }

    /// Attempt `id` reported a milestone.
    fn on_milestone(&mut self, id: AttemptId, milestone: Milestone, now: Instant) {
        match milestone {
            Milestone::Reachable => {
                self.in_attempt(id, || tracing::debug!("reachable"));
                self.race.on_attempt_reachable(id, now);
            }
            Milestone::TransportUp => {
                self.in_attempt(id, || tracing::debug!("transport up"));
                self.race.on_attempt_transport_up(id, now);
            }
        }
    }

    /// Attempt `id` ended (its future is gone from the live list).
    fn on_outcome(
        &mut self,
        id: AttemptId,
        result: Result<Established, AttemptError>,
        now: Instant,
    ) {
        match result {
            Ok(established) => {
                self.in_attempt(id, || tracing::info!("connected"));
                self.connected = Some((id, established));
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

    /// One family's DNS answer: its candidates join the race (scored once per answer
    /// and preconnection, see `Preconnection`), or its failure is kept for the error.
    fn on_dns_answer(&mut self, lookups: &mut Lookups, answer: DnsAnswer, now: Instant) {
        lookups.answered[family_index(answer.family)] = true;
        match answer.result {
            Ok(addrs) => {
                tracing::debug!(family = %answer.family, addresses = ?addrs, "DNS answer");
                let port = lookups.port(self.input.remote.port);
                self.add_addresses(answer.family, &addrs, DnsSource::Answer, port, now);
                if lookups
                    .resolution
                    .as_ref()
                    .is_some_and(|r| r.service_pending())
                {
                    // Kept to be gathered again if the HTTPS records name another port.
                    lookups.early.push((answer.family, addrs));
                }
            }
            Err(e) => {
                tracing::debug!(family = %answer.family, cause = %e, "DNS lookup failed");
                self.race.on_dns_failed(answer.family, e.clone(), now);
                lookups.dns_causes.push((answer.family, e));
            }
        }
    }

    /// The interface list changed: an attempt whose local address (or, unbound, whose
    /// family) no interface that is up offers any more fails at once as unreachable —
    /// its packets have no way out — instead of waiting for the race's timeout. (New
    /// interfaces add no candidates to a running race.)
    fn on_interfaces<A>(&mut self, list: &[Interface], now: Instant, p: &mut InPlace<'_, A>) {
        let report = self.race.report();
        let gone: Vec<AttemptId> = self
            .first
            .iter()
            .copied()
            .chain(self.attempts.iter().map(|(id, _)| *id))
            .filter(|id| {
                report
                    .attempt(*id)
                    .is_some_and(|a| !can_leave(list, &a.candidate))
            })
            .collect();
        for id in gone {
            self.drop_attempt(id, p);
            self.in_attempt(id, || tracing::info!("failed: its interface went down"));
            self.spans.retain(|(i, _)| *i != id);
            self.race
                .on_attempt_failed(id, AttemptCause::Unreachable, now);
        }
    }

    /// The HTTPS answer: the race learns it (QUIC kept only with h3), and its address
    /// hints stand in for the families whose A/AAAA answer has not come yet (HEv3).
    fn on_service(
        &mut self,
        lookups: &mut Lookups,
        answer: Result<ServiceInfo, DnsFailure>,
        now: Instant,
    ) {
        match &answer {
            Ok(info) => tracing::debug!(records = ?info, "HTTPS records"),
            Err(cause) => tracing::debug!(%cause, "no HTTPS records"),
        }
        let origin = self.input.remote.port;
        if let Ok(info) = &answer {
            lookups.service = Some(info.clone());
            // Addresses that came before the records were gathered on the origin's port:
            // they join again on the records' port before the race reads the answer
            // (which then drops what is queued for another port).
            if let Some(port) = info.port().filter(|p| *p != origin) {
                for (family, addrs) in std::mem::take(&mut lookups.early) {
                    self.add_addresses(family, &addrs, DnsSource::ServicePort, port, now);
                }
            }
        }
        self.race.on_service(answer, now);
        let Some(info) = &lookups.service else {
            return;
        };
        let port = lookups.port(origin);
        for family in [Family::V6, Family::V4] {
            let hints = info.hints(family);
            if !hints.is_empty() && !lookups.answered[family_index(family)] {
                self.add_addresses(family, &hints, DnsSource::Hint, port, now);
            }
        }
    }
}
