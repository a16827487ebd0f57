//! The report's sections: a table per experiment (and protocol), with its notes and
//! plots.

#![forbid(unsafe_code)]

use std::fmt::Write;

use super::plot_name;
use crate::experiments::{
    human_bytes, ConnectPoint, Failures, Faults, HeVariant, Proto, Summary, TransferPoint,
};
use crate::measure::ratio;
use crate::Results;

/// Microseconds as milliseconds with three decimals (`1234.5` → `1.235`).
fn fmt_ms_from_us(us: f64) -> String {
    format!("{:.3}", us / 1e3)
}

/// A summary as `median (min–max)`, each divided by `scale`, with `digits` decimals.
fn fmt_median_range(s: &Summary, scale: f64, digits: usize) -> String {
    format!(
        "{:.d$} ({:.d$}–{:.d$})",
        s.median / scale,
        s.min / scale,
        s.max / scale,
        d = digits
    )
}

/// The Markdown image of plot `name`, if it was written.
fn embed_plot(s: &mut String, plots: &[&str], name: &str) {
    if plots.contains(&name) {
        let _ = writeln!(s, "![{name}]({name})\n");
    }
}

/// Experiment 1 over `proto`: the table(s), failures and plots.
pub(super) fn connect_section(s: &mut String, r: &Results, proto: Proto, plots: &[&str]) {
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
         Client and server are separate processes; a fresh server per trial. *Server CPU \
         ratio*: each server with its own client (taps with taps, raw with raw), from the \
         client's start to the last flow accepted. *Listener / raw, raw client* (TCP): a \
         taps `Listener` against a tokio `TcpListener`, both serving the raw client, the \
         listener's accept path alone (a slower client changes what any server pays per \
         connection).\n"
    );
    let _ = writeln!(
        s,
        "| flows | client CPU taps ms | client CPU raw ms | ratio | server CPU ratio | listener / raw, raw client | RSS growth taps KiB | raw KiB | extra KiB/flow | delay median taps ms | raw ms | max taps ms | max raw ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for p in &points {
        let listener = match (&p.taps_listener, p.listener_server_cpu_ratio) {
            (Some(l), Some(r)) => format!("{r:.2} ({:.2} ms)", l.server_cpu_us.median / 1e3),
            _ => "–".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.2} | {:.2} | {} | {:.0} | {:.0} | {:+.2} | {} | {} | {} | {} |",
            p.flows,
            fmt_median_range(&p.taps.client_cpu_us, 1e3, 2),
            fmt_median_range(&p.raw.client_cpu_us, 1e3, 2),
            p.client_cpu_ratio,
            p.server_cpu_ratio,
            listener,
            p.taps.rss_growth_kib.median,
            p.raw.rss_growth_kib.median,
            p.rss_extra_per_flow_kib,
            fmt_ms_from_us(p.taps.delay_median_us.median),
            fmt_ms_from_us(p.raw.delay_median_us.median),
            fmt_ms_from_us(p.taps.delay_max_us.median),
            fmt_ms_from_us(p.raw.delay_max_us.median),
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
            let vs_off = ratio(m.client_cpu_us.median, p.taps.client_cpu_us.median);
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {:.2} | {:.2} | {:.0} | {:+.2} | {:.3} | {} | {} |",
                p.flows,
                fmt_median_range(&m.client_cpu_us, 1e3, 2),
                v.client_cpu_ratio,
                vs_off,
                v.server_cpu_ratio,
                m.rss_growth_kib.median,
                v.rss_extra_per_flow_kib,
                m.attempts_per_flow.median,
                fmt_ms_from_us(m.delay_median_us.median),
                fmt_ms_from_us(m.delay_max_us.median),
            );
        }
        s.push('\n');
    }
    failures_note(
        s,
        points.iter().flat_map(|p| {
            side_failures(&p.taps, &p.raw, p.taps_mapped.as_ref())
                .chain(p.taps_listener.as_ref().map(Failures::faults))
        }),
    );
    for what in ["cpu", "rss", "delay"] {
        embed_plot(s, plots, &plot_name("connect", proto, what));
    }
}

/// Experiment 2 over `proto`: the table(s), failures and plots.
pub(super) fn transfer_section(s: &mut String, r: &Results, proto: Proto, plots: &[&str]) {
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
            fmt_median_range(&p.taps.sender_cpu_us, 1e3, 2),
            fmt_median_range(&p.raw.sender_cpu_us, 1e3, 2),
            p.sender_cpu_ratio,
            fmt_median_range(&p.taps.receiver_cpu_us, 1e3, 2),
            fmt_median_range(&p.raw.receiver_cpu_us, 1e3, 2),
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
                fmt_median_range(&m.sender_cpu_us, 1e3, 2),
                v.sender_cpu_ratio,
                fmt_median_range(&m.receiver_cpu_us, 1e3, 2),
                v.receiver_cpu_ratio,
                v.total_cpu_ratio,
                fmt_ms_from_us(m.elapsed_us.median),
                fmt_ms_from_us(p.raw.elapsed_us.median),
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
        embed_plot(s, plots, &plot_name("transfer", proto, what));
    }
}

/// What went wrong on a point's taps, raw and (SCTP) mapped sides.
fn side_failures<'a, S: Failures>(
    taps: &'a S,
    raw: &'a S,
    mapped: Option<&'a S>,
) -> impl Iterator<Item = Faults> + 'a {
    [Some(taps), Some(raw), mapped]
        .into_iter()
        .flatten()
        .map(Failures::faults)
}

/// Experiment 3: the table, failures and plots.
pub(super) fn he_section(s: &mut String, r: &Results, plots: &[&str]) {
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
            fmt_median_range(&p.client_cpu_per_conn_us, 1.0, 1),
            if p.variant == p.single {
                "1.00".to_string()
            } else {
                format!(
                    "{:.2} ({})",
                    p.client_vs_single,
                    baseline_protocol(p.single)
                )
            },
            p.client_vs_raw,
            baseline_protocol(p.variant.raw_baseline()),
            if connects {
                fmt_median_range(&p.server_cpu_per_conn_us, 1.0, 1)
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
            fmt_ms_from_us(p.delay_median_us.median),
        );
    }
    s.push('\n');
    failures_note(s, r.he.iter().map(Failures::faults));
    embed_plot(s, plots, "he_client.svg");
    embed_plot(s, plots, "he_server.svg");
}

/// The protocol (and target) of a baseline variant, short, for table cells.
fn baseline_protocol(v: HeVariant) -> &'static str {
    match v {
        HeVariant::RawTcp | HeVariant::TapsSingle => "TCP",
        HeVariant::TapsSingleName => "TCP to localhost, IPv4",
        HeVariant::RawSctp | HeVariant::TapsSctp => "SCTP",
        _ => "?",
    }
}

/// Experiment 4: the table, failures and plots.
pub(super) fn http_section(s: &mut String, r: &Results, plots: &[&str]) {
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
            fmt_median_range(&p.server_load_pct, 1.0, 2),
            p.server_vs_raw,
            p.server_vs_single,
            p.achieved_rate.median,
            100.0 * p.sctp_share.median,
            p.client_load_pct.median,
            fmt_ms_from_us(p.delay_median_us.median),
        );
    }
    s.push('\n');
    failures_note(s, r.http.iter().map(Failures::faults));
    for name in plots.iter().filter(|n| n.starts_with("http_")) {
        embed_plot(s, plots, name);
    }
}

/// The note on what went wrong (failed connections with the first error, server
/// timeouts, short transfers), if anything did.
pub(super) fn failures_note(s: &mut String, it: impl Iterator<Item = Faults>) {
    let mut total = Faults::default();
    for f in it {
        total.failed += f.failed;
        total.server_timeouts += f.server_timeouts;
        total.short_transfers += f.short_transfers;
        if total.first_error.is_none() {
            total.first_error = f.first_error;
        }
    }
    if let Some(why) = total.problem() {
        let _ = writeln!(s, "**Not a clean measurement**: {why}.\n");
    }
}
