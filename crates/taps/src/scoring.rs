//! The last scored DNS answer of a preconnection per address family, kept so that its
//! flows to one endpoint score their candidates once: the sans-IO core computes a
//! [`ScoredAnswer`], the I/O side decides how long to keep it (here: until an answer,
//! endpoint or interface list differs).

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use taps_core::candidates::{Gathered, Plan, ScoredAnswer};
use taps_core::{Family, Interface};

use crate::context::Context;

/// One preconnection's last scored answer of each family: a name's A and AAAA answers
/// keep one each, so races to a dual-stack name alternating between them score
/// neither anew. Cost: one uncontended lock per DNS answer.
#[derive(Debug, Default)]
pub(crate) struct AnswerCache(Mutex<[Option<Arc<ScoredAnswer>>; 2]>);

/// What a DNS answer is scored for: the preconnection's plan, its remote endpoint
/// (`host:port`, the CIB's key) and the port the candidates use.
pub(crate) struct ScoreFor<'a> {
    pub(crate) plan: &'a Plan,
    pub(crate) endpoint: &'a Arc<str>,
    pub(crate) port: u16,
}

impl AnswerCache {
    /// Candidates for `addrs` (the answer for `family`) in race order, with the CIB's
    /// histories: scored anew only when the family's last answer differs (endpoint,
    /// port, addresses or the context's interface list). One lock of the CIB reads the
    /// interface list and the histories; scoring anew (rare) happens outside it, and
    /// takes a second.
    pub(crate) fn gather(
        &self,
        on: &ScoreFor<'_>,
        ctx: &Context,
        family: Family,
        addrs: &[IpAddr],
        now: Instant,
    ) -> Gathered {
        let cib = ctx.cib();
        let interfaces = cib.interfaces();
        if let Some(hit) = self.kept(on, family, addrs, &interfaces) {
            return on.plan.gather_scored(&hit, on.endpoint, &cib, now);
        }
        drop(cib);
        let fresh = self.score(on, family, addrs, interfaces);
        on.plan.gather_scored(&fresh, on.endpoint, &ctx.cib(), now)
    }

    /// The family's kept answer, if it was scored for the same endpoint, port,
    /// addresses and interface list.
    fn kept(
        &self,
        on: &ScoreFor<'_>,
        family: Family,
        addrs: &[IpAddr],
        interfaces: &Arc<Vec<Interface>>,
    ) -> Option<Arc<ScoredAnswer>> {
        let cached = self.lock()[slot(family)].clone();
        cached.filter(|s| s.matches(on.endpoint, on.port, addrs, interfaces))
    }

    /// `addrs` scored on `interfaces`, and kept as the family's answer.
    fn score(
        &self,
        on: &ScoreFor<'_>,
        family: Family,
        addrs: &[IpAddr],
        interfaces: Arc<Vec<Interface>>,
    ) -> Arc<ScoredAnswer> {
        let fresh = on
            .plan
            .score_answer(on.endpoint, on.port, addrs, interfaces);
        let fresh = Arc::new(fresh);
        self.lock()[slot(family)] = Some(fresh.clone());
        fresh
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, [Option<Arc<ScoredAnswer>>; 2]> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `family`'s slot in the cache.
fn slot(family: Family) -> usize {
    match family {
        Family::V4 => 0,
        Family::V6 => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TransportProperties;

    /// A race to a dual-stack name scores each family's answer once: the A and AAAA
    /// answers alternate without evicting each other; another address list is scored
    /// anew.
    #[test]
    fn each_family_keeps_its_answer() {
        // No context: the test needs no sockets, interface list or runtime.
        let props = TransportProperties::new().compile().unwrap();
        let pib = Arc::new(taps_core::policy::Pib::empty());
        let plan = Plan::new(&props, pib, &taps_core::candidates::Availability::all()).unwrap();
        let interfaces = Arc::new(Vec::new());
        let cache = AnswerCache::default();
        let endpoint: Arc<str> = "localhost:80".into();
        let v4 = [IpAddr::from([127, 0, 0, 1])];
        let v6 = [IpAddr::from(std::net::Ipv6Addr::LOCALHOST)];
        let on = ScoreFor {
            plan: &plan,
            endpoint: &endpoint,
            port: 80,
        };
        // What `gather` does with the lock aside: the kept answer, else a new score.
        let score = |family, addrs: &[IpAddr]| {
            cache
                .kept(&on, family, addrs, &interfaces)
                .unwrap_or_else(|| cache.score(&on, family, addrs, interfaces.clone()))
        };
        let (a, aaaa) = (score(Family::V4, &v4), score(Family::V6, &v6));
        for _ in 0..3 {
            assert!(Arc::ptr_eq(&a, &score(Family::V4, &v4)));
            assert!(Arc::ptr_eq(&aaaa, &score(Family::V6, &v6)));
        }
        let other = [IpAddr::from([127, 0, 0, 2])];
        let b = score(Family::V4, &other);
        assert!(!Arc::ptr_eq(&a, &b));
        assert!(Arc::ptr_eq(&aaaa, &score(Family::V6, &v6)));
    }
}
