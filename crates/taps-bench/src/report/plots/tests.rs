//! Every figure of the report, drawn from a synthetic run of every experiment (TCP and
//! SCTP): the files the report links, each a well-formed SVG document with its title,
//! its axes (with units) and its series named in the legend.

use super::plots;
use crate::experiments::{
    ConnectPoint, ConnectSide, HePoint, HeVariant, HttpPoint, Proto, SecurePoint, SecureVariant,
    Summary, TransferPoint, TransferSide,
};
use crate::report::chart::tests::parse;
use crate::{Meta, Results};

/// A summary whose every sample is `m`.
fn s(m: f64) -> Summary {
    Summary {
        median: m,
        min: m,
        max: m,
        samples: vec![m],
    }
}

fn connect_side(k: f64) -> ConnectSide {
    ConnectSide {
        client_cpu_us: s(1000.0 * k),
        server_cpu_us: s(800.0 * k),
        rss_growth_kib: s(100.0 * k),
        server_rss_growth_kib: s(90.0 * k),
        delay_median_us: s(200.0 * k),
        delay_max_us: s(400.0 * k),
        ..ConnectSide::default()
    }
}

fn connect(protocol: Proto) -> Vec<ConnectPoint> {
    [1, 4, 16, 64]
        .into_iter()
        .map(|flows| {
            let k = flows as f64;
            ConnectPoint {
                protocol,
                flows,
                taps: connect_side(1.2 * k),
                raw: connect_side(k),
                client_cpu_ratio: 1.2,
                server_cpu_ratio: 1.2,
                rss_extra_per_flow_kib: 1.0,
                delay_median_diff_ms: 0.1,
                delay_max_diff_ms: 0.2,
                taps_mapped: (protocol == Proto::Sctp).then(|| connect_side(0.5 * k)),
                mapped_vs_raw: None,
                taps_listener: (protocol == Proto::Tcp).then(|| connect_side(1.05 * k)),
                listener_server_cpu_ratio: (protocol == Proto::Tcp).then_some(1.05),
            }
        })
        .collect()
}

fn transfer_side(k: f64) -> TransferSide {
    TransferSide {
        sender_cpu_us: s(k),
        receiver_cpu_us: s(0.8 * k),
        total_cpu_us: s(1.8 * k),
        ..TransferSide::default()
    }
}

fn transfer(protocol: Proto) -> Vec<TransferPoint> {
    let mut out = Vec::new();
    for flows in [1, 2] {
        for bytes in [1_000u64, 1_000_000, 10_000_000] {
            let k = bytes as f64 / 100.0 * flows as f64;
            out.push(TransferPoint {
                protocol,
                bytes,
                flows,
                taps: transfer_side(1.1 * k),
                raw: transfer_side(k),
                sender_cpu_ratio: 1.1,
                receiver_cpu_ratio: 1.1,
                total_cpu_ratio: 1.1,
                taps_mapped: (protocol == Proto::Sctp).then(|| transfer_side(0.9 * k)),
                mapped_vs_raw: None,
            });
        }
    }
    out
}

const HE_RACES: [HeVariant; 3] = [
    HeVariant::RaceSctpDead,
    HeVariant::RaceBothAlive,
    HeVariant::RaceV6Dead,
];
const HE_FLAT: [HeVariant; 6] = [
    HeVariant::TapsSingle,
    HeVariant::TapsSctp,
    HeVariant::RawTcp,
    HeVariant::RawSctp,
    HeVariant::ResolveOnly,
    HeVariant::TapsSingleName,
];

fn he_point(variant: HeVariant, hit_percent: Option<u32>, y: f64) -> HePoint {
    HePoint {
        variant,
        hit_percent,
        connections: 100,
        client_cpu_per_conn_us: s(y),
        server_cpu_per_conn_us: s(0.7 * y),
        attempts_per_conn: s(1.0),
        sctp_share: s(0.0),
        server_timeouts: 0,
        delay_median_us: s(100.0),
        single: HeVariant::TapsSingle,
        client_vs_single: 1.0,
        client_vs_raw: 1.0,
        server_vs_single: 1.0,
        failed: 0,
        first_error: None,
    }
}

fn he() -> Vec<HePoint> {
    let mut out: Vec<HePoint> = HE_FLAT
        .iter()
        .enumerate()
        .map(|(i, &v)| he_point(v, None, 100.0 + 10.0 * i as f64))
        .collect();
    for (i, &v) in HE_RACES.iter().enumerate() {
        for h in [0, 50, 100] {
            out.push(he_point(v, Some(h), 300.0 - f64::from(h) + 20.0 * i as f64));
        }
    }
    out
}

fn http() -> Vec<HttpPoint> {
    let mut out = Vec::new();
    for object in [1024, 35 * 1024] {
        for (variant, hit_percent) in [
            (HeVariant::RawTcp, None),
            (HeVariant::RaceBothAlive, Some(80)),
        ] {
            for rate in [200.0, 400.0] {
                out.push(HttpPoint {
                    variant,
                    hit_percent,
                    object,
                    rate,
                    server_load_pct: s(rate / 20.0),
                    client_load_pct: s(rate / 30.0),
                    achieved_rate: s(rate),
                    delay_median_us: s(100.0),
                    sctp_share: s(0.5),
                    server_vs_raw: 1.1,
                    server_vs_single: 1.0,
                    failed: 0,
                    server_timeouts: 0,
                    first_error: None,
                });
            }
        }
    }
    out
}

const SECURE_RACES: [SecureVariant; 2] =
    [SecureVariant::RaceBothAlive, SecureVariant::RaceQuicDead];
const SECURE_FLAT: [SecureVariant; 4] = [
    SecureVariant::TapsQuic,
    SecureVariant::TapsTls,
    SecureVariant::RawQuic,
    SecureVariant::RawTls,
];

fn secure() -> Vec<SecurePoint> {
    let mut out = Vec::new();
    for object in [1024, 35 * 1024] {
        let mut variants: Vec<(SecureVariant, Option<u32>)> =
            SECURE_FLAT.iter().map(|&v| (v, None)).collect();
        for v in SECURE_RACES {
            variants.extend([(v, Some(0)), (v, Some(100))]);
        }
        for (i, (variant, hit_percent)) in variants.into_iter().enumerate() {
            let y = 500.0 + 25.0 * i as f64;
            out.push(SecurePoint {
                variant,
                hit_percent,
                object,
                connections: 100,
                rate: 500.0,
                client_cpu_per_conn_us: s(y),
                server_cpu_per_conn_us: s(0.8 * y),
                attempts_per_conn: s(1.0),
                quic_share: s(1.0),
                delay_median_us: s(2000.0),
                single: SecureVariant::TapsQuic,
                client_vs_single: 1.0,
                server_vs_single: 1.0,
                client_vs_raw: 1.0,
                server_vs_raw: 1.0,
                failed: 0,
                first_error: None,
                server_timeouts: 0,
            });
        }
    }
    out
}

/// A run of every experiment, TCP and SCTP.
fn results() -> Results {
    let both = [Proto::Tcp, Proto::Sctp];
    Results {
        meta: Meta {
            experiment: "all".into(),
            quick: true,
            protocols: both.to_vec(),
            release: false,
            cpus: 2,
            kernel: "test".into(),
            started_unix: 0,
            duration_s: 1.0,
            phases: Vec::new(),
        },
        connect: both.into_iter().flat_map(connect).collect(),
        transfer: both.into_iter().flat_map(transfer).collect(),
        sctp_speed: Vec::new(),
        connect_cli: Vec::new(),
        he: he(),
        http: http(),
        http3: None,
        secure: secure(),
        lab: None,
        unavailable: Vec::new(),
        crashes: Vec::new(),
        goals: Vec::new(),
    }
}

/// The file, and the texts it must show: title, x axis, y axis, then the series.
type Expected = (String, Vec<String>);

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn expected_connect() -> Vec<Expected> {
    let mut out = Vec::new();
    for (proto, prefix, taps) in [
        ("TCP", "connect_", "taps"),
        ("SCTP", "connect_sctp_", "taps, mapping off"),
    ] {
        for (file, title, y, figures) in [
            (
                "cpu",
                "CPU time (median)",
                "CPU time (user+sys), ms",
                ["client", "server"],
            ),
            (
                "rss",
                "RSS growth (median)",
                "RSS growth, KiB",
                ["client", "server"],
            ),
            (
                "delay",
                "per-flow connect delay",
                "delay, ms",
                ["median", "max"],
            ),
        ] {
            let mut texts = vec![
                format!("Connection establishment ({proto}): {title}"),
                format!("concurrent {proto} flows"),
                y.to_string(),
            ];
            for f in figures {
                texts.extend([format!("{taps} {f}"), format!("raw {f}")]);
                if proto == "SCTP" {
                    texts.push(format!("taps, mapping on {f}"));
                }
            }
            let name = format!("{prefix}{file}.svg");
            out.push((name, texts));
        }
    }
    out
}

fn expected_transfer() -> Vec<Expected> {
    let mut out = Vec::new();
    for (proto, prefix) in [("TCP", "transfer_"), ("SCTP", "transfer_sctp_")] {
        for side in ["sender", "receiver"] {
            let mut texts = vec![
                format!("Data transfer ({proto}): {side} CPU time (median)"),
                "bytes per flow".into(),
                "CPU time (user+sys), ms".into(),
            ];
            for f in [1, 2] {
                texts.extend([format!("taps, {f} flow(s)"), format!("raw, {f} flow(s)")]);
            }
            texts.extend(strings(&["1 kB", "1 MB", "10 MB"]));
            let name = format!("{prefix}{side}.svg");
            out.push((name, texts));
        }
    }
    out.push((
        "transfer_sctp_mapping.svg".into(),
        strings(&[
            "Data transfer (SCTP), 2 flows: sender + receiver CPU",
            "bytes per flow",
            "CPU time (user+sys), ms",
            "taps, mapping off",
            "taps, mapping on",
            "raw",
        ]),
    ));
    out
}

fn expected_rest() -> Vec<Expected> {
    let mut out = Vec::new();
    for side in ["client", "server"] {
        let mut texts = vec![
            format!("Happy Eyeballs cost: {side} CPU per connection"),
            "CIB cache hit ratio".into(),
            "CPU time per connection, µs".into(),
            "0%".into(),
            "100%".into(),
        ];
        let flat = HE_FLAT
            .iter()
            .filter(|v| side == "client" || **v != HeVariant::ResolveOnly);
        texts.extend(HE_RACES.iter().chain(flat).map(|v| v.label().to_string()));
        out.push((format!("he_{side}.svg"), texts));
    }
    for (object, file) in [("1 KiB", "http_1k.svg"), ("35 KiB", "http_35k.svg")] {
        out.push((
            file.to_string(),
            vec![
                format!("HTTP server CPU load, {object} objects"),
                "offered load, requests/s".into(),
                "server CPU load, % of one core".into(),
                "raw TCP".into(),
                "taps race SCTP/TCP, both alive, 80% hits".into(),
            ],
        ));
    }
    for (object, k) in [("1 KiB", 1), ("35 KiB", 35)] {
        for side in ["client", "server"] {
            let mut texts = vec![
                format!("Secure Happy Eyeballs cost: {side} CPU per connection, {object} objects"),
                "CIB cache hit ratio".into(),
                "CPU time per connection (connect, fetch, close), µs".into(),
            ];
            texts.extend(
                SECURE_RACES
                    .iter()
                    .chain(&SECURE_FLAT)
                    .map(|v| v.label().to_string()),
            );
            let name = format!("secure_{side}_{k}k.svg");
            out.push((name, texts));
        }
    }
    out
}

#[test]
fn every_figure_is_drawn_with_its_axes_and_series() {
    let drawn = plots(&results()).expect("plots");
    let expected: Vec<Expected> =
        [expected_connect(), expected_transfer(), expected_rest()].concat();
    let mut names: Vec<&str> = drawn.iter().map(|(n, _)| n.as_str()).collect();
    let mut want: Vec<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    want.sort();
    assert_eq!(names, want);
    for (name, texts) in &expected {
        let svg = &drawn.iter().find(|(n, _)| n == name).expect("drawn").1;
        let p = parse(svg);
        for t in texts {
            assert!(p.has(t), "{name}: {t:?} missing from {:?}", p.texts);
        }
        assert!(p.circles > 0, "{name}: no point drawn");
    }
}

#[test]
fn a_run_without_points_draws_nothing() {
    let mut r = results();
    r.connect.clear();
    r.transfer.clear();
    r.he.clear();
    r.http.clear();
    r.secure.clear();
    assert!(plots(&r).expect("plots").is_empty());
}
