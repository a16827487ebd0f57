//! The last scored DNS answer of a preconnection, kept so that its flows to one endpoint
//! score their candidates once: the sans-IO core computes a [`ScoredAnswer`], the I/O
//! side decides how long to keep it (here: until an answer, endpoint or interface list
//! differs).

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use taps_core::candidates::{Gathered, Plan, ScoredAnswer};

use crate::context::Context;

/// One preconnection's last scored answer. Cost: one uncontended lock per DNS answer.
#[derive(Debug, Default)]
pub(crate) struct AnswerCache(Mutex<Option<Arc<ScoredAnswer>>>);

impl AnswerCache {
    /// Candidates for `addrs` of `endpoint` in race order, with the CIB's histories:
    /// scored anew only when the last answer differs (endpoint, port, addresses or
    /// interface list); the CIB is locked only to add the histories.
    pub(crate) fn gather(
        &self,
        plan: &Plan,
        ctx: &Context,
        endpoint: &Arc<str>,
        port: u16,
        addrs: &[IpAddr],
        now: Instant,
    ) -> Gathered {
        let interfaces = ctx.cib().interfaces();
        let cached = self.lock().clone();
        let scored = match cached.filter(|s| s.matches(endpoint, port, addrs, &interfaces)) {
            Some(hit) => hit,
            None => {
                let fresh = Arc::new(plan.score_answer(endpoint, port, addrs, interfaces));
                *self.lock() = Some(fresh.clone());
                fresh
            }
        };
        plan.gather_scored(&scored, endpoint, &ctx.cib(), now)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<ScoredAnswer>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
