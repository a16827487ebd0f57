//! The commitment to an attempt whose peer answered before its handshake completed
//! (SCTP's INIT-ACK), and how long it holds.

use std::time::{Duration, Instant};

use super::{AttemptId, AttemptOutcome, Pending, Race, RaceEvent, MIN_ATTEMPT_DELAY};

/// The race's commitment to attempt `id`, which holds until `until` (`grace` after its
/// peer answered).
#[derive(Debug, Clone, Copy)]
pub(super) struct Commitment {
    pub(super) id: AttemptId,
    pub(super) until: Instant,
    pub(super) grace: Duration,
}

impl Race {
    /// Attempt `id`'s peer answered one round trip in, before its handshake completed
    /// (SCTP INIT-ACK). The race commits to it: every other alive attempt is cancelled
    /// and its candidate queued again in front, and nothing starts until `id` fails or
    /// the commitment lapses, `max(2 × the answer time + 10 ms, attempt delay)` after the
    /// answer. Ignored for unknown or ended ids and when the race is already committed.
    /// Cost: O(attempts).
    pub fn on_attempt_reachable(&mut self, id: AttemptId, now: Instant) {
        if self.finished || !self.is_alive(id) || self.leader.is_some() {
            return;
        }
        let reached_after = self
            .report
            .attempt(id)
            .map(|a| now.saturating_duration_since(a.started_at))
            .unwrap_or_default();
        let grace = commit_grace(reached_after, self.config.attempt_delay);
        self.leader = Some(Commitment {
            id,
            until: now + grace,
            grace,
        });
        self.log(now, RaceEvent::Reachable(id));
        let mut requeue = Vec::new();
        for other in self.pending() {
            if other == id {
                continue;
            }
            self.end(other, AttemptOutcome::Cancelled, now);
            self.log(now, RaceEvent::Cancelled(other));
            self.outbox.push(Pending::Cancel(other));
            if let Some(a) = self.report.attempt(other) {
                requeue.push(a.candidate.clone());
            }
        }
        requeue.append(&mut self.queue);
        self.queue = requeue;
        self.drive(now);
    }

    /// Ends the commitment to a leader that has not connected within its grace while
    /// candidates wait: they start again by the usual rules (the leader stays alive, and
    /// whichever connects first wins). A handshake that stalls after its peer answered (a
    /// lost COOKIE-ECHO, a server that never completes) then costs the grace, not the
    /// establishment timeout.
    pub(super) fn lapse_commitment(&mut self, now: Instant) {
        let Some(c) = self.leader else { return };
        if now < c.until || self.queue.is_empty() {
            return;
        }
        self.leader = None;
        self.log(
            now,
            RaceEvent::CommitmentLapsed {
                id: c.id,
                after: c.grace,
            },
        );
    }
}

/// How long a commitment to an attempt whose peer answered `reached_after` into it
/// holds: twice that (the handshake's remaining round trip, with room) plus 10 ms, and
/// never less than the attempt delay, so a peer that answers quickly but completes a
/// little late (a loaded server) is not raced by the next candidate for it.
pub(super) fn commit_grace(reached_after: Duration, attempt_delay: Duration) -> Duration {
    (reached_after.saturating_mul(2) + MIN_ATTEMPT_DELAY).max(attempt_delay)
}
