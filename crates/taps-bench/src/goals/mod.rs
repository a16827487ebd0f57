//! The benchmark issues' goals, evaluated fail-closed on whatever a run measured: a goal
//! is met only when its figure exists, is a finite number computed the one way the
//! report states (the median of per-repetition ratios or differences), is within the
//! limit, and nothing went wrong in the trials behind it. A failed flow or connection,
//! a server that did not see every connection in time, a transfer the server did not
//! receive in full, a missing figure, a baseline sample of 0 or a point that was
//! planned but not measured is a goal **not met**, with the reason in the goals table.

#![forbid(unsafe_code)]

mod lab;
mod sctp;
#[cfg(test)]
mod tests;

use serde::Serialize;

use crate::experiments::{
    self, human_bytes, pairwise, CliPoint, Config, ConnectPoint, Failures, Faults, HeVariant,
    Proto, Selection, Summary, TransferPoint,
};
use crate::measure::ratio;
use crate::Results;

/// A goal of the benchmark issues and whether it is met.
#[derive(Debug, Clone, Serialize)]
pub struct Goal {
    /// What is measured.
    pub name: String,
    /// The target, in words.
    pub target: String,
    /// The measured value, in words (with the reason when it cannot count).
    pub measured: String,
    /// The measured value (NaN when there is none).
    pub value: f64,
    /// The limit.
    pub limit: f64,
    /// Whether it is met.
    pub met: bool,
    /// Why the figure cannot count (failures, timeouts, a missing figure or baseline),
    /// if it cannot.
    pub problem: Option<String>,
}

impl Goal {
    /// A goal `value ≤ limit`: `figure` is the value with its words, or why there is no
    /// figure that can count (then the goal is not met). A value that is not a positive
    /// number does not count either.
    pub(crate) fn at_most(
        name: String,
        target: String,
        limit: f64,
        figure: Result<(f64, String), String>,
    ) -> Goal {
        match figure {
            Ok((v, words)) => {
                let ok = v.is_finite() && v > 0.0;
                Goal {
                    name,
                    target,
                    measured: words,
                    value: v,
                    limit,
                    met: ok && v <= limit,
                    problem: (!ok).then(|| "no figure (a baseline sample is 0 or missing)".into()),
                }
            }
            Err(why) => Goal {
                name,
                target,
                measured: format!("**not counted**: {why}"),
                value: f64::NAN,
                limit,
                met: false,
                problem: Some(why),
            },
        }
    }
}

/// Which goals a run must evaluate: those of every experiment it planned, so that a
/// planned point that is missing is a goal not met rather than no goal.
#[derive(Debug, Clone, Default)]
pub(crate) struct Expected {
    /// Experiment 1 over TCP, at this (largest) flow count.
    pub(crate) connect_tcp: Option<usize>,
    /// Experiment 2 over these protocols.
    pub(crate) transfer: Vec<Proto>,
    /// Experiment 3's races at 80 % cache hits.
    pub(crate) races: Vec<HeVariant>,
    /// The whole-process comparison at these flow counts.
    pub(crate) connect_cli: Vec<usize>,
    /// SCTP against TCP, one bulk flow (runs with experiment 2).
    pub(crate) sctp_speed: bool,
    /// The experiments in network namespaces (`taps-bench lab`).
    pub(crate) lab: bool,
}

impl Expected {
    /// What `cfg` and `sel` plan.
    pub(crate) fn of(cfg: &Config, sel: Selection) -> Expected {
        Expected {
            connect_tcp: (sel.connect && cfg.protocols.contains(&Proto::Tcp))
                .then(|| experiments::connect_flows(cfg).into_iter().max())
                .flatten(),
            transfer: if sel.transfer {
                cfg.protocols.clone()
            } else {
                Vec::new()
            },
            races: if sel.he {
                experiments::race_variants_at(cfg, 80)
            } else {
                Vec::new()
            },
            connect_cli: if sel.connect_cli {
                experiments::cli_flows(cfg)
            } else {
                Vec::new()
            },
            sctp_speed: sel.transfer,
            lab: sel.lab,
        }
    }
}

/// Evaluates the goals of what `expected` planned on what `r` measured.
pub(crate) fn goals(r: &Results, expected: &Expected) -> Vec<Goal> {
    let mut g = Vec::new();
    if let Some(n) = expected.connect_tcp {
        connect_goals(r, n, &mut g);
    }
    for &proto in &expected.transfer {
        transfer_goal(r, proto, &mut g);
    }
    sctp::sctp_speed_goals(r, expected.sctp_speed, &mut g);
    race_goals(r, &expected.races, &mut g);
    cli_goals(r, &expected.connect_cli, &mut g);
    lab::lab_goals(r, expected.lab, &mut g);
    g
}

/// Collects the reasons a goal's figure cannot count.
#[derive(Debug, Default, Clone)]
struct Judge {
    problems: Vec<String>,
}

impl Judge {
    /// What went wrong on one side (`who`: taps, raw, …).
    fn faults(&mut self, who: &str, f: Faults) -> &mut Self {
        if let Some(p) = f.problem() {
            self.problems.push(format!("{who}: {p}"));
        }
        self
    }

    /// The samples of `what`: there must be some, all finite, and (`positive`) above 0
    /// (a CPU time of 0 is a reading that failed or a baseline that cannot divide).
    fn samples(&mut self, what: &str, s: &Summary, positive: bool) -> &mut Self {
        if s.samples.is_empty() {
            self.problems.push(format!("{what}: no samples"));
        } else if s.samples.iter().any(|x| !x.is_finite()) {
            self.problems
                .push(format!("{what}: a sample is not a number"));
        } else if positive && s.samples.iter().any(|x| *x <= 0.0) {
            self.problems.push(format!("{what}: a sample is 0"));
        }
        self
    }

    /// The goal `value ≤ limit`, met only without problems and with a finite value.
    fn goal(&self, name: String, target: &str, limit: f64, value: f64, measured: String) -> Goal {
        let mut problems = self.problems.clone();
        if !value.is_finite() {
            problems.push("no figure (a repetition's ratio could not be computed)".into());
        }
        let problem = (!problems.is_empty()).then(|| problems.join("; "));
        Goal {
            measured: match &problem {
                None => measured,
                Some(p) => format!("{measured}; **not counted**: {p}"),
            },
            met: problem.is_none() && value <= limit,
            problem,
            name,
            target: target.into(),
            value,
            limit,
        }
    }
}

/// A planned goal with nothing measured for it.
fn not_measured(name: String, target: &str, limit: f64) -> Goal {
    let why = "not measured (the phase failed or did not produce this point; see the \
               report's first lines)";
    Goal {
        name,
        target: target.into(),
        measured: format!("**not counted**: {why}"),
        value: f64::NAN,
        limit,
        met: false,
        problem: Some(why.into()),
    }
}

/// Per-flow (marginal) figures without the one-time context cost, per repetition: the
/// slope of client CPU (× raw) and of RSS (KiB per flow above raw) from `q` to `p`, and
/// the one-time extra at `q` (ms, KiB): `(q's flows, cpu, rss, fixed cpu, fixed rss)`.
fn marginal(q: &ConnectPoint, p: &ConnectPoint) -> (usize, f64, f64, f64, f64) {
    let d = (p.flows - q.flows) as f64;
    let minus = |a: &Summary, b: &Summary| {
        Summary::of(
            a.samples
                .iter()
                .zip(&b.samples)
                .map(|(x, y)| x - y)
                .collect(),
        )
    };
    let cpu = pairwise(
        &minus(&p.taps.client_cpu_us, &q.taps.client_cpu_us),
        &minus(&p.raw.client_cpu_us, &q.raw.client_cpu_us),
        ratio,
    );
    let rss = pairwise(
        &minus(&p.taps.rss_growth_kib, &q.taps.rss_growth_kib),
        &minus(&p.raw.rss_growth_kib, &q.raw.rss_growth_kib),
        |a, b| (a - b) / d,
    );
    let fixed_cpu = pairwise(&q.taps.client_cpu_us, &q.raw.client_cpu_us, |a, b| {
        (a - b) / 1e3
    });
    let fixed_rss = pairwise(&q.taps.rss_growth_kib, &q.raw.rss_growth_kib, |a, b| a - b);
    (q.flows, cpu, rss, fixed_cpu, fixed_rss)
}

/// The connection-establishment goals at the largest TCP flow count measured (`n`
/// planned).
fn connect_goals(r: &Results, n: usize, g: &mut Vec<Goal>) {
    // Issue 14's targets (the earlier 1.15 for the client was tightened to 1.1 there,
    // and the listener's accept path given one of its own).
    const CPU: &str = "≤ 1.1 × raw";
    const RSS: &str = "≤ 2 KiB";
    const DELAY: &str = "within 0.1 ms of raw";
    let tcp: Vec<&ConnectPoint> = r
        .connect
        .iter()
        .filter(|p| p.protocol == Proto::Tcp)
        .collect();
    let Some(p) = tcp.iter().copied().max_by_key(|p| p.flows) else {
        g.push(not_measured(format!("client CPU, {n} TCP flows"), CPU, 1.1));
        let server = format!("server CPU (listener accept path), {n} TCP flows");
        g.push(not_measured(server, "≤ 1.1 × raw", 1.1));
        let rss = format!("client RSS growth per flow above raw, {n} TCP flows");
        g.push(not_measured(rss, RSS, 2.0));
        let delay = format!("median per-flow connect delay, {n} TCP flows");
        g.push(not_measured(delay, DELAY, 0.1));
        return;
    };
    let n = p.flows;
    let mut base = Judge::default();
    base.faults("taps", p.taps.faults())
        .faults("raw", p.raw.faults());
    let marginal = tcp
        .iter()
        .min_by_key(|q| q.flows)
        .filter(|q| q.flows < n)
        .map(|q| marginal(q, p));
    let mut cpu = base.clone();
    cpu.samples("taps client CPU", &p.taps.client_cpu_us, true)
        .samples("raw client CPU", &p.raw.client_cpu_us, true);
    g.push(cpu.goal(
        format!("client CPU, {n} TCP flows"),
        CPU,
        1.1,
        p.client_cpu_ratio,
        format!(
            "{:.2} × raw ({:.2} ms vs {:.2} ms){}",
            p.client_cpu_ratio,
            p.taps.client_cpu_us.median / 1e3,
            p.raw.client_cpu_us.median / 1e3,
            marginal.map_or(String::new(), |(f, cpu, _, fixed, _)| format!(
                "; per added flow (slope from {f} flow(s)) {cpu:.2} × raw; \
                 one-time extra at {f} flow(s) {fixed:.2} ms"
            ))
        ),
    ));
    accept_path_goal(p, &base, g);
    let mut rss = base.clone();
    rss.samples("taps RSS growth", &p.taps.rss_growth_kib, false)
        .samples("raw RSS growth", &p.raw.rss_growth_kib, false);
    let anon = pairwise(&p.taps.anon_growth_kib, &p.raw.anon_growth_kib, |a, b| {
        (a - b) / n as f64
    });
    g.push(rss.goal(
        format!("client RSS growth per flow above raw, {n} TCP flows"),
        RSS,
        2.0,
        p.rss_extra_per_flow_kib,
        format!(
            "{:+.2} KiB/flow (taps {:.0} KiB, raw {:.0} KiB in total; of it anonymous \
             memory, i.e. heap and stacks, {anon:+.2} KiB/flow, the rest code pages faulted \
             in on first use){}",
            p.rss_extra_per_flow_kib,
            p.taps.rss_growth_kib.median,
            p.raw.rss_growth_kib.median,
            marginal.map_or(String::new(), |(f, _, rss, _, fixed)| format!(
                "; per added flow {rss:+.2} KiB; one-time extra at {f} flow(s) {fixed:.0} KiB"
            ))
        ),
    ));
    let mut delay = base;
    delay
        .samples("taps median delay", &p.taps.delay_median_us, true)
        .samples("raw median delay", &p.raw.delay_median_us, true);
    g.push(delay.goal(
        format!("median per-flow connect delay, {n} TCP flows"),
        DELAY,
        0.1,
        p.delay_median_diff_ms,
        format!(
            "{:+.3} ms ({:.3} ms vs {:.3} ms)",
            p.delay_median_diff_ms,
            p.taps.delay_median_us.median / 1e3,
            p.raw.delay_median_us.median / 1e3
        ),
    ));
}

/// The listener's accept path at the connect point `p`: server CPU, a taps `Listener`
/// against a tokio `TcpListener`, both serving the raw client (so that neither server's
/// figure depends on how fast its own client is). Without those trials, not met.
fn accept_path_goal(p: &ConnectPoint, base: &Judge, g: &mut Vec<Goal>) {
    const SERVER: &str = "≤ 1.1 × raw";
    let n = p.flows;
    let name = format!("server CPU (listener accept path), {n} TCP flows");
    let Some(l) = &p.taps_listener else {
        g.push(not_measured(name, SERVER, 1.1));
        return;
    };
    let mut server = base.clone();
    server
        .faults("taps listener", l.faults())
        .samples("taps listener server CPU", &l.server_cpu_us, true)
        .samples("raw server CPU", &p.raw.server_cpu_us, true);
    let value = p.listener_server_cpu_ratio.unwrap_or(f64::NAN);
    g.push(server.goal(
        name,
        SERVER,
        1.1,
        value,
        format!(
            "{value:.2} × raw ({:.2} ms vs {:.2} ms; a taps `Listener` against a tokio \
             `TcpListener`, both serving the raw client, from its start to the last flow \
             accepted; each server with its own client: {:.2} ×)",
            l.server_cpu_us.median / 1e3,
            p.raw.server_cpu_us.median / 1e3,
            p.server_cpu_ratio,
        ),
    ));
}

/// The transfer goal at the largest size, for `proto`: the CPU of the whole transfer
/// (sender + receiver) against raw, as the median of the per-repetition ratios of every
/// flow count at that size pooled (each ratio pairs a taps and a raw trial run next to
/// each other). On loopback the kernel charges packet processing to whichever side
/// happens to run, so a side alone swings by several per cent from run to run while the
/// sum does not; the per-flow-count ratios and each side's are listed with it.
fn transfer_goal(r: &Results, proto: Proto, g: &mut Vec<Goal>) {
    const TARGET: &str = "≤ 1.05 × raw";
    let of_proto = || r.transfer.iter().filter(|p| p.protocol == proto);
    let Some(max_bytes) = of_proto().map(|p| p.bytes).max() else {
        g.push(not_measured(
            format!("transfer CPU (sender + receiver), largest size, {proto}"),
            TARGET,
            1.05,
        ));
        return;
    };
    let points: Vec<&TransferPoint> = of_proto().filter(|p| p.bytes == max_bytes).collect();
    let mut j = Judge::default();
    let mut per_rep = Vec::new();
    for p in &points {
        j.faults(&format!("taps, {} flow(s)", p.flows), p.taps.faults())
            .faults(&format!("raw, {} flow(s)", p.flows), p.raw.faults())
            .samples("taps CPU", &p.taps.total_cpu_us, true)
            .samples("raw CPU", &p.raw.total_cpu_us, true);
        if p.taps.total_cpu_us.samples.len() != p.raw.total_cpu_us.samples.len() {
            per_rep.push(f64::NAN);
        }
        per_rep.extend(
            p.taps
                .total_cpu_us
                .samples
                .iter()
                .zip(&p.raw.total_cpu_us.samples)
                .map(|(a, b)| ratio(*a, *b)),
        );
    }
    let pooled = if per_rep.is_empty() || per_rep.iter().any(|x| !x.is_finite()) {
        f64::NAN
    } else {
        crate::measure::median(&per_rep)
    };
    let list = |f: &dyn Fn(&TransferPoint) -> f64| -> String {
        points
            .iter()
            .map(|p| format!("{} flow(s) {:.3}", p.flows, f(p)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    g.push(j.goal(
        format!(
            "transfer CPU (sender + receiver), {} per flow, {proto}",
            human_bytes(max_bytes)
        ),
        TARGET,
        1.05,
        pooled,
        format!(
            "{pooled:.3} × raw: median of {} per-repetition ratios, all flow counts (per flow \
             count: totals {}; sender {}; receiver {})",
            per_rep.len(),
            list(&|p| p.total_cpu_ratio),
            list(&|p| p.sender_cpu_ratio),
            list(&|p| p.receiver_cpu_ratio),
        ),
    ));
}

/// The race goal at 80 % cache hits, for every race variant planned there.
fn race_goals(r: &Results, races: &[HeVariant], g: &mut Vec<Goal>) {
    const TARGET: &str = "≤ 1.2 × single-protocol connect";
    for &variant in races {
        let name = format!("{} at 80% cache hits, client CPU", variant.label());
        let p =
            r.he.iter()
                .find(|p| p.variant == variant && p.hit_percent == Some(80));
        let single = r.he.iter().find(|s| Some(s.variant) == p.map(|p| p.single));
        let (Some(p), Some(single)) = (p, single) else {
            g.push(not_measured(name, TARGET, 1.2));
            continue;
        };
        let mut j = Judge::default();
        j.faults("race", p.faults())
            .faults("single", single.faults())
            .samples("race CPU", &p.client_cpu_per_conn_us, true)
            .samples("single CPU", &single.client_cpu_per_conn_us, true);
        g.push(j.goal(
            name,
            TARGET,
            1.2,
            p.client_vs_single,
            format!(
                "{:.2} × {} ({:.2} × raw); {:.1} µs vs {:.1} µs per connection; \
                 {:.2} attempts/conn",
                p.client_vs_single,
                p.single.label(),
                p.client_vs_raw,
                p.client_cpu_per_conn_us.median,
                single.client_cpu_per_conn_us.median,
                p.attempts_per_conn.median,
            ),
        ));
    }
}

/// The whole-process goals: CPU ≤ 1.5 × the C client at every planned flow count above
/// 1. Peak RSS is reported beside them (the report's table), not held to a goal.
fn cli_goals(r: &Results, flows: &[usize], g: &mut Vec<Goal>) {
    const CPU: &str = "≤ 1.5 × the C epoll client";
    for &n in flows.iter().filter(|n| **n > 1) {
        let cpu_name = format!("`taps connect` whole-process CPU, {n} TCP flows");
        let Some(p) = r.connect_cli.iter().find(|p| p.flows == n) else {
            g.push(not_measured(cpu_name, CPU, 1.5));
            continue;
        };
        let mut j = Judge::default();
        j.samples("taps CPU", &p.taps.cpu_us, true)
            .samples("C CPU", &p.c.cpu_us, true);
        g.push(j.goal(cpu_name, CPU, 1.5, p.cpu_ratio, cli_cpu_words(p)));
    }
}

/// The words of a whole-process CPU goal.
fn cli_cpu_words(p: &CliPoint) -> String {
    let tokio = match &p.tokio {
        Some(k) => format!(
            "; the plain tokio client {:.2} × C, taps {:.2} × it",
            k.cpu_vs_c, k.taps_cpu_vs_tokio
        ),
        None => String::new(),
    };
    format!(
        "{:.2} × C ({:.1} ms vs {:.1} ms user + sys; user {:.1} vs {:.1} ms, sys {:.1} vs \
         {:.1} ms{tokio})",
        p.cpu_ratio,
        p.taps.cpu_us.median / 1e3,
        p.c.cpu_us.median / 1e3,
        p.taps.user_us.median / 1e3,
        p.c.user_us.median / 1e3,
        p.taps.sys_us.median / 1e3,
        p.c.sys_us.median / 1e3,
    )
}
