//! The Markdown report and the SVG plots, shaped like the NEAT thesis's figures (CPU vs
//! number of flows, taps vs raw; transfer CPU vs size) and the ANRW'16 paper's (HE cost
//! vs cache hit ratio; server CPU vs request rate).

use std::fmt::Write;

use crate::experiments::{
    human_bytes, ConnectPoint, ConnectSide, Failures, HePoint, HeVariant, Proto, Summary,
    TransferPoint,
};
use crate::svg::{render, Chart, Line, Scale};
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

/// The protocols present in `protocols`, in first-seen order.
fn protocols_of(protocols: impl Iterator<Item = Proto>) -> Vec<Proto> {
    let mut out: Vec<Proto> = Vec::new();
    for p in protocols {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// File name of a per-protocol plot: `connect_cpu.svg` for TCP (the names the report has
/// always used), `connect_sctp_cpu.svg` for SCTP.
fn plot_name(experiment: &str, proto: Proto, what: &str) -> String {
    match proto {
        Proto::Tcp => format!("{experiment}_{what}.svg"),
        Proto::Sctp => format!("{experiment}_sctp_{what}.svg"),
    }
}

/// One plotted figure of a connect side: its legend suffix and how to read it.
type Figure = (&'static str, fn(&ConnectSide) -> f64);

fn connect_plots(r: &Results, proto: Proto, out: &mut Vec<(String, String)>) {
    let points: Vec<&ConnectPoint> = r.connect.iter().filter(|p| p.protocol == proto).collect();
    if points.is_empty() {
        return;
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
    out.push((plot_name("connect", proto, "cpu"), render(&chart, &lines)));

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
    out.push((plot_name("connect", proto, "rss"), render(&chart, &lines)));

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
    out.push((plot_name("connect", proto, "delay"), render(&chart, &lines)));
}

fn transfer_plots(r: &Results, proto: Proto, out: &mut Vec<(String, String)>) {
    let points: Vec<&TransferPoint> = r.transfer.iter().filter(|p| p.protocol == proto).collect();
    if points.is_empty() {
        return;
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
        out.push((plot_name("transfer", proto, side), render(&chart, &lines)));
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
            render(&chart, &lines),
        ));
    }
}

fn he_plots(r: &Results, out: &mut Vec<(String, String)>) {
    if r.he.is_empty() {
        return;
    }
    fn get(p: &HePoint, client: bool) -> &Summary {
        if client {
            &p.client_cpu_per_conn_us
        } else {
            &p.server_cpu_per_conn_us
        }
    }
    let flat = |v: HeVariant, client: bool| {
        r.he.iter().find(|p| p.variant == v).map(|p| {
            let y = get(p, client).median;
            vec![(0.0, y), (100.0, y)]
        })
    };
    let race = |v: HeVariant, client: bool| {
        r.he.iter()
            .filter(|p| p.variant == v)
            .filter_map(|p| p.hit_percent.map(|h| (h as f64, get(p, client).median)))
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
            HeVariant::Raw,
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
        out.push((name.to_string(), render(&chart, &lines)));
    }
}

fn http_plots(r: &Results, out: &mut Vec<(String, String)>) {
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
                if *v == HeVariant::Raw {
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
            render(&chart, &lines),
        ));
    }
}

/// The plots for `r`, as (file name, SVG text); only those with data.
pub fn plots(r: &Results) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for proto in protocols_of(r.connect.iter().map(|p| p.protocol)) {
        connect_plots(r, proto, &mut out);
    }
    for proto in protocols_of(r.transfer.iter().map(|p| p.protocol)) {
        transfer_plots(r, proto, &mut out);
    }
    he_plots(r, &mut out);
    http_plots(r, &mut out);
    out
}

fn ms(us: f64) -> String {
    format!("{:.3}", us / 1e3)
}

fn spread(s: &Summary, scale: f64, digits: usize) -> String {
    format!(
        "{:.d$} ({:.d$}–{:.d$})",
        s.median / scale,
        s.min / scale,
        s.max / scale,
        d = digits
    )
}

fn img(s: &mut String, plots: &[&str], name: &str) {
    if plots.contains(&name) {
        let _ = writeln!(s, "![{name}]({name})\n");
    }
}

fn connect_section(s: &mut String, r: &Results, proto: Proto, plots: &[&str]) {
    let points: Vec<&ConnectPoint> = r.connect.iter().filter(|p| p.protocol == proto).collect();
    let baseline = match proto {
        Proto::Tcp => "raw = plain tokio `TcpSocket`/`TcpListener`",
        Proto::Sctp => {
            "raw = the `usrsctp` crate used directly (one association per flow, SCTP over \
             UDP like taps); *taps* = a preconnection requiring SCTP in a context with flow \
             mapping **off** (one association per flow, as raw), the server a taps `Listener` \
             requiring SCTP"
        }
    };
    let _ = writeln!(
        s,
        "### {proto}\n\nN concurrent flows to a server on 127.0.0.1, measured from context \
         creation (taps) or the first socket (raw) to the last flow connected; {baseline}. \
         Client and server are separate processes; a fresh server per trial.\n"
    );
    let _ = writeln!(
        s,
        "| flows | client CPU taps ms | client CPU raw ms | ratio | server CPU ratio | RSS growth taps KiB | raw KiB | extra KiB/flow | delay median taps ms | raw ms | max taps ms | max raw ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for p in &points {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.2} | {:.2} | {:.0} | {:.0} | {:+.2} | {} | {} | {} | {} |",
            p.flows,
            spread(&p.taps.client_cpu_us, 1e3, 2),
            spread(&p.raw.client_cpu_us, 1e3, 2),
            p.client_cpu_ratio,
            p.server_cpu_ratio,
            p.taps.rss_growth_kib.median,
            p.raw.rss_growth_kib.median,
            p.rss_extra_per_flow_kib,
            ms(p.taps.delay_median_us.median),
            ms(p.raw.delay_median_us.median),
            ms(p.taps.delay_max_us.median),
            ms(p.raw.delay_max_us.median),
        );
    }
    s.push('\n');
    if points.iter().any(|p| p.taps_mapped.is_some()) {
        let _ = writeln!(
            s,
            "**Flow mapping on** (the taps default): the same N flows from one preconnection \
             become streams of one association: one handshake, then a stream and a one-byte \
             announcement per further flow. Compared with the same raw baseline (one \
             association per flow).\n"
        );
        let _ = writeln!(
            s,
            "| flows | client CPU mapped ms | × raw | × taps mapping off | server CPU × raw | RSS growth mapped KiB | extra KiB/flow vs raw | handshakes/flow | delay median ms | max ms |\n|---|---|---|---|---|---|---|---|---|---|"
        );
        for p in &points {
            let (Some(m), Some(v)) = (&p.taps_mapped, &p.mapped_vs_raw) else {
                continue;
            };
            let vs_off = crate::measure::ratio(m.client_cpu_us.median, p.taps.client_cpu_us.median);
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {:.2} | {:.2} | {:.0} | {:+.2} | {:.3} | {} | {} |",
                p.flows,
                spread(&m.client_cpu_us, 1e3, 2),
                v.client_cpu_ratio,
                vs_off,
                v.server_cpu_ratio,
                m.rss_growth_kib.median,
                v.rss_extra_per_flow_kib,
                m.attempts_per_flow.median,
                ms(m.delay_median_us.median),
                ms(m.delay_max_us.median),
            );
        }
        s.push('\n');
    }
    failures_note(
        s,
        points
            .iter()
            .flat_map(|p| side_failures(&p.taps, &p.raw, p.taps_mapped.as_ref())),
    );
    for what in ["cpu", "rss", "delay"] {
        img(s, plots, &plot_name("connect", proto, what));
    }
}

fn transfer_section(s: &mut String, r: &Results, proto: Proto, plots: &[&str]) {
    let points: Vec<&TransferPoint> = r.transfer.iter().filter(|p| p.protocol == proto).collect();
    let how = match proto {
        Proto::Tcp => "64 KiB writes, then `shutdown`",
        Proto::Sctp => {
            "64 KiB writes (taps sends each as one SCTP message, as does raw), then \
             `shutdown` (taps: its end-of-flow message; raw: an end-of-data message of its \
             own); taps with flow mapping off, raw usrsctp one association per flow"
        }
    };
    let _ = writeln!(
        s,
        "### {proto}\n\nFlows are connected before the window; in it every flow sends its \
         bytes ({how}), and waits for the receiver (the server process) to answer the end \
         after reading everything. Sender = client CPU, receiver = server CPU over the same \
         window.\n"
    );
    let _ = writeln!(
        s,
        "| bytes/flow | flows | sender taps ms | sender raw ms | sender ratio | receiver taps ms | receiver raw ms | receiver ratio | total ratio |\n|---|---|---|---|---|---|---|---|---|"
    );
    for p in &points {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.3} | {} | {} | {:.3} | {:.3} |",
            human_bytes(p.bytes),
            p.flows,
            spread(&p.taps.sender_cpu_us, 1e3, 2),
            spread(&p.raw.sender_cpu_us, 1e3, 2),
            p.sender_cpu_ratio,
            spread(&p.taps.receiver_cpu_us, 1e3, 2),
            spread(&p.raw.receiver_cpu_us, 1e3, 2),
            p.receiver_cpu_ratio,
            p.total_cpu_ratio,
        );
    }
    s.push('\n');
    if points.iter().any(|p| p.taps_mapped.is_some()) {
        let _ = writeln!(
            s,
            "**Flow mapping on**: the flows are streams of one association (one congestion \
             window, one receive window for all of them), against the same raw baseline.\n"
        );
        let _ = writeln!(
            s,
            "| bytes/flow | flows | sender mapped ms | × raw | receiver mapped ms | × raw | total × raw | wall time mapped ms | raw ms |\n|---|---|---|---|---|---|---|---|---|"
        );
        for p in &points {
            let (Some(m), Some(v)) = (&p.taps_mapped, &p.mapped_vs_raw) else {
                continue;
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.3} | {} | {:.3} | {:.3} | {} | {} |",
                human_bytes(p.bytes),
                p.flows,
                spread(&m.sender_cpu_us, 1e3, 2),
                v.sender_cpu_ratio,
                spread(&m.receiver_cpu_us, 1e3, 2),
                v.receiver_cpu_ratio,
                v.total_cpu_ratio,
                ms(m.elapsed_us.median),
                ms(p.raw.elapsed_us.median),
            );
        }
        s.push('\n');
    }
    failures_note(
        s,
        points
            .iter()
            .flat_map(|p| side_failures(&p.taps, &p.raw, p.taps_mapped.as_ref())),
    );
    for what in ["sender", "receiver", "mapping"] {
        img(s, plots, &plot_name("transfer", proto, what));
    }
}

/// Failed flows and the first error of a point's taps, raw and (SCTP) mapped sides.
fn side_failures<'a, S: Failures>(
    taps: &'a S,
    raw: &'a S,
    mapped: Option<&'a S>,
) -> impl Iterator<Item = (usize, Option<String>)> + 'a {
    [Some(taps), Some(raw), mapped]
        .into_iter()
        .flatten()
        .map(Failures::failures)
}

/// The Markdown report; `plots` are the SVG file names written beside it.
pub fn markdown(r: &Results, plots: &[&str]) -> String {
    let mut s = String::new();
    let m = &r.meta;
    let _ = writeln!(s, "# taps benchmark report\n");
    let protocols: Vec<String> = m.protocols.iter().map(|p| p.to_string()).collect();
    let _ = writeln!(
        s,
        "Experiment `{}`{}, experiments 1–2 over {}, {} build, {} CPUs, Linux {}, run took \
         {:.0} s ({}). Generated by `taps bench`; every number is a median over interleaved \
         repetitions (taps and raw alternate), ratios are medians of per-repetition ratios. \
         Ranges in parentheses are min–max.\n",
        m.experiment,
        if m.quick { " (quick matrix)" } else { "" },
        protocols.join(" and "),
        if m.release { "release" } else { "debug" },
        m.cpus,
        m.kernel,
        m.duration_s,
        m.phases
            .iter()
            .map(|p| format!("{} {:.0} s", p.name, p.duration_s))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for u in &r.unavailable {
        let _ = writeln!(s, "- **{u}**");
    }
    if !r.unavailable.is_empty() {
        s.push('\n');
    }
    if !r.crashes.is_empty() {
        let _ = writeln!(
            s,
            "**Worker crashes**: {} time(s) a worker process died or hung during a trial (a \
             bug below the benchmark, see docs/benchmarks.md); `retried`: the point's \
             samples come from a rerun of the trial; `kept`: the client died after reporting \
             its result, the measurement stands; `gave up`: the phase was not measured.\n\n\
             | trial | outcome | error |\n|---|---|---|",
            r.crashes.len()
        );
        for c in &r.crashes {
            let _ = writeln!(
                s,
                "| {} | {} | {} |",
                c.trial,
                c.outcome,
                c.error.replace('|', "\\|")
            );
        }
        s.push('\n');
    }
    if !r.goals.is_empty() {
        let _ = writeln!(
            s,
            "## Goals\n\n| goal | target | measured | met |\n|---|---|---|---|"
        );
        for g in &r.goals {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                g.name,
                g.target,
                g.measured,
                if g.met { "yes" } else { "**no**" }
            );
        }
        s.push('\n');
    }
    if !r.connect.is_empty() {
        let _ = writeln!(s, "## 1. Connection establishment\n");
        for proto in protocols_of(r.connect.iter().map(|p| p.protocol)) {
            connect_section(&mut s, r, proto, plots);
        }
    }
    if !r.transfer.is_empty() {
        let _ = writeln!(s, "## 2. Data transfer\n");
        for proto in protocols_of(r.transfer.iter().map(|p| p.protocol)) {
            transfer_section(&mut s, r, proto, plots);
        }
    }
    if !r.he.is_empty() {
        he_section(&mut s, r, plots);
    }
    if !r.http.is_empty() {
        http_section(&mut s, r, plots);
    }
    s
}

fn he_section(s: &mut String, r: &Results, plots: &[&str]) {
    let _ = writeln!(
        s,
        "## 3. Happy Eyeballs cost\n\n\
         The race is NEAT's `transport: [\"SCTP\", \"TCP\"]` (one of them required, SCTP \
         preferred) to 127.0.0.1, flow mapping off (every connection races). *SCTP dead*: \
         the server (a taps `Listener`) listens on TCP only and nothing listens on the UDP \
         port the client encapsulates SCTP in, so the SCTP attempt is refused at once (ICMP \
         port unreachable) and the race falls over to TCP. *Both alive*: the server listens \
         on TCP and SCTP; SCTP wins (the race commits on SCTP's INIT-ACK, long before TCP's \
         turn). A cache hit is a race whose context's CIB was seeded by a preliminary \
         connection (so a failed SCTP goes after TCP); a miss uses a context whose CIB \
         forgets at once (lifetime 0). The single-protocol baselines are taps requiring TCP \
         or SCTP (one candidate, no race); the race ratios (× single, × raw) are against \
         the protocol the race ends up on (TCP when SCTP is dead, SCTP when both are alive). \
         The family race (TCP to `localhost`: `::1` and `127.0.0.1`, nothing on `::1`) is \
         an extra, compared with TCP to `localhost` with IPv4 required (the same lookup, one \
         candidate, no race). {} sequential connections (connect, close) per trial.\n",
        r.he[0].connections
    );
    let _ = writeln!(
        s,
        "| variant | hits | client µs/conn | × single | × raw | server µs/conn | server × single | attempts/conn | on SCTP | delay median ms |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    for p in &r.he {
        let connects = p.variant.connects();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.2} ({}) | {} | {} | {} | {} | {} |",
            p.variant.label(),
            p.hit_percent.map(|h| format!("{h}%")).unwrap_or("–".into()),
            spread(&p.client_cpu_per_conn_us, 1.0, 1),
            if p.variant == p.single {
                "1.00".to_string()
            } else {
                format!("{:.2} ({})", p.client_vs_single, short(p.single))
            },
            p.client_vs_raw,
            short(p.variant.raw()),
            if connects {
                spread(&p.server_cpu_per_conn_us, 1.0, 1)
            } else {
                "–".into()
            },
            if connects {
                format!("{:.2}", p.server_vs_single)
            } else {
                "–".into()
            },
            if connects {
                format!("{:.2}", p.attempts_per_conn.median)
            } else {
                "– (no connection)".into()
            },
            if connects {
                format!("{:.0}%", 100.0 * p.sctp_share.median)
            } else {
                "–".into()
            },
            ms(p.delay_median_us.median),
        );
    }
    s.push('\n');
    failures_note(s, r.he.iter().map(|p| (p.failed, p.first_error.clone())));
    img(s, plots, "he_client.svg");
    img(s, plots, "he_server.svg");
}

/// A short name of a baseline variant for table cells.
fn short(v: HeVariant) -> &'static str {
    match v {
        HeVariant::Raw | HeVariant::TapsSingle => "TCP",
        HeVariant::TapsSingleName => "TCP to localhost, IPv4",
        HeVariant::RawSctp | HeVariant::TapsSctp => "SCTP",
        _ => "?",
    }
}

fn http_section(s: &mut String, r: &Results, plots: &[&str]) {
    let _ = writeln!(
        s,
        "## 4. HTTP server under load\n\nA minimal HTTP/1.0 keep-alive server in its own \
         process: a taps `Listener` on TCP and SCTP (same port; SCTP inside UDP), or raw \
         tokio TCP for the raw client. A load generator opens connections as a Poisson \
         process at the offered rate (one `GET` per connection, as each request is a new \
         connection to race; flow mapping off) and reads the object. Server CPU load = \
         server CPU time / wall time of the load period. Races are `transport: [\"SCTP\", \
         \"TCP\"]`; *SCTP dead* clients encapsulate SCTP to a UDP port nobody listens on \
         (refused at once), so they fall over to the server's TCP; *both alive* clients \
         reach its SCTP.\n"
    );
    let _ = writeln!(
        s,
        "| object | rate/s | client | server load % | × raw | × taps TCP only | achieved/s | on SCTP | client load % | delay median ms |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    for p in &r.http {
        let _ = writeln!(
            s,
            "| {} | {:.0} | {}{} | {} | {:.2} | {:.2} | {:.0} | {:.0}% | {:.1} | {} |",
            human_bytes(p.object as u64),
            p.rate,
            p.variant.label(),
            p.hit_percent
                .map(|h| format!(", {h}% hits"))
                .unwrap_or_default(),
            spread(&p.server_load_pct, 1.0, 2),
            p.server_vs_raw,
            p.server_vs_single,
            p.achieved_rate.median,
            100.0 * p.sctp_share.median,
            p.client_load_pct.median,
            ms(p.delay_median_us.median),
        );
    }
    s.push('\n');
    failures_note(s, r.http.iter().map(|p| (p.failed, p.first_error.clone())));
    for name in plots.iter().filter(|n| n.starts_with("http_")) {
        img(s, plots, name);
    }
}

fn failures_note(s: &mut String, it: impl Iterator<Item = (usize, Option<String>)>) {
    let mut total = 0;
    let mut first = None;
    for (n, e) in it {
        total += n;
        if first.is_none() {
            first = e;
        }
    }
    if total > 0 {
        let _ = writeln!(
            s,
            "**{total} connection(s) failed**; first: {}\n",
            first.unwrap_or_default()
        );
    }
}

/// The one-line summary `taps bench connect` prints per protocol and flow count.
pub fn connect_line(p: &ConnectPoint) -> String {
    let mut line = format!(
        "connect {} {} flows: client CPU taps{}/raw {:.2}x ({:.2} ms vs {:.2} ms), server CPU {:.2}x, \
         RSS {:+.2} KiB/flow over raw, delay median {:.3} vs {:.3} ms ({:+.3} ms), max {:.3} vs {:.3} ms",
        p.protocol,
        p.flows,
        if p.taps_mapped.is_some() {
            " (flow mapping off)"
        } else {
            ""
        },
        p.client_cpu_ratio,
        p.taps.client_cpu_us.median / 1e3,
        p.raw.client_cpu_us.median / 1e3,
        p.server_cpu_ratio,
        p.rss_extra_per_flow_kib,
        p.taps.delay_median_us.median / 1e3,
        p.raw.delay_median_us.median / 1e3,
        p.delay_median_diff_ms,
        p.taps.delay_max_us.median / 1e3,
        p.raw.delay_max_us.median / 1e3,
    );
    if let (Some(m), Some(v)) = (&p.taps_mapped, &p.mapped_vs_raw) {
        let _ = write!(
            line,
            "; flow mapping on: client CPU {:.2}x raw ({:.2} ms), RSS {:+.2} KiB/flow, delay median {:.3} ms",
            v.client_cpu_ratio,
            m.client_cpu_us.median / 1e3,
            v.rss_extra_per_flow_kib,
            m.delay_median_us.median / 1e3,
        );
    }
    line
}
