//! A small hand-written SVG line chart (no plotting dependency).

#![forbid(unsafe_code)]

use std::fmt::Write;

/// How the x axis is scaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scale {
    /// Linear.
    Linear,
    /// Logarithmic (any base; ticks at the data's x values).
    Log,
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    /// Legend text.
    pub(crate) name: String,
    /// Drawn dashed (used for the raw baseline).
    pub(crate) dashed: bool,
    /// Points (x, y).
    pub(crate) points: Vec<(f64, f64)>,
}

impl Line {
    /// A solid line.
    pub(crate) fn solid(name: impl Into<String>, points: Vec<(f64, f64)>) -> Line {
        Line {
            name: name.into(),
            dashed: false,
            points,
        }
    }

    /// A dashed line.
    pub(crate) fn dashed(name: impl Into<String>, points: Vec<(f64, f64)>) -> Line {
        Line {
            name: name.into(),
            dashed: true,
            points,
        }
    }
}

/// Chart labels and scale.
#[derive(Debug, Clone)]
pub(crate) struct Chart<'a> {
    /// Title.
    pub(crate) title: &'a str,
    /// X axis label.
    pub(crate) x_label: &'a str,
    /// Y axis label.
    pub(crate) y_label: &'a str,
    /// X scale.
    pub(crate) x_scale: Scale,
    /// Formats an x tick.
    pub(crate) x_tick: fn(f64) -> String,
}

const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn nice_step(max: f64) -> f64 {
    let raw = max / 5.0;
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn fmt_y(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The plot area of a chart and its scales: where a data point goes.
struct Frame {
    /// Width and height of the whole picture.
    w: f64,
    h: f64,
    /// Left and top margins (the plot area starts there).
    left: f64,
    top: f64,
    /// Width and height of the plot area.
    pw: f64,
    ph: f64,
    x_scale: Scale,
    /// The data's distinct x values (ticks go there), ascending.
    xs: Vec<f64>,
    /// The x range, scaled (`ln` for a log scale).
    x0: f64,
    x1: f64,
    /// The top of the y axis (from 0) and its tick step.
    ymax: f64,
    step: f64,
}

impl Frame {
    /// The frame that fits `lines`.
    fn new(chart: &Chart<'_>, lines: &[Line]) -> Frame {
        let (w, h) = (860.0, 420.0);
        let (left, right, top, bottom) = (70.0, 330.0, 40.0, 60.0);
        let (pw, ph) = (w - left - right, h - top - bottom);
        let mut xs: Vec<f64> = lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0))
            .filter(|x| x.is_finite() && (chart.x_scale == Scale::Linear || *x > 0.0))
            .collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let tx = |x: f64| scaled(chart.x_scale, x);
        let (x0, x1) = match (xs.first(), xs.last()) {
            (Some(a), Some(b)) if tx(*b) > tx(*a) => (tx(*a), tx(*b)),
            (Some(a), _) => (tx(*a) - 1.0, tx(*a) + 1.0),
            _ => (0.0, 1.0),
        };
        let ymax_data = lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .filter(|y| y.is_finite())
            .fold(0.0, f64::max);
        let step = nice_step(ymax_data * 1.05);
        let ymax = (ymax_data * 1.05 / step).ceil().max(1.0) * step;
        Frame {
            w,
            h,
            left,
            top,
            pw,
            ph,
            x_scale: chart.x_scale,
            xs,
            x0,
            x1,
            ymax,
            step,
        }
    }

    /// The picture's x coordinate of data `x`.
    fn px(&self, x: f64) -> f64 {
        self.left + (scaled(self.x_scale, x) - self.x0) / (self.x1 - self.x0) * self.pw
    }

    /// The picture's y coordinate of data `y`.
    fn py(&self, y: f64) -> f64 {
        self.top + self.ph - (y / self.ymax) * self.ph
    }
}

/// `x` on the `scale` (`ln x` for a log scale).
fn scaled(scale: Scale, x: f64) -> f64 {
    match scale {
        Scale::Linear => x,
        Scale::Log => x.ln(),
    }
}

/// The document's opening tag, its white background and the title.
fn write_header(s: &mut String, f: &Frame, chart: &Chart<'_>) {
    let (w, h) = (f.w, f.h);
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        f.left + f.pw / 2.0,
        esc(chart.title)
    );
}

/// The horizontal grid lines and the y ticks.
fn write_y_grid(s: &mut String, f: &Frame) {
    let left = f.left;
    let mut y = 0.0;
    while y <= f.ymax + f.step / 2.0 {
        let yy = f.py(y);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            left + f.pw,
            left - 6.0,
            yy + 4.0,
            fmt_y(y)
        );
        y += f.step;
    }
}

/// The x ticks, at the data's x values.
fn write_x_ticks(s: &mut String, f: &Frame, chart: &Chart<'_>) {
    let (top, ph) = (f.top, f.ph);
    for &x in &f.xs {
        let xx = f.px(x);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{:.1}" x2="{xx:.1}" y2="{:.1}" stroke="#999"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            top + ph,
            top + ph + 5.0,
            top + ph + 18.0,
            esc(&(chart.x_tick)(x))
        );
    }
}

/// The plot area's border and the axis labels.
fn write_axes(s: &mut String, f: &Frame, chart: &Chart<'_>) {
    let (left, top, pw, ph) = (f.left, f.top, f.pw, f.ph);
    let _ = writeln!(
        s,
        r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        left + pw / 2.0,
        f.h - 18.0,
        esc(chart.x_label)
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
        top + ph / 2.0,
        top + ph / 2.0,
        esc(chart.y_label)
    );
}

/// Line `i` of the chart: its polyline, a dot per point and its legend entry.
fn write_line(s: &mut String, f: &Frame, i: usize, line: &Line) {
    let color = COLORS[i % COLORS.len()];
    let dash = if line.dashed {
        r#" stroke-dasharray="6 4""#
    } else {
        ""
    };
    let pts: Vec<String> = line
        .points
        .iter()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .filter(|(x, _)| f.x_scale == Scale::Linear || *x > 0.0)
        .map(|(x, y)| format!("{:.1},{:.1}", f.px(*x), f.py(*y)))
        .collect();
    if !pts.is_empty() {
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{}"/>"#,
            pts.join(" ")
        );
        for p in &pts {
            let (cx, cy) = p.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(s, r#"<circle cx="{cx}" cy="{cy}" r="3" fill="{color}"/>"#);
        }
    }
    let ly = f.top + 10.0 + 20.0 * i as f64;
    let lx = f.left + f.pw + 15.0;
    let _ = writeln!(
        s,
        r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
        lx + 24.0,
        lx + 30.0,
        ly + 4.0,
        esc(&line.name)
    );
}

/// Renders `lines` as an SVG document (y from 0, legend on the right).
pub(crate) fn render(chart: &Chart<'_>, lines: &[Line]) -> String {
    let frame = Frame::new(chart, lines);
    let mut s = String::new();
    write_header(&mut s, &frame, chart);
    write_y_grid(&mut s, &frame);
    write_x_ticks(&mut s, &frame, chart);
    write_axes(&mut s, &frame, chart);
    for (i, line) in lines.iter().enumerate() {
        write_line(&mut s, &frame, i, line);
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_chart() {
        let chart = Chart {
            title: "t <1>",
            x_label: "x",
            y_label: "y",
            x_scale: Scale::Log,
            x_tick: |x| format!("{x}"),
        };
        let svg = render(
            &chart,
            &[
                Line::solid("a", vec![(1.0, 1.0), (2.0, 3.0), (4.0, 2.0)]),
                Line::dashed("b", vec![(1.0, 0.5), (4.0, 1.0)]),
            ],
        );
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("t &lt;1&gt;"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}
