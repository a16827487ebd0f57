//! Scenarios: a lab, rules, `taps connect` runs (or plain-socket probes) and the bounds
//! they must meet. [`run`] builds a fresh lab, runs one scenario, tears the lab down and
//! returns what happened and which checks passed.
//!
//! To add a scenario: write a `fn(&Lab, &Ctx, &mut Outcome) -> Result<(), String>` that
//! sets rules (and DNS delays), runs connections with [`Ctx::connect`] and records
//! checks with [`Outcome::check`]; then list it in [`all`] with a name and a summary.

#![forbid(unsafe_code)]

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::dns::RecordType;
use crate::lab::{
    self, addresses, fqdn, is_dead, Lab, LabOptions, SCTP_HOST, SCTP_UDP_PORT, SERVICE_PORT,
};
use crate::packet::Proto;
use crate::probe;
use crate::rules::{Direction, Match, Rule};
use crate::sctp_server::SCTP_ONLY;
use crate::taps::{Connect, ConnectReport, FlowReport};

/// The Connection Attempt Delay taps uses by default (RFC 8305's 250 ms; taps-core's
/// `race::DEFAULT_ATTEMPT_DELAY`).
pub const ATTEMPT_DELAY: Duration = Duration::from_millis(250);
/// The Resolution Delay taps uses by default (RFC 8305's 50 ms; taps-core's
/// `race::DEFAULT_RESOLUTION_DELAY`).
pub const RESOLUTION_DELAY: Duration = Duration::from_millis(50);
/// The establishment timeout the all-dead scenario sets (`connTimeout`), to keep it short.
pub const SHORT_CONN_TIMEOUT: Duration = Duration::from_secs(2);

/// NEAT properties that allow TCP only. The address-family scenarios (rd ... load) race
/// TCP: taps prefers SCTP by default (RFC 9622's multistreaming preference), and their
/// bounds are TCP's one-round-trip handshake. The sctp-* scenarios race SCTP.
pub const TCP_ONLY: &str = r#"{"transport": {"value": "TCP", "precedence": 2}}"#;
/// NEAT properties that require SCTP or TCP, SCTP preferred (listed first).
pub const SCTP_THEN_TCP: &str = r#"{"transport": {"value": ["SCTP", "TCP"], "precedence": 2}}"#;
/// The short Connection Attempt Delay `sctp-fair` sets (`__he_delay`): TCP starts this
/// long after SCTP, much less than one round trip.
pub const FAIR_ATTEMPT_DELAY: Duration = Duration::from_millis(30);

/// How a scenario is run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Keep taps' CIB in this file (across runs); a fresh temporary file otherwise.
    pub cib: Option<PathBuf>,
    /// Bridge seed (loss, jitter); the lab's default if `None`.
    pub seed: Option<u64>,
    /// Print the log as it is written.
    pub echo: bool,
}

/// One checked bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What was checked, with the measured value and the bound.
    pub what: String,
    /// Whether it held.
    pub ok: bool,
}

/// What a scenario run did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The scenario's name.
    pub scenario: String,
    /// Human-readable lines (connections, attempts, checks).
    pub log: Vec<String>,
    /// The checks, in order.
    pub checks: Vec<Check>,
    /// Why the scenario could not run to the end, if it could not.
    pub error: Option<String>,
    /// Wall-clock time of the whole run, lab setup and teardown included.
    pub elapsed: Duration,
    echo: bool,
}

impl Outcome {
    /// Whether it ran to the end and every check held (and there was at least one).
    pub fn passed(&self) -> bool {
        self.error.is_none() && !self.checks.is_empty() && self.checks.iter().all(|c| c.ok)
    }

    /// Adds a log line.
    pub fn say(&mut self, line: impl Into<String>) {
        let line = line.into();
        if self.echo {
            println!("{line}");
        }
        self.log.push(line);
    }

    /// Records a check and logs it.
    pub fn check(&mut self, ok: bool, what: impl Into<String>) -> bool {
        let what = what.into();
        self.say(format!(
            "  check {}  {what}",
            if ok { "ok  " } else { "FAIL" }
        ));
        self.checks.push(Check { what, ok });
        ok
    }

    /// The failed checks and the error, one per line (empty if it passed).
    pub fn failures(&self) -> Vec<String> {
        let mut f: Vec<String> = self
            .checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| c.what.clone())
            .collect();
        if let Some(e) = &self.error {
            f.push(format!("error: {e}"));
        }
        if self.checks.is_empty() && self.error.is_none() {
            f.push("no check was made".into());
        }
        f
    }
}

/// What a scenario body gets besides the lab.
#[derive(Debug)]
pub struct Ctx {
    /// The CIB file every `taps connect` of this run shares.
    pub cib: PathBuf,
}

impl Ctx {
    /// Runs `taps connect` for `c` with this run's CIB.
    pub fn connect(&self, lab: &Lab, mut c: Connect) -> Result<ConnectReport, String> {
        c.cib = Some(self.cib.clone());
        lab.taps_connect(&c)
    }
}

/// A named scenario.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Its name, for `netlab run NAME`.
    pub name: &'static str,
    /// One line on what it shows.
    pub summary: &'static str,
    /// Whether it runs the `taps` binary (the probes do not).
    pub needs_taps: bool,
    body: fn(&Lab, &Ctx, &mut Outcome) -> Result<(), String>,
}

/// Every scenario, in the order the suite runs them.
pub fn all() -> &'static [Scenario] {
    const ALL: &[Scenario] = &[
        Scenario {
            name: "probe",
            summary: "plain sockets: 50 ms each way gives a 100 ms TCP connect; blackhole, DNS delay, rate limit and loss work",
            needs_taps: false,
            body: probe_body,
        },
        Scenario {
            name: "rd",
            summary: "TCP, both families work, IPv4 RTT 50 ms, IPv6 RTT 40 ms: IPv6 wins within RTT + 10 ms",
            needs_taps: true,
            body: rd,
        },
        Scenario {
            name: "r6",
            summary: "TCP, IPv6 only, RTT 40 ms: connects within RTT + 10 ms",
            needs_taps: true,
            body: r6,
        },
        Scenario {
            name: "rx",
            summary: "TCP, IPv6 address dead, RTT 50 ms: connect within attempt delay + RTT + 20 ms; twice more (same CIB, either DNS order) within RTT + 10 ms",
            needs_taps: true,
            body: rx,
        },
        Scenario {
            name: "rxxx",
            summary: "TCP, three dead IPv6, one live IPv4, RTT 50 ms: within attempt delay + RTT + 20 ms; twice more (same CIB, either DNS order) within RTT + 10 ms",
            needs_taps: true,
            body: rxxx,
        },
        Scenario {
            name: "rxz4",
            summary: "TCP, one dead IPv6, one dead and one live IPv4, RTT 50 ms: within 2 attempt delays + RTT + 20 ms; twice more (same CIB, either DNS order) within RTT + 10 ms",
            needs_taps: true,
            body: rxz4,
        },
        Scenario {
            name: "rxxzz",
            summary: "TCP, two dead of each family: failure within the establishment timeout, listing four causes",
            needs_taps: true,
            body: rxxzz,
        },
        Scenario {
            name: "aaaa-slow",
            summary: "TCP, AAAA answers delayed 300 ms: connects over IPv4 after the Resolution Delay, not after 300 ms",
            needs_taps: true,
            body: aaaa_slow,
        },
        Scenario {
            name: "loss",
            summary: "2% loss, 100 ms RTT: a 10 MB transfer over TCP completes, bytes verified",
            needs_taps: true,
            body: loss,
        },
        Scenario {
            name: "load",
            summary: "TCP, 50 flows at once to rd (RTT 40/50 ms): all connect over IPv6",
            needs_taps: true,
            body: load,
        },
        // SCTP (user-space, inside UDP port 9899, RFC 6951) against the lab's SCTP
        // server on r4 (192.0.2.61), with SCTP preferred over TCP.
        Scenario {
            name: "sctp-blocked",
            summary: "SCTP preferred but UDP 9899 blackholed, RTT 50 ms: TCP wins within attempt delay + RTT + 20 ms; again (same CIB) the CIB skips SCTP: within RTT + 10 ms",
            needs_taps: true,
            body: sctp_blocked,
        },
        Scenario {
            name: "sctp-fair",
            summary: "SCTP preferred, TCP 30 ms later, RTT 100 ms: SCTP wins on its INIT-ACK (1 RTT), TCP cancelled, connected within 2 RTT + 20 ms",
            needs_taps: true,
            body: sctp_fair,
        },
        Scenario {
            name: "sctp-loss",
            summary: "2% loss, 100 ms RTT: a 10 MB transfer over SCTP completes, bytes verified",
            needs_taps: true,
            body: sctp_loss,
        },
    ];
    ALL
}

/// The scenario called `name`.
pub fn find(name: &str) -> Option<&'static Scenario> {
    all().iter().find(|s| s.name == name)
}

/// Builds a lab, runs scenario `name`, tears the lab down. `Err` only when the scenario
/// does not exist or the lab cannot be built; a scenario that fails has `passed() ==
/// false` and says why in its checks and `error`.
pub fn run(name: &str, opts: &RunOptions) -> Result<Outcome, String> {
    let scenario = find(name).ok_or_else(|| {
        let names: Vec<&str> = all().iter().map(|s| s.name).collect();
        format!("no scenario {name:?}; scenarios: {}", names.join(", "))
    })?;
    let started = Instant::now();
    let mut out = Outcome {
        scenario: name.to_string(),
        echo: opts.echo,
        ..Outcome::default()
    };
    out.say(format!("scenario {name}: {}", scenario.summary));
    if scenario.needs_taps {
        let taps = crate::taps::taps_binary()?;
        out.say(format!("  taps binary: {}", taps.display()));
    }
    let mut lab_opts = LabOptions::default();
    if let Some(seed) = opts.seed {
        lab_opts.seed = seed;
    }
    let lab = Lab::start(lab_opts).map_err(|e| format!("cannot build the lab: {e}"))?;
    let names = (
        lab.client().name().to_string(),
        lab.server().name().to_string(),
    );
    out.say(format!(
        "  lab: client namespace {}, server namespace {}",
        names.0, names.1
    ));
    let (cib, temporary) = match &opts.cib {
        Some(p) => (p.clone(), false),
        None => (
            std::env::temp_dir().join(format!(
                "netlab-{}-{}.cib.json",
                std::process::id(),
                names.0
            )),
            true,
        ),
    };
    let ctx = Ctx { cib: cib.clone() };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        (scenario.body)(&lab, &ctx, &mut out)
    }));
    let stats = lab.stats();
    match result {
        Ok(Ok(())) => {}
        Ok(Err(e)) => out.error = Some(e),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            out.error = Some(format!("scenario panicked: {msg}"));
        }
    }
    if let Some(e) = &out.error {
        let e = e.clone();
        out.say(format!("  error: {e}"));
    }
    out.say(format!(
        "  bridge: to server {} packets ({} lost, {} blackholed, {} queue drops); to client {} packets ({} lost, {} blackholed)",
        stats.to_server.forwarded,
        stats.to_server.lost,
        stats.to_server.blackholed,
        stats.to_server.queue_full,
        stats.to_client.forwarded,
        stats.to_client.lost,
        stats.to_client.blackholed,
    ));
    let torn = lab.teardown();
    if temporary {
        let _ = std::fs::remove_file(&cib);
    }
    let gone = [&names.0, &names.1]
        .iter()
        .all(|n| !std::path::Path::new("/run/netns").join(n).exists());
    out.check(
        torn.is_ok() && gone,
        match torn {
            Ok(()) if gone => {
                "teardown removed both namespaces, the TUN devices and every child".to_string()
            }
            Ok(()) => "teardown: a namespace is still there".to_string(),
            Err(e) => format!("teardown: {e}"),
        },
    );
    out.elapsed = started.elapsed();
    let verdict = if out.passed() { "PASS" } else { "FAIL" };
    out.say(format!(
        "{verdict} {name} ({:.1} s)",
        out.elapsed.as_secs_f64()
    ));
    Ok(out)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn ms_u(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// RTT rules for every zone address: `rtt4` for IPv4, `rtt6` for IPv6.
fn rtt_rules(rtt4: Duration, rtt6: Duration) -> Vec<Rule> {
    let (n4, l4) = lab::ZONE_NET_V4;
    let (n6, l6) = lab::ZONE_NET_V6;
    vec![
        Rule::new(Match::net(IpAddr::V4(n4), l4)).rtt(rtt4),
        Rule::new(Match::net(IpAddr::V6(n6), l6)).rtt(rtt6),
    ]
}

fn describe_rules(rtt4: Duration, rtt6: Duration) -> String {
    format!(
        "  rules: RTT {} ms to IPv4 zone addresses, {} ms to IPv6; dead addresses blackholed",
        ms_u(rtt4),
        ms_u(rtt6)
    )
}

/// Logs one connection: result line, then each attempt.
fn show(out: &mut Outcome, label: &str, r: &ConnectReport) {
    for (i, f) in r.flows.iter().enumerate() {
        let label = if r.flows.len() > 1 {
            format!("{label} flow {}", i + 1)
        } else {
            label.to_string()
        };
        show_flow(out, &label, f, r);
    }
}

fn show_flow(out: &mut Outcome, label: &str, f: &FlowReport, r: &ConnectReport) {
    match (&f.winner, &f.error) {
        (Some(w), None) => out.say(format!(
            "  {label}: connected over {} ({} to {}) in {:.1} ms [process {:.1} ms]",
            w.family,
            w.stack,
            w.remote,
            f.total_ms,
            ms(r.wall)
        )),
        (_, Some(e)) => out.say(format!(
            "  {label}: failed after {:.1} ms [process {:.1} ms]: {e}",
            f.total_ms,
            ms(r.wall)
        )),
        (None, None) => out.say(format!("  {label}: no winner and no error?")),
    }
    let mut skipped = 0;
    for a in &f.attempts {
        if !a.started() {
            skipped += 1;
            continue;
        }
        let dead = if a.remote_ip().is_some_and(is_dead) {
            " (dead)"
        } else {
            ""
        };
        let end = a
            .end_ms
            .map_or("    …  ".to_string(), |e| format!("{e:7.1}"));
        let err = a
            .error
            .as_deref()
            .map_or(String::new(), |e| format!(": {e}"));
        out.say(format!(
            "      attempt {:7.1} -> {end} ms  {} {}{dead}  {}{err}",
            a.start_ms, a.stack, a.remote, a.outcome
        ));
    }
    if skipped > 0 {
        let why = f
            .attempts
            .iter()
            .find(|a| !a.started())
            .and_then(|a| a.error.clone())
            .unwrap_or_default();
        out.say(format!("      ({skipped} candidates skipped: {why})"));
    }
}

/// Checks a connection succeeded within `bound` (and over `family` if given).
fn check_connected(
    out: &mut Outcome,
    label: &str,
    f: &FlowReport,
    family: Option<&str>,
    bound: Duration,
    why: &str,
) -> bool {
    let Some(w) = &f.winner else {
        out.check(
            false,
            format!(
                "{label} connected (it failed: {})",
                f.error.as_deref().unwrap_or("?")
            ),
        );
        return false;
    };
    let mut ok = true;
    if let Some(fam) = family {
        ok &= out.check(
            w.family == fam,
            format!("{label} winner is {fam} (got {} {})", w.family, w.remote),
        );
    }
    let remote_ip = w.remote.parse::<SocketAddr>().map(|a| a.ip());
    ok &= out.check(
        remote_ip.is_ok_and(|ip| !is_dead(ip)),
        format!("{label} winner {} is a live address", w.remote),
    );
    ok &= out.check(
        f.total_ms <= ms(bound),
        format!(
            "{label} time to connect {:.1} ms <= {} ms ({why})",
            f.total_ms,
            ms_u(bound)
        ),
    );
    ok
}

/// A connection to zone name `name` that may use TCP only.
fn tcp_to(name: &str) -> Connect {
    let mut c = Connect::new(fqdn(name));
    c.props = Some(TCP_ONLY.to_string());
    c
}

fn connect_one(lab: &Lab, ctx: &Ctx, name: &str) -> Result<ConnectReport, String> {
    ctx.connect(lab, tcp_to(name))
}

fn rd(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let (rtt4, rtt6) = (Duration::from_millis(50), Duration::from_millis(40));
    lab.set_rules(rtt_rules(rtt4, rtt6));
    out.say(describe_rules(rtt4, rtt6));
    // The harder order: A first, so the race must not sit out the whole Resolution Delay.
    answer_first(lab, RecordType::A);
    out.say(format!(
        "  A answered first (AAAA held back {} ms)",
        ms_u(DNS_SKEW)
    ));
    let r = connect_one(lab, ctx, "rd");
    lab.dns().clear_delays();
    let r = r?;
    show(out, "#1", &r);
    check_connected(
        out,
        "#1",
        r.flow(),
        Some("IPv6"),
        rtt6 + Duration::from_millis(10),
        "IPv6 RTT 40 + 10",
    );
    Ok(())
}

fn r6(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let rtt = Duration::from_millis(40);
    lab.set_rules(rtt_rules(rtt, rtt));
    out.say(describe_rules(rtt, rtt));
    let r = connect_one(lab, ctx, "r6")?;
    show(out, "#1", &r);
    check_connected(
        out,
        "#1",
        r.flow(),
        Some("IPv6"),
        rtt + Duration::from_millis(10),
        "RTT 40 + 10",
    );
    Ok(())
}

/// How much one family's DNS answer is held back to fix the order the answers arrive in
/// (the order decides how a race starts, so scenarios that care test both orders).
pub const DNS_SKEW: Duration = Duration::from_millis(1);

/// Makes the answers of `first` arrive [`DNS_SKEW`] before the other family's.
fn answer_first(lab: &Lab, first: RecordType) {
    lab.dns().clear_delays();
    let other = if first == RecordType::AAAA {
        RecordType::A
    } else {
        RecordType::AAAA
    };
    lab.dns().set_delay(other, DNS_SKEW);
}

/// A name with dead addresses and one live IPv4 address: the first connection needs
/// `delays` attempt delays at most; later ones (same CIB) none and try no dead address,
/// whichever DNS answer arrives first.
fn dead_then_cached(
    lab: &Lab,
    ctx: &Ctx,
    out: &mut Outcome,
    name: &str,
    delays: u32,
) -> Result<(), String> {
    let rtt = Duration::from_millis(50);
    lab.set_rules(rtt_rules(rtt, rtt));
    out.say(describe_rules(rtt, rtt));
    let dead: Vec<String> = addresses(name)
        .iter()
        .filter(|r| !r.live)
        .map(|r| r.addr.to_string())
        .collect();
    out.say(format!(
        "  {}: dead addresses {}",
        fqdn(name),
        dead.join(", ")
    ));
    out.say(format!(
        "  #1 and #2: AAAA answered first (A held back {} ms)",
        ms_u(DNS_SKEW)
    ));
    answer_first(lab, RecordType::AAAA);
    let first = connect_one(lab, ctx, name)?;
    show(out, "#1", &first);
    let bound = ATTEMPT_DELAY * delays + rtt + Duration::from_millis(20);
    let why = if delays == 1 {
        "attempt delay 250 + RTT 50 + 20".to_string()
    } else {
        format!("{delays} x attempt delay 250 + RTT 50 + 20")
    };
    check_connected(out, "#1", first.flow(), Some("IPv4"), bound, &why);
    for (label, order) in [("#2", RecordType::AAAA), ("#3", RecordType::A)] {
        answer_first(lab, order);
        if order == RecordType::A {
            out.say(format!(
                "  #3: A answered first (AAAA held back {} ms)",
                ms_u(DNS_SKEW)
            ));
        }
        let again = connect_one(lab, ctx, name)?;
        show(out, &format!("{label} (same CIB)"), &again);
        check_connected(
            out,
            label,
            again.flow(),
            Some("IPv4"),
            rtt + Duration::from_millis(10),
            "RTT 50 + 10, dead addresses skipped",
        );
        let tried_dead: Vec<&str> = again
            .flow()
            .attempts
            .iter()
            .filter(|a| a.started() && a.remote_ip().is_some_and(is_dead))
            .map(|a| a.remote.as_str())
            .collect();
        out.check(
            tried_dead.is_empty(),
            format!(
                "{label} attempted no dead address (attempted: {})",
                if tried_dead.is_empty() {
                    "none".into()
                } else {
                    tried_dead.join(", ")
                }
            ),
        );
    }
    lab.dns().clear_delays();
    Ok(())
}

fn rx(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    dead_then_cached(lab, ctx, out, "rx", 1)
}

fn rxxx(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    dead_then_cached(lab, ctx, out, "rxxx", 1)
}

fn rxz4(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    dead_then_cached(lab, ctx, out, "rxz4", 2)
}

fn rxxzz(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let rtt = Duration::from_millis(50);
    lab.set_rules(rtt_rules(rtt, rtt));
    out.say(describe_rules(rtt, rtt));
    let timeout = SHORT_CONN_TIMEOUT;
    let mut c = Connect::new(fqdn("rxxzz"));
    c.props = Some(format!(
        "{{\"transport\": {{\"value\": \"TCP\", \"precedence\": 2}}, \"connTimeout\": {}}}",
        timeout.as_secs_f64()
    ));
    out.say(format!(
        "  establishment timeout (connTimeout) {} ms",
        ms_u(timeout)
    ));
    let r = ctx.connect(lab, c)?;
    show(out, "#1", &r);
    let f = r.flow();
    out.check(
        f.winner.is_none() && f.error.is_some() && r.exit_code.is_some_and(|c| c != 0),
        format!("#1 failed (exit code {:?})", r.exit_code),
    );
    let bound = timeout + Duration::from_millis(50);
    out.check(
        f.total_ms <= ms(bound),
        format!(
            "#1 failed after {:.1} ms <= {} ms (establishment timeout + 50)",
            f.total_ms,
            ms_u(bound)
        ),
    );
    let failed: Vec<_> = f
        .attempts
        .iter()
        .filter(|a| {
            a.started()
                && a.outcome == "failed"
                && a.error.as_deref().is_some_and(|e| !e.is_empty())
        })
        .collect();
    out.check(
        failed.len() == 4,
        format!(
            "#1 four attempts failed with a cause (got {})",
            failed.len()
        ),
    );
    let err = f.error.clone().unwrap_or_default();
    let missing: Vec<String> = addresses("rxxzz")
        .iter()
        .map(|r| r.addr.to_string())
        .filter(|a| !err.contains(a.as_str()))
        .collect();
    out.check(
        missing.is_empty(),
        format!(
            "#1 error lists a cause for each of the four addresses{}",
            if missing.is_empty() {
                String::new()
            } else {
                format!(" (missing {})", missing.join(", "))
            }
        ),
    );
    Ok(())
}

fn aaaa_slow(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let (rtt4, rtt6) = (Duration::from_millis(50), Duration::from_millis(40));
    let slow = Duration::from_millis(300);
    lab.set_rules(rtt_rules(rtt4, rtt6));
    lab.dns().set_delay(RecordType::AAAA, slow);
    out.say(describe_rules(rtt4, rtt6));
    out.say(format!("  DNS: AAAA answers delayed {} ms", ms_u(slow)));
    let r = connect_one(lab, ctx, "rd");
    lab.dns().clear_delays();
    let r = r?;
    show(out, "#1", &r);
    let bound = RESOLUTION_DELAY + rtt4 + Duration::from_millis(20);
    let f = r.flow();
    check_connected(
        out,
        "#1",
        f,
        Some("IPv4"),
        bound,
        "Resolution Delay 50 + IPv4 RTT 50 + 20, not 300",
    );
    let v4_start = f
        .attempts
        .iter()
        .filter(|a| a.started() && a.remote_ip().is_some_and(|ip| ip.is_ipv4()))
        .map(|a| a.start_ms)
        .fold(f64::NAN, f64::min);
    out.check(
        v4_start >= ms(RESOLUTION_DELAY) - 5.0,
        format!(
            "#1 IPv4 attempt started at {v4_start:.1} ms, after the Resolution Delay (>= 45 ms)"
        ),
    );
    Ok(())
}

fn loss(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let cc = lab
        .client()
        .run(|| std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control"))
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    out.say(format!("  client congestion control: {}", cc.trim()));
    transfer_over_loss(lab, ctx, out, tcp_to("rd"), "TCP", Proto::Tcp)
}

fn sctp_loss(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    out.say(format!(
        "  SCTP only, to the SCTP server on {} (UDP port {SCTP_UDP_PORT}); usrsctp's congestion control",
        fqdn(SCTP_HOST)
    ));
    let mut c = Connect::new(fqdn(SCTP_HOST));
    c.props = Some(SCTP_ONLY.to_string());
    transfer_over_loss(lab, ctx, out, c, "SCTP", Proto::Sctp)
}

/// 2% loss each way and a 100 ms RTT to every zone address; `c` sends 10 MB; checks it
/// connected over `stack`, sent everything, and the server (`protocol`) got every byte
/// right and saw a clean close.
fn transfer_over_loss(
    lab: &Lab,
    ctx: &Ctx,
    out: &mut Outcome,
    mut c: Connect,
    stack: &str,
    protocol: Proto,
) -> Result<(), String> {
    const SIZE: u64 = 10 * 1024 * 1024;
    let rtt = Duration::from_millis(100);
    let (n4, l4) = lab::ZONE_NET_V4;
    let (n6, l6) = lab::ZONE_NET_V6;
    lab.set_rules(vec![
        Rule::new(Match::net(IpAddr::V4(n4), l4))
            .rtt(rtt)
            .loss(0.02),
        Rule::new(Match::net(IpAddr::V6(n6), l6))
            .rtt(rtt)
            .loss(0.02),
    ]);
    out.say("  rules: RTT 100 ms and 2% loss in each direction to every zone address");
    lab.sink().clear();
    c.send_bytes = Some(SIZE);
    c.limit = Duration::from_secs(360);
    let started = Instant::now();
    let r = ctx.connect(lab, c)?;
    let took = started.elapsed();
    show(out, "#1", &r);
    let f = r.flow();
    out.check(
        f.winner.is_some() && f.error.is_none() && r.exit_code == Some(0),
        format!(
            "#1 connected and finished cleanly (exit code {:?})",
            r.exit_code
        ),
    );
    let won = f.winner.as_ref().map_or("none", |w| w.stack.as_str());
    out.check(
        won == stack,
        format!("#1 connected over {stack} (got {won})"),
    );
    out.check(
        f.bytes_sent == SIZE,
        format!("#1 taps sent {} bytes (expected {SIZE})", f.bytes_sent),
    );
    let recs = lab.sink().wait_for(1, Duration::from_secs(5));
    let got: u64 = recs.iter().map(|s| s.bytes).sum();
    let bad: u64 = recs.iter().map(|s| s.mismatched).sum();
    out.say(format!(
        "  transfer: {got} bytes in {:.1} s ({:.0} kB/s)",
        took.as_secs_f64(),
        got as f64 / took.as_secs_f64() / 1e3
    ));
    out.check(
        recs.len() == 1
            && got == SIZE
            && bad == 0
            && recs.iter().all(|s| s.clean_close && s.protocol == protocol),
        format!(
            "server received {got} bytes over {} on {} connection(s), {bad} wrong, closed cleanly (expected {SIZE} over {stack}, 0 wrong)",
            protocols(&recs),
            recs.len()
        ),
    );
    let st = lab.stats();
    out.check(
        st.to_server.lost > 0 && st.to_client.lost > 0,
        format!(
            "the bridge dropped packets in both directions ({} to server, {} to client)",
            st.to_server.lost, st.to_client.lost
        ),
    );
    Ok(())
}

/// The protocols of sink records, for log lines (`TCP`, `SCTP`, `TCP+SCTP`, `none`).
fn protocols(recs: &[crate::sink::SinkRecord]) -> String {
    let mut names: Vec<&str> = recs
        .iter()
        .map(|r| match r.protocol {
            Proto::Sctp => "SCTP",
            Proto::Tcp => "TCP",
            _ => "other",
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        "none".into()
    } else {
        names.join("+")
    }
}

fn load(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    const FLOWS: usize = 50;
    let (rtt4, rtt6) = (Duration::from_millis(50), Duration::from_millis(40));
    lab.set_rules(rtt_rules(rtt4, rtt6));
    out.say(describe_rules(rtt4, rtt6));
    lab.sink().clear();
    let mut c = tcp_to("rd");
    c.flows = FLOWS;
    let r = ctx.connect(lab, c)?;
    let connected: Vec<&FlowReport> = r.flows.iter().filter(|f| f.winner.is_some()).collect();
    let v6 = connected
        .iter()
        .filter(|f| f.winner.as_ref().is_some_and(|w| w.family == "IPv6"))
        .count();
    let mut times: Vec<f64> = connected.iter().map(|f| f.total_ms).collect();
    times.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        times
            .get(((times.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    out.say(format!(
        "  {} of {FLOWS} flows connected ({v6} over IPv6); time to connect median {:.1} ms, max {:.1} ms [process {:.1} ms]",
        connected.len(),
        pct(0.5),
        pct(1.0),
        ms(r.wall)
    ));
    out.check(
        r.flows.len() == FLOWS && connected.len() == FLOWS,
        format!("all {FLOWS} flows connected (got {})", connected.len()),
    );
    out.check(
        v6 == FLOWS,
        format!("every flow won over IPv6 ({v6} of {FLOWS})"),
    );
    let recs = lab.sink().wait_for(FLOWS, Duration::from_secs(5));
    out.check(
        recs.len() == FLOWS,
        format!(
            "the server saw {} connections close (expected {FLOWS})",
            recs.len()
        ),
    );
    Ok(())
}

/// Logs a connection's race timeline: the events `taps connect --trace` prints, among
/// them SCTP's `#N reachable (peer answered): committing to it` (its INIT-ACK).
fn show_timeline(out: &mut Outcome, label: &str, f: &FlowReport) {
    out.say(format!(
        "      {label} race timeline (ms since the race began):"
    ));
    for (at, event) in &f.timeline {
        out.say(format!("        {at:7.1}  {event}"));
    }
}

/// Checks that a connection won over `stack` (`TCP`, `SCTP`).
fn check_stack(out: &mut Outcome, label: &str, f: &FlowReport, stack: &str) -> bool {
    let got = f.winner.as_ref().map_or("nothing", |w| w.stack.as_str());
    out.check(
        got == stack,
        format!("{label} won over {stack} (got {got})"),
    )
}

/// The first attempt over `stack` that actually started.
fn started_over<'a>(f: &'a FlowReport, stack: &str) -> Option<&'a crate::taps::Attempt> {
    f.attempts.iter().find(|a| a.started() && a.stack == stack)
}

/// A connection to the SCTP server's name with `props`.
fn to_sctp_host(props: &str) -> Connect {
    let mut c = Connect::new(fqdn(SCTP_HOST));
    c.props = Some(props.to_string());
    c
}

fn sctp_blocked(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let rtt = Duration::from_millis(50);
    let server = lab::sctp_server_addr();
    let mut rules = vec![Rule::new(Match::host(server).udp().port(SCTP_UDP_PORT)).blackhole()];
    rules.extend(rtt_rules(rtt, rtt));
    lab.set_rules(rules);
    out.say(format!(
        "  rules: UDP port {SCTP_UDP_PORT} (SCTP inside UDP) of {server} blackholed; RTT {} ms to every zone address",
        ms_u(rtt)
    ));
    out.say(format!(
        "  properties: {SCTP_THEN_TCP} (default attempt delay {} ms)",
        ms_u(ATTEMPT_DELAY)
    ));
    let host = fqdn(SCTP_HOST);
    lab.sink().clear();

    let first = ctx.connect(lab, to_sctp_host(SCTP_THEN_TCP))?;
    show(out, "#1", &first);
    let f = first.flow();
    show_timeline(out, "#1", f);
    check_connected(
        out,
        "#1",
        f,
        Some("IPv4"),
        ATTEMPT_DELAY + rtt + Duration::from_millis(20),
        "attempt delay 250 + RTT 50 + 20",
    );
    check_stack(out, "#1", f, "TCP");
    let sctp = started_over(f, "SCTP");
    let tcp_start = started_over(f, "TCP").map_or(f64::NAN, |a| a.start_ms);
    out.check(
        sctp.is_some_and(|a| a.start_ms < tcp_start && a.outcome == "cancelled")
            && f.event_at("reachable").is_none(),
        format!(
            "#1 SCTP was tried first and never answered: {}",
            sctp.map_or("no SCTP attempt".to_string(), |a| format!(
                "started at {:.1} ms, {} at {:.1} ms, TCP started at {tcp_start:.1} ms{}",
                a.start_ms,
                a.outcome,
                a.end_ms.unwrap_or(f64::NAN),
                if f.event_at("reachable").is_some() {
                    ", but the timeline has a reachable event"
                } else {
                    ""
                }
            ))
        ),
    );
    let blackholed = lab.stats().to_server.blackholed;
    out.check(
        blackholed > 0,
        format!("the bridge blackholed {blackholed} packet(s) to UDP port {SCTP_UDP_PORT}"),
    );

    // What the CIB learned: the next race's order and each candidate's history.
    let ranked = lab.taps_candidates(&host, SERVICE_PORT, Some(SCTP_THEN_TCP), &ctx.cib)?;
    out.say("  CIB after #1 (`taps candidates` with the same CIB file): race order");
    for c in &ranked {
        out.say(format!(
            "      {}. {} {}  history: {}",
            c.rank, c.stack, c.remote, c.history
        ));
    }
    let rank_of = |stack: &str| ranked.iter().find(|c| c.stack == stack);
    let (sctp_c, tcp_c) = (rank_of("SCTP"), rank_of("TCP"));
    let history = |c: Option<&crate::taps::RankedCandidate>| {
        c.map_or("not listed".to_string(), |c| c.history.clone())
    };
    out.check(
        sctp_c.is_some_and(|c| c.history.starts_with("failed") && c.history.contains("overtaken")),
        format!(
            "CIB: SCTP recorded as failed, overtaken by TCP (history: {})",
            history(sctp_c)
        ),
    );
    out.check(
        tcp_c.is_some_and(|c| c.history.starts_with("connected")),
        format!(
            "CIB: TCP recorded as connected (history: {})",
            history(tcp_c)
        ),
    );
    out.check(
        matches!((tcp_c, sctp_c), (Some(t), Some(s)) if t.rank < s.rank),
        format!(
            "CIB: TCP now ranks before SCTP (TCP {}, SCTP {})",
            tcp_c.map_or(0, |c| c.rank),
            sctp_c.map_or(0, |c| c.rank)
        ),
    );

    let second = ctx.connect(lab, to_sctp_host(SCTP_THEN_TCP))?;
    show(out, "#2 (same CIB)", &second);
    let f = second.flow();
    show_timeline(out, "#2", f);
    check_connected(
        out,
        "#2",
        f,
        Some("IPv4"),
        rtt + Duration::from_millis(10),
        "RTT 50 + 10, SCTP skipped",
    );
    check_stack(out, "#2", f, "TCP");
    out.check(
        started_over(f, "SCTP").is_none(),
        format!(
            "#2 attempted no SCTP candidate (attempted: {})",
            f.attempts
                .iter()
                .filter(|a| a.started())
                .map(|a| format!("{} {}", a.stack, a.remote))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    let tcp_history = started_over(f, "TCP").map_or("no TCP attempt", |a| a.history.as_str());
    out.check(
        tcp_history.starts_with("connected"),
        format!("#2 report: the TCP candidate came with the CIB's history \"{tcp_history}\""),
    );
    let recs = lab.sink().wait_for(2, Duration::from_secs(5));
    out.check(
        recs.len() == 2 && recs.iter().all(|r| r.protocol == Proto::Tcp),
        format!(
            "the server saw {} connection(s), over {} (expected 2, TCP)",
            recs.len(),
            protocols(&recs)
        ),
    );
    Ok(())
}

fn sctp_fair(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    const BYTES: u64 = 64 * 1024;
    let rtt = Duration::from_millis(100);
    lab.set_rules(rtt_rules(rtt, rtt));
    out.say(describe_rules(rtt, rtt));
    let props = format!(
        r#"{{"transport": {{"value": ["SCTP", "TCP"], "precedence": 2}}, "__he_delay": {}}}"#,
        ms_u(FAIR_ATTEMPT_DELAY)
    );
    out.say(format!("  properties: {props}"));
    out.say(format!(
        "  expected: SCTP's INIT-ACK after 1 RTT (~{} ms), TCP's SYN-ACK would follow at ~{} ms, SCTP's COOKIE-ACK at ~{} ms",
        ms_u(rtt),
        ms_u(rtt + FAIR_ATTEMPT_DELAY),
        ms_u(2 * rtt)
    ));
    lab.sink().clear();
    let mut c = to_sctp_host(&props);
    c.send_bytes = Some(BYTES);
    let r = ctx.connect(lab, c)?;
    show(out, "#1", &r);
    let f = r.flow();
    show_timeline(out, "#1", f);
    check_connected(
        out,
        "#1",
        f,
        Some("IPv4"),
        2 * rtt + Duration::from_millis(20),
        "2 RTT (INIT, COOKIE-ECHO) + 20",
    );
    check_stack(out, "#1", f, "SCTP");
    let sctp_start = started_over(f, "SCTP").map_or(f64::NAN, |a| a.start_ms);
    let reachable = f.event_at("reachable");
    out.check(
        reachable.is_some_and(|at| at - sctp_start <= ms(rtt) + 20.0),
        match reachable {
            Some(at) => format!(
                "#1 SCTP reachable (INIT-ACK) at {at:.1} ms, {:.1} ms after its start (<= RTT 100 + 20): the race committed to it",
                at - sctp_start
            ),
            None => "#1 the timeline has no reachable event (SCTP's INIT-ACK)".to_string(),
        },
    );
    let tcp = started_over(f, "TCP");
    out.check(
        tcp.is_some_and(|a| {
            a.outcome == "cancelled" && a.end_ms.is_some_and(|end| end < a.start_ms + ms(rtt))
        }),
        match tcp {
            Some(a) => format!(
                "#1 TCP (started at {:.1} ms) {} at {:.1} ms, before its SYN-ACK was due ({:.1} ms): a race waiting for establishment would have let TCP win",
                a.start_ms,
                a.outcome,
                a.end_ms.unwrap_or(f64::NAN),
                a.start_ms + ms(rtt)
            ),
            None => "#1 a TCP attempt started (it did not)".to_string(),
        },
    );
    let recs = lab.sink().wait_for(1, Duration::from_secs(5));
    let got: u64 = recs.iter().map(|r| r.bytes).sum();
    let bad: u64 = recs.iter().map(|r| r.mismatched).sum();
    out.check(
        recs.len() == 1
            && recs[0].protocol == Proto::Sctp
            && got == BYTES
            && bad == 0
            && recs[0].clean_close,
        format!(
            "the server received {got} bytes over {} on {} connection(s), {bad} wrong (expected {BYTES} over SCTP on 1, 0 wrong, clean close)",
            protocols(&recs),
            recs.len()
        ),
    );
    Ok(())
}

fn probe_body(lab: &Lab, _ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let rd = addresses("rd");
    let (rd6, rd4) = (rd[0].addr, rd[1].addr);
    let one_way = Duration::from_millis(50);
    lab.set_rules(vec![
        Rule::new(Match::host(rd4)).delay(one_way),
        Rule::new(Match::host(rd6)).delay(one_way),
    ]);
    out.say("  rules: 50 ms each way to rd's addresses");
    for ip in [rd4, rd6] {
        let addr = SocketAddr::new(ip, SERVICE_PORT);
        let mut times = Vec::new();
        for _ in 0..5 {
            times.push(
                probe::tcp_connect_time(lab.client(), addr, Duration::from_secs(2)).map_err(io)?,
            );
        }
        let list: Vec<String> = times.iter().map(|t| format!("{:.1}", ms(*t))).collect();
        out.say(format!("  TCP connect to {addr}: {} ms", list.join(", ")));
        let (lo, hi) = (Duration::from_millis(100), Duration::from_millis(110));
        out.check(
            times.iter().all(|t| *t >= lo && *t <= hi),
            format!("TCP connect to {addr} took 100..110 ms each time (50 ms each way)"),
        );
    }

    // A dead (blackholed) address gives no answer at all: the connect times out.
    let dead = SocketAddr::new(addresses("rx")[0].addr, SERVICE_PORT);
    let r = probe::tcp_connect_time(lab.client(), dead, Duration::from_millis(300));
    out.check(
        matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::TimedOut),
        format!("TCP connect to dead {dead} gets no answer (times out after 300 ms): {r:?}"),
    );

    // DNS, and its per-type delay.
    let dns = lab.dns_addr();
    let (t, n) = probe::dns_query(lab.client(), dns, &fqdn("rxz4"), 1, Duration::from_secs(2))
        .map_err(io)?;
    out.check(
        n == 2,
        format!(
            "DNS A rxz4 answered {n} records in {:.1} ms (expected 2)",
            ms(t)
        ),
    );
    lab.dns()
        .set_delay(RecordType::AAAA, Duration::from_millis(300));
    let q = probe::dns_query(lab.client(), dns, &fqdn("rxxx"), 28, Duration::from_secs(2));
    lab.dns().clear_delays();
    let (t, n) = q.map_err(io)?;
    out.check(
        n == 3 && t >= Duration::from_millis(300) && t < Duration::from_millis(400),
        format!("DNS AAAA rxxx with a 300 ms delay answered {n} records in {:.1} ms (expected 3, 300..400 ms)", ms(t)),
    );

    // Rate limit: 2 MB at 16 Mbit/s takes about a second.
    lab.set_rules(vec![Rule::new(
        Match::host(rd4).tcp().direction(Direction::ToServer),
    )
    .rate(16_000_000)]);
    lab.sink().clear();
    let size = 2_000_000u64;
    let t = probe::tcp_send(
        lab.client(),
        SocketAddr::new(rd4, SERVICE_PORT),
        size,
        Duration::from_secs(10),
    )
    .map_err(io)?;
    let recs = lab.sink().wait_for(1, Duration::from_secs(2));
    let got: u64 = recs.iter().map(|r| r.bytes).sum();
    out.check(
        got == size && t >= Duration::from_millis(1000) && t <= Duration::from_millis(1400),
        format!("2 MB over a 16 Mbit/s limit took {:.0} ms (expected 1000..1400), server got {got} bytes", ms(t)),
    );

    // Loss: 5% each way, no delay; 2 MB still arrives intact.
    lab.set_rules(vec![Rule::new(Match::host(rd6)).loss(0.05)]);
    lab.sink().clear();
    let before = lab.stats();
    let t = probe::tcp_send(
        lab.client(),
        SocketAddr::new(rd6, SERVICE_PORT),
        size,
        Duration::from_secs(30),
    )
    .map_err(io)?;
    let recs = lab.sink().wait_for(1, Duration::from_secs(2));
    let got: u64 = recs.iter().map(|r| r.bytes).sum();
    let bad: u64 = recs.iter().map(|r| r.mismatched).sum();
    let lost = lab.stats().to_server.lost - before.to_server.lost;
    out.check(
        got == size && bad == 0 && lost > 0,
        format!("2 MB over 5% loss arrived intact in {:.0} ms ({got} bytes, {bad} wrong, {lost} packets dropped)", ms(t)),
    );
    Ok(())
}
