//! Generated race scripts: random networks, DNS timings and settings played through the
//! same simulator as the hand-written tests ([`Sim::run`](super::tests::Sim::run)), which
//! checks the race's invariants on each. Minimal failing scripts are kept below as named
//! regression tests.

use std::collections::HashMap;

use proptest::prelude::*;
use proptest::sample::Index;

use super::tests::{addr, cand, ms, Input, Path, Sim};
use std::time::Duration;

use super::*;
use crate::policy::History;
use crate::properties::Protocol;
use crate::{Stack, Unavailable};

/// Cases per `cargo test` run (the whole property takes about a second in debug).
const CASES: u32 = 5000;
/// Cases of the same scripts with every time on a coarse grid, so that inputs and
/// timers coincide (a connection and a failure in the same instant, a connection at
/// the deadline, an answer when the Resolution Delay or the stagger runs out, ...).
const GRID_CASES: u32 = 1000;

/// One remote address of a generated script.
#[derive(Debug, Clone)]
struct Addr {
    path: Path,
    history: History,
    /// A higher score than the others (ranks first).
    preferred: bool,
    /// The TCP candidate is `unavailable`.
    unavailable: bool,
    /// An SCTP candidate for the same address too: `Some(available)`.
    sctp: Option<bool>,
}

/// One family's lookup.
#[derive(Debug, Clone)]
enum Dns {
    /// Answers with the family's candidates at this ms.
    Answer(u64),
    /// Answers with no record at this ms.
    Empty(u64),
    /// Fails at this ms.
    Fail(u64),
    /// Never answers.
    Never,
}

/// A generated script: settings, network and resolver.
#[derive(Debug, Clone)]
struct Script {
    config: RaceConfig,
    v6: Vec<Addr>,
    v4: Vec<Addr>,
    aaaa: Dns,
    a: Dns,
    /// At equal times, the A input goes before the AAAA input.
    a_first: bool,
    /// `on_dns_complete` at this ms.
    complete: Option<u64>,
    /// Candidates repeated inside their own answer.
    dups: Vec<Index>,
    /// A later answer of one family, joining the race.
    late: Option<Late>,
}

/// A later answer of one family (another resolver, an updated record set): some of
/// the family's candidates again, and new addresses.
#[derive(Debug, Clone)]
struct Late {
    ipv6: bool,
    at: u64,
    repeats: Vec<Index>,
    new: Vec<Addr>,
}

impl Script {
    fn candidates(addrs: &[Addr], ip: impl Fn(usize) -> String) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (i, a) in addrs.iter().enumerate() {
            let mut c = cand(&ip(i + 1));
            c.history = a.history.clone();
            c.score = if a.preferred { 1.0 } else { 0.0 };
            if a.unavailable {
                c.unavailable = Some(Unavailable::NotBuilt);
            }
            if let Some(available) = a.sctp {
                let mut s = c.clone();
                s.stack = Stack::plain(Protocol::Sctp);
                s.unavailable = (!available).then_some(Unavailable::NotBuilt);
                out.push(s);
            }
            out.push(c);
        }
        out
    }

    /// The same script with every time a multiple of 50 ms (the timeout of 100 ms, a
    /// CIB connect time of 20 ms: adaptive delays of 10, 50, 90, ... ms).
    fn on_grid(mut self) -> Script {
        fn round(ms: u64, grid: u64) -> u64 {
            (ms + grid / 2) / grid * grid
        }
        fn dur(d: Duration, grid: u64) -> Duration {
            ms(round(d.as_millis() as u64, grid))
        }
        fn path(p: &mut Path) {
            match p {
                Path::Connects(t) | Path::Refused(t) => *t = round(*t, 50),
                Path::Blackhole => {}
                Path::Reachable(t, then) => {
                    *t = round(*t, 50);
                    path(then);
                }
            }
        }
        fn address(a: &mut Addr) {
            path(&mut a.path);
            if let History::Succeeded { rtt, .. } = &mut a.history {
                *rtt = dur(*rtt, 20);
            }
        }
        let c = &mut self.config;
        c.attempt_delay = dur(c.attempt_delay, 50);
        c.resolution_delay = dur(c.resolution_delay, 50);
        c.timeout = dur(c.timeout, 100).max(ms(100));
        for dns in [&mut self.aaaa, &mut self.a] {
            if let Dns::Answer(t) | Dns::Empty(t) | Dns::Fail(t) = dns {
                *t = round(*t, 50);
            }
        }
        self.complete = self.complete.map(|t| round(t, 50));
        if let Some(late) = &mut self.late {
            late.at = round(late.at, 50);
            late.new.iter_mut().for_each(address);
        }
        self.v6.iter_mut().chain(&mut self.v4).for_each(address);
        self
    }

    fn sim(&self) -> Sim {
        let v6ip = |i: usize| format!("2001:db8::{i}");
        let v4ip = |i: usize| format!("192.0.2.{i}");
        let mut net = HashMap::new();
        let mut paths = |addrs: &[Addr], ip: &dyn Fn(usize) -> String| {
            for (i, a) in addrs.iter().enumerate() {
                net.insert(addr(&ip(i + 1)), a.path.clone());
            }
        };
        paths(&self.v6, &v6ip);
        paths(&self.v4, &v4ip);
        let mut v6 = Self::candidates(&self.v6, v6ip);
        let mut v4 = Self::candidates(&self.v4, v4ip);
        let late = self.late.as_ref().map(|late| {
            let (family, from) = match late.ipv6 {
                true => (Family::V6, &v6),
                false => (Family::V4, &v4),
            };
            let mut answer: Vec<Candidate> =
                late.repeats.iter().map(|i| i.get(from).clone()).collect();
            let ip = move |i: usize| match late.ipv6 {
                true => format!("2001:db8:1::{i}"),
                false => format!("198.51.100.{i}"),
            };
            paths(&late.new, &ip);
            answer.extend(Self::candidates(&late.new, ip));
            (ms(late.at), Input::Answer(family, answer))
        });
        for (n, i) in self.dups.iter().enumerate() {
            let list = if n % 2 == 0 { &mut v6 } else { &mut v4 };
            let c = i.get(list).clone();
            list.push(c);
        }
        let lookup = |family: Family, dns: &Dns, candidates: Vec<Candidate>| match dns {
            Dns::Answer(at) => Some((ms(*at), Input::Answer(family, candidates))),
            Dns::Empty(at) => Some((ms(*at), Input::Answer(family, Vec::new()))),
            Dns::Fail(at) => Some((
                ms(*at),
                Input::DnsFailed(
                    family,
                    DnsFailure::Other(crate::LayerError::new(std::io::Error::other("SERVFAIL"))),
                ),
            )),
            Dns::Never => None,
        };
        let aaaa = lookup(Family::V6, &self.aaaa, v6);
        let a = lookup(Family::V4, &self.a, v4);
        let mut script: Vec<(Duration, Input)> = Vec::new();
        let lookups = match self.a_first {
            true => [a, aaaa],
            false => [aaaa, a],
        };
        script.extend(lookups.into_iter().flatten());
        script.extend(self.complete.map(|at| (ms(at), Input::DnsComplete)));
        script.extend(late);
        Sim {
            config: self.config.clone(),
            expect: None,
            net,
            script,
        }
    }
}

fn path() -> impl Strategy<Value = Path> {
    prop_oneof![
        3 => (0..=3000u64).prop_map(Path::Connects),
        2 => (0..=500u64).prop_map(Path::Refused),
        2 => Just(Path::Blackhole),
        2 => (0..=1500u64, 0..=1500u64, any::<bool>()).prop_map(|(r, d, connects)| {
            let then = match connects {
                true => Path::Connects(r + d),
                false => Path::Refused(r + d),
            };
            Path::Reachable(r, Box::new(then))
        }),
    ]
}

fn history() -> impl Strategy<Value = History> {
    let age = ms(60_000);
    let cause = prop_oneof![
        Just(AttemptCause::Refused),
        Just(AttemptCause::TimedOut { after: None }),
        (0..=3000u64).prop_map(|s| AttemptCause::Overtaken { silent: ms(s) }),
    ];
    prop_oneof![
        3 => Just(History::Unknown),
        2 => (0..=500u64).prop_map(move |rtt| History::Succeeded { rtt: ms(rtt), age }),
        1 => cause.prop_map(move |cause| History::Failed { cause, age }),
    ]
}

fn address() -> impl Strategy<Value = Addr> {
    (
        path(),
        history(),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.1),
        prop::option::weighted(0.2, any::<bool>()),
    )
        .prop_map(|(path, history, preferred, unavailable, sctp)| Addr {
            path,
            history,
            preferred,
            unavailable,
            sctp,
        })
}

fn dns() -> impl Strategy<Value = Dns> {
    prop_oneof![
        8 => (0..=300u64).prop_map(Dns::Answer),
        1 => (0..=300u64).prop_map(Dns::Empty),
        1 => (0..=300u64).prop_map(Dns::Fail),
        1 => Just(Dns::Never),
    ]
}

fn config() -> impl Strategy<Value = RaceConfig> {
    (
        10..=2000u64,
        0..=200u64,
        1..=8usize,
        100..=30_000u64,
        1..=2usize,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(attempt, resolution, max_alive, timeout, ffc, adaptive, v6)| RaceConfig {
                attempt_delay: ms(attempt),
                resolution_delay: ms(resolution),
                first_family_count: ffc,
                timeout: ms(timeout),
                max_alive,
                adaptive_delay: adaptive,
                awaited_family: if v6 { Family::V6 } else { Family::V4 },
                await_service: false,
                // The oracle staggers by the configured delays: no estimate mid-race.
                path_rtt: None,
                rtt_from_dns: false,
                timeline: true,
            },
        )
}

fn late() -> impl Strategy<Value = Late> {
    (
        any::<bool>(),
        0..=1500u64,
        prop::collection::vec(any::<Index>(), 0..=2),
        prop::collection::vec(address(), 0..=2),
    )
        .prop_map(|(ipv6, at, repeats, new)| Late {
            ipv6,
            at,
            repeats,
            new,
        })
}

fn script() -> impl Strategy<Value = Script> {
    (
        config(),
        prop::collection::vec(address(), 1..=6),
        prop::collection::vec(address(), 1..=6),
        dns(),
        dns(),
        any::<bool>(),
        prop::option::weighted(0.25, 0..=400u64),
        prop::collection::vec(any::<Index>(), 0..=2),
        prop::option::weighted(0.3, late()),
    )
        .prop_map(
            |(config, v6, v4, aaaa, a, a_first, complete, dups, late)| Script {
                config,
                v6,
                v4,
                aaaa,
                a,
                a_first,
                complete,
                dups,
                late,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: CASES,
        // Minimal failing scripts are kept as named tests below, not in a file.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every generated script keeps every invariant `Sim::run` checks.
    #[test]
    fn generated_scripts_keep_the_invariants(script in script()) {
        script.sim().run();
    }
}

/// What a run decided and reported, without the timeline and the run's own clock: what
/// must not change when the race keeps no timeline.
fn decisions(run: &super::tests::Run) -> String {
    // A failed race's report is in its error (the race keeps an empty one).
    let r = run
        .failed
        .as_ref()
        .map_or(run.race.report(), |(_, e)| e.report());
    let attempts: Vec<_> = r
        .attempts
        .iter()
        .map(|a| (a.id, a.candidate.remote, a.start, a.end, &a.outcome))
        .collect();
    let starts: Vec<_> = run
        .starts
        .iter()
        .map(|(t, id, c)| (t, id, c.remote))
        .collect();
    format!(
        "{starts:?} {:?} {:?} {:?} {:?} {attempts:?} {:?} {:?} {}",
        run.cancels,
        run.failures,
        run.won,
        run.failed.as_ref().map(|(t, e)| (t, e.to_string())),
        r.winner,
        r.total,
        r.dns.len(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: GRID_CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The same with coinciding inputs and timers.
    #[test]
    fn coinciding_events_keep_the_invariants(script in script().prop_map(Script::on_grid)) {
        script.sim().run();
    }

    /// A race that keeps no timeline decides and reports everything else the same, and
    /// its timeline stays empty.
    #[test]
    fn a_race_without_a_timeline_decides_the_same(script in script()) {
        let with = script.sim().run();
        let mut sim = script.sim();
        sim.config.timeline = false;
        let without = sim.run();
        prop_assert!(without.race.report().timeline.is_empty());
        if let Some((_, e)) = &without.failed {
            prop_assert!(e.report().timeline.is_empty());
        }
        prop_assert_eq!(decisions(&with), decisions(&without));
    }
}
