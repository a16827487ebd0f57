//! The secure experiment's section of the report (table, notes) and its plots: CPU per
//! connection against the cache hit ratio, per object size and side, as the ANRW'16
//! paper's TLS figures.

#![forbid(unsafe_code)]

use std::fmt::Write;

use super::chart::{render, Chart, Line, Scale};
use crate::experiments::{human_bytes, SecurePoint, SecureVariant};
use crate::Results;

/// The object sizes measured, ascending.
fn objects(r: &Results) -> Vec<usize> {
    let mut o: Vec<usize> = r.secure.iter().map(|p| p.object).collect();
    o.sort();
    o.dedup();
    o
}

/// `secure_client_1k.svg`, `secure_server_35k.svg`.
fn plot_file(side: &str, object: usize) -> String {
    format!("secure_{side}_{}k.svg", object / 1024)
}

fn cpu(p: &SecurePoint, client: bool) -> f64 {
    if client {
        p.client_cpu_per_conn_us.median
    } else {
        p.server_cpu_per_conn_us.median
    }
}

/// The plots: per object size and side, the races against the hit ratio (solid) and the
/// single-protocol and raw connects (flat, dashed).
pub(super) fn secure_plots(r: &Results, out: &mut Vec<(String, String)>) -> Result<(), String> {
    for object in objects(r) {
        let of = |v: SecureVariant| {
            r.secure
                .iter()
                .filter(move |p| p.object == object && p.variant == v)
        };
        for (side, client) in [("client", true), ("server", false)] {
            let mut lines = Vec::new();
            for v in [SecureVariant::RaceBothAlive, SecureVariant::RaceQuicDead] {
                let pts: Vec<(f64, f64)> = of(v)
                    .filter_map(|p| p.hit_percent.map(|h| (h as f64, cpu(p, client))))
                    .collect();
                if !pts.is_empty() {
                    lines.push(Line::solid(v.label(), pts));
                }
            }
            for v in [
                SecureVariant::TapsQuic,
                SecureVariant::TapsTls,
                SecureVariant::RawQuic,
                SecureVariant::RawTls,
            ] {
                if let Some(p) = of(v).next() {
                    let y = cpu(p, client);
                    lines.push(Line::dashed(v.label(), vec![(0.0, y), (100.0, y)]));
                }
            }
            let title = format!(
                "Secure Happy Eyeballs cost: {side} CPU per connection, {} objects",
                human_bytes(object as u64)
            );
            let chart = Chart {
                title: &title,
                x_label: "CIB cache hit ratio",
                y_label: "CPU time per connection (connect, fetch, close), µs",
                x_scale: Scale::Linear,
                x_tick: |x| format!("{x:.0}%"),
            };
            out.push((plot_file(side, object), render(&chart, &lines)?));
        }
    }
    Ok(())
}

fn range(s: &crate::experiments::Summary) -> String {
    format!("{:.0} ({:.0}–{:.0})", s.median, s.min, s.max)
}

/// The section: what was measured and how, the table, failures, plots.
pub(super) fn secure_section(s: &mut String, r: &Results, plots: &[&str]) {
    let _ = writeln!(
        s,
        "## 6. Secure Happy Eyeballs cost (TLS/TCP and QUIC)\n\n\
         Experiment 3 over TLS, after the ANRW'16 paper's TLS case. The race is taps \
         requiring security to 127.0.0.1: QUIC (ranked first) against TLS/TCP, flow mapping \
         off. *Both alive*: the server (a taps `Listener` with an identity) serves TLS/TCP \
         and QUIC on one port; QUIC wins. *QUIC dead*: the server serves TLS/TCP only and \
         nothing listens on its UDP port, so a miss starts QUIC with its first-contact port \
         probe, the kernel refuses the probe (ICMP port unreachable), the QUIC attempt \
         fails and TLS/TCP starts at once and wins; a hit (a context whose CIB was seeded by a preliminary connection) \
         starts TLS/TCP alone. A miss uses a context whose CIB forgets at once. Baselines: \
         taps requiring security and TCP (TLS/TCP) or QUIC (one candidate, no race), against \
         the same server as the race that ends on that protocol; and tokio-rustls over \
         tokio TCP and quinn's own `Endpoint`, against a tokio-rustls and a quinn server. \
         Both sides do the same security work: the test CA alone as trust anchor, name \
         `localhost` verified, *ring*, TLS 1.3 (negotiated) and 1.2 offered, ALPN \
         `taps-bench`, session resumption on (a 256-session client store; the server's \
         default stateful cache), no 0-RTT, no client certificate (a unit test checks they \
         agree). Every client warms up with one connection per context before the window \
         (QUIC socket created, a session cached, the CIB seeded). {} connections per trial, \
         started {:.0} per second (open loop, as the paper's request rate: every variant's \
         window is as long and the server sees the same arrivals, whether a race waits for \
         a dead QUIC or not), each: connect, `GET` one object (HTTP/1.0), read it, close.\n",
        r.secure[0].connections, r.secure[0].rate
    );
    for object in objects(r) {
        let _ = writeln!(
            s,
            "### {} objects\n\n\
             | variant | hits | client µs/conn | × single | × raw | server µs/conn | server × single | server × raw | attempts/conn | on QUIC | fetch median ms |\n\
             |---|---|---|---|---|---|---|---|---|---|---|",
            human_bytes(object as u64)
        );
        for p in r.secure.iter().filter(|p| p.object == object) {
            let raw = matches!(p.variant, SecureVariant::RawTls | SecureVariant::RawQuic);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {:.3} | {} | {} | {:.3} | {:.2} | {:.0}% | {:.3} |",
                p.variant.label(),
                p.hit_percent.map_or("–".into(), |h| format!("{h}%")),
                range(&p.client_cpu_per_conn_us),
                if raw {
                    "–".into()
                } else {
                    format!("{:.3}", p.client_vs_single)
                },
                p.client_vs_raw,
                range(&p.server_cpu_per_conn_us),
                if raw {
                    "–".into()
                } else {
                    format!("{:.3}", p.server_vs_single)
                },
                p.server_vs_raw,
                p.attempts_per_conn.median,
                100.0 * p.quic_share.median,
                p.delay_median_us.median / 1e3,
            );
        }
        s.push('\n');
        for side in ["client", "server"] {
            let name = plot_file(side, object);
            if plots.contains(&name.as_str()) {
                let _ = writeln!(s, "![{name}]({name})\n");
            }
        }
    }
    let failed: usize = r.secure.iter().map(|p| p.failed).sum();
    if failed > 0 {
        let first = r.secure.iter().find_map(|p| p.first_error.clone());
        let _ = writeln!(
            s,
            "**{failed} connection(s) failed**; first: {}\n",
            first.unwrap_or_default()
        );
    }
}
