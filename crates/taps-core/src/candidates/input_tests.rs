//! Plans for property sets as a new user writes them (issue 15).

use std::sync::Arc;

use super::*;
use crate::policy::Pib;
use crate::properties::{Name, Protocol, TransportProperties};

fn plan_json(json: &str) -> Result<Plan, Unsatisfiable> {
    let props = TransportProperties::from_neat_json(json)
        .unwrap()
        .compile()
        .unwrap();
    Plan::new(&props, Arc::new(Pib::builtin()), &Availability::all())
}

fn protocols(plan: &Plan) -> Vec<Protocol> {
    plan.stacks().iter().map(|s| s.stack.protocol).collect()
}

#[test]
fn required_mptcp_implies_multipath() {
    // Used to fail with "MPTCP: multipath is disabled".
    let plan = plan_json(r#"{"transport":{"value":"MPTCP","precedence":2}}"#).unwrap();
    assert_eq!(protocols(&plan), [Protocol::Mptcp]);
    assert!(plan.stacks()[0].reasons.contains(&Reason::Implied {
        name: Name::Multipath,
        by: Name::Transport,
    }));
}

#[test]
fn listed_mptcp_is_raced_with_the_others() {
    let plan = plan_json(r#"{"transport":["MPTCP","TCP"]}"#).unwrap();
    assert_eq!(plan.stacks()[0].stack.protocol, Protocol::Mptcp);
    assert!(protocols(&plan).contains(&Protocol::Tcp));
}

#[test]
fn explicit_multipath_disabled_still_rules_mptcp_out() {
    let e = plan_json(
        r#"{"transport":{"value":"MPTCP","precedence":2},"multipath":{"value":"disabled","precedence":2}}"#,
    )
    .unwrap_err();
    assert!(e.to_string().contains("multipath"), "{e}");
    // And a `not MPTCP` is no request for it.
    let plan = plan_json(r#"{"transport":{"value":{"not":"SCTP"},"precedence":2}}"#).unwrap();
    assert!(!protocols(&plan).contains(&Protocol::Mptcp));
}

#[test]
fn multipath_true_puts_mptcp_first() {
    let plan = plan_json(r#"{"multipath": true}"#).unwrap();
    assert_eq!(plan.stacks()[0].stack.protocol, Protocol::Mptcp);
}

#[test]
fn required_multipath_rules_out_single_path_stacks() {
    let e = plan_json(
        r#"{"transport":{"value":"UDP","precedence":2},"multipath":{"value":"active","precedence":2}}"#,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("multipath requires active, candidate is UDP"),
        "{e}"
    );
    let plan = plan_json(r#"{"multipath":{"value":"active","precedence":2}}"#).unwrap();
    assert_eq!(protocols(&plan), [Protocol::Mptcp]);
}

#[test]
fn required_multihoming_is_a_service_of_sctp_and_mptcp_only() {
    let plan = plan_json(r#"{"multihoming":{"value":true,"precedence":2}}"#).unwrap();
    let mut left = protocols(&plan);
    left.sort_by_key(|p| p.as_str());
    assert_eq!(left, [Protocol::Mptcp, Protocol::Sctp]);
    let e = plan_json(
        r#"{"transport":{"value":"UDP","precedence":2},"multihoming":{"value":true,"precedence":2}}"#,
    )
    .unwrap_err();
    let words = e.to_string();
    assert!(
        words.contains("multihoming requires true, candidate is UDP (one path only)"),
        "{words}"
    );
    assert!(
        e.properties.iter().any(|p| p.starts_with("multihoming")),
        "{e:?}"
    );
    // Plain TCP (MPTCP not asked for) is one path too: the conflict names both properties.
    let words = plan_json(
        r#"{"transport":{"value":"TCP","precedence":2},"multihoming":{"value":true,"precedence":2}}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(
        words.contains("multihoming (require) and transport=TCP (required) conflict")
            && words.contains("multihoming requires true, candidate is TCP (one path only)"),
        "{words}"
    );
}

#[test]
fn a_required_local_address_this_host_lacks_is_named() {
    let plan = plan_json(
        r#"{"transport":{"value":"TCP","precedence":2},"local_ips":{"value":["127.0.0.1","192.0.2.7"],"precedence":2}}"#,
    )
    .unwrap();
    let cib = crate::policy::Cib::default();
    let addrs = ["127.0.0.1".parse().unwrap()];
    let g = plan.gather(&"h:1".into(), 1, &addrs, &cib, std::time::Instant::now());
    assert!(g.candidates.is_empty());
    let why = g.pruned[0].violations[0].to_string();
    assert_eq!(
        why,
        "local_ips names 192.0.2.7, which is not an address of this host"
    );
}
