//! The report of `taps-bench multipath`: a markdown section (tables of our numbers beside
//! the paper's) and SVG plots drawn like the rest of the report, written as
//! `multipath.md`, `multipath.json`, `multipath-*.svg`, and the same section in
//! `report.md` (replacing an earlier multipath section, or appended to what the other
//! experiments wrote there, or alone in a new file).

#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::chart::{render, Chart, Line, Scale};
use super::multipath_stats::{Group, Groups, Stat};
use crate::experiments::{MultipathPoint, MultipathResults, SEND_SPLIT_ONLY};

fn kib_tick(x: f64) -> String {
    format!("{x:.0}")
}

/// The line of series `name` of experiment `e`: `f` of each point by σ, with its 95 %
/// interval as whiskers.
fn line(g: &Groups<'_>, e: u8, name: &str, label: String, f: impl Fn(&Group<'_>) -> Stat) -> Line {
    let stats: Vec<(f64, Stat)> = g
        .series(e, name)
        .into_iter()
        .map(|p| (f64::from(p.buffer_kib), f(p)))
        .collect();
    let pts = stats.iter().map(|(x, s)| (*x, s.mean)).collect();
    let errors = stats.iter().map(|(_, s)| s.half).collect();
    if name.starts_with("RR") {
        Line::dashed(label, pts)
    } else {
        Line::solid(label, pts)
    }
    .with_errors(errors)
}

fn chart<'a>(title: &'a str, y: &'a str) -> Chart<'a> {
    Chart {
        title,
        x_label: "send/receive buffer σ, KiB",
        y_label: y,
        x_scale: Scale::Linear,
        x_tick: kib_tick,
    }
}

/// The plots: (file name, SVG); every point is a mean with its 95 % interval.
fn plots(g: &Groups<'_>) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let n1 = g.names(1);
    let lines: Vec<Line> = n1
        .iter()
        .map(|n| line(g, 1, n, n.to_string(), |p| p.mbit))
        .collect();
    out.push((
        "multipath-exp1-throughput.svg".into(),
        render(
            &chart(
                "1: delay dissimilarity, two 10 Mbit/s paths",
                "payload throughput, Mbit/s",
            ),
            &lines,
        )?,
    ));
    for s in 0..2 {
        let lines: Vec<Line> = n1
            .iter()
            .map(|n| line(g, 1, n, n.to_string(), |p| p.stream(s, true)))
            .collect();
        let title = format!("1: mean message delay, stream #{s}");
        out.push((
            format!("multipath-exp1-delay-stream{s}.svg"),
            render(&chart(&title, "message delay, ms"), &lines)?,
        ));
    }
    for rb in ["25", "50"] {
        let mut lines = Vec::new();
        for n in g.names(2).iter().filter(|n| n.contains(&format!("={rb} "))) {
            let short = n.split(',').next().unwrap_or(n);
            let split = if n.ends_with(SEND_SPLIT_ONLY) {
                " (send split only)"
            } else {
                ""
            };
            for s in 0..2 {
                lines.push(line(g, 2, n, format!("{short}{split}: stream #{s}"), |p| {
                    p.stream(s, false)
                }));
            }
        }
        let title = format!("2: per-stream rate, ρA=10, ρB={rb} Mbit/s");
        out.push((
            format!("multipath-exp2-rho{rb}.svg"),
            render(&chart(&title, "stream payload rate, Mbit/s"), &lines)?,
        ));
    }
    let n3 = g.names(3);
    for (file, title, y, delay) in [
        (
            "multipath-exp3-throughput.svg",
            "3: three paths, seven streams",
            "payload throughput, Mbit/s",
            false,
        ),
        (
            "multipath-exp3-delay.svg",
            "3: mean message delay, all streams",
            "message delay, ms",
            true,
        ),
    ] {
        let lines: Vec<Line> = n3
            .iter()
            .map(|n| {
                line(g, 3, n, n.to_string(), |p| {
                    if delay {
                        p.delay_ms
                    } else {
                        p.mbit
                    }
                })
            })
            .collect();
        out.push((file.into(), render(&chart(title, y), &lines)?));
    }
    Ok(out)
}

/// A table of experiment `e`: one row per series, one column per σ, `cell` per point
/// (`failed` where every run failed).
fn table(md: &mut String, g: &Groups<'_>, e: u8, cell: impl Fn(&Group<'_>) -> String) {
    let sigmas = g.sigmas(e);
    let _ = write!(md, "| series |");
    for s in &sigmas {
        let _ = write!(md, " σ={s} KiB |");
    }
    let _ = write!(md, "\n|---|");
    for _ in &sigmas {
        let _ = write!(md, "---|");
    }
    md.push('\n');
    for n in g.names(e) {
        let _ = write!(md, "| {n} |");
        for s in &sigmas {
            let c = g
                .all
                .iter()
                .find(|p| p.experiment == e && p.series == n && p.buffer_kib == *s)
                .map_or(String::new(), |p| {
                    if p.all_failed() {
                        "failed".into()
                    } else {
                        cell(p)
                    }
                });
            let _ = write!(md, " {c} |");
        }
        md.push('\n');
    }
    md.push('\n');
}

/// The markdown section (our tables; the paper's numbers and the comparison are in
/// [`super::multipath_text`], [`super::multipath_exp2`]). Every figure is a mean over the point's runs ± the half-width
/// of its 95 % confidence interval.
pub(crate) fn section(r: &MultipathResults) -> String {
    let g = Groups::of(r);
    let mut md =
        String::from("## Multipath: CMT-SCTP stream scheduling (the seed's experiments)\n\n");
    super::multipath_text::intro(&mut md, r, &g);
    md.push_str("### 1. Delay dissimilarity\n\nPayload throughput, Mbit/s (association), mean ± 95 % interval:\n\n");
    table(&mut md, &g, 1, |p| p.mbit.show(1));
    md.push_str("Mean message delay, ms, stream #0 / stream #1:\n\n");
    table(&mut md, &g, 1, |p| {
        format!(
            "{} / {}",
            p.stream(0, true).show(0),
            p.stream(1, true).show(0)
        )
    });
    md.push_str("Bottleneck queue drops per run, mean (link A / link B, packets); runs with a stall of 200 ms or more after their start-up, of the runs made:\n\n");
    table(&mut md, &g, 1, |p| {
        let drops: Vec<String> = p.queue_drops.iter().map(|d| format!("{d:.0}")).collect();
        format!("{}; {} of {}", drops.join(" / "), p.stalled_runs, p.runs)
    });
    md.push_str("![exp 1 throughput](multipath-exp1-throughput.svg)\n![exp 1 delay stream 0](multipath-exp1-delay-stream0.svg)\n![exp 1 delay stream 1](multipath-exp1-delay-stream1.svg)\n\n");
    super::multipath_text::exp1(&mut md, r, &g);
    md.push_str("### 2. Bandwidth dissimilarity\n\nPer-stream payload rate, Mbit/s, stream #0 / stream #1 (sum):\n\n");
    table(&mut md, &g, 2, |p| {
        format!(
            "{} / {} ({})",
            p.stream(0, false),
            p.stream(1, false),
            p.mbit
        )
    });
    md.push_str(
        "![exp 2 rho 25](multipath-exp2-rho25.svg)\n![exp 2 rho 50](multipath-exp2-rho50.svg)\n\n",
    );
    super::multipath_exp2::exp2(&mut md, &g);
    md.push_str("### 3. Three paths, seven streams\n\nPayload throughput, Mbit/s / mean message delay over all streams, ms:\n\n");
    table(&mut md, &g, 3, |p| {
        format!("{} / {}", p.mbit, p.delay_ms.show(0))
    });
    md.push_str("![exp 3 throughput](multipath-exp3-throughput.svg)\n![exp 3 delay](multipath-exp3-delay.svg)\n\n");
    super::multipath_text::exp3(&mut md, &g);
    let failed: Vec<&MultipathPoint> = r.points.iter().filter(|p| p.error.is_some()).collect();
    if !failed.is_empty() {
        md.push_str("### Runs that failed\n\n");
        for p in failed {
            let _ = writeln!(
                md,
                "- exp {} {} σ={} KiB, run {}: {}",
                p.experiment,
                p.series,
                p.buffer_kib,
                p.run + 1,
                p.error.as_deref().unwrap_or("")
            );
        }
        md.push('\n');
    }
    md
}

/// The heading the section starts with (how an earlier copy is found in report.md).
const HEADING: &str = "## Multipath: CMT-SCTP stream scheduling";

/// `report` with its multipath section replaced by `md` (or `md` appended); a new report
/// when there is none. One pass over the text.
fn merge_section(report: Option<&str>, md: &str) -> String {
    let Some(report) = report else {
        return format!("# taps-bench multipath\n\n{md}");
    };
    match report.find(HEADING) {
        Some(start) => {
            let rest = &report[start + HEADING.len()..];
            let end = rest
                .find("\n## ")
                .map_or(report.len(), |i| start + HEADING.len() + i + 1);
            format!("{}{md}{}", &report[..start], &report[end..])
        }
        None => format!("{}\n\n{md}", report.trim_end()),
    }
}

/// Writes the section, the plots and the JSON into `dir`; returns the files written.
/// report.md keeps whatever else it holds: the multipath section is replaced or appended.
pub fn write_multipath(r: &MultipathResults, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut written = Vec::new();
    let mut put = |name: &str, body: &str| -> Result<(), String> {
        let p = dir.join(name);
        std::fs::write(&p, body).map_err(|e| format!("{}: {e}", p.display()))?;
        written.push(p);
        Ok(())
    };
    let md = section(r);
    put("multipath.md", &md)?;
    let existing = std::fs::read_to_string(dir.join("report.md")).ok();
    put("report.md", &merge_section(existing.as_deref(), &md))?;
    let json = serde_json::to_string_pretty(r).map_err(|e| e.to_string())?;
    put("multipath.json", &json)?;
    for (name, svg) in plots(&Groups::of(r))? {
        put(&name, &svg)?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::{LinkSpec, Timing};

    fn point(e: u8, series: &str, sigma: u32, mbit: f64) -> MultipathPoint {
        MultipathPoint {
            run: 0,
            experiment: e,
            series: series.into(),
            buffer_kib: sigma,
            links: vec![LinkSpec {
                mbit: 10.0,
                delay_ms: 10,
            }],
            fixed: series.starts_with("Fixed"),
            fill_by_queue: false,
            nr_sack: true,
            nr_on_arrival: false,
            send_split_only: false,
            mbit,
            delay_ms: 20.0,
            streams: vec![(mbit / 2.0, 10.0), (mbit / 2.0, 30.0)],
            out_of_order: 0,
            queue_drops: vec![0, 1],
            paths: serde_json::Value::Null,
            wire: Vec::new(),
            pinning: None,
            stalls: Vec::new(),
            held: None,
            error: None,
        }
    }

    #[test]
    fn merge_replaces_only_the_multipath_section() {
        let old = format!("# r\n\n## A\n\na\n\n{HEADING} (old)\n\nold\n\n## B\n\nb\n");
        let new = format!("{HEADING} (new)\n\nnew\n\n");
        assert_eq!(
            merge_section(Some(&old), &new),
            format!("# r\n\n## A\n\na\n\n{new}## B\n\nb\n")
        );
        assert_eq!(merge_section(None, "s"), "# taps-bench multipath\n\ns");
    }

    #[test]
    fn section_tables_and_plots() {
        let mut points = vec![
            point(1, "RR, δB=75 ms", 224, 15.0),
            point(1, "RR, δB=75 ms", 288, 18.5),
            point(1, "Fixed, δB=75 ms", 224, 18.5),
            point(1, "Fixed, δB=75 ms", 288, 18.6),
            point(1, "RR, δB=10 ms", 64, 18.6),
            point(2, "Fixed, ρB=25 Mbit/s", 288, 18.6),
            point(3, "Fixed, NR-SACK on", 128, 19.5),
        ];
        points[1].error = Some("boom".into());
        let r = MultipathResults {
            points,
            timing: Timing {
                warmup_ms: 2000,
                measure_ms: 4000,
            },
            knobs: vec!["knob".into()],
            duration_s: 1.0,
            later: Vec::new(),
        };
        let md = section(&r);
        assert!(md.contains("| Fixed, δB=75 ms |  | 18.5 | 18.6 |"), "{md}");
        assert!(md.contains("| RR, δB=75 ms |  | 15.0 | failed |"));
        assert!(md.contains("Fixed 224 KiB, RR not within the grid"));
        assert!(md.contains("exp 1 RR, δB=75 ms σ=288 KiB, run 1: boom"));
        assert!(md.contains("no intervals (one run)"), "{md}");
        assert!(md.contains("19.5 Mbit/s, 20 ms"));
        let svgs = plots(&Groups::of(&r)).unwrap();
        assert_eq!(svgs.len(), 7);
        assert!(svgs
            .iter()
            .all(|(n, s)| n.starts_with("multipath-") && s.starts_with("<svg")));
        // The JSON written is read back (NaN as null included).
        let mut r2 = r.clone();
        r2.points[0].mbit = f64::NAN;
        let json = serde_json::to_string(&r2).unwrap();
        let dir = std::env::temp_dir().join(format!("mp-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("multipath.json");
        std::fs::write(&f, json).unwrap();
        let back = crate::experiments::read_multipath(&f).unwrap();
        assert!(back.points[0].mbit.is_nan());
        assert_eq!(back.points.len(), 7);
        std::fs::write(dir.join("report.md"), "# taps-bench\n\n## Transfer\n\nx\n").unwrap();
        let written = write_multipath(&back, &dir).unwrap();
        assert_eq!(written.len(), 10);
        // Written twice: the other sections stay, the multipath section is there once.
        write_multipath(&back, &dir).unwrap();
        let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert!(report.starts_with("# taps-bench\n\n## Transfer\n\nx\n\n## Multipath"));
        assert_eq!(report.matches(HEADING).count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn runs_of_a_point_are_one_mean_with_its_interval() {
        let mut points = Vec::new();
        for (run, mbit) in [17.0, 18.0, 19.0].into_iter().enumerate() {
            for (series, m) in [("Fixed, δB=75 ms", mbit), ("RR, δB=75 ms", mbit - 5.0)] {
                let mut p = point(1, series, 224, m);
                p.run = run as u32;
                points.push(p);
            }
        }
        points.push(point(1, "RR, δB=10 ms", 64, 18.0));
        let r = MultipathResults {
            points,
            timing: Timing {
                warmup_ms: 2000,
                measure_ms: 4000,
            },
            knobs: Vec::new(),
            duration_s: 1.0,
            later: Vec::new(),
        };
        let md = section(&r);
        // Mean 18, s = 1, t(2) = 4.303: half-width 4.303 / √3 = 2.5.
        assert!(md.contains("| Fixed, δB=75 ms |  | 18.0 ± 2.5 |"), "{md}");
        assert!(md.contains("| RR, δB=75 ms |  | 13.0 ± 2.5 |"), "{md}");
        assert!(md.contains("intervals apart"), "{md}");
        assert!(md.contains("ran 1 or 3 times"), "{md}");
        let svgs = plots(&Groups::of(&r)).unwrap();
        // The throughput plot draws whiskers (plotters' error bars are polylines).
        let throughput = &svgs[0].1;
        assert!(throughput.matches("<polyline").count() > 2, "{throughput}");
    }

    #[test]
    fn a_later_run_adds_points_or_replaces_them_and_is_told() {
        let run = |points: Vec<MultipathPoint>, measure_ms: u64| MultipathResults {
            points,
            timing: Timing {
                warmup_ms: 2000,
                measure_ms,
            },
            knobs: Vec::new(),
            duration_s: 60.0,
            later: Vec::new(),
        };
        let mut whole = run(vec![point(1, "RR, δB=75 ms", 224, 15.0)], 4000);
        let mut again = whole.clone();
        again
            .add_later(run(vec![point(1, "RR, δB=75 ms", 224, 16.0)], 4000))
            .unwrap();
        assert_eq!(again.points.len(), 1);
        assert_eq!(again.points[0].mbit, 16.0);
        assert!(section(&again).contains(
            "Of these, the whole run had 1 too (exp 1 RR, δB=75 ms σ=224): the figures below take it from the later run alone."
        ));
        let shorter = run(vec![point(1, "RR, δB=75 ms", 240, 16.0)], 2000);
        assert!(whole.clone().add_later(shorter).is_err());
        let later = run(
            vec![
                point(1, "RR, δB=75 ms", 240, 16.0),
                point(1, "RR, δB=75 ms", 240, 17.0),
            ],
            4000,
        );
        whole.add_later(later).unwrap();
        assert_eq!(whole.points.len(), 3);
        assert_eq!(whole.later[0].points, ["exp 1 RR, δB=75 ms σ=240"]);
        assert!(whole.later[0].replaced.is_empty());
        let md = section(&whole);
        assert!(
            md.contains("Afterwards 1 point ran on its own, in rounds as well (60 s): exp 1 RR, δB=75 ms σ=240."),
            "{md}"
        );
    }
}
