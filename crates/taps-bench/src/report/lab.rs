//! The report's section of `taps-bench lab`: the netlab scenarios' transfer times at 2 %
//! loss and the first-contact comparison with curl.

use std::fmt::Write;

use crate::experiments::{FirstContact, LabResults, PATH_1500};
use crate::Results;

/// The section (nothing when the lab did not run).
pub(super) fn lab_section(s: &mut String, r: &Results) {
    // A lab run alone has no transfer section for the 1500-byte path's row.
    if r.transfer.is_empty() && r.sctp_speed.iter().any(|p| p.path == PATH_1500) {
        let _ = writeln!(s, "## 2. Data transfer\n");
        super::sctp::sctp_speed_section(s, r);
    }
    let Some(lab) = &r.lab else {
        return;
    };
    let _ = writeln!(
        s,
        "## 8. In network namespaces: loss and first contact\n\n\
         netlab scenarios (`netlab run NAME` runs the same), seed 1, in this process: a \
         client and a server namespace joined by netlab's user-space bridge, which applies \
         the delays and losses. Where a scenario did not record its figures, the report's \
         first lines say why.\n"
    );
    loss_table(s, lab);
    first_contact_table(s, lab);
}

/// `sctp-loss`: SCTP, TCP CUBIC and the kernel's default TCP, side by side.
fn loss_table(s: &mut String, lab: &LabResults) {
    let Some(l) = &lab.loss else {
        return;
    };
    let _ = writeln!(
        s,
        "### 10 MiB at 2 % loss each way, 100 ms RTT (`sctp-loss`)\n\n\
         One flow through taps sends 10 MiB; the time is the client's, from start to the \
         server's clean close. SCTP uses usrsctp's default congestion control (RFC 4960; \
         docs/sctp.md has the others tried); TCP runs once with CUBIC on the client's routes \
         (`congctl cubic`) and once with the namespace's default.\n\n\
         | transport | congestion control | time s | × SCTP's time |\n|---|---|---|---|"
    );
    let rows = [
        ("SCTP (usrsctp)", "RFC 4960", l.sctp_s),
        ("TCP", "CUBIC", l.tcp_cubic_s),
        ("TCP", l.default_cc.as_str(), l.tcp_default_s),
    ];
    for (what, cc, secs) in rows {
        let _ = writeln!(s, "| {what} | {cc} | {secs:.1} | {:.2} |", secs / l.sctp_s);
    }
    if !l.failed.is_empty() {
        let _ = writeln!(s, "\nFailed checks: {}.", l.failed.join("; "));
    }
    s.push('\n');
}

/// `rx-first` and `rd-first`, with curl's time.
fn first_contact_table(s: &mut String, lab: &LabResults) {
    if lab.rx_first.is_none() && lab.rd_first.is_none() {
        return;
    }
    let _ = writeln!(
        s,
        "### First contact at 50 ms RTT (`rx-first`, `rd-first`)\n\n\
         An empty CIB; the DNS server as far away as the hosts (RTT 50 ms), so the first \
         lookup's round trip is what taps knows of the network, and it staggers first \
         contacts by `clamp(2 × RTT + 10 ms, 100 ms, 250 ms)` (RFC 8305's fixed 250 ms would \
         connect `rx` ~300 ms after the answer). curl (Debian's; its version is in the table) \
         runs in the same lab with `--resolve` giving both addresses (no DNS), so its \
         `time_connect` is its Happy Eyeballs alone (a 200 ms timeout).\n\n\
         | scenario | first DNS answer ms | connected after it ms | attempts | winner | curl `time_connect` ms | checks |\n\
         |---|---|---|---|---|---|---|"
    );
    let row = |s: &mut String, name: &str, c: &FirstContact| {
        let winner = match c.ipv6_won {
            Some(true) => "IPv6",
            Some(false) => "IPv4",
            None => "none (did not connect)",
        };
        let curl = match (c.curl_ms, &c.curl_version) {
            (Some(ms), Some(v)) => format!("{ms:.1} ({v})"),
            (Some(ms), None) => format!("{ms:.1}"),
            _ => "–".to_string(),
        };
        let checks = if c.failed.is_empty() {
            "all held".to_string()
        } else {
            format!("failed: {}", c.failed.join("; "))
        };
        let _ = writeln!(
            s,
            "| {name} | {:.1} | {:.1} | {} | {winner} | {curl} | {checks} |",
            c.answer_ms, c.after_answer_ms, c.attempts
        );
    };
    if let Some(c) = &lab.rx_first {
        row(s, "rx (dead IPv6)", c);
    }
    if let Some(c) = &lab.rd_first {
        row(s, "rd (both work)", c);
    }
    s.push('\n');
}
