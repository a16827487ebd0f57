//! Line charts of the report, drawn with `plotters` into an SVG string. Only the SVG
//! backend is built (no bitmap, no font files): text is written as `<text>` elements that
//! the viewer lays out, and plotters' own size estimate places the labels, so nothing
//! needs fontconfig or freetype at build or run time.

#![forbid(unsafe_code)]

use std::ops::Range;

use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// How the x axis is scaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scale {
    /// Linear.
    Linear,
    /// Logarithmic (ticks at the data's x values).
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
    /// Per point, the half-width of an interval drawn as a whisker from y - e to y + e
    /// (empty: none; a NaN: none at that point).
    pub(crate) errors: Vec<f64>,
}

impl Line {
    /// A solid line.
    pub(crate) fn solid(name: impl Into<String>, points: Vec<(f64, f64)>) -> Line {
        Line {
            name: name.into(),
            dashed: false,
            points,
            errors: Vec::new(),
        }
    }

    /// A dashed line.
    pub(crate) fn dashed(name: impl Into<String>, points: Vec<(f64, f64)>) -> Line {
        Line {
            name: name.into(),
            dashed: true,
            points,
            errors: Vec::new(),
        }
    }

    /// The line with a whisker of half-width `errors[i]` at point `i`.
    pub(crate) fn with_errors(mut self, errors: Vec<f64>) -> Line {
        self.errors = errors;
        self
    }

    /// Point `i`'s whisker half-width, if it has one.
    fn error(&self, i: usize) -> Option<f64> {
        self.errors.get(i).copied().filter(|e| e.is_finite())
    }
}

/// Chart labels and scale.
#[derive(Debug, Clone)]
pub(crate) struct Chart<'a> {
    /// Title.
    pub(crate) title: &'a str,
    /// X axis label (with its unit).
    pub(crate) x_label: &'a str,
    /// Y axis label (with its unit).
    pub(crate) y_label: &'a str,
    /// X scale.
    pub(crate) x_scale: Scale,
    /// Formats an x tick.
    pub(crate) x_tick: fn(f64) -> String,
}

/// Line colours, in series order (the palette the report has always used).
const COLORS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// Picture height; the width is the plot's plus the legend's.
const HEIGHT: u32 = 460;
/// Width of the plot (axes and their labels included).
const PLOT_WIDTH: u32 = 600;
/// Font sizes as plotters counts them (it writes `size / 1.24` px into the SVG).
const TITLE_SIZE: f64 = 19.0;
const LABEL_SIZE: f64 = 15.0;

/// The x axis: linear or logarithmic, ticks at the data's x values (as many as fit).
struct XAxis {
    scale: Scale,
    /// The shown range, on the axis' scale (`ln x` for a log axis).
    lo: f64,
    hi: f64,
    /// The data's distinct x values, ascending.
    ticks: Vec<f64>,
}

impl XAxis {
    /// The axis that fits `xs` (finite, positive on a log scale, sorted, distinct), with
    /// 3% room at both ends so that the end points do not sit on the frame.
    fn new(scale: Scale, xs: Vec<f64>) -> XAxis {
        let (lo, hi) = match (xs.first(), xs.last()) {
            (Some(a), Some(b)) if b > a => (scaled(scale, *a), scaled(scale, *b)),
            (Some(a), _) => (scaled(scale, *a) - 1.0, scaled(scale, *a) + 1.0),
            _ => (0.0, 1.0),
        };
        let pad = (hi - lo) * 0.03;
        XAxis {
            scale,
            lo: lo - pad,
            hi: hi + pad,
            ticks: xs,
        }
    }
}

/// `x` on `scale` (`ln x` for a log scale).
fn scaled(scale: Scale, x: f64) -> f64 {
    match scale {
        Scale::Linear => x,
        Scale::Log => x.ln(),
    }
}

/// The inverse of [`scaled`].
fn unscaled(scale: Scale, v: f64) -> f64 {
    match scale {
        Scale::Linear => v,
        Scale::Log => v.exp(),
    }
}

impl Ranged for XAxis {
    type ValueType = f64;
    type FormatOption = NoDefaultFormatting;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let t = (scaled(self.scale, *value) - self.lo) / (self.hi - self.lo);
        limit.0 + (f64::from(limit.1 - limit.0) * t).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Bold points only (ticks and labels); every k-th value when too many.
        if hint.weight().allow_light_points() {
            return Vec::new();
        }
        let max = hint.max_num_points().max(1);
        let every = self.ticks.len().div_ceil(max).max(1);
        self.ticks.iter().copied().step_by(every).collect()
    }

    fn range(&self) -> Range<f64> {
        unscaled(self.scale, self.lo)..unscaled(self.scale, self.hi)
    }
}

impl ValueFormatter<f64> for XAxis {
    fn format(value: &f64) -> String {
        format!("{value}")
    }
}

/// A y tick: `0`, `250`, `12.5`, `0.25`.
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

/// The top of the y axis (from 0): 5% above the largest value (whiskers included),
/// rounded up to 1, 2 or 5 times a power of ten.
fn y_top(lines: &[Line]) -> f64 {
    let max = lines
        .iter()
        .flat_map(|l| {
            l.points
                .iter()
                .enumerate()
                .map(|(i, p)| p.1 + l.error(i).unwrap_or(0.0))
        })
        .filter(|y| y.is_finite())
        .fold(0.0, f64::max)
        * 1.05;
    if max <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(max.log10().floor());
    let nice = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .find(|n| n * mag >= max)
        .unwrap_or(10.0);
    nice * mag
}

/// A point that can be drawn, with its whisker's half-width if it has one.
type Drawn = ((f64, f64), Option<f64>);

/// The points of `line` that can be drawn on `scale` (finite, x > 0 on a log scale).
fn drawable(scale: Scale, line: &Line) -> Vec<Drawn> {
    line.points
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, (x, y))| x.is_finite() && y.is_finite())
        .filter(|(_, (x, _))| scale == Scale::Linear || *x > 0.0)
        .map(|(i, p)| (p, line.error(i)))
        .collect()
}

/// Width of the legend for `lines` (plotters' own estimate of the text's size).
fn legend_width(root: &DrawingArea<SVGBackend<'_>, Shift>, lines: &[Line]) -> u32 {
    let font: TextStyle = ("sans-serif", LABEL_SIZE).into_font().into();
    let text = lines
        .iter()
        .filter_map(|l| root.estimate_text_size(&l.name, &font).ok())
        .map(|(w, _)| w)
        .max()
        .unwrap_or(0);
    // The sample line (from 10 to 34 px), the text from 40 px, a margin after it.
    text + 40 + 15
}

/// Draws `lines` on `root`: the plot on the left (y from 0), the legend in the `legend`
/// pixels on the right.
fn draw(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    chart: &Chart<'_>,
    lines: &[Line],
    legend: u32,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<_>| format!("drawing {:?}: {e}", chart.title);
    root.fill(&WHITE).map_err(err)?;
    let (width, _) = root.dim_in_pixel();
    let (plot_area, legend_area) = root.split_horizontally(width.saturating_sub(legend));
    let plotted: Vec<Vec<Drawn>> = lines.iter().map(|l| drawable(chart.x_scale, l)).collect();
    let mut xs: Vec<f64> = plotted.iter().flatten().map(|p| p.0 .0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let x_axis = XAxis::new(chart.x_scale, xs);
    let mut ctx = ChartBuilder::on(&plot_area)
        .caption(chart.title, ("sans-serif", TITLE_SIZE))
        .margin(10)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(x_axis, 0f64..y_top(lines))
        .map_err(err)?;
    ctx.configure_mesh()
        .disable_x_mesh()
        .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
        .light_line_style(TRANSPARENT)
        .x_labels(24)
        .y_labels(8)
        .x_label_formatter(&|x| (chart.x_tick)(*x))
        .y_label_formatter(&|y| fmt_y(*y))
        .x_desc(chart.x_label)
        .y_desc(chart.y_label)
        .label_style(("sans-serif", LABEL_SIZE))
        .axis_desc_style(("sans-serif", LABEL_SIZE))
        .draw()
        .map_err(err)?;
    for (i, drawn) in plotted.into_iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let style = color.stroke_width(2);
        let points: Vec<(f64, f64)> = drawn.iter().map(|d| d.0).collect();
        if lines[i].dashed {
            ctx.draw_series(DashedLineSeries::new(points.clone(), 6, 4, style))
        } else {
            ctx.draw_series(LineSeries::new(points.clone(), style))
        }
        .map_err(err)?;
        ctx.draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(err)?;
        let whiskers = drawn.iter().filter_map(|((x, y), e)| {
            e.map(|e| {
                ErrorBar::new_vertical(*x, (y - e).max(0.0), *y, y + e, color.stroke_width(1), 6)
            })
        });
        ctx.draw_series(whiskers).map_err(err)?;
    }
    // The legend, level with the plot's top: a sample of each line (dashed as drawn)
    // and its name.
    let top = ctx.plotting_area().get_pixel_range().1.start - root.get_pixel_range().1.start;
    let font: TextStyle = ("sans-serif", LABEL_SIZE)
        .into_font()
        .into_text_style(&legend_area)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, line) in lines.iter().enumerate() {
        let style = COLORS[i % COLORS.len()].stroke_width(2);
        let y = top + 10 + 20 * i as i32;
        let sample = [(10, y), (34, y)];
        if line.dashed {
            legend_area.draw(&DashedPathElement::new(sample, 6, 4, style))
        } else {
            legend_area.draw(&PathElement::new(sample, style))
        }
        .map_err(err)?;
        legend_area
            .draw(&Text::new(line.name.as_str(), (40, y), font.clone()))
            .map_err(err)?;
    }
    root.present().map_err(err)
}

/// Renders `lines` as an SVG document: y from 0, axes labelled, a legend on the right
/// naming every line (solid or dashed as drawn), a dot per point. Points that cannot be
/// drawn (not finite; x ≤ 0 on a log scale) are left out. Costs one pass over the points
/// and a string of some kB per chart.
pub(crate) fn render(chart: &Chart<'_>, lines: &[Line]) -> Result<String, String> {
    let mut svg = String::new();
    {
        // Measure the legend on a throwaway area, then draw at the final size.
        let mut probe = String::new();
        let legend = legend_width(
            &SVGBackend::with_string(&mut probe, (1, 1)).into_drawing_area(),
            lines,
        );
        let root =
            SVGBackend::with_string(&mut svg, (PLOT_WIDTH + legend, HEIGHT)).into_drawing_area();
        draw(&root, chart, lines, legend)?;
    }
    Ok(svg)
}

#[cfg(test)]
pub(super) mod tests;
