//! First contact with the DNS server as far away as the hosts (RTT 50 ms everywhere): the
//! first lookup's round trip is the only thing taps knows about the network, and it uses
//! it to stagger the attempts (`clamp(2 × RTT + 10 ms, 100 ms, 250 ms)`). `rx-first`:
//! dead IPv6, live IPv4 — connected within 180 ms of the first DNS answer, and curl
//! (Debian's, `--resolve` with both addresses, its 200 ms Happy Eyeballs timeout) is timed
//! in the same lab for comparison. `rd-first`: both families work — IPv6 still wins, with
//! one attempt.

#![forbid(unsafe_code)]

use std::net::IpAddr;
use std::process::Command;
use std::time::Duration;

use super::checks::{
    check_connected, first_answer_ms, millis_f64, millis_u64, show_connection, show_timeline,
};
use super::runner::{Ctx, Outcome};
use super::setup::{connect_tcp, rtt_rules};
use crate::lab::{addresses, fqdn, Lab, DNS_V4, DNS_V6, SERVICE_PORT};
use crate::rules::{Match, Rule};
use crate::taps::FlowReport;

/// The RTT to every zone address and to the DNS server.
const RTT: Duration = Duration::from_millis(50);
/// The goal: connected this long after the first DNS answer, at most.
const GOAL: Duration = Duration::from_millis(180);

/// RTT rules for the zone (IPv4 `rtt4`, IPv6 `rtt6`) and [`RTT`] to the DNS server.
fn rules(rtt4: Duration, rtt6: Duration) -> Vec<Rule> {
    let mut rules = rtt_rules(rtt4, rtt6);
    for ip in [IpAddr::V4(DNS_V4), IpAddr::V6(DNS_V6)] {
        rules.push(Rule::new(Match::host(ip)).rtt(RTT));
    }
    rules
}

/// Attempts that started.
fn started(f: &FlowReport) -> usize {
    f.attempts.iter().filter(|a| a.started()).count()
}

/// `rx-first` (see the module docs). Figures: those of [`record_first_contact`] and
/// `curl_ms` (curl's `time_connect`); label `curl_version`.
pub(super) fn rx_first(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    lab.set_rules(rules(RTT, RTT));
    lab.dns().clear_delays();
    out.say(format!(
        "  rules: RTT {} ms to every zone address and to the DNS server; rx's IPv6 address is dead",
        millis_u64(RTT)
    ));
    let r = connect_tcp(lab, ctx, "rx")?;
    show_connection(out, "#1 (first contact)", &r);
    let f = r.flow();
    show_timeline(out, "#1", f);
    let answer = first_answer_ms(f).unwrap_or(f64::NAN);
    let after = f.total_ms - answer;
    check_connected(
        out,
        "#1",
        f,
        Some("IPv4"),
        Duration::from_secs(1),
        "a first contact",
    );
    // The stagger this lookup's time sets, then the winner's round trip: with the lab's
    // RTT (a lookup of ~50 ms) that is within the goal; the benchmark judges the goal on
    // the figure (a release build), this checks the mechanism (a debug build's slower
    // lookup sets a longer stagger).
    let stagger = (2.0 * answer + 10.0).clamp(100.0, 250.0);
    let bound = stagger + millis_f64(RTT) + 25.0;
    out.check(
        after <= bound,
        format!(
            "#1 connected {after:.1} ms after the first DNS answer (at {answer:.1} ms) <= {bound:.1} ms (the stagger the lookup set, {stagger:.1} ms, + RTT 50 + 25; the goal is {} ms at the lab's RTT, RFC 8305's 250 ms stagger would give 300)",
            millis_u64(GOAL)
        ),
    );
    out.check(
        f.timeline
            .iter()
            .any(|(_, e)| e.starts_with("the lookup took")),
        "#1 the trace says the lookup's time set the stagger".to_string(),
    );
    record_first_contact(out, f, answer);
    let curl = curl_connect_ms(lab, "rx")?;
    out.figure("curl_ms", curl);
    out.label("curl_version", curl_version(lab));
    out.say(format!(
        "  curl (--resolve with both addresses, no DNS): connected after {curl:.1} ms; taps {after:.1} ms after its first DNS answer"
    ));
    out.check(
        after < curl,
        format!("taps' first contact ({after:.1} ms) beats curl's ({curl:.1} ms)"),
    );
    Ok(())
}

/// `rd-first` (see the module docs). Figures: those of [`record_first_contact`].
pub(super) fn rd_first(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let (rtt4, rtt6) = (RTT, Duration::from_millis(40));
    lab.set_rules(rules(rtt4, rtt6));
    lab.dns().clear_delays();
    out.say(format!(
        "  rules: RTT {} ms to IPv4, {} ms to IPv6 zone addresses, {} ms to the DNS server",
        millis_u64(rtt4),
        millis_u64(rtt6),
        millis_u64(RTT)
    ));
    let r = connect_tcp(lab, ctx, "rd")?;
    show_connection(out, "#1 (first contact)", &r);
    let f = r.flow();
    show_timeline(out, "#1", f);
    let answer = first_answer_ms(f).unwrap_or(f64::NAN);
    record_first_contact(out, f, answer);
    let bound = Duration::from_millis(1) + rtt6 + RTT;
    check_connected(
        out,
        "#1",
        f,
        Some("IPv6"),
        bound,
        "IPv6 RTT 40 + 50 (the DNS round trip, for load) + 1",
    );
    out.check(
        started(f) == 1,
        format!(
            "#1 one attempt on a healthy network (started {})",
            started(f)
        ),
    );
    Ok(())
}

/// Records a first contact's figures: `answer_ms` (the first DNS answer, since the race
/// began), `after_answer_ms` (connected, since that answer; NaN when the flow did not
/// connect, so a quick failure never reads as a fast connection), `attempts` (started)
/// and `ipv6_won` (1 or 0; NaN without a winner).
fn record_first_contact(out: &mut Outcome, f: &FlowReport, answer: f64) {
    let winner = f.winner.as_ref().filter(|_| f.error.is_none());
    out.figure("answer_ms", answer);
    out.figure(
        "after_answer_ms",
        winner.map_or(f64::NAN, |_| f.total_ms - answer),
    );
    out.figure("attempts", started(f) as f64);
    out.figure(
        "ipv6_won",
        winner.map_or(f64::NAN, |w| if w.family == "IPv6" { 1.0 } else { 0.0 }),
    );
}

/// The first line of `curl --version` in the client namespace ("curl" if it says
/// nothing).
fn curl_version(lab: &Lab) -> String {
    let mut cmd: Command = lab.client().command("curl");
    cmd.arg("--version");
    lab.run_child(cmd, Duration::from_secs(5))
        .ok()
        .and_then(|c| {
            let mut words = c.stdout.split_whitespace();
            match (words.next(), words.next()) {
                (Some("curl"), Some(version)) => Some(format!("curl {version}")),
                _ => None,
            }
        })
        .unwrap_or_else(|| "curl".into())
}

/// Runs curl in the client namespace against zone name `name` on the service port, with
/// `--resolve` giving every address of the name (IPv6 first, as DNS order would), and
/// returns its `time_connect` in ms. The sink accepts and never answers HTTP, so curl is
/// stopped by `--max-time` after it connected; its timing line is printed anyway.
fn curl_connect_ms(lab: &Lab, name: &str) -> Result<f64, String> {
    let host = fqdn(name);
    let addrs: Vec<String> = addresses(name)
        .iter()
        .map(|r| match r.addr {
            IpAddr::V6(a) => format!("[{a}]"),
            IpAddr::V4(a) => a.to_string(),
        })
        .collect();
    let mut cmd: Command = lab.client().command("curl");
    cmd.args([
        "-s",
        "-o",
        "/dev/null",
        "--max-time",
        "1",
        "-w",
        "%{time_connect}",
    ])
    .arg("--resolve")
    .arg(format!("{host}:{SERVICE_PORT}:{}", addrs.join(",")))
    .arg(format!("http://{host}:{SERVICE_PORT}/"));
    let c = lab
        .run_child(cmd, Duration::from_secs(5))
        .map_err(|e| format!("cannot run curl: {e}"))?;
    let secs: f64 = c.stdout.trim().parse().map_err(|_| {
        format!(
            "curl printed no connect time (stdout {:?}, stderr {:?})",
            c.stdout, c.stderr
        )
    })?;
    if secs <= 0.0 {
        return Err(format!("curl did not connect (time_connect {secs})"));
    }
    Ok(secs * 1e3)
}
