use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::failure::AttemptCause;
use crate::net::{Family, Interface, InterfaceKind};
use crate::policy::{Cib, CibConfig, History, OutcomeKey, Pib, PropertySet, Rule, RuleKind};
use crate::properties::{
    Entry, Name, Precedence, Preference, Properties, Protocol, TransportProperties, Value,
};
use crate::{Security, Stack, Unavailable};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// An Ethernet interface that is up, with these addresses.
fn ethernet(name: &str, index: u32, addrs: &[(&str, u8)]) -> Interface {
    Interface {
        name: name.into(),
        index,
        kind: InterfaceKind::Ethernet,
        up: true,
        addresses: addrs
            .iter()
            .map(|(a, prefix_len)| crate::net::InterfaceAddress {
                addr: ip(a),
                prefix_len: *prefix_len,
            })
            .collect(),
    }
}

/// An interface list of one Ethernet interface `eth0` with these addresses.
fn eth0(addrs: &[(&str, u8)]) -> Arc<Vec<Interface>> {
    Arc::new(vec![ethernet("eth0", 2, addrs)])
}

fn endpoint() -> Arc<str> {
    "localhost:8080".into()
}

fn plan_json(json: &str) -> Result<Plan, Unsatisfiable> {
    let props = TransportProperties::from_neat_json(json)
        .unwrap()
        .compile()
        .unwrap();
    Plan::new(&props, Arc::new(Pib::builtin()), &Availability::all())
}

fn gather(plan: &Plan, addrs: &[&str], cib: &Cib, now: Instant) -> Gathered {
    let addrs: Vec<IpAddr> = addrs.iter().map(|a| ip(a)).collect();
    plan.gather(&endpoint(), 8080, &addrs, cib, now)
}

fn names(g: &Gathered) -> Vec<String> {
    g.candidates.iter().map(|c| c.to_string()).collect()
}

#[test]
fn transport_list_gives_both_protocols_both_families_sctp_first() {
    let plan = plan_json(r#"{"transport":{"value":["SCTP","TCP"],"precedence":2}}"#).unwrap();
    let g = gather(
        &plan,
        &["127.0.0.1", "::1"],
        &Cib::default(),
        Instant::now(),
    );
    assert_eq!(
        names(&g),
        [
            "SCTP [::1]:8080",
            "SCTP 127.0.0.1:8080",
            "TCP [::1]:8080",
            "TCP 127.0.0.1:8080"
        ]
    );
}

#[test]
fn services_not_protocols_pick_sctp() {
    let plan = plan_json(
        r#"{"reliability":{"value":true,"precedence":2},
            "preserveMsgBoundaries":{"value":true,"precedence":2}}"#,
    )
    .unwrap();
    let stacks: Vec<Stack> = plan.stacks().iter().map(|s| s.stack).collect();
    assert_eq!(stacks, [Stack::plain(Protocol::Sctp)]);
    let tcp = plan
        .pruned()
        .iter()
        .find(|p| p.stack == Stack::plain(Protocol::Tcp))
        .unwrap();
    assert_eq!(
        tcp.violations,
        [Violation::Lacks {
            name: Name::PreserveMsgBoundaries
        }]
    );
    let udp = plan
        .pruned()
        .iter()
        .find(|p| p.stack == Stack::plain(Protocol::Udp))
        .unwrap();
    assert!(udp.violations.contains(&Violation::Lacks {
        name: Name::Reliability
    }));
}

#[test]
fn conflict_names_both_properties() {
    let err = plan_json(
        r#"{"transport":{"value":"TCP","precedence":2},
            "preserveMsgBoundaries":{"value":true,"precedence":2}}"#,
    )
    .unwrap_err();
    let text = err.to_string();
    assert_eq!(err.properties.len(), 2, "{text}");
    assert!(text.contains("transport=TCP"), "{text}");
    assert!(text.contains("preserveMsgBoundaries (require)"), "{text}");
}

#[test]
fn a_secure_only_protocol_without_security_says_to_ask_for_security() {
    // QUIC is always secured; without security asked for only plain stacks run.
    let err = plan_json(r#"{"transport":{"value":"QUIC","precedence":2}}"#).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("transport=QUIC"), "{text}");
    assert!(text.contains("security (not requested)"), "{text}");
    assert!(text.contains("only QUIC can meet them"), "{text}");
    assert!(text.contains("require (or prefer) security"), "{text}");
    // Asked for, it plans.
    let plan = plan_json(
        r#"{"transport":{"value":"QUIC","precedence":2},"security":{"value":true,"precedence":2}}"#,
    )
    .unwrap();
    assert_eq!(plan.stacks()[0].stack.to_string(), "QUIC");
}

#[test]
fn defaults_yield_to_an_explicit_protocol() {
    // RFC 9622 defaults require reliability; an application asking for UDP gets UDP.
    let plan = plan_json(r#"{"transport":{"value":"UDP","precedence":2}}"#).unwrap();
    let s = &plan.stacks()[0];
    assert_eq!(s.stack, Stack::plain(Protocol::Udp));
    assert!(s.reasons.contains(&Reason::Relaxed {
        name: Name::Reliability
    }));
}

#[test]
fn defaults_rank_tcp_then_sctp_and_exclude_the_rest() {
    let plan = Plan::new(
        &Properties::defaults(),
        Arc::new(Pib::builtin()),
        &Availability::all(),
    )
    .unwrap();
    let stacks: Vec<String> = plan.stacks().iter().map(|s| s.stack.to_string()).collect();
    assert_eq!(stacks, ["TCP", "SCTP"]);
    let mptcp = plan
        .pruned()
        .iter()
        .find(|p| p.stack.protocol == Protocol::Mptcp && p.stack.security == Security::None)
        .unwrap();
    assert_eq!(mptcp.violations, [Violation::MultipathDisabled]);
}

#[test]
fn multipath_active_puts_mptcp_first() {
    let props = TransportProperties::new()
        .multipath(crate::properties::Multipath::Active)
        .compile()
        .unwrap();
    let plan = Plan::new(&props, Arc::new(Pib::empty()), &Availability::all()).unwrap();
    assert_eq!(plan.stacks()[0].stack, Stack::plain(Protocol::Mptcp));
}

#[test]
fn security_never_mixes_secure_and_plain_stacks() {
    let plan = plan_json(r#"{"security":{"value":true,"precedence":1}}"#).unwrap();
    assert!(plan
        .stacks()
        .iter()
        .all(|s| s.stack.security != Security::None));
    assert!(plan
        .stacks()
        .iter()
        .any(|s| s.stack.protocol == Protocol::Quic));
    let plan = plan_json(r#"{}"#).unwrap();
    assert!(plan
        .stacks()
        .iter()
        .all(|s| s.stack.security == Security::None));
}

#[test]
fn prohibit_and_avoid() {
    let props = TransportProperties::new()
        .protocols(Preference::Prohibit, [Protocol::Sctp])
        .compile()
        .unwrap();
    let plan = Plan::new(&props, Arc::new(Pib::empty()), &Availability::all()).unwrap();
    assert_eq!(plan.stacks()[0].stack, Stack::plain(Protocol::Tcp));
    assert_eq!(plan.stacks().len(), 1);
    // Avoiding multistreaming keeps TCP first and scores SCTP down.
    let props = TransportProperties::new()
        .avoid(Name::Multistreaming)
        .compile()
        .unwrap();
    let plan = Plan::new(&props, Arc::new(Pib::empty()), &Availability::all()).unwrap();
    let order: Vec<String> = plan.stacks().iter().map(|s| s.stack.to_string()).collect();
    assert_eq!(order, ["TCP", "SCTP"]);
}

#[test]
fn sctp_leads_when_the_application_asks_for_what_only_sctp_gives() {
    let order = |props: TransportProperties| -> Vec<String> {
        let plan = Plan::new(
            &props.compile().unwrap(),
            Arc::new(Pib::empty()),
            &Availability::all(),
        )
        .unwrap();
        plan.stacks().iter().map(|s| s.stack.to_string()).collect()
    };
    // The RFC 9622 default (multistreaming Prefer) alone does not: TCP leads.
    assert_eq!(order(TransportProperties::new()), ["TCP", "SCTP"]);
    // Asked for by the application, it does.
    let ms = TransportProperties::new().prefer(Name::Multistreaming);
    assert_eq!(order(ms), ["SCTP", "TCP"]);
    let msg = TransportProperties::new().prefer(Name::PreserveMsgBoundaries);
    assert_eq!(order(msg)[0], "SCTP");
}

#[test]
fn ip_version_required_prunes_the_other_family() {
    let plan = plan_json(r#"{"ip_version":{"value":6,"precedence":2}}"#).unwrap();
    let g = gather(
        &plan,
        &["127.0.0.1", "::1"],
        &Cib::default(),
        Instant::now(),
    );
    assert!(g.candidates.iter().all(|c| c.family() == Family::V6));
    assert!(g.pruned.iter().all(|p| p.remote.is_ipv4()));
    assert!(!g.pruned.is_empty());
}

#[test]
fn only_family_is_known_when_the_properties_require_one() {
    let only = |json: &str| plan_json(json).unwrap().only_family();
    assert_eq!(
        only(r#"{"ip_version":{"value":6,"precedence":2}}"#),
        Some(Family::V6)
    );
    assert_eq!(
        only(r#"{"ip_version":{"value":4,"precedence":2}}"#),
        Some(Family::V4)
    );
    // Asked for, not required: both families stay in the race.
    assert_eq!(only(r#"{"ip_version":{"value":4,"precedence":1}}"#), None);
    assert_eq!(
        only(r#"{"transport":{"value":"TCP","precedence":2}}"#),
        None
    );
    // Prohibiting IPv6 leaves IPv4 alone.
    let props = TransportProperties::new()
        .ip_version(Preference::Prohibit, Family::V6)
        .compile()
        .unwrap();
    let plan = Plan::new(&props, Arc::new(Pib::builtin()), &Availability::all()).unwrap();
    assert_eq!(plan.only_family(), Some(Family::V4));
}

#[test]
fn a_policy_naming_ip_version_leaves_both_families_to_the_candidates() {
    let props = TransportProperties::from_neat_json(r#"{"ip_version":{"value":4,"precedence":2}}"#)
        .unwrap()
        .compile()
        .unwrap();
    let policy: serde_json::Value = serde_json::from_str(
        r#"{"uid":"v6-for-one-host","match":{"domain_name":{"value":"example.org"}},
            "properties":{"ip_version":{"value":6,"precedence":2}}}"#,
    )
    .unwrap();
    let mut pib = Pib::builtin();
    pib.add(Rule::from_json(&policy, RuleKind::Policy, "p").unwrap());
    let plan = Plan::new(&props, Arc::new(pib), &Availability::all()).unwrap();
    assert_eq!(plan.only_family(), None);
}

#[test]
fn missing_interface_is_reported_not_silently_empty() {
    // NEAT's example profile named `lo0`; on Linux every candidate was dropped silently.
    let plan = plan_json(r#"{"interface":{"value":"lo0","precedence":2}}"#).unwrap();
    let g = gather(&plan, &["127.0.0.1"], &Cib::default(), Instant::now());
    assert!(g.candidates.is_empty());
    let why = g.pruned[0].violations[0].to_string();
    assert!(why.contains("interface requires lo0"), "{why}");
    // By kind it works.
    let plan = plan_json(r#"{"interface":{"value":"loopback","precedence":2}}"#).unwrap();
    let g = gather(&plan, &["127.0.0.1"], &Cib::default(), Instant::now());
    assert_eq!(
        g.candidates[0].local.as_ref().unwrap().interface.as_ref(),
        "lo"
    );
}

#[test]
fn no_local_address_of_a_family_prunes_it() {
    let mut cib = Cib::default();
    cib.set_interfaces(eth0(&[("192.0.2.10", 24)]));
    let plan = plan_json("{}").unwrap();
    let g = gather(
        &plan,
        &["2001:db8::1", "198.51.100.1"],
        &cib,
        Instant::now(),
    );
    assert!(g.candidates.iter().all(|c| c.family() == Family::V4));
    assert_eq!(
        g.pruned[0].violations,
        [Violation::NoLocalAddress { family: Family::V6 }]
    );
}

/// Gathers like the I/O side does: keeps the last scored answer in `kept` and reuses it
/// while it matches, else scores afresh.
fn gather_reusing(
    plan: &Plan,
    kept: &mut Option<ScoredAnswer>,
    addrs: &[&str],
    cib: &Cib,
    now: Instant,
) -> Gathered {
    let addrs: Vec<IpAddr> = addrs.iter().map(|a| ip(a)).collect();
    let interfaces = cib.interfaces();
    let endpoint = endpoint();
    if !kept
        .as_ref()
        .is_some_and(|s| s.matches(&endpoint, 8080, &addrs, &interfaces))
    {
        *kept = Some(plan.score_answer(&endpoint, 8080, &addrs, interfaces));
    }
    plan.gather_scored(kept.as_ref().unwrap(), &endpoint, cib, now)
}

#[test]
fn repeated_gathers_reuse_the_scores_but_follow_the_cib_and_the_interfaces() {
    let plan = plan_json("{}").unwrap();
    let now = Instant::now();
    let mut cib = Cib::default();
    let mut kept = None;
    cib.set_interfaces(eth0(&[("192.0.2.10", 24), ("2001:db8::10", 64)]));
    let first = gather_reusing(&plan, &mut kept, &["2001:db8::1", "192.0.2.1"], &cib, now);
    assert!(first
        .candidates
        .iter()
        .all(|c| c.history == History::Unknown));
    // The same answer again: same candidates, now with what the CIB learned since.
    let tcp_v4 = first
        .candidates
        .iter()
        .find(|c| c.stack.protocol == Protocol::Tcp && c.family() == Family::V4)
        .unwrap()
        .clone();
    cib.record_failure(tcp_v4.outcome_key(&endpoint()), AttemptCause::Refused, now);
    let second = gather_reusing(&plan, &mut kept, &["2001:db8::1", "192.0.2.1"], &cib, now);
    assert_eq!(second.candidates.len(), first.candidates.len());
    let again = second
        .candidates
        .iter()
        .find(|c| c.stack == tcp_v4.stack && c.remote == tcp_v4.remote)
        .unwrap();
    assert!(matches!(again.history, History::Failed { .. }));
    assert!(
        Arc::ptr_eq(&again.reasons, &tcp_v4.reasons),
        "scores reused"
    );
    // A new interface list (only IPv4 now) is scored afresh.
    cib.set_interfaces(eth0(&[("192.0.2.10", 24)]));
    let third = gather_reusing(&plan, &mut kept, &["2001:db8::1", "192.0.2.1"], &cib, now);
    assert!(third.candidates.iter().all(|c| c.family() == Family::V4));
    assert!(!third.pruned.is_empty());
    // Other addresses are scored afresh too.
    let other = gather_reusing(&plan, &mut kept, &["192.0.2.7"], &cib, now);
    assert!(other
        .candidates
        .iter()
        .all(|c| c.remote.ip() == ip("192.0.2.7")));
}

#[test]
fn gather_scored_on_a_reused_answer_gives_what_gather_gives() {
    let plan = plan_json(r#"{"transport":{"value":["SCTP","TCP"],"precedence":2}}"#)
        .unwrap()
        .with_first_family_count(2);
    let now = Instant::now();
    let mut cib = Cib::default();
    cib.set_interfaces(eth0(&[("192.0.2.10", 24), ("2001:db8::10", 64)]));
    let addrs: Vec<IpAddr> = ["2001:db8::1", "2001:db8::2", "192.0.2.1", "192.0.2.2"]
        .iter()
        .map(|a| ip(a))
        .collect();
    let ep = endpoint();
    let scored = plan.score_answer(&ep, 8080, &addrs, cib.interfaces());
    assert!(scored.matches(&ep, 8080, &addrs, &cib.interfaces()));
    assert!(!scored.matches(&ep, 8081, &addrs, &cib.interfaces()));
    assert!(!scored.matches("other:8080", 8080, &addrs, &cib.interfaces()));
    assert!(!scored.matches(&ep, 8080, &addrs[..1], &cib.interfaces()));
    assert!(!scored.matches(&ep, 8080, &addrs, &eth0(&[("192.0.2.10", 24)])));
    let same = |a: &Gathered, b: &Gathered| {
        let key = |g: &Gathered| -> Vec<String> {
            g.candidates
                .iter()
                .map(|c| format!("{c} {} {:?} {:?}", c.score, c.history, c.reasons))
                .chain(g.pruned.iter().map(|p| format!("{p:?}")))
                .collect()
        };
        assert_eq!(key(a), key(b));
    };
    // Fresh, and again after the CIB learned something: the reused answer follows it.
    for round in 0..2 {
        let reused = plan.gather_scored(&scored, &ep, &cib, now);
        let fresh = plan.gather(&ep, 8080, &addrs, &cib, now);
        assert!(!fresh.candidates.is_empty());
        same(&reused, &fresh);
        if round == 0 {
            let first = fresh.candidates[0].outcome_key(&ep);
            cib.record_failure(first, AttemptCause::Refused, now);
        }
    }
    assert_eq!(scored.candidates().len() + scored.pruned().len(), 2 * 4);
}

fn tcp_only() -> Plan {
    plan_json(r#"{"transport":{"value":"TCP","precedence":2}}"#).unwrap()
}

#[test]
fn families_interleave_after_first_family_count() {
    let addrs = [
        "2001:db8::1",
        "2001:db8::2",
        "2001:db8::3",
        "192.0.2.1",
        "192.0.2.2",
    ];
    let mut cib = Cib::default();
    cib.set_interfaces(eth0(&[("192.0.2.10", 24), ("2001:db8::10", 64)]));
    let fams = |g: &Gathered| -> String {
        g.candidates
            .iter()
            .map(|c| if c.family() == Family::V6 { '6' } else { '4' })
            .collect()
    };
    let g = gather(&tcp_only(), &addrs, &cib, Instant::now());
    assert_eq!(fams(&g), "64646");
    let g = gather(
        &tcp_only().with_first_family_count(2),
        &addrs,
        &cib,
        Instant::now(),
    );
    assert_eq!(fams(&g), "66464");
}

#[test]
fn history_moves_failures_back_and_fast_paths_forward() {
    let now = Instant::now();
    let mut cib = Cib::default();
    let ep = endpoint();
    let key = |a: &str| OutcomeKey {
        interface: None,
        endpoint: ep.clone(),
        stack: Stack::plain(Protocol::Tcp),
        remote: SocketAddr::new(ip(a), 8080),
    };
    cib.record_failure(key("::1"), AttemptCause::TimedOut { after: None }, now);
    let g = gather(&tcp_only(), &["::1", "127.0.0.1"], &cib, now);
    assert_eq!(names(&g), ["TCP 127.0.0.1:8080", "TCP [::1]:8080"]);
    assert!(matches!(g.candidates[1].history, History::Failed { .. }));

    // Expired: back to RFC 6724 order.
    let later = now + Duration::from_secs(601);
    let g = gather(&tcp_only(), &["::1", "127.0.0.1"], &cib, later);
    assert_eq!(names(&g), ["TCP [::1]:8080", "TCP 127.0.0.1:8080"]);

    // A failed SCTP path puts TCP first even though SCTP is preferred.
    let plan = plan_json(r#"{"transport":{"value":["SCTP","TCP"],"precedence":2}}"#).unwrap();
    let mut cib = Cib::default();
    for a in ["::1", "127.0.0.1"] {
        cib.record_failure(
            OutcomeKey {
                interface: None,
                endpoint: ep.clone(),
                stack: Stack::plain(Protocol::Sctp),
                remote: SocketAddr::new(ip(a), 8080),
            },
            AttemptCause::Overtaken {
                silent: Duration::from_millis(250),
            },
            now,
        );
    }
    let g = gather(&plan, &["::1", "127.0.0.1"], &cib, now);
    assert_eq!(g.candidates[0].stack.protocol, Protocol::Tcp);
    assert_eq!(g.candidates[3].stack.protocol, Protocol::Sctp);

    // Successful addresses go first, fastest first.
    let mut cib = Cib::default();
    cib.record_success(key("127.0.0.1"), Duration::from_millis(5), now);
    let g = gather(&tcp_only(), &["::1", "127.0.0.1"], &cib, now);
    assert_eq!(names(&g), ["TCP 127.0.0.1:8080", "TCP [::1]:8080"]);
}

#[test]
fn unavailable_stacks_are_ranked_and_marked() {
    let props = Properties::defaults();
    let avail = Availability::all().without(Stack::plain(Protocol::Tcp), Unavailable::NotBuilt);
    let plan = Plan::new(&props, Arc::new(Pib::empty()), &avail).unwrap();
    let g = plan.gather(
        &endpoint(),
        1,
        &[ip("::1")],
        &Cib::new(CibConfig::default()),
        Instant::now(),
    );
    assert_eq!(g.candidates[0].unavailable, Some(Unavailable::NotBuilt));
    assert_eq!(g.candidates[1].unavailable, None);
}

mod pib {
    use super::*;
    use crate::policy::merge_entry;
    use crate::policy::{Rule, RuleKind};

    fn rule(json: &str, kind: RuleKind) -> Rule {
        Rule::from_json(&serde_json::from_str(json).unwrap(), kind, "test").unwrap()
    }

    #[test]
    fn profile_changes_ranking_by_score() {
        let mut pib = Pib::empty();
        pib.add(rule(
            r#"{"uid": "tcp_for_low_latency", "priority": 1,
                "match": {"low_latency": {"value": true}},
                "properties": [[{"transport": {"value": "TCP", "precedence": 2, "score": 5}},
                                {"transport": {"value": "SCTP", "precedence": 2, "score": 1}}]]}"#,
            RuleKind::Profile,
        ));
        let props = TransportProperties::from_neat_json(r#"{"low_latency": true}"#)
            .unwrap()
            .compile()
            .unwrap();
        let plan = Plan::new(&props, Arc::new(pib), &Availability::all()).unwrap();
        let order: Vec<String> = plan.stacks().iter().map(|s| s.stack.to_string()).collect();
        assert_eq!(order, ["TCP", "SCTP"]);
        // Without the match, the default order stands (SCTP first only when asked for
        // multistreaming).
        let props = TransportProperties::new()
            .prefer(Name::Multistreaming)
            .compile()
            .unwrap();
        let plan = Plan::new(&props, Arc::new(Pib::empty()), &Availability::all()).unwrap();
        assert_eq!(plan.stacks()[0].stack.protocol, Protocol::Sctp);
    }

    #[test]
    fn merge_rules() {
        let uid: Arc<str> = "p".into();
        let mut set = PropertySet::new();
        let list = Value::List(vec![Value::Str("SCTP".into()), Value::Str("TCP".into())]);
        let mut e = Entry::new(list, Precedence::Required);
        e.score = Some(1.0);
        set.insert(Name::Transport, e);
        // Intersecting values combine, scores add, precedence is the higher.
        let mut inc = Entry::new(Value::Str("TCP".into()), Precedence::Requested);
        inc.score = Some(2.0);
        merge_entry(&mut set, Name::Transport, &inc, &uid).unwrap();
        let got = &set[&Name::Transport];
        assert_eq!(got.value, Value::Str("TCP".into()));
        assert_eq!(got.score, Some(3.0));
        assert_eq!(got.precedence, Precedence::Required);
        // Conflict, lower precedence incoming: ignored.
        merge_entry(
            &mut set,
            Name::Transport,
            &Entry::new(Value::Str("UDP".into()), Precedence::Requested),
            &uid,
        )
        .unwrap();
        assert_eq!(set[&Name::Transport].value, Value::Str("TCP".into()));
        // Two required values that conflict: dropped.
        let err = merge_entry(
            &mut set,
            Name::Transport,
            &Entry::new(Value::Str("UDP".into()), Precedence::Required),
            &uid,
        )
        .unwrap_err();
        assert!(err.to_string().contains("requires transport=UDP"), "{err}");
        // Conflict, higher precedence incoming: wins.
        let mut set = PropertySet::new();
        set.insert(
            Name::IpVersion,
            Entry::new(Value::Int(4), Precedence::Requested),
        );
        merge_entry(
            &mut set,
            Name::IpVersion,
            &Entry::new(Value::Int(6), Precedence::Required),
            &uid,
        )
        .unwrap();
        assert_eq!(set[&Name::IpVersion].value, Value::Int(6));
    }

    #[test]
    fn replace_matched_and_alternatives_expand() {
        let r = rule(
            r#"{"uid": "reliable", "replace_matched": true,
                "match": {"transport": {"value": "reliable"}},
                "properties": [{"transport": {"value": "SCTP", "precedence": 2, "score": 3}},
                               {"transport": {"value": "TCP", "precedence": 2, "score": 2}}]}"#,
            RuleKind::Profile,
        );
        let mut pib = Pib::empty();
        pib.add(r);
        let props = TransportProperties::from_neat_json(r#"{"transport": "reliable"}"#)
            .unwrap()
            .compile()
            .unwrap();
        let (sets, conflicts) = pib.apply_profiles(props.entries());
        assert!(conflicts.is_empty());
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[0][&Name::Transport].value, Value::Str("SCTP".into()));
        let plan = Plan::new(&props, Arc::new(pib), &Availability::all()).unwrap();
        let order: Vec<String> = plan.stacks().iter().map(|s| s.stack.to_string()).collect();
        assert_eq!(order, ["SCTP", "TCP"]);
    }

    #[test]
    fn list_of_lists_is_every_combination() {
        let r = rule(
            r#"{"properties": [[{"transport": {"value": "SCTP"}}, {"transport": {"value": "TCP"}}],
                               [{"ip_version": {"value": 4}}, {"ip_version": {"value": 6}}]]}"#,
            RuleKind::Profile,
        );
        assert_eq!(r.alternatives.len(), 4);
    }

    #[test]
    fn policy_conflict_drops_candidate_and_says_why() {
        let mut pib = Pib::empty();
        pib.add(rule(
            r#"{"uid": "no_sctp_over_v4", "match": {"ip_version": {"value": 4}},
                "properties": {"transport": {"value": "TCP", "precedence": 2}}}"#,
            RuleKind::Policy,
        ));
        pib.add(rule(
            r#"{"uid": "boost_v4", "priority": 5, "match": {"ip_version": {"value": 4}},
                "properties": {"ip_version": {"value": 4, "precedence": 1, "score": 10}}}"#,
            RuleKind::Policy,
        ));
        let props = TransportProperties::from_neat_json(
            r#"{"transport":{"value":["SCTP","TCP"],"precedence":2}}"#,
        )
        .unwrap()
        .compile()
        .unwrap();
        let plan = Plan::new(&props, Arc::new(pib), &Availability::all()).unwrap();
        let g = plan.gather(
            &endpoint(),
            80,
            &[ip("::1"), ip("127.0.0.1")],
            &Cib::default(),
            Instant::now(),
        );
        let pruned: Vec<String> = g
            .pruned
            .iter()
            .map(|p| format!("{} {}: {}", p.stack, p.remote, p.violations[0]))
            .collect();
        assert_eq!(pruned.len(), 1, "{pruned:?}");
        // The violation names the policies that led to it.
        assert!(
            pruned[0].starts_with("SCTP 127.0.0.1:80: policy no_sctp_over_v4")
                && pruned[0].ends_with("transport requires TCP, candidate is SCTP"),
            "{pruned:?}"
        );
        // The boosted IPv4 TCP candidate now ranks first.
        assert_eq!(g.candidates[0].to_string(), "TCP 127.0.0.1:80");
        assert!(g.candidates[0]
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::Rule { uid } if &**uid == "boost_v4")));
    }

    #[test]
    fn load_dir_in_neat_layout() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("profiles")).unwrap();
        std::fs::write(
            dir.path().join("profiles/prefer_tcp.json"),
            r#"{"uid": "prefer_tcp", "properties": {"transport": {"value": "TCP", "precedence": 1, "score": 10}}}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("ignored.txt"), "not json").unwrap();
        let pib = Pib::empty().load_dir(dir.path()).unwrap();
        assert_eq!(pib.profiles().len(), 1);
        std::fs::write(dir.path().join("bad.policy"), "{\"uid\": 1,").unwrap();
        let err = Pib::empty().load_dir(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("bad.policy") && err.contains("line 1"),
            "{err}"
        );
        std::fs::write(
            dir.path().join("bad.policy"),
            r#"{"properties": {"nope": 1}}"#,
        )
        .unwrap();
        let err = Pib::empty().load_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("unknown property 'nope'"), "{err}");
    }
}

mod cib {
    use super::*;
    use std::time::SystemTime;

    fn key(n: u16) -> OutcomeKey {
        OutcomeKey {
            interface: None,
            endpoint: "h:1".into(),
            stack: Stack::plain(Protocol::Tcp),
            remote: SocketAddr::new(ip("::1"), n),
        }
    }

    #[test]
    fn expiry_and_median_rtt() {
        let now = Instant::now();
        let mut cib = Cib::default();
        for ms in [30, 10, 20] {
            cib.record_success(key(1), Duration::from_millis(ms), now);
        }
        match cib.history(&key(1), now) {
            History::Succeeded { rtt, .. } => assert_eq!(rtt, Duration::from_millis(20)),
            h => panic!("{h:?}"),
        }
        assert_eq!(cib.best_rtt("h:1", now), Some(Duration::from_millis(20)));
        assert_eq!(
            cib.history(&key(1), now + Duration::from_secs(600)),
            History::Unknown
        );
        cib.prune(now + Duration::from_secs(601));
        assert!(cib.is_empty());
    }

    #[test]
    fn size_bound_evicts_oldest() {
        let now = Instant::now();
        let mut cib = Cib::new(CibConfig {
            lifetime: Duration::from_secs(600),
            max_entries: 3,
        });
        for n in 0..5u16 {
            cib.record_failure(
                key(n),
                AttemptCause::other(std::io::Error::other("x")),
                now + Duration::from_secs(n.into()),
            );
        }
        assert_eq!(cib.len(), 3);
        assert_eq!(
            cib.history(&key(0), now + Duration::from_secs(5)),
            History::Unknown
        );
        assert!(matches!(
            cib.history(&key(4), now + Duration::from_secs(5)),
            History::Failed { .. }
        ));
    }

    #[test]
    fn persistence_round_trip_and_corruption() {
        let now = Instant::now();
        let wall = SystemTime::now();
        let mut cib = Cib::default();
        cib.record_success(key(1), Duration::from_millis(7), now);
        cib.record_failure(key(2), AttemptCause::Refused, now);
        let text = cib.to_json(now, wall);

        // A later process, 60 s on.
        let later = now + Duration::from_secs(60);
        let mut loaded = Cib::default();
        assert_eq!(
            loaded
                .load_json(&text, later, wall + Duration::from_secs(60))
                .unwrap(),
            2
        );
        match loaded.history(&key(2), later) {
            History::Failed { cause, age } => {
                assert_eq!(cause, AttemptCause::Refused);
                assert!(age >= Duration::from_secs(59) && age <= Duration::from_secs(61));
            }
            h => panic!("{h:?}"),
        }
        // 11 minutes on, nothing loads.
        let mut stale = Cib::default();
        assert_eq!(
            stale
                .load_json(&text, later, wall + Duration::from_secs(660))
                .unwrap(),
            0
        );
        // Corrupt and foreign files are rejected with a reason.
        let mut c = Cib::default();
        let e = c
            .load_json("{\"format\": \"taps-cib\", ", now, wall)
            .unwrap_err();
        assert!(e.contains("not a taps CIB file"), "{e}");
        let e = c
            .load_json(
                r#"{"format": "other", "version": 1, "entries": []}"#,
                now,
                wall,
            )
            .unwrap_err();
        assert!(e.contains("format 'other'"), "{e}");
        assert!(c.is_empty());
    }
}

/// Two interfaces with both families: the race takes the interfaces in turn and
/// alternates families, so a dead link costs one attempt delay, not two.
#[test]
fn interfaces_and_families_are_interleaved() {
    let mut cib = Cib::default();
    cib.set_interfaces(Arc::new(vec![
        ethernet("eth0", 2, &[("192.0.2.10", 24), ("2001:db8:1::10", 64)]),
        ethernet("eth1", 3, &[("198.51.100.10", 24), ("2001:db8:2::10", 64)]),
    ]));
    let plan = plan_json(
        r#"{"transport":{"value":"TCP","precedence":2},
            "interface":{"value":["eth0","eth1"],"precedence":1}}"#,
    )
    .unwrap();
    let g = gather(
        &plan,
        &["2001:db8:9::1", "203.0.113.1"],
        &cib,
        Instant::now(),
    );
    let order: Vec<(String, Family)> = g
        .candidates
        .iter()
        .map(|c| (c.local.as_ref().unwrap().interface.to_string(), c.family()))
        .collect();
    assert_eq!(order.len(), 4, "{order:?}");
    assert_ne!(order[0].0, order[1].0, "{order:?}");
    assert_ne!(order[0].1, order[1].1, "{order:?}");
    assert_ne!(order[2].0, order[3].0, "{order:?}");
}
