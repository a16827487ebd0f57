//! Executes a [`taps_core::race::Race`] on tokio: feeds it DNS answers, attempt outcomes
//! and timer expiries; starts and drops attempts as it says.
//!
//! Attempts are futures owned by this task, not spawned tasks: cancelling one is
//! dropping it, which closes its socket at once. When the winner is returned, every
//! other attempt has already been dropped, so nothing of a loser outlives the race.
//! Each wake-up polls the few live attempts (bounded by `max_alive`).

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use taps_core::candidates::{Candidate, Plan, PrunedCandidate};
use taps_core::race::{Action, AttemptId, FailureKind, Race, RaceConfig, RaceReport};
use tokio::sync::mpsc;

use crate::preconnection::RemoteEndpoint;
use crate::resolver::DnsError;
use crate::transport::{self, AttemptError, Established, SocketOptions};
use crate::{Context, Error};

type Attempt = Pin<Box<dyn Future<Output = Result<Established, AttemptError>> + Send>>;

/// What a won race hands to the connection.
pub(crate) struct Won {
    pub established: Established,
    pub candidate: Candidate,
    pub report: RaceReport,
}

/// The race settings for a property set.
pub(crate) fn race_config(props: &taps_core::properties::Properties) -> RaceConfig {
    let c = props.compiled();
    let mut config = RaceConfig::default();
    if let Some(d) = c.attempt_delay {
        config.attempt_delay = d;
    }
    if let Some(t) = c.timeout {
        config.timeout = t;
    }
    config
}

/// Races the candidates for `remote` and returns the winner.
pub(crate) async fn race(
    ctx: &Context,
    remote: &RemoteEndpoint,
    key: Arc<str>,
    plan: &Arc<Plan>,
    config: RaceConfig,
    opts: &Arc<SocketOptions>,
) -> Result<Won, Error> {
    let start = Instant::now();
    let mut race = Race::new(config, start);
    if let Some(family) = ctx.cib().best_family(&key, start) {
        race.expect_family(family, start);
    }
    let mut resolution = ctx.resolver().resolve(&remote.host);
    let mut dns_done = false;
    // Few entries (bounded by the attempts alive at once): vectors, not maps.
    let mut attempts: Vec<(AttemptId, Attempt)> = Vec::new();
    let mut connected: Vec<(AttemptId, Established)> = Vec::new();
    // Kept to turn a race with nothing to try into the error that explains it.
    let mut dns_causes: Vec<(taps_core::Family, DnsError)> = Vec::new();
    // Candidates the properties ruled out, kept as data: their reasons are only put into
    // words if nothing else was left to try.
    let mut pruned: Vec<PrunedCandidate> = Vec::new();
    let mut any_address = false;
    // Attempts say "the remote answered" here (SCTP INIT-ACK) before they connect; only
    // races with SCTP candidates pay for the channel.
    let (reach_tx, mut reach_rx) = if transport::sctp::plan_runs_sctp(plan) {
        let (tx, rx) = mpsc::unbounded_channel::<AttemptId>();
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    // One timer for the whole race, moved only when the race's next deadline changes:
    // registering a tokio timer takes the timer wheel's lock (and may wake the driver),
    // so a fresh one per wake-up would cost every flow a few contended locks.
    let timer = tokio::time::sleep_until(start.into());
    tokio::pin!(timer);
    let mut armed: Option<Instant> = None;
    loop {
        while let Some(action) = race.poll_action() {
            match action {
                Action::Start { id, candidate } => {
                    let opts = opts.clone();
                    let reach = reach_tx.clone();
                    let reachable = move || {
                        if let Some(reach) = reach {
                            let _ = reach.send(id);
                        }
                    };
                    attempts.push((
                        id,
                        Box::pin(async move {
                            transport::connect_signalling(&candidate, &opts, reachable).await
                        }),
                    ));
                }
                Action::Cancel { id } => {
                    attempts.retain(|(i, _)| *i != id);
                    connected.retain(|(i, _)| *i != id);
                }
                Action::Won { id } => {
                    attempts.clear();
                    let established = take(&mut connected, id)
                        .expect("the race names a connected attempt as winner");
                    connected.clear();
                    let report = race.into_report();
                    report.record_outcomes(&mut ctx.cib(), &key);
                    let candidate = report
                        .attempt(id)
                        .expect("the winner has a report entry")
                        .candidate
                        .clone();
                    return Ok(Won {
                        established,
                        candidate,
                        report,
                    });
                }
                Action::Failed(err) => {
                    attempts.clear();
                    race.report().record_outcomes(&mut ctx.cib(), &key);
                    let nothing_tried = err.kind == FailureKind::NoCandidates;
                    if nothing_tried && !any_address {
                        return Err(Error::Resolve {
                            host: remote.host.clone(),
                            causes: std::mem::take(&mut dns_causes),
                        });
                    }
                    if nothing_tried && err.attempts.is_empty() && !pruned.is_empty() {
                        return Err(Error::NoCandidates {
                            host: remote.host.clone(),
                            reasons: pruned
                                .iter()
                                .map(|p| {
                                    let why: Vec<String> =
                                        p.violations.iter().map(|v| v.to_string()).collect();
                                    format!("{} {}: {}", p.stack, p.remote, why.join(", "))
                                })
                                .collect::<Vec<_>>()
                                .join("; "),
                        });
                    }
                    return Err(Error::Race(err));
                }
            }
        }
        let deadline = race.poll_timeout();
        if deadline != armed {
            if let Some(d) = deadline {
                timer.as_mut().reset(d.into());
            }
            armed = deadline;
        }
        tokio::select! {
            answer = resolution.next(), if !dns_done => {
                let now = Instant::now();
                match answer {
                    None => {
                        dns_done = true;
                        race.on_dns_complete(now);
                    }
                    Some(a) => match a.result {
                        Ok(addrs) => {
                            any_address = true;
                            let mut gathered =
                                plan.gather(&key, remote.port, &addrs, &ctx.cib(), now);
                            pruned.append(&mut gathered.pruned);
                            race.on_candidates(a.family, gathered.candidates, now);
                        }
                        Err(e) => {
                            race.on_dns_failed(a.family, e.to_string(), now);
                            dns_causes.push((a.family, e));
                        }
                    },
                }
            }
            (id, result) = next_outcome(&mut attempts), if !attempts.is_empty() => {
                let now = Instant::now();
                attempts.retain(|(i, _)| *i != id);
                match result {
                    Ok(est) => {
                        connected.push((id, est));
                        race.on_attempt_connected(id, now);
                    }
                    Err(e) => race.on_attempt_failed(id, e.to_string(), now),
                }
            }
            Some(id) = async {
                match &mut reach_rx {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            } => race.on_attempt_reachable(id, Instant::now()),
            _ = &mut timer, if armed.is_some() => {
                // Fired: re-armed above if the race still has a deadline.
                armed = None;
                race.handle_timeout(Instant::now());
            }
        }
    }
}

/// Removes and returns the entry for `id`.
fn take<T>(v: &mut Vec<(AttemptId, T)>, id: AttemptId) -> Option<T> {
    let i = v.iter().position(|(i, _)| *i == id)?;
    Some(v.swap_remove(i).1)
}

/// Resolves when any live attempt finishes.
async fn next_outcome(
    attempts: &mut [(AttemptId, Attempt)],
) -> (AttemptId, Result<Established, AttemptError>) {
    poll_fn(|cx| {
        for (id, fut) in attempts.iter_mut() {
            if let Poll::Ready(r) = fut.as_mut().poll(cx) {
                return Poll::Ready((*id, r));
            }
        }
        Poll::Pending
    })
    .await
}
