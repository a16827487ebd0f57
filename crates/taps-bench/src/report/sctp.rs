//! The SCTP-against-TCP table: one bulk flow through taps, each protocol.

use std::fmt::Write;

use crate::experiments::PATH_1500;
use crate::Results;

/// Writes the table (nothing when the comparison did not run).
pub(super) fn sctp_speed_section(s: &mut String, r: &Results) {
    if r.sctp_speed.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "### SCTP against TCP, one bulk flow\n\n\
         One flow through taps to a taps listener sends the bytes, over TCP and over SCTP \
         (usrsctp over UDP, path-MTU packets: 64 KiB on loopback) in alternating trials; \
         throughput is bytes over the transfer's wall time, CPU is sender + receiver. \
         Ratios are medians of per-repetition ratios. The {PATH_1500} (`taps-bench lab`, \
         root) is the loopback of a network namespace with MTU 1500, both processes \
         inside: every SCTP packet carries at most 1,444 bytes of data (1,500-byte IP \
         packets: IP, UDP, SCTP and DATA headers) and usrsctp builds, checksums and \
         acknowledges each itself, while TCP keeps its segmentation offload (64 KiB through \
         the stack at both ends, as on a veth pair; a NIC's receiver would still take \
         1,500-byte frames, so this path flatters TCP).\n\n\
         | path | bytes | TCP ms | SCTP ms | TCP MB/s | SCTP MB/s | SCTP throughput × TCP | \
         TCP CPU ms | SCTP CPU ms | SCTP CPU per byte × TCP |\n\
         |---|---|---|---|---|---|---|---|---|---|"
    );
    for p in &r.sctp_speed {
        let mb = p.bytes as f64 / 1e6;
        let rate = |us: f64| mb / (us / 1e6);
        let _ = writeln!(
            s,
            "| {} | {:.0} MB | {:.1} | {:.1} | {:.0} | {:.0} | {:.2} | {:.1} | {:.1} | {:.2} |",
            p.path,
            mb,
            p.tcp.elapsed_us.median / 1e3,
            p.sctp.elapsed_us.median / 1e3,
            rate(p.tcp.elapsed_us.median),
            rate(p.sctp.elapsed_us.median),
            p.throughput_ratio,
            p.tcp.total_cpu_us.median / 1e3,
            p.sctp.total_cpu_us.median / 1e3,
            p.cpu_ratio,
        );
    }
    let _ = writeln!(s);
}
