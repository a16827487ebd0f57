//! Each kind of chart the report draws, rendered from synthetic data and read back with
//! an XML parser: a well-formed SVG document whose text names the title, both axes, the
//! ticks and every series.

use super::*;

/// What a rendered chart says: the root's size and the text of every `<text>` element.
pub(crate) struct Parsed {
    /// `width` and `height` of the `<svg>` element.
    pub(crate) size: (f64, f64),
    /// Every text, in document order.
    pub(crate) texts: Vec<String>,
    /// How many `<circle>` elements (a dot per drawn point).
    pub(crate) circles: usize,
}

impl Parsed {
    /// Whether some text is exactly `s`.
    pub(crate) fn has(&self, s: &str) -> bool {
        self.texts.iter().any(|t| t == s)
    }
}

/// Parses `svg` as XML and checks it is an SVG document; panics (the test fails) with
/// the parser's error otherwise.
pub(crate) fn parse(svg: &str) -> Parsed {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("not XML: {e}\n{svg}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    let dim = |a: &str| -> f64 {
        root.attribute(a)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("<svg> without a numeric {a}"))
    };
    let texts = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect();
    let circles = doc
        .descendants()
        .filter(|n| n.has_tag_name("circle"))
        .count();
    Parsed {
        size: (dim("width"), dim("height")),
        texts,
        circles,
    }
}

fn int_tick(x: f64) -> String {
    format!("{x:.0}")
}

fn pct_tick(x: f64) -> String {
    format!("{x:.0}%")
}

fn kb_tick(x: f64) -> String {
    format!("{} kB", x / 1e3)
}

/// Renders `lines` on `chart` and checks the document names the title, the axes, every
/// line and `ticks`; returns what it says.
fn check(chart: &Chart<'_>, lines: &[Line], ticks: &[&str]) -> Parsed {
    let svg = render(chart, lines).expect("render");
    let p = parse(&svg);
    for s in [chart.title, chart.x_label, chart.y_label] {
        assert!(p.has(s), "{s:?} missing from {:?}", p.texts);
    }
    for l in lines {
        assert!(
            p.has(&l.name),
            "series {:?} missing from {:?}",
            l.name,
            p.texts
        );
    }
    for t in ticks {
        assert!(p.has(t), "tick {t:?} missing from {:?}", p.texts);
    }
    assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    p
}

#[test]
fn log_x_against_flows_taps_solid_raw_dashed() {
    // Experiment 1's kind: flow counts on a log axis, two figures of two sides.
    let flows: Vec<f64> = (0..=8).map(|i| f64::from(1 << i)).collect();
    let line = |k: f64| flows.iter().map(|&f| (f, k * f)).collect::<Vec<_>>();
    let lines = [
        Line::solid("taps client", line(1.2)),
        Line::dashed("raw client", line(1.0)),
        Line::solid("taps server", line(0.6)),
        Line::dashed("raw server", line(0.5)),
    ];
    let chart = Chart {
        title: "Connection establishment (TCP): CPU time (median)",
        x_label: "concurrent TCP flows",
        y_label: "CPU time (user+sys), ms",
        x_scale: Scale::Log,
        x_tick: int_tick,
    };
    let p = check(&chart, &lines, &["1", "16", "256"]);
    assert_eq!(p.circles, 4 * flows.len());
}

#[test]
fn log_x_against_bytes() {
    // Experiment 2's kind: bytes per flow on a log axis, a pair of lines per flow count.
    let sizes = [1e3, 1e4, 1e5, 1e6, 1e7];
    let mut lines = Vec::new();
    for f in [1, 2, 4, 8] {
        let pts = |k: f64| sizes.iter().map(|&b| (b, k * b / 1e4)).collect();
        lines.push(Line::solid(format!("taps, {f} flow(s)"), pts(1.1)));
        lines.push(Line::dashed(format!("raw, {f} flow(s)"), pts(1.0)));
    }
    let chart = Chart {
        title: "Data transfer (TCP): sender CPU time (median)",
        x_label: "bytes per flow",
        y_label: "CPU time (user+sys), ms",
        x_scale: Scale::Log,
        x_tick: kb_tick,
    };
    let p = check(&chart, &lines, &["1 kB", "10000 kB"]);
    assert_eq!(p.circles, lines.len() * sizes.len());
}

#[test]
fn linear_hit_ratio_with_flat_baselines() {
    // Experiments 3 and the secure one: races against the hit ratio, flat baselines.
    let hits = [0.0, 20.0, 40.0, 60.0, 80.0, 100.0];
    let lines = [
        Line::solid(
            "taps race QUIC/TLS, QUIC dead",
            hits.iter().map(|&h| (h, 900.0 - 3.0 * h)).collect(),
        ),
        Line::dashed("taps TLS/TCP only", vec![(0.0, 600.0), (100.0, 600.0)]),
        Line::dashed(
            "raw TLS/TCP (tokio-rustls)",
            vec![(0.0, 500.0), (100.0, 500.0)],
        ),
    ];
    let chart = Chart {
        title: "Secure Happy Eyeballs cost: client CPU per connection, 1 kB objects",
        x_label: "CIB cache hit ratio",
        y_label: "CPU time per connection (connect, fetch, close), µs",
        x_scale: Scale::Linear,
        x_tick: pct_tick,
    };
    check(&chart, &lines, &["0%", "40%", "100%"]);
}

#[test]
fn linear_rate_against_load() {
    // Experiment 4's kind: offered load on a linear axis.
    let rates = [200.0, 400.0, 800.0];
    let lines = [
        Line::solid(
            "taps race SCTP/TCP, both alive, 80% hits",
            rates.iter().map(|&r| (r, r / 40.0)).collect(),
        ),
        Line::dashed("raw TCP", rates.iter().map(|&r| (r, r / 50.0)).collect()),
    ];
    let chart = Chart {
        title: "HTTP server CPU load, 1 kB objects",
        x_label: "offered load, requests/s",
        y_label: "server CPU load, % of one core",
        x_scale: Scale::Linear,
        x_tick: int_tick,
    };
    check(&chart, &lines, &["200", "800"]);
}

#[test]
fn undrawable_points_are_left_out_and_text_is_escaped() {
    let lines = [
        Line::solid(
            "a <b> & 'c'",
            vec![
                (0.0, 1.0),
                (-1.0, 2.0),
                (f64::NAN, 1.0),
                (2.0, f64::INFINITY),
                (4.0, 3.0),
            ],
        ),
        Line::dashed("empty", Vec::new()),
    ];
    let chart = Chart {
        title: "t <1> & \"2\"",
        x_label: "x, s",
        y_label: "y, ms",
        x_scale: Scale::Log,
        x_tick: int_tick,
    };
    // Only (4, 3) can go on a log axis.
    let p = check(&chart, &lines, &["4"]);
    assert_eq!(p.circles, 1);
}

#[test]
fn a_chart_without_data_is_still_a_document() {
    for scale in [Scale::Linear, Scale::Log] {
        let chart = Chart {
            title: "nothing",
            x_label: "x, s",
            y_label: "y, ms",
            x_scale: scale,
            x_tick: int_tick,
        };
        let p = check(&chart, &[], &[]);
        assert_eq!(p.circles, 0);
        assert!(p.size.0 > 0.0 && p.size.1 > 0.0);
    }
}

#[test]
fn the_legend_widens_the_picture_not_the_plot() {
    let chart = Chart {
        title: "t",
        x_label: "x, s",
        y_label: "y, ms",
        x_scale: Scale::Linear,
        x_tick: int_tick,
    };
    let short = parse(&render(&chart, &[Line::solid("a", vec![(1.0, 1.0)])]).unwrap());
    let long_name = "a much longer series name than the other one";
    let long = parse(&render(&chart, &[Line::solid(long_name, vec![(1.0, 1.0)])]).unwrap());
    assert!(long.size.0 > short.size.0 + 100.0);
    assert_eq!(long.size.1, short.size.1);
}
