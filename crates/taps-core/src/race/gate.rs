//! The start gate: the Resolution Delay (HEv3), waiting for the preferred family's and
//! the service (HTTPS) answers before the first start.

use std::time::Instant;

use super::{Family, Lookup, Race, RaceEvent};

impl Race {
    /// What the start gate waits for: the awaited family (when the other answered
    /// first) and the service answer (when candidates are in), each since when.
    pub(super) fn gate_waits(&self) -> (Option<Instant>, Option<Instant>) {
        let family = self
            .other_answered_at
            .filter(|_| self.awaited_pending() && !self.dns_complete);
        let service = self
            .first_candidates_at
            .filter(|_| self.service == Lookup::Pending && !self.dns_complete);
        (family, service)
    }

    pub(super) fn awaited_pending(&self) -> bool {
        match self.awaited {
            Family::V6 => self.v6 == Lookup::Pending,
            Family::V4 => self.v4 == Lookup::Pending,
        }
    }

    /// When the Resolution Delay ends the gate's wait, if it waits.
    pub(super) fn gate_deadline(&self) -> Option<Instant> {
        let (family, service) = self.gate_waits();
        let since = match (family, service) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some(since + self.config.resolution_delay)
    }

    /// Opens the start gate when nothing is awaited any more or the Resolution Delay
    /// since the first wait is over (HEv3: addresses in, and the preferred family and
    /// the service answer in, or the delay passed).
    pub(super) fn update_gate(&mut self, now: Instant) {
        if self.gate_open || self.queue.is_empty() {
            return;
        }
        let (family, service) = self.gate_waits();
        let Some(deadline) = self.gate_deadline() else {
            self.gate_open = true;
            return;
        };
        if now < deadline {
            return;
        }
        let after = self.config.resolution_delay;
        if family.is_some() {
            let family = self.awaited;
            self.log(now, RaceEvent::ResolutionDelayOver { family, after });
        }
        if service.is_some() {
            self.log(now, RaceEvent::ServiceDelayOver { after });
        }
        self.gate_open = true;
    }
}
