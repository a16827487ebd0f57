//! The multipath report's paragraph on NR-SACK's effect on round robin (experiment 3),
//! told from what the receiver's SACKs said the sender held.

#![forbid(unsafe_code)]

use std::fmt::Write as _;

use super::multipath_stats::{Group, Groups, HeldStats, Stat};

/// User data per TSN in experiment 3 (one message per chunk).
const CHUNK: f64 = 1444.0;

/// The three RR curves of experiment 3 compared here, without NR-SACK, with it (usrsctp
/// NR-acks what it delivered) and with every chunk NR-acked on arrival.
const OFF: &str = "RR, NR-SACK off";
const ON: &str = "RR, NR-SACK on";
const ARRIVAL: &str = "RR, NR-SACK on arrival";

/// `s` times `by`, with its interval, no decimals (TSNs or bytes as KB).
fn scaled(s: Stat, by: f64) -> String {
    Stat {
        mean: s.mean * by,
        half: s.half * by,
        n: s.n,
    }
    .show(0)
}

/// TSNs as KB of user data.
const KB_PER_TSN: f64 = CHUNK / 1e3;
/// Bytes as KB.
const KB_PER_BYTE: f64 = 1e-3;

/// The point of `series` of experiment 3 at `sigma`, with what its runs' SACKs said the
/// sender held (`None` if they recorded nothing).
fn held_at<'g, 'a>(
    g: &'g Groups<'a>,
    series: &str,
    sigma: u32,
) -> Option<(&'g Group<'a>, HeldStats)> {
    let p = g.at(3, series, sigma)?;
    Some((p, p.held?))
}

/// Writes the paragraph if the three RR curves have their SACK figures at one σ (runs
/// from before the ledger kept them have none: then nothing is written).
pub(crate) fn nr_sack_on_rr(md: &mut String, g: &Groups<'_>) {
    let found = g.sigmas(3).into_iter().rev().find_map(|s| {
        Some((
            s,
            held_at(g, OFF, s)?,
            held_at(g, ON, s)?,
            held_at(g, ARRIVAL, s)?,
        ))
    });
    let Some((sigma, (off, h_off), (on, h_on), (arr, h_arr))) = found else {
        return;
    };
    let share = 100.0 * h_on.nr_acked.mean / h_on.outstanding.mean;
    let more = h_on.outstanding.mean - h_off.outstanding.mean;
    let _ = writeln!(
        md,
        "- **NR-SACK's effect on RR, from the wire** (every SACK of a run's measured window \
in netlab's ledger, averaged per run, then over the runs; σ={sigma} KiB, TSNs of \
{CHUNK:.0} B): without NR-SACK the sender had {} TSNs outstanding ({} KB), each held in its \
buffer until the cumulative ack passes it, while the receiver advertised {} KB free: here \
the sender's buffer, not the receiver's, bounds RR. With NR-SACK the receiver NR-acked {} \
of {} outstanding TSNs ({share:.0} %): usrsctp NR-acks what it has delivered, messages in \
order within their stream though above the cumulative ack; {} more it gap-acked as \
renegable (out of order within their stream, held at both ends). The sender frees the \
NR-acked ones, so \
{more:.0} more TSNs were out and the rate rose from {} to {} Mbit/s. The paper puts its \
small effect down to data of every stream waiting for other paths anyway; here \
{share:.0} % of what is outstanding does not wait. A receiver that NR-acks every chunk on \
arrival (usrsctp's sysctl sctp_do_drain=0; the paper's simulator, INET, acks so when it \
may not renege, its disableReneging), the extra curve: {} of {} TSNs NR-acked, {} Mbit/s \
at {} ms, the receiver still advertising {} KB: the sender frees far more, the rate \
hardly moves and the delay grows, so the freed buffer holds messages waiting to be sent \
and neither buffer bounds the rate then (what does was not measured). Which chunks the \
receiver NR-acks does not make NR-SACK's effect small, then; which buffer is split does \
(below).\n",
        h_off.outstanding.show(0),
        scaled(h_off.outstanding, KB_PER_TSN),
        scaled(h_off.a_rwnd, KB_PER_BYTE),
        h_on.nr_acked.show(0),
        h_on.outstanding.show(0),
        h_on.gap_acked.show(0),
        off.mbit,
        on.mbit,
        h_arr.nr_acked.show(0),
        h_arr.outstanding.show(0),
        arr.mbit,
        arr.delay_ms.show(0),
        scaled(h_arr.a_rwnd, KB_PER_BYTE),
    );
}
