//! The secure experiment's goals (issue 12), evaluated fail-closed: a point with a
//! failed connection, a server that did not see every connection in time, or a figure
//! that was not measured at all is a goal not met.

#![forbid(unsafe_code)]

use crate::experiments::{human_bytes, SecurePoint, SecureVariant};
use crate::goals::Goal;
use crate::Results;

/// Why a point cannot count, if it cannot.
fn unusable(p: Option<&SecurePoint>) -> Option<String> {
    match p {
        None => Some("not measured".into()),
        Some(p) if p.failed > 0 => Some(format!(
            "{} failed connection(s): {}",
            p.failed,
            p.first_error.as_deref().unwrap_or("?")
        )),
        Some(p) if p.server_timeouts > 0 => Some(format!(
            "the server did not see every connection in {} trial(s)",
            p.server_timeouts
        )),
        Some(p) if p.client_cpu_per_conn_us.median <= 0.0 => Some("no CPU figure".into()),
        _ => None,
    }
}

/// A goal `value ≤ limit` on point `p` against `base`; not met when either cannot count.
fn goal(
    name: String,
    limit: f64,
    target: String,
    p: Option<&SecurePoint>,
    base: Option<&SecurePoint>,
    value: impl Fn(&SecurePoint) -> f64,
    words: impl Fn(&SecurePoint, &SecurePoint) -> String,
) -> Goal {
    let why = unusable(p).or_else(|| unusable(base).map(|w| format!("baseline: {w}")));
    let figure = match (p, base, why) {
        (Some(p), Some(b), None) => Ok((value(p), words(p, b))),
        (_, _, why) => Err(why.unwrap_or_default()),
    };
    Goal::at_most(name, target, limit, figure)
}

/// The race at 80 % hits against the single secure protocol it ends on (client and
/// server CPU), and taps' TLS and QUIC against rustls and quinn (both sides), per
/// object size.
pub(crate) fn secure_goals(r: &Results, g: &mut Vec<Goal>) {
    let mut objects: Vec<usize> = r.secure.iter().map(|p| p.object).collect();
    objects.sort();
    objects.dedup();
    if objects.is_empty() {
        objects.push(1024);
    }
    for object in objects {
        let size = human_bytes(object as u64);
        let find = |v: SecureVariant, hit: Option<u32>| {
            r.secure
                .iter()
                .find(|p| p.object == object && p.variant == v && p.hit_percent == hit)
        };
        for race in [SecureVariant::RaceBothAlive, SecureVariant::RaceQuicDead] {
            let p = find(race, Some(80));
            let base = find(race.single_baseline(), None);
            for client in [true, false] {
                let side = if client { "client" } else { "server" };
                g.push(goal(
                    format!("{} at 80% cache hits, {side} CPU, {size}", race.label()),
                    1.1,
                    "≤ 1.1 × single secure protocol".into(),
                    p,
                    base,
                    |p| {
                        if client {
                            p.client_vs_single
                        } else {
                            p.server_vs_single
                        }
                    },
                    |p, b| {
                        let (v, a, s) = if client {
                            (
                                p.client_vs_single,
                                &p.client_cpu_per_conn_us,
                                &b.client_cpu_per_conn_us,
                            )
                        } else {
                            (
                                p.server_vs_single,
                                &p.server_cpu_per_conn_us,
                                &b.server_cpu_per_conn_us,
                            )
                        };
                        format!(
                            "{v:.3} × {} ({:.0} µs vs {:.0} µs per connection; {:.2} attempts/conn)",
                            b.variant.label(),
                            a.median,
                            s.median,
                            p.attempts_per_conn.median
                        )
                    },
                ));
            }
        }
        for taps in [SecureVariant::TapsTls, SecureVariant::TapsQuic] {
            let raw = taps.raw_baseline();
            for client in [true, false] {
                let side = if client { "client" } else { "server" };
                let of = move |p: &SecurePoint| {
                    if client {
                        (p.client_vs_raw, p.client_cpu_per_conn_us.median)
                    } else {
                        (p.server_vs_raw, p.server_cpu_per_conn_us.median)
                    }
                };
                g.push(goal(
                    format!("{} connect + fetch, {side} CPU, {size}", taps.label()),
                    1.05,
                    format!("≤ 1.05 × {}", raw.label()),
                    find(taps, None),
                    find(raw, None),
                    move |p| of(p).0,
                    move |p, b| {
                        format!(
                            "{:.3} × ({:.0} µs vs {:.0} µs per connection)",
                            of(p).0,
                            of(p).1,
                            of(b).1
                        )
                    },
                ));
            }
        }
    }
}
