//! Micro-benchmarks of the sans-IO core (taps-core): what every flow pays before and
//! around its sockets. Run with `cargo bench -p taps-bench --bench core`.

#![forbid(unsafe_code)]

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_main, Criterion};
use taps_core::candidates::{Availability, Candidate, Plan};
use taps_core::policy::{Cib, OutcomeKey, Pib};
use taps_core::properties::{Preference, Protocol, TransportProperties};
use taps_core::race::{Action, Race, RaceConfig};
use taps_core::{AttemptCause, Family, Security, Stack, Unavailable};

const NEAT_JSON: &str = r#"{"transport": {"value": ["SCTP", "TCP"], "precedence": 2},
 "preserveMsgBoundaries": {"value": true, "precedence": 1}, "low_latency": true}"#;

/// What taps can run (as `taps::Context` reports it): the plain stacks, SCTP included
/// (usrsctp); no TLS, DTLS or QUIC yet.
fn availability() -> Availability {
    let mut a = Availability::all();
    for stack in Stack::ALL {
        let runs = stack.security == Security::None && stack.protocol != Protocol::Quic;
        if !runs {
            a = a.without(stack, Unavailable::NotBuilt);
        }
    }
    a
}

fn properties(c: &mut Criterion) {
    c.bench_function("properties: defaults, compile", |b| {
        b.iter(|| black_box(TransportProperties::new().compile().expect("compiles")))
    });
    c.bench_function("properties: NEAT JSON, parse + compile", |b| {
        b.iter(|| {
            black_box(
                TransportProperties::from_neat_json(black_box(NEAT_JSON))
                    .expect("parses")
                    .compile()
                    .expect("compiles"),
            )
        })
    });
}

fn plan_and_gather(c: &mut Criterion) {
    let props = TransportProperties::new().compile().expect("compiles");
    let pib = Arc::new(Pib::builtin());
    let avail = availability();
    c.bench_function("Plan::new (built-in PIB, default properties)", |b| {
        b.iter(|| black_box(Plan::new(&props, pib.clone(), &avail).expect("plan")))
    });
    let plan = Plan::new(&props, pib.clone(), &avail).expect("plan");
    let endpoint: Arc<str> = "localhost:7400".into();
    let addrs = [
        IpAddr::V6(Ipv6Addr::LOCALHOST),
        IpAddr::V4(Ipv4Addr::LOCALHOST),
    ];
    let now = Instant::now();
    let empty = Cib::default();
    c.bench_function("Plan::gather, 2 addresses, empty CIB", |b| {
        b.iter(|| black_box(plan.gather(&endpoint, 7400, black_box(&addrs), &empty, now)))
    });
    let mut seeded = Cib::default();
    for ip in addrs {
        let key = OutcomeKey {
            interface: None,
            endpoint: endpoint.clone(),
            stack: Stack::plain(Protocol::Tcp),
            remote: SocketAddr::new(ip, 7400),
        };
        if ip.is_ipv6() {
            seeded.record_failure(key, AttemptCause::Refused, now);
        } else {
            seeded.record_success(key, Duration::from_micros(60), now);
        }
    }
    c.bench_function("Plan::gather, 2 addresses, seeded CIB", |b| {
        b.iter(|| black_box(plan.gather(&endpoint, 7400, black_box(&addrs), &seeded, now)))
    });
    // What every flow after the first pays: the answer was scored once and is reused.
    let scored = plan.score_answer(&endpoint, 7400, &addrs, seeded.interfaces());
    c.bench_function("Plan::gather_scored, 2 addresses, seeded CIB", |b| {
        b.iter(|| black_box(plan.gather_scored(black_box(&scored), &endpoint, &seeded, now)))
    });
    let tcp = TransportProperties::new()
        .protocols(Preference::Require, [Protocol::Tcp])
        .compile()
        .expect("compiles");
    let tcp_plan = Plan::new(&tcp, pib, &avail).expect("plan");
    let one = [IpAddr::V4(Ipv4Addr::LOCALHOST)];
    c.bench_function("Plan::gather, TCP only, 1 address", |b| {
        b.iter(|| black_box(tcp_plan.gather(&endpoint, 7400, black_box(&one), &empty, now)))
    });
}

fn race(c: &mut Criterion) {
    let props = TransportProperties::new()
        .protocols(Preference::Require, [Protocol::Tcp])
        .compile()
        .expect("compiles");
    let plan = Plan::new(&props, Arc::new(Pib::builtin()), &availability()).expect("plan");
    let endpoint: Arc<str> = "localhost:7400".into();
    let cib = Cib::default();
    let t0 = Instant::now();
    let v6 = plan.gather(&endpoint, 7400, &[Ipv6Addr::LOCALHOST.into()], &cib, t0);
    let v4 = plan.gather(&endpoint, 7400, &[Ipv4Addr::LOCALHOST.into()], &cib, t0);
    // A whole race as the tokio driver runs it on loopback with ::1 refused: both
    // answers, first attempt fails, second connects and wins.
    c.bench_function("Race: 2 families, first refused, second wins", |b| {
        b.iter(|| {
            let now = Instant::now();
            let mut race = Race::new(RaceConfig::default(), now);
            race.on_candidates(Family::V6, v6.candidates.clone(), now);
            race.on_candidates(Family::V4, v4.candidates.clone(), now);
            race.on_dns_complete(now);
            play_until_won(&mut race, now, |c| c.remote.is_ipv6());
            black_box(race.report().attempts.len())
        })
    });
    // The TCP+SCTP race of the benchmarks' experiment 3 with SCTP dead: SCTP refused at
    // once, TCP started and wins.
    let both = TransportProperties::new()
        .protocols(Preference::Require, [Protocol::Sctp, Protocol::Tcp])
        .compile()
        .expect("compiles");
    let both_plan = Plan::new(&both, Arc::new(Pib::builtin()), &availability()).expect("plan");
    let endpoint4: Arc<str> = "127.0.0.1:7400".into();
    let sctp_tcp = both_plan.gather(&endpoint4, 7400, &[Ipv4Addr::LOCALHOST.into()], &cib, t0);
    assert_eq!(sctp_tcp.candidates.len(), 2, "SCTP and TCP candidates");
    c.bench_function("Race: SCTP refused, TCP wins", |b| {
        b.iter(|| {
            let now = Instant::now();
            let mut race = Race::new(RaceConfig::default(), now);
            race.on_candidates(Family::V4, sctp_tcp.candidates.clone(), now);
            race.on_dns_complete(now);
            play_until_won(&mut race, now, |c| c.stack.protocol == Protocol::Sctp);
            black_box(race.report().attempts.len())
        })
    });
    // Both alive: SCTP's INIT-ACK commits the race, then it connects.
    c.bench_function("Race: SCTP reachable then connected", |b| {
        b.iter(|| {
            let now = Instant::now();
            let mut race = Race::new(RaceConfig::default(), now);
            race.on_candidates(Family::V4, sctp_tcp.candidates.clone(), now);
            race.on_dns_complete(now);
            while let Some(action) = race.poll_action() {
                if let Action::Start { id, .. } = action {
                    race.on_attempt_reachable(id, now);
                    race.on_attempt_connected(id, now);
                }
            }
            black_box(race.is_finished())
        })
    });
    c.bench_function("Race: 1 candidate connects", |b| {
        b.iter(|| {
            let now = Instant::now();
            let mut race = Race::new(RaceConfig::default(), now);
            race.on_candidates(Family::V4, v4.candidates.clone(), now);
            race.on_dns_complete(now);
            while let Some(action) = race.poll_action() {
                if let Action::Start { id, .. } = action {
                    race.on_attempt_connected(id, now);
                }
            }
            black_box(race.is_finished())
        })
    });
}

/// Answers the race's starts at `now` until one wins: candidates `refused` picks fail
/// with "connection refused", the others connect.
fn play_until_won(race: &mut Race, now: Instant, refused: impl Fn(&Candidate) -> bool) {
    while let Some(action) = race.poll_action() {
        match action {
            Action::Start { id, candidate } if refused(&candidate) => {
                race.on_attempt_failed(id, AttemptCause::Refused, now)
            }
            Action::Start { id, .. } => race.on_attempt_connected(id, now),
            Action::Won { .. } | Action::Failed(_) => return,
            Action::Cancel { .. } => {}
        }
    }
}

// `criterion_group!` defines a `pub fn benches` the macro gives no doc to.
#[allow(missing_docs)]
mod group {
    use super::{plan_and_gather, properties, race};

    criterion::criterion_group!(benches, properties, plan_and_gather, race);
}

criterion_main!(group::benches);
