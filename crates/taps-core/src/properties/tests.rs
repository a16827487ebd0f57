use super::*;

fn pref(p: &Properties, n: Name) -> Preference {
    p.get(n).and_then(Entry::as_preference).unwrap()
}

#[test]
fn rfc_9622_defaults() {
    let p = Properties::defaults();
    let expect = [
        (Name::Reliability, Preference::Require),
        (Name::PreserveMsgBoundaries, Preference::NoPreference),
        (Name::PerMsgReliability, Preference::NoPreference),
        (Name::PreserveOrder, Preference::Require),
        (Name::ZeroRttMsg, Preference::NoPreference),
        (Name::Multistreaming, Preference::Prefer),
        (Name::FullChecksumSend, Preference::Require),
        (Name::FullChecksumRecv, Preference::Require),
        (Name::CongestionControl, Preference::Require),
        (Name::KeepAlive, Preference::NoPreference),
        (Name::UseTemporaryLocalAddress, Preference::Prefer),
    ];
    for (n, want) in expect {
        assert_eq!(pref(&p, n), want, "{n}");
        assert_eq!(p.get(n).unwrap().origin, Origin::Default);
    }
    let c = p.compiled();
    assert_eq!(c.multipath, Multipath::Disabled);
    assert_eq!(c.capacity_profile, CapacityProfile::Default);
    assert_eq!(c.priority, 100);
    assert_eq!(c.timeout, None);
}

#[test]
fn listener_defaults() {
    let p = TransportProperties::for_listener().compile().unwrap();
    assert_eq!(pref(&p, Name::UseTemporaryLocalAddress), Preference::Avoid);
    assert_eq!(p.compiled().multipath, Multipath::Passive);
}

#[test]
fn five_levels_round_trip_through_neat_encoding() {
    for level in [
        Preference::Require,
        Preference::Prefer,
        Preference::NoPreference,
        Preference::Avoid,
        Preference::Prohibit,
    ] {
        let p = TransportProperties::new()
            .set(Name::Multistreaming, level)
            .compile()
            .unwrap();
        assert_eq!(pref(&p, Name::Multistreaming), level);
        let (v, prec) = level.to_neat();
        assert_eq!(Preference::from_neat(v, prec), level);
    }
    assert_eq!(
        Preference::parse("noPreference"),
        Some(Preference::NoPreference)
    );
    assert_eq!(Preference::parse("PROHIBIT"), Some(Preference::Prohibit));
    assert_eq!(Preference::parse("maybe"), None);
}

#[test]
fn neat_full_form() {
    let p = TransportProperties::from_neat_json(
        r#"{"transport": {"value": "TCP", "precedence": 2, "score": 3.5}}"#,
    )
    .unwrap();
    let e = p.get(Name::Transport).unwrap();
    assert_eq!(e.value, Value::Str("TCP".into()));
    assert_eq!(e.precedence, Precedence::Required);
    assert_eq!(e.score, Some(3.5));
}

#[test]
fn neat_list_form_of_transport_does_not_crash() {
    // The documented list form that aborted NEAT with an assertion.
    let p = TransportProperties::from_neat_json(
        r#"{"transport": {"value": ["SCTP", "TCP", "SCTP/UDP"], "precedence": 2}}"#,
    )
    .unwrap();
    assert_eq!(p.get(Name::Transport).unwrap().value.items().len(), 3);
}

#[test]
fn neat_list_of_entries_is_ordered_alternatives() {
    let p = TransportProperties::from_neat_json(
        r#"{"transport": [{"value": "TCP", "precedence": 1, "score": 1},
                          {"value": "SCTP", "precedence": 2, "score": 3}]}"#,
    )
    .unwrap();
    let e = p.get(Name::Transport).unwrap();
    assert_eq!(e.precedence, Precedence::Required);
    let names: Vec<String> = e.value.items().iter().map(|v| v.to_string()).collect();
    assert_eq!(names, ["SCTP", "TCP"]);
}

#[test]
fn neat_range_null_and_shorthands() {
    let p = TransportProperties::from_neat_json(
        r#"{"flow_priority": {"value": {"start": 0.1, "end": 0.5}},
            "interface": {"value": null},
            "low_latency": true,
            "preserveMsgBoundaries": "require",
            "__he_delay": 5}"#,
    )
    .unwrap();
    assert_eq!(
        p.get(Name::ConnPriority).unwrap().value,
        Value::Range(0.1, 0.5)
    );
    assert_eq!(p.get(Name::Interface).unwrap().value, Value::Any);
    assert_eq!(
        p.get(Name::PreserveMsgBoundaries).unwrap().as_preference(),
        Some(Preference::Require)
    );
    let c = p.compile().unwrap();
    assert_eq!(
        c.compiled().capacity_profile,
        CapacityProfile::LowLatencyInteractive
    );
    // __he_delay is clamped to the RFC 8305 floor of 10 ms.
    assert_eq!(c.compiled().attempt_delay, Some(Duration::from_millis(10)));
}

#[test]
fn neat_example_property_shapes() {
    // The shapes used by NEAT's example programs and its documentation.
    for json in [
        r#"{"transport": [{"value": "SCTP", "precedence": 1}, {"value": "TCP", "precedence": 1}]}"#,
        r#"{"transport": {"value": "SCTP/UDP", "precedence": 2}}"#,
        r#"{"transport": {"value": ["UDP", "UDP-Lite"], "precedence": 1}, "ip_version": {"value": 6, "precedence": 1}}"#,
        r#"{"security": {"value": true, "precedence": 2}, "verification": {"value": false}}"#,
        r#"{"multihoming": {"value": true, "precedence": 1}, "local_ips": {"value": ["127.0.0.1", "::1"]}}"#,
        r#"{"transport_type": {"value": "message", "precedence": 2}, "stream_count": {"value": 4}}"#,
        r#"{"capacity_profile": {"value": "scavenger"}, "dscp_value": {"value": 8}, "flow_group": {"value": 1}}"#,
    ] {
        TransportProperties::from_neat_json(json)
            .and_then(TransportProperties::compile)
            .unwrap_or_else(|e| panic!("{json}: {e}"));
    }
}

#[test]
fn malformed_json_gives_line_and_column() {
    let err = TransportProperties::from_neat_json("{\n  \"transport\": {\"value\": \"TCP\",,}\n}")
        .unwrap_err();
    match err {
        PropertyError::Json { line, column, .. } => {
            assert_eq!(line, 2);
            assert!(column > 20, "{column}");
        }
        e => panic!("{e}"),
    }
    assert!(err.to_string().contains("line 2, column"));
}

#[test]
fn unknown_names_and_bad_values_are_named() {
    let e = TransportProperties::from_neat_json(r#"{"relability": {"value": true}}"#).unwrap_err();
    assert_eq!(e, PropertyError::Unknown("relability".into()));
    assert_eq!(e.to_string(), "unknown property 'relability'");
    let e = TransportProperties::from_neat_json(r#"{"transport": {"value": "TCPX"}}"#).unwrap_err();
    assert!(e.to_string().contains("TCPX"), "{e}");
    let e = TransportProperties::from_neat_json(r#"{"reliability": {"value": 3}}"#).unwrap_err();
    assert!(e.to_string().starts_with("property 'reliability'"), "{e}");
    let e = TransportProperties::from_neat_json(r#"{"ip_version": 5}"#).unwrap_err();
    assert!(e.to_string().contains("4 or 6"), "{e}");
    let e =
        TransportProperties::from_neat_json(r#"{"transport": {"value": "TCP", "precedence": 7}}"#)
            .unwrap_err();
    assert!(e.to_string().contains("precedence"), "{e}");
    let e = TransportProperties::from_neat_json(r#"["TCP"]"#).unwrap_err();
    assert!(e.to_string().contains("expected an object"), "{e}");
    let e =
        TransportProperties::from_neat_json(r#"{"so/SOL_SOCKET/SO_SNDBUF": 4096}"#).unwrap_err();
    assert!(e.to_string().contains("raw socket options"), "{e}");
}

#[test]
fn names_accept_rfc_neat_and_snake_spellings() {
    assert_eq!(
        Name::parse("preserveMsgBoundaries"),
        Some(Name::PreserveMsgBoundaries)
    );
    assert_eq!(
        Name::parse("preserve_msg_boundaries"),
        Some(Name::PreserveMsgBoundaries)
    );
    assert_eq!(Name::parse("capacity_profile"), Some(Name::CapacityProfile));
    assert_eq!(Name::parse("__he_delay"), Some(Name::HeDelay));
    assert_eq!(Name::parse("nope"), None);
}

#[test]
fn compiled_properties_are_shared_not_copied() {
    let p = TransportProperties::new().compile().unwrap();
    let q = p.clone();
    assert!(p.ptr_eq(&q));
}

#[test]
fn builder_protocol_and_family_preferences() {
    let p = TransportProperties::new()
        .protocols(Preference::Prohibit, [Protocol::Udp])
        .ip_version(Preference::Require, Family::V6)
        .attempt_delay(Duration::from_secs(10))
        .compile()
        .unwrap();
    let t = p.get(Name::Transport).unwrap();
    assert!(!t.value.admits(&Value::Str("UDP".into())));
    assert!(t.value.admits(&Value::Str("TCP".into())));
    assert_eq!(p.compiled().attempt_delay, Some(Duration::from_secs(2)));
}

#[test]
fn value_intersection() {
    let l = |v: &[&str]| Value::List(v.iter().map(|s| Value::Str((*s).into())).collect());
    assert_eq!(
        l(&["SCTP", "TCP"]).intersect(&Value::Str("tcp".into())),
        Some(Value::Str("TCP".into()))
    );
    assert_eq!(l(&["SCTP"]).intersect(&Value::Str("TCP".into())), None);
    assert_eq!(
        Value::Range(1.0, 5.0).intersect(&Value::Range(3.0, 9.0)),
        Some(Value::Range(3.0, 5.0))
    );
    assert_eq!(Value::Any.intersect(&Value::Int(4)), Some(Value::Int(4)));
    let not_udp = Value::Not(Box::new(Value::Str("UDP".into())));
    assert_eq!(
        not_udp.intersect(&l(&["UDP", "TCP"])),
        Some(Value::Str("TCP".into()))
    );
}

/// Input as a new user writes it (issue 15): each of these used to be rejected or
/// silently wrong.
#[test]
fn multipath_true_means_active_and_false_disabled() {
    let p = TransportProperties::from_neat_json(r#"{"multipath": true}"#)
        .unwrap()
        .compile()
        .unwrap();
    assert_eq!(p.compiled().multipath, Multipath::Active);
    let p = TransportProperties::for_listener()
        .merge_neat_json(r#"{"multipath": {"value": false, "precedence": 2}}"#)
        .unwrap()
        .compile()
        .unwrap();
    assert_eq!(p.compiled().multipath, Multipath::Disabled);
    // A number is still an error, naming the words.
    let e = TransportProperties::from_neat_json(r#"{"multipath": 1}"#).unwrap_err();
    assert!(e.to_string().contains("disabled, active, passive"), "{e}");
}

#[test]
fn words_in_any_case_and_with_underscores() {
    let p = TransportProperties::from_neat_json(
        r#"{"multipath": "Active", "scheduler": "Round_Robin", "direction": "BIDIRECTIONAL"}"#,
    )
    .unwrap();
    assert_eq!(
        p.get(Name::ConnScheduler).unwrap().value,
        Value::Str("round-robin".into())
    );
    assert_eq!(p.compile().unwrap().compiled().multipath, Multipath::Active);
    let e = TransportProperties::from_neat_json(r#"{"multipath": "sometimes"}"#).unwrap_err();
    assert!(e.to_string().contains("got sometimes"), "{e}");
}

#[test]
fn ip_version_as_text() {
    for (text, want) in [
        ("\"IPv6\"", 6),
        ("\"4\"", 4),
        ("\"v4\"", 4),
        ("[\"ipv6\", 4]", 6),
    ] {
        let json = format!(r#"{{"ip_version": {text}}}"#);
        let p = TransportProperties::from_neat_json(&json).unwrap();
        let v = &p.get(Name::IpVersion).unwrap().value;
        assert_eq!(v.items()[0].as_f64(), Some(want as f64), "{text}: {v:?}");
    }
    let e = TransportProperties::from_neat_json(r#"{"ip_version": "IPv5"}"#).unwrap_err();
    assert!(e.to_string().contains("expected 4 or 6"), "{e}");
}

#[test]
fn booleans_written_as_text() {
    let p = TransportProperties::from_neat_json(
        r#"{"reliability": {"value": "false", "precedence": 2}, "low_latency": "TRUE"}"#,
    )
    .unwrap()
    .compile()
    .unwrap();
    assert_eq!(pref(&p, Name::Reliability), Preference::Prohibit);
    assert_eq!(
        p.compiled().capacity_profile,
        CapacityProfile::LowLatencyInteractive
    );
}

#[test]
fn negative_priority_is_an_error_not_zero() {
    let e = TransportProperties::from_neat_json(r#"{"priority": -1}"#)
        .unwrap()
        .compile()
        .unwrap_err();
    assert!(e.to_string().contains("expected 0 or more"), "{e}");
}

#[test]
fn tls_as_a_transport_points_to_security() {
    let e = TransportProperties::from_neat_json(r#"{"transport": "TLS"}"#).unwrap_err();
    assert!(e.to_string().contains("\"security\": \"require\""), "{e}");
}

#[test]
fn abort_establishment_and_keep_alive_timeouts_are_distinct() {
    // RFC 9622: connTimeout (8.1.3) is the timeout for aborting an established
    // connection; the establishment timeout is Initiate's and has a name of its own.
    let p = TransportProperties::from_neat_json(
        r#"{"connTimeout": 2.5, "establishmentTimeout": 4, "keepAliveTimeout": 1}"#,
    )
    .unwrap()
    .compile()
    .unwrap();
    let c = p.compiled();
    assert_eq!(c.abort_timeout, Some(Duration::from_millis(2500)));
    assert_eq!(c.timeout, Some(Duration::from_secs(4)));
    assert_eq!(c.keep_alive_timeout, Some(Duration::from_secs(1)));
    // "timeout" stays the establishment timeout; the builder sets each.
    let p = TransportProperties::from_neat_json(r#"{"timeout": 3}"#)
        .unwrap()
        .compile()
        .unwrap();
    assert_eq!(p.compiled().timeout, Some(Duration::from_secs(3)));
    assert_eq!(p.compiled().abort_timeout, None);
    let p = TransportProperties::new()
        .abort_timeout(Duration::from_secs(7))
        .keep_alive_timeout(Duration::from_secs(9))
        .compile()
        .unwrap();
    assert_eq!(p.compiled().abort_timeout, Some(Duration::from_secs(7)));
    assert_eq!(
        p.compiled().keep_alive_timeout,
        Some(Duration::from_secs(9))
    );
    for bad in [r#"{"connTimeout": -1}"#, r#"{"keepAliveTimeout": 1e300}"#] {
        let err = TransportProperties::from_neat_json(bad)
            .and_then(TransportProperties::compile)
            .unwrap_err();
        assert!(err.to_string().contains("seconds"), "{bad}: {err}");
    }
}

#[test]
fn multipath_policy_words_and_default() {
    use super::MultipathPolicy;
    let policy = |json: &str| {
        TransportProperties::from_neat_json(json)
            .and_then(|p| p.compile())
            .map(|p| p.compiled().multipath_policy)
    };
    assert_eq!(policy("{}").unwrap(), MultipathPolicy::Handover);
    assert_eq!(
        policy(r#"{"multipathPolicy": "Aggregate"}"#).unwrap(),
        MultipathPolicy::Aggregate
    );
    assert_eq!(
        policy(r#"{"multipath_policy": "interactive"}"#).unwrap(),
        MultipathPolicy::Interactive
    );
    let e = policy(r#"{"multipathPolicy": "fastest"}"#).unwrap_err();
    assert!(e.to_string().contains("multipathPolicy"), "{e}");
    assert!(
        e.to_string().contains("handover, interactive, aggregate"),
        "{e}"
    );
}
