//! The SVG plots of the report.

#![forbid(unsafe_code)]

use super::chart::{render, Chart, Line, Scale};
use super::{plot_name, protocols_of};
use crate::experiments::{
    human_bytes, ConnectPoint, ConnectSide, HePoint, HeVariant, Proto, Summary, TransferPoint,
};
use crate::Results;

fn int_tick(x: f64) -> String {
    format!("{x:.0}")
}

fn bytes_tick(x: f64) -> String {
    human_bytes(x as u64)
}

fn pct_tick(x: f64) -> String {
    format!("{x:.0}%")
}

/// One plotted figure of a connect side: its legend suffix and how to read it.
type Figure = (&'static str, fn(&ConnectSide) -> f64);

fn connect_plots(r: &Results, proto: Proto, out: &mut Vec<(String, String)>) -> Result<(), String> {
    let points: Vec<&ConnectPoint> = r.connect.iter().filter(|p| p.protocol == proto).collect();
    if points.is_empty() {
        return Ok(());
    }
    let pts = |f: &dyn Fn(&ConnectPoint) -> Option<f64>| {
        points
            .iter()
            .filter_map(|p| f(p).map(|y| (p.flows as f64, y)))
            .collect::<Vec<_>>()
    };
    let mapped = points.iter().any(|p| p.taps_mapped.is_some());
    let taps = if mapped { "taps, mapping off" } else { "taps" };
    let x_label = format!("concurrent {proto} flows");
    // Two figures of every side: taps solid, raw dashed, then taps with mapping (SCTP).
    let lines_of = |figures: [Figure; 2]| {
        let mut lines = Vec::new();
        for (label, f) in figures {
            lines.push(Line::solid(
                format!("{taps} {label}"),
                pts(&|p| Some(f(&p.taps))),
            ));
            lines.push(Line::dashed(
                format!("raw {label}"),
                pts(&|p| Some(f(&p.raw))),
            ));
        }
        if mapped {
            for (label, f) in figures {
                lines.push(Line::solid(
                    format!("taps, mapping on {label}"),
                    pts(&|p| p.taps_mapped.as_ref().map(f)),
                ));
            }
        }
        lines
    };
    let title = format!("Connection establishment ({proto}): CPU time (median)");
    let chart = Chart {
        title: &title,
        x_label: &x_label,
        y_label: "CPU time (user+sys), ms",
        x_scale: Scale::Log,
        x_tick: int_tick,
    };
    let lines = lines_of([
        ("client", |s| s.client_cpu_us.median / 1e3),
        ("server", |s| s.server_cpu_us.median / 1e3),
    ]);
    out.push((plot_name("connect", proto, "cpu"), render(&chart, &lines)?));

    let title = format!("Connection establishment ({proto}): RSS growth (median)");
    let chart = Chart {
        title: &title,
        y_label: "RSS growth, KiB",
        ..chart
    };
    let lines = lines_of([
        ("client", |s| s.rss_growth_kib.median),
        ("server", |s| s.server_rss_growth_kib.median),
    ]);
    out.push((plot_name("connect", proto, "rss"), render(&chart, &lines)?));

    let title = format!("Connection establishment ({proto}): per-flow connect delay");
    let chart = Chart {
        title: &title,
        y_label: "delay, ms",
        ..chart
    };
    let lines = lines_of([
        ("median", |s| s.delay_median_us.median / 1e3),
        ("max", |s| s.delay_max_us.median / 1e3),
    ]);
    out.push((
        plot_name("connect", proto, "delay"),
        render(&chart, &lines)?,
    ));
    Ok(())
}

fn transfer_plots(
    r: &Results,
    proto: Proto,
    out: &mut Vec<(String, String)>,
) -> Result<(), String> {
    let points: Vec<&TransferPoint> = r.transfer.iter().filter(|p| p.protocol == proto).collect();
    if points.is_empty() {
        return Ok(());
    }
    let mut flows: Vec<usize> = points.iter().map(|p| p.flows).collect();
    flows.sort();
    flows.dedup();
    for side in ["sender", "receiver"] {
        let mut lines = Vec::new();
        for &f in &flows {
            let sel = |taps: bool| {
                points
                    .iter()
                    .filter(|p| p.flows == f)
                    .map(|p| {
                        let s = if taps { &p.taps } else { &p.raw };
                        let v = if side == "sender" {
                            &s.sender_cpu_us
                        } else {
                            &s.receiver_cpu_us
                        };
                        (p.bytes as f64, v.median / 1e3)
                    })
                    .collect::<Vec<_>>()
            };
            lines.push(Line::solid(format!("taps, {f} flow(s)"), sel(true)));
            lines.push(Line::dashed(format!("raw, {f} flow(s)"), sel(false)));
        }
        let title = format!("Data transfer ({proto}): {side} CPU time (median)");
        let chart = Chart {
            title: &title,
            x_label: "bytes per flow",
            y_label: "CPU time (user+sys), ms",
            x_scale: Scale::Log,
            x_tick: bytes_tick,
        };
        out.push((plot_name("transfer", proto, side), render(&chart, &lines)?));
    }
    // Flow mapping: sender + receiver CPU of the three variants at the largest flow count.
    if points.iter().any(|p| p.taps_mapped.is_some()) {
        let f = *flows.last().unwrap_or(&1);
        let sel = |get: &dyn Fn(&TransferPoint) -> Option<f64>| {
            points
                .iter()
                .filter(|p| p.flows == f)
                .filter_map(|p| get(p).map(|y| (p.bytes as f64, y / 1e3)))
                .collect::<Vec<_>>()
        };
        let lines = vec![
            Line::solid(
                "taps, mapping off",
                sel(&|p| Some(p.taps.total_cpu_us.median)),
            ),
            Line::solid(
                "taps, mapping on",
                sel(&|p| p.taps_mapped.as_ref().map(|m| m.total_cpu_us.median)),
            ),
            Line::dashed("raw", sel(&|p| Some(p.raw.total_cpu_us.median))),
        ];
        let title = format!("Data transfer ({proto}), {f} flows: sender + receiver CPU");
        let chart = Chart {
            title: &title,
            x_label: "bytes per flow",
            y_label: "CPU time (user+sys), ms",
            x_scale: Scale::Log,
            x_tick: bytes_tick,
        };
        out.push((
            plot_name("transfer", proto, "mapping"),
            render(&chart, &lines)?,
        ));
    }
    Ok(())
}

fn he_plots(r: &Results, out: &mut Vec<(String, String)>) -> Result<(), String> {
    if r.he.is_empty() {
        return Ok(());
    }
    fn cpu_per_conn(p: &HePoint, client: bool) -> &Summary {
        if client {
            &p.client_cpu_per_conn_us
        } else {
            &p.server_cpu_per_conn_us
        }
    }
    let flat = |v: HeVariant, client: bool| {
        r.he.iter().find(|p| p.variant == v).map(|p| {
            let y = cpu_per_conn(p, client).median;
            vec![(0.0, y), (100.0, y)]
        })
    };
    let race = |v: HeVariant, client: bool| {
        r.he.iter()
            .filter(|p| p.variant == v)
            .filter_map(|p| {
                p.hit_percent
                    .map(|h| (h as f64, cpu_per_conn(p, client).median))
            })
            .collect::<Vec<_>>()
    };
    for (side, name) in [("client", "he_client.svg"), ("server", "he_server.svg")] {
        let client = side == "client";
        let mut lines = Vec::new();
        for v in [
            HeVariant::RaceSctpDead,
            HeVariant::RaceBothAlive,
            HeVariant::RaceV6Dead,
        ] {
            let pts = race(v, client);
            if !pts.is_empty() {
                lines.push(Line::solid(v.label(), pts));
            }
        }
        let mut flats = vec![
            HeVariant::TapsSingle,
            HeVariant::TapsSctp,
            HeVariant::RawTcp,
            HeVariant::RawSctp,
        ];
        if client {
            flats.push(HeVariant::ResolveOnly);
        }
        flats.push(HeVariant::TapsSingleName);
        for v in flats {
            if let Some(p) = flat(v, client) {
                lines.push(Line::dashed(v.label(), p));
            }
        }
        let title = format!("Happy Eyeballs cost: {side} CPU per connection");
        let chart = Chart {
            title: &title,
            x_label: "CIB cache hit ratio",
            y_label: "CPU time per connection, µs",
            x_scale: Scale::Linear,
            x_tick: pct_tick,
        };
        out.push((name.to_string(), render(&chart, &lines)?));
    }
    Ok(())
}

fn http_plots(r: &Results, out: &mut Vec<(String, String)>) -> Result<(), String> {
    let mut objects: Vec<usize> = r.http.iter().map(|p| p.object).collect();
    objects.sort();
    objects.dedup();
    for object in objects {
        let mut variants: Vec<(HeVariant, Option<u32>)> = Vec::new();
        for p in r.http.iter().filter(|p| p.object == object) {
            if !variants.contains(&(p.variant, p.hit_percent)) {
                variants.push((p.variant, p.hit_percent));
            }
        }
        let lines: Vec<Line> = variants
            .iter()
            .map(|(v, h)| {
                let pts = r
                    .http
                    .iter()
                    .filter(|p| p.object == object && p.variant == *v && p.hit_percent == *h)
                    .map(|p| (p.rate, p.server_load_pct.median))
                    .collect();
                let name = match h {
                    Some(h) => format!("{}, {h}% hits", v.label()),
                    None => v.label().to_string(),
                };
                if *v == HeVariant::RawTcp {
                    Line::dashed(name, pts)
                } else {
                    Line::solid(name, pts)
                }
            })
            .collect();
        let title = format!(
            "HTTP server CPU load, {} objects",
            human_bytes(object as u64)
        );
        let chart = Chart {
            title: &title,
            x_label: "offered load, requests/s",
            y_label: "server CPU load, % of one core",
            x_scale: Scale::Linear,
            x_tick: int_tick,
        };
        out.push((
            format!("http_{}k.svg", object / 1024),
            render(&chart, &lines)?,
        ));
    }
    Ok(())
}

/// The plots for `r`, as (file name, SVG text); only those with data. An error names
/// the chart that could not be drawn.
pub(crate) fn plots(r: &Results) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for proto in protocols_of(r.connect.iter().map(|p| p.protocol)) {
        connect_plots(r, proto, &mut out)?;
    }
    for proto in protocols_of(r.transfer.iter().map(|p| p.protocol)) {
        transfer_plots(r, proto, &mut out)?;
    }
    he_plots(r, &mut out)?;
    http_plots(r, &mut out)?;
    super::secure::secure_plots(r, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests;
