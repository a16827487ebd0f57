//! DNS answers joining the race: their candidates are checked against what is already
//! queued or attempted, ranked with what came before, and the start gate is told.

use std::collections::HashSet;
use std::time::Instant;

use super::{
    first_contact_delay, AttemptOutcome, AttemptReport, DnsEvent, DnsSource, Lookup, Race,
    RaceEvent, DNS_RTT_MIN,
};
use crate::candidates::{order, Candidate};
use crate::net::Family;
use crate::properties::Protocol;

impl Race {
    /// A DNS answer for `family` arrived; the caller already turned its addresses into
    /// candidates (`Plan::gather`). An empty vec means no records of that family.
    /// Candidates already queued or attempted (same stack, remote and local binding) are
    /// ignored; unavailable ones are reported as skipped. Cost: O(new × known) for the
    /// duplicate check plus a sort of every candidate seen.
    pub fn on_candidates(&mut self, family: Family, candidates: Vec<Candidate>, now: Instant) {
        self.on_candidates_from(family, candidates, DnsSource::Answer, now);
    }

    /// [`Race::on_candidates`] for addresses from `source`: the HTTPS records' hints
    /// (they stand in for the `family` lookup that has not answered yet, HEv3; the real
    /// answer then adds only what is new) or earlier answers gathered again on the
    /// records' port. The trace says which. Cost: as [`Race::on_candidates`].
    pub fn on_candidates_from(
        &mut self,
        family: Family,
        candidates: Vec<Candidate>,
        source: DnsSource,
        now: Instant,
    ) {
        if self.finished {
            return;
        }
        self.take_answer(family, candidates, source, false, now);
        self.drive(now);
    }

    /// An address answer after which no other comes (an address literal's, the only
    /// one): [`Race::on_candidates`] and [`Race::on_dns_complete`] in one step, so the
    /// answer waits for no other family. Cost: as [`Race::on_candidates`].
    pub fn on_final_candidates(&mut self, family: Family, cands: Vec<Candidate>, now: Instant) {
        if !self.finished {
            self.take_answer(family, cands, DnsSource::Answer, true, now);
            self.on_dns_complete(now);
        }
    }

    /// Records an answer and queues its new candidates (`last`: no other answer comes,
    /// so it waits for none); the caller then applies the rules.
    fn take_answer(
        &mut self,
        family: Family,
        candidates: Vec<Candidate>,
        source: DnsSource,
        last: bool,
        now: Instant,
    ) {
        // Distinct addresses, counted without allocating (answers are short).
        let addresses = candidates
            .iter()
            .enumerate()
            .filter(|(i, c)| {
                !candidates[..*i]
                    .iter()
                    .any(|o| o.remote.ip() == c.remote.ip())
            })
            .count();
        self.set_lookup(family, now);
        let waits = !self.gate_open
            && family != self.awaited
            && *self.lookup(self.awaited) == Lookup::Pending
            && !self.dns_complete
            && !last
            && addresses > 0;
        self.log(
            now,
            RaceEvent::Dns {
                index: self.report.dns.len(),
                candidates: candidates.len(),
                waiting_for: waits.then_some((self.awaited, self.config.resolution_delay)),
            },
        );
        self.report.dns.push(DnsEvent {
            family,
            at: self.report.offset(now),
            result: Ok(addresses),
            source,
        });
        let mut candidates = candidates;
        if addresses > 0 && self.first_candidates_at.is_none() {
            self.first_candidates_at = Some(now);
            self.estimate_path_rtt(now);
        }
        if self.service_info.as_ref().is_some_and(|s| !s.allows_quic()) {
            candidates.retain(|c| c.stack.protocol != Protocol::Quic);
        }
        // Sized exactly: an in-flight race per flow should not carry spare slots of
        // candidate-sized entries.
        self.report.attempts.reserve_exact(candidates.len());
        // In place: drop what is already queued or attempted (or repeated in this
        // answer), and move what this build cannot run to the report as skipped.
        let mut i = 0;
        while i < candidates.len() {
            let c = &candidates[i];
            let same =
                |o: &Candidate| o.stack == c.stack && o.remote == c.remote && o.local == c.local;
            let known = candidates[..i].iter().any(same)
                || self.queue.iter().any(same)
                || self.report.attempts.iter().any(|a| same(&a.candidate));
            if known {
                candidates.remove(i);
                continue;
            }
            let Some(why) = c.unavailable else {
                i += 1;
                continue;
            };
            let c = candidates.remove(i);
            let id = self.new_id();
            self.log(now, RaceEvent::Skipped(id));
            self.report.attempts.push(AttemptReport {
                id,
                start: self.report.offset(now),
                end: Some(self.report.offset(now)),
                started_at: now,
                ended_at: Some(now),
                candidate: c,
                outcome: AttemptOutcome::Skipped(why),
                transport_up: None,
            });
        }
        let added = candidates.len();
        if self.queue.is_empty() {
            // The answer's vector becomes the queue: no copy, no allocation.
            self.queue = candidates;
        } else {
            self.queue.append(&mut candidates);
        }
        // A queue of one is in order whatever has started (the ranking drops what
        // started).
        if added > 0 && self.queue.len() > 1 {
            self.rerank();
        }
    }

    /// Ranks the queue as if every answer so far had arrived together, then drops what
    /// already started: the queue continues the interleaving where the race is (after
    /// an IPv6 start, an A answer's candidate comes next). Cost: a sort of every
    /// candidate seen.
    fn rerank(&mut self) {
        let started: Vec<&Candidate> = self
            .report
            .attempts
            .iter()
            // Cancelled candidates are queued again (see `on_attempt_reachable`).
            .filter(|a| {
                !matches!(
                    a.outcome,
                    AttemptOutcome::Skipped(_) | AttemptOutcome::Cancelled
                )
            })
            .map(|a| &a.candidate)
            .collect();
        if started.is_empty() {
            order(&mut self.queue, self.config.first_family_count);
            return;
        }
        let key = |c: &Candidate| (c.stack, c.remote, c.local.clone());
        let done: HashSet<_> = started.iter().map(|c| key(c)).collect();
        let mut all: Vec<Candidate> = started.into_iter().cloned().collect();
        all.append(&mut self.queue);
        order(&mut all, self.config.first_family_count);
        all.retain(|c| !done.contains(&key(c)));
        self.queue = all;
    }

    /// The first addresses' lookup time estimates the RTT (`RaceConfig::rtt_from_dns`).
    fn estimate_path_rtt(&mut self, now: Instant) {
        let c = &self.config;
        if !c.adaptive_delay || !c.rtt_from_dns || c.path_rtt.is_some() {
            return;
        }
        let rtt = now.saturating_duration_since(self.report.started);
        if rtt < DNS_RTT_MIN {
            return;
        }
        self.config.path_rtt = Some(rtt);
        let delay = first_contact_delay(rtt, self.config.attempt_delay);
        self.log(now, RaceEvent::PathRttFromDns { rtt, delay });
    }
}
