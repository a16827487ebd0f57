//! The Happy Eyeballs race state machine fed arbitrary event sequences: DNS answers (with
//! duplicates, unavailable stacks, CIB histories), DNS failures, HTTPS answers, attempt
//! progress, and time passing. Invariants, as in the proptests (race/proptests.rs):
//! attempt ids only grow; unavailable candidates never start; at most one decision (Won or
//! Failed) and no action after it; cancels and the win name alive attempts only, and the
//! win cancels every other attempt first; alive attempts stay within `max_alive`; a running
//! race always has a timer after `now` and not after the deadline; the report's times
//! never go backwards. With the first byte odd the events may also name attempts that are
//! no longer alive (stale events a careless caller could deliver): then only "no panic, at
//! most one decision, nothing after it" is checked.
#![no_main]

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use taps_core::candidates::Candidate;
use taps_core::policy::History;
use taps_core::race::{Action, AttemptId, Race, RaceConfig};
use taps_core::Stack;
use taps_core::{AttemptCause, DnsFailure, Family, LayerError, ServiceInfo, ServiceRecord};

/// Reads the input a byte at a time; zeros when it runs out.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn below(&mut self, n: u64) -> u64 {
        let v = u64::from(self.byte()) | u64::from(self.byte()) << 8;
        v % n
    }
    fn flag(&mut self) -> bool {
        self.byte() & 1 == 1
    }
    fn ms(&mut self, max: u64) -> Duration {
        Duration::from_millis(self.below(max + 1))
    }
    fn empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn family(b: &mut Bytes) -> Family {
    if b.flag() {
        Family::V6
    } else {
        Family::V4
    }
}

fn cause(b: &mut Bytes) -> AttemptCause {
    match b.byte() % 6 {
        0 => AttemptCause::Refused,
        1 => AttemptCause::Reset,
        2 => AttemptCause::Unreachable,
        3 => AttemptCause::TimedOut { after: None },
        4 => AttemptCause::Handshake(LayerError::new(std::io::Error::other("alert"))),
        _ => AttemptCause::other(std::io::Error::other("fuzz")),
    }
}

fn candidate(b: &mut Bytes, family: Family) -> Candidate {
    let host = u16::from(b.byte() % 8) + 1;
    let ip = match family {
        Family::V4 => IpAddr::V4(Ipv4Addr::new(192, 0, 2, host as u8)),
        Family::V6 => IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, host)),
    };
    let port = if b.byte() % 4 == 0 { 8443 } else { 443 };
    let stack = Stack::ALL[usize::from(b.byte()) % Stack::ALL.len()];
    let history = match b.byte() % 4 {
        0 | 1 => History::Unknown,
        2 => History::Succeeded {
            rtt: b.ms(600),
            age: Duration::from_secs(60),
        },
        _ => History::Failed {
            cause: cause(b),
            age: Duration::from_secs(60),
        },
    };
    Candidate {
        stack,
        remote: SocketAddr::new(ip, port),
        local: None,
        score: f64::from(b.byte() % 4),
        history,
        reasons: Vec::new().into(),
        unavailable: (b.byte() % 8 == 0).then_some(taps_core::Unavailable::NotBuilt),
    }
}

fn service(b: &mut Bytes) -> Result<ServiceInfo, DnsFailure> {
    if b.byte() % 4 == 0 {
        return Err(DnsFailure::Other(LayerError::new(std::io::Error::other(
            "SERVFAIL",
        ))));
    }
    let records = (0..b.byte() % 3)
        .map(|i| ServiceRecord {
            priority: u16::from(i) + 1,
            target: ".".into(),
            alpn: if b.flag() {
                vec!["h3".into(), "h2".into()]
            } else {
                vec!["h2".into()]
            },
            port: b.flag().then_some(8443),
            ..ServiceRecord::default()
        })
        .collect();
    Ok(ServiceInfo::new(records))
}

/// What the caller knows of the race from its actions.
#[derive(Default)]
struct Watch {
    last_id: u32,
    started: Vec<AttemptId>,
    alive: BTreeSet<AttemptId>,
    decided: bool,
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let strict = !b.flag();
    let config = RaceConfig {
        attempt_delay: b.ms(2000),
        resolution_delay: b.ms(200),
        first_family_count: usize::from(b.byte() % 3),
        timeout: Duration::from_millis(100) + b.ms(30_000),
        max_alive: usize::from(b.byte() % 9),
        adaptive_delay: b.flag(),
        awaited_family: family(&mut b),
        await_service: b.flag(),
        path_rtt: None,
        rtt_from_dns: false,
        // The timeline is only recorded or not; the property test in taps-core shows
        // the race the same either way.
        timeline: true,
    };
    // A known path RTT (from the caller) and one estimated from the DNS time, both
    // fuzzed: neither may break an invariant.
    let config = RaceConfig {
        path_rtt: b.flag().then(|| b.ms(500)),
        rtt_from_dns: b.flag(),
        ..config
    };
    let start = Instant::now();
    let mut race = Race::new(config, start);
    let max = race.config().max_alive;
    let deadline = start + race.config().timeout;
    let mut now = start;
    let mut w = Watch::default();
    let mut steps = 0;
    while !b.empty() && steps < 4096 {
        steps += 1;
        // The attempt an event is about: an alive one, or (not strict) any id.
        let pick = |b: &mut Bytes, w: &Watch| -> Option<AttemptId> {
            let i = usize::from(b.byte());
            if strict {
                w.alive.iter().nth(i % w.alive.len().max(1)).copied()
            } else if i % 8 == 7 || w.started.is_empty() {
                Some(AttemptId(i as u32 % 40))
            } else {
                Some(w.started[i % w.started.len()])
            }
        };
        let mut connected = None;
        match b.byte() % 10 {
            0 | 1 => {
                let f = family(&mut b);
                let list = (0..b.byte() % 6).map(|_| candidate(&mut b, f)).collect();
                race.on_candidates(f, list, now);
            }
            2 => {
                let f = family(&mut b);
                race.on_dns_failed(
                    f,
                    DnsFailure::Other(LayerError::new(std::io::Error::other("SERVFAIL"))),
                    now,
                );
            }
            3 => {
                let s = service(&mut b);
                race.on_service(s, now);
            }
            4 => race.on_dns_complete(now),
            5 => match pick(&mut b, &w) {
                Some(id) => race.on_attempt_reachable(id, now),
                None => continue,
            },
            6 => match pick(&mut b, &w) {
                Some(id) => race.on_attempt_transport_up(id, now),
                None => continue,
            },
            7 => match pick(&mut b, &w) {
                Some(id) => {
                    connected = Some(id);
                    race.on_attempt_connected(id, now)
                }
                None => continue,
            },
            8 => match pick(&mut b, &w) {
                Some(id) => {
                    let c = cause(&mut b);
                    w.alive.remove(&id);
                    race.on_attempt_failed(id, c, now)
                }
                None => continue,
            },
            _ => {
                // Time passes: to the race's timer (exactly) or by some amount.
                let to_timer = b.flag();
                let step = b.ms(3000);
                now = match (to_timer, race.poll_timeout()) {
                    (true, Some(t)) if t > now => t,
                    _ => now + step,
                };
                if race.poll_timeout().is_some_and(|t| t <= now) {
                    race.handle_timeout(now);
                }
            }
        }
        while let Some(action) = race.poll_action() {
            assert!(!w.decided, "{action:?} after the decision");
            match action {
                Action::Start { id, candidate } => {
                    assert!(id.0 > w.last_id, "{id} after #{}", w.last_id);
                    w.last_id = id.0;
                    assert!(candidate.unavailable.is_none(), "started {candidate}");
                    w.started.push(id);
                    w.alive.insert(id);
                }
                Action::Cancel { id } => {
                    let was = w.alive.remove(&id);
                    assert!(was || !strict, "cancelled {id}, not alive");
                }
                Action::Won { id } => {
                    assert!(w.started.contains(&id), "{id} won, never started");
                    if strict {
                        assert_eq!(connected, Some(id), "{id} won unasked");
                        assert!(w.alive.contains(&id), "{id} won, not alive");
                        assert_eq!(w.alive.len(), 1, "won with others alive: {:?}", w.alive);
                        assert!(now <= deadline, "won after the deadline");
                    }
                    w.alive.clear();
                    w.decided = true;
                }
                Action::Failed(_) => {
                    if strict {
                        assert!(w.alive.is_empty(), "failed with {:?} alive", w.alive);
                    }
                    w.alive.clear();
                    w.decided = true;
                }
            }
        }
        assert_eq!(race.is_finished(), w.decided, "finished without a decision");
        if strict {
            assert_eq!(race.alive(), w.alive.len(), "alive count");
            assert!(race.alive() <= max, "{} alive, max {max}", race.alive());
            if let Some(id) = connected {
                assert!(w.decided, "{id} connected and did not win");
            }
            if !w.decided {
                let t = race.poll_timeout().expect("a running race has a timer");
                assert!(t > now, "timer {t:?} not after now {now:?}");
                assert!(t <= deadline, "timer after the deadline");
            }
        }
        if w.decided {
            break;
        }
    }
    let report = race.report();
    let mut last = Duration::ZERO;
    for (at, event) in &report.timeline {
        assert!(*at >= last, "timeline went back at {event:?}");
        last = *at;
    }
    for a in &report.attempts {
        if let Some(end) = a.end {
            assert!(end >= a.start, "{} ended before it started", a.id);
        }
    }
    let _ = report.trace();
});
