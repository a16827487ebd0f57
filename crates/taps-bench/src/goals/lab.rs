//! The goals measured in network namespaces (`taps-bench lab`; issue 14, parts 3 and 4):
//! SCTP's CPU per byte on a 1500-byte path, and first contact at 50 ms RTT.

use super::{not_measured, Judge};
use crate::experiments::{FirstContact, PATH_1500};
use crate::{Goal, Results};

/// The `rx-first` goal: connected this long after the first DNS answer, at most (ms).
const FIRST_CONTACT_MS: f64 = 180.0;

/// Evaluates the lab's goals when the run planned the lab.
pub(super) fn lab_goals(r: &Results, planned: bool, g: &mut Vec<Goal>) {
    if !planned {
        return;
    }
    path_cpu_goal(r, g);
    rx_first_goal(r, g);
    rd_first_goal(r, g);
}

/// SCTP's CPU per byte (sender + receiver) against TCP's on the 1500-byte path: at most
/// 3 ×, as the median of per-repetition ratios; throughput is listed with it.
fn path_cpu_goal(r: &Results, g: &mut Vec<Goal>) {
    const TARGET: &str = "≤ 3 × TCP's CPU per byte";
    let name = format!("SCTP CPU per byte (sender + receiver), one flow through taps, {PATH_1500}");
    let Some(p) = r.sctp_speed.iter().find(|p| p.path == PATH_1500) else {
        g.push(not_measured(name, TARGET, 3.0));
        return;
    };
    let j = super::sctp::speed_judge(p);
    let mb = p.bytes as f64 / 1e6;
    let ns_per_byte = |us: f64| us * 1e3 / p.bytes as f64;
    g.push(j.goal(
        format!("{name}, {mb:.0} MB"),
        TARGET,
        3.0,
        p.cpu_ratio,
        format!(
            "{:.2} × TCP's ({:.1} vs {:.1} ns per byte); throughput {:.2} × TCP's",
            p.cpu_ratio,
            ns_per_byte(p.sctp.total_cpu_us.median),
            ns_per_byte(p.tcp.total_cpu_us.median),
            p.throughput_ratio,
        ),
    ));
}

/// The scenario's failed checks in words, for a goal's text.
fn failed_words(c: &FirstContact) -> String {
    if c.failed.is_empty() {
        "every check of the scenario held".into()
    } else {
        format!("failed checks: {}", c.failed.join("; "))
    }
}

/// A first contact's figure counts only when its scenario connected and every check
/// held (a failed flow's time is no connect time).
fn contact_judge(c: &FirstContact) -> Judge {
    let mut j = Judge::default();
    if c.ipv6_won.is_none() {
        j.problems.push("the flow did not connect".into());
    }
    if !c.failed.is_empty() {
        j.problems.push(format!(
            "{} check(s) of the scenario failed",
            c.failed.len()
        ));
    }
    j
}

/// `rx-first`: connected within 180 ms of the first DNS answer; curl's time beside it.
fn rx_first_goal(r: &Results, g: &mut Vec<Goal>) {
    const TARGET: &str = "connected ≤ 180 ms after the first DNS answer";
    let name = "first contact, rx (dead IPv6, live IPv4), RTT 50 ms to hosts and DNS".to_string();
    let Some(c) = r.lab.as_ref().and_then(|l| l.rx_first.as_ref()) else {
        g.push(not_measured(name, TARGET, FIRST_CONTACT_MS));
        return;
    };
    let curl = match c.curl_ms {
        Some(ms) => format!(
            "{} in the same lab connects after {ms:.1} ms",
            c.curl_version.as_deref().unwrap_or("curl")
        ),
        None => "curl not measured".into(),
    };
    g.push(contact_judge(c).goal(
        name,
        TARGET,
        FIRST_CONTACT_MS,
        c.after_answer_ms,
        format!(
            "{:.1} ms (first answer at {:.1} ms; {} attempt(s)); {curl}; {}",
            c.after_answer_ms,
            c.answer_ms,
            c.attempts,
            failed_words(c)
        ),
    ));
}

/// `rd-first`: IPv6 still wins, with one attempt (no extra attempt on a healthy network).
fn rd_first_goal(r: &Results, g: &mut Vec<Goal>) {
    const TARGET: &str = "IPv6 wins, 1 attempt per connection";
    let name = "first contact, rd (both families work), DNS RTT 50 ms".to_string();
    let Some(c) = r.lab.as_ref().and_then(|l| l.rd_first.as_ref()) else {
        g.push(not_measured(name, TARGET, 1.0));
        return;
    };
    let ipv6 = c.ipv6_won == Some(true);
    let mut goal = contact_judge(c).goal(
        name,
        TARGET,
        1.0,
        c.attempts,
        format!(
            "{} attempt(s), {} won, connected {:.1} ms after the first DNS answer; {}",
            c.attempts,
            match c.ipv6_won {
                Some(true) => "IPv6",
                Some(false) => "IPv4 (not IPv6)",
                None => "nothing",
            },
            c.after_answer_ms,
            failed_words(c)
        ),
    );
    goal.met &= ipv6;
    g.push(goal);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::LabResults;

    fn contact(after: f64, attempts: f64, ipv6: Option<bool>) -> FirstContact {
        FirstContact {
            answer_ms: 50.0,
            after_answer_ms: after,
            attempts,
            curl_ms: Some(255.0),
            curl_version: Some("curl 7.88.1".into()),
            ipv6_won: ipv6,
            failed: Vec::new(),
        }
    }

    fn lab_goals_of(lab: Option<LabResults>) -> Vec<Goal> {
        let mut r = super::super::tests::results();
        r.lab = lab;
        let mut g = Vec::new();
        lab_goals(&r, true, &mut g);
        g
    }

    #[test]
    fn nothing_measured_fails_every_lab_goal() {
        let g = lab_goals_of(None);
        assert_eq!(g.len(), 3);
        assert!(g.iter().all(|g| !g.met && g.problem.is_some()));
    }

    #[test]
    fn first_contact_goals_follow_their_figures() {
        let lab = |rx: FirstContact, rd: FirstContact| LabResults {
            loss: None,
            rx_first: Some(rx),
            rd_first: Some(rd),
        };
        let g = lab_goals_of(Some(lab(
            contact(160.0, 2.0, Some(false)),
            contact(41.0, 1.0, Some(true)),
        )));
        assert!(g[1].met && g[2].met, "{g:?}");
        // A flow that failed fast is no fast first contact.
        let g = lab_goals_of(Some(lab(
            contact(120.0, 2.0, None),
            contact(41.0, 1.0, None),
        )));
        assert!(!g[1].met && !g[2].met && g[1].problem.is_some());
        // A failed check of the scenario makes its figure not count.
        let mut rx = contact(160.0, 2.0, Some(false));
        rx.failed
            .push("the trace says the lookup's time set the stagger".into());
        let g = lab_goals_of(Some(lab(rx, contact(41.0, 1.0, Some(true)))));
        assert!(!g[1].met);
        let g = lab_goals_of(Some(lab(
            contact(300.0, 2.0, Some(false)),
            contact(41.0, 2.0, Some(true)),
        )));
        assert!(!g[1].met && !g[2].met);
        // One attempt, but IPv4 won: not met.
        let g = lab_goals_of(Some(lab(
            contact(160.0, 2.0, Some(false)),
            contact(41.0, 1.0, Some(false)),
        )));
        assert!(!g[2].met);
        // A missing figure (NaN) never counts.
        let g = lab_goals_of(Some(lab(
            contact(f64::NAN, 2.0, Some(false)),
            contact(41.0, 1.0, Some(true)),
        )));
        assert!(!g[1].met && g[1].problem.is_some());
    }
}
