//! The CIB's unit tests.
use super::*;
use crate::net::{InterfaceAddress, InterfaceKind};

/// Outcomes are kept per interface (in memory and in the file): a path that failed
/// over one link is not held against another.
#[test]
fn outcomes_are_kept_per_interface() {
    let (t0, wall) = (Instant::now(), SystemTime::now());
    let on = |i: &str| OutcomeKey {
        interface: Some(i.into()),
        ..key(Protocol::Tcp, Security::None)
    };
    let mut cib = Cib::default();
    cib.record_failure(on("wlan0"), AttemptCause::Refused, t0);
    cib.record_success(on("eth0"), Duration::from_millis(20), t0);
    let mut loaded = Cib::default();
    assert_eq!(loaded.load_json(&cib.to_json(t0, wall), t0, wall), Ok(2));
    let plain = key(Protocol::Tcp, Security::None);
    for c in [&cib, &loaded] {
        let h = |k: &OutcomeKey| c.history(k, t0);
        assert!(matches!(h(&on("wlan0")), History::Failed { .. }));
        assert!(matches!(h(&on("eth0")), History::Succeeded { .. }));
        assert_eq!(h(&plain), History::Unknown);
    }
}

/// Regression (fuzz/crashes/cib): a failure whose cause is only text (a file from
/// before typed causes, a TLS handshake failure) made `to_json` panic.
#[test]
fn text_only_causes_save_and_load_again() {
    let t0 = Instant::now();
    let wall = SystemTime::now();
    let mut cib = Cib::default();
    let tls = key(Protocol::Tcp, Security::Tls);
    let sctp = key(Protocol::Sctp, Security::None);
    cib.record_failure(
        tls.clone(),
        AttemptCause::other(std::io::Error::other("bad alert")),
        t0,
    );
    cib.record_failure(sctp.clone(), AttemptCause::Refused, t0);
    let mut loaded = Cib::default();
    assert_eq!(loaded.load_json(&cib.to_json(t0, wall), t0, wall), Ok(2));
    let History::Failed { cause, .. } = loaded.history(&tls, t0) else {
        panic!("the TLS failure was not kept");
    };
    assert!(cause.to_string().contains("bad alert"), "{cause}");
    assert!(matches!(
        loaded.history(&sctp, t0),
        History::Failed {
            cause: AttemptCause::Refused,
            ..
        }
    ));
}

fn key(protocol: Protocol, security: Security) -> OutcomeKey {
    OutcomeKey {
        endpoint: "example.test:443".into(),
        stack: Stack::new(protocol, security),
        remote: "192.0.2.1:443".parse().unwrap(),
        interface: None,
    }
}

#[test]
fn quic_failures_back_off_doubling_and_clear_on_a_new_network() {
    let t0 = Instant::now();
    let mut cib = Cib::default();
    let quic = key(Protocol::Quic, Security::QuicTls);
    let tls = key(Protocol::Tcp, Security::Tls);
    let minute = Duration::from_secs(60);
    cib.record_failure(quic.clone(), AttemptCause::TimedOut { after: None }, t0);
    cib.record_failure(tls.clone(), AttemptCause::Refused, t0);
    // First QUIC failure: 5 minutes; other stacks: the 10-minute lifetime.
    assert!(matches!(
        cib.history(&quic, t0 + 4 * minute),
        History::Failed { .. }
    ));
    assert_eq!(cib.history(&quic, t0 + 6 * minute), History::Unknown);
    assert!(matches!(
        cib.history(&tls, t0 + 9 * minute),
        History::Failed { .. }
    ));
    // Second and third in a row: 10, then 20 minutes.
    cib.record_failure(quic.clone(), AttemptCause::TimedOut { after: None }, t0);
    assert!(matches!(
        cib.history(&quic, t0 + 9 * minute),
        History::Failed { .. }
    ));
    cib.record_failure(quic.clone(), AttemptCause::TimedOut { after: None }, t0);
    assert!(matches!(
        cib.history(&quic, t0 + 19 * minute),
        History::Failed { .. }
    ));
    assert_eq!(cib.history(&quic, t0 + 21 * minute), History::Unknown);
    // Pruning keeps what still counts, and the persisted form keeps the count.
    cib.prune(t0 + 15 * minute);
    assert!(matches!(
        cib.history(&quic, t0 + 15 * minute),
        History::Failed { .. }
    ));
    let wall = SystemTime::now();
    let mut loaded = Cib::default();
    loaded.load_json(&cib.to_json(t0, wall), t0, wall).unwrap();
    assert!(matches!(
        loaded.history(&quic, t0 + 19 * minute),
        History::Failed { .. }
    ));
    // A success resets the count; a new network forgets QUIC failures only.
    cib.record_failure(tls.clone(), AttemptCause::Refused, t0);
    cib.set_interfaces(Arc::new(vec![Interface {
        name: "eth0".into(),
        index: 2,
        kind: InterfaceKind::Ethernet,
        up: true,
        addresses: vec![InterfaceAddress {
            addr: "198.51.100.7".parse().unwrap(),
            prefix_len: 24,
        }],
    }]));
    assert_eq!(cib.history(&quic, t0), History::Unknown);
    assert!(matches!(cib.history(&tls, t0), History::Failed { .. }));
    // A too long doubling is capped at two days.
    for _ in 0..40 {
        cib.record_failure(quic.clone(), AttemptCause::TimedOut { after: None }, t0);
    }
    let (k, o) = cib.outcomes().find(|(k, _)| **k == quic).unwrap();
    assert_eq!(cib.lifetime_of(k, o), QUIC_BROKEN_MAX);
    // A CIB that keeps nothing keeps no QUIC failure either.
    let mut forgetful = Cib::new(CibConfig {
        lifetime: Duration::ZERO,
        ..CibConfig::default()
    });
    forgetful.record_failure(quic.clone(), AttemptCause::TimedOut { after: None }, t0);
    assert_eq!(forgetful.history(&quic, t0), History::Unknown);
}

/// The RTT median: zero without samples, the upper one of an even count, only the last
/// `RTT_SAMPLES` counted.
#[test]
fn median_of_the_last_samples() {
    let ms = Duration::from_millis;
    assert_eq!(median(&[]), Duration::ZERO);
    assert_eq!(median(&[ms(7)]), ms(7));
    assert_eq!(median(&[ms(5), ms(1), ms(3), ms(2)]), ms(3));
    assert_eq!(
        median(&[ms(2), Duration::from_micros(1500), ms(1)]),
        Duration::from_micros(1500)
    );
    let many: Vec<Duration> = (1..=20).map(ms).collect();
    // The last eight are 13..=20: upper median 17.
    assert_eq!(median(&many), ms(17));
}

/// Every cause crosses to the policy manager: one with a tagged form as itself, one that
/// holds a lower layer's error (a TLS alert, an I/O error) as its words.
#[test]
fn portable_records_carry_every_cause() {
    let t0 = Instant::now();
    let remote: SocketAddr = "192.0.2.1:443".parse().unwrap();
    for cause in [
        AttemptCause::Refused,
        AttemptCause::other(std::io::Error::other("alert 40 handshake failure")),
    ] {
        let record = AttemptRecord {
            stack: Stack::new(Protocol::Tcp, Security::Tls),
            remote,
            interface: None,
            at: t0,
            result: Err(cause.clone()),
        };
        let line = serde_json::to_string(&PortableRecord::new(&record, t0))
            .expect("every record serialises");
        let back: PortableRecord = serde_json::from_str(&line).unwrap();
        let got = back.to_record(t0).unwrap().result.unwrap_err();
        assert_eq!(got.to_string(), cause.to_string(), "{line}");
    }
}

/// `is_portable` says exactly which causes serialise (the CIB file and the policy
/// manager's records rely on it instead of trying).
#[test]
fn is_portable_agrees_with_serialisation() {
    let kept = || crate::LayerError::new(std::io::Error::other("x"));
    for cause in [
        AttemptCause::Refused,
        AttemptCause::Reset,
        AttemptCause::Unreachable,
        AttemptCause::TimedOut { after: None },
        AttemptCause::SecurityTimedOut {
            transport_up: Duration::from_millis(1),
            after: Duration::from_millis(5),
        },
        AttemptCause::Overtaken {
            silent: Duration::from_millis(5),
        },
        AttemptCause::Verification {
            server_name: "a".into(),
            reason: crate::VerifyFailure::Expired,
        },
        AttemptCause::Verification {
            server_name: "a".into(),
            reason: crate::VerifyFailure::Other(kept()),
        },
        AttemptCause::Unavailable(crate::Unavailable::NotBuilt),
        AttemptCause::Handshake(kept()),
        AttemptCause::Unsupported(kept()),
        AttemptCause::Other(kept()),
    ] {
        assert_eq!(
            cause.is_portable(),
            serde_json::to_value(&cause).is_ok(),
            "{cause:?}"
        );
    }
}
