//! The report's section of the whole-process comparison: the `taps` command against a
//! C epoll client.

#![forbid(unsafe_code)]

use std::fmt::Write;

use crate::experiments::{pairwise, Summary, TAPS_PROPS, TOKIO_CLIENT};
use crate::measure::ratio;
use crate::Results;

/// A summary of µs as `median (min–max)` in ms.
fn ms(s: &Summary) -> String {
    format!(
        "{:.1} ({:.1}–{:.1})",
        s.median / 1e3,
        s.min / 1e3,
        s.max / 1e3
    )
}

/// The section: what was run and how, and the table.
pub(super) fn cli_section(s: &mut String, r: &Results) {
    let reps = r
        .connect_cli
        .first()
        .map_or(0, |p| p.taps.cpu_us.samples.len());
    let _ = writeln!(
        s,
        "## 7. The `taps` command, whole process, against a C epoll client\n\n\
         `taps connect 127.0.0.1 P --flows N --send-bytes 1 --props '{TAPS_PROPS}'` \
         against a plain C client on one epoll loop doing the same work \
         (`crates/taps-bench/c/epoll_client.c`: N non-blocking TCP sockets with \
         TCP_NODELAY connect at once; each writes 1 byte, shuts down its sending side, \
         waits for the server's close and closes), each a process of its own, in an order that rotates every repetition \
         in every repetition, each run against a raw tokio sink server of its own (a fresh \
         server port: the TIME_WAIT sockets of earlier runs to one port made every connect \
         search longer for a local port, in every program). Whole-process CPU \
         (user + system, every thread) and peak RSS (`ru_maxrss`) come from `wait4` in a \
         small C runner (`c/rusage_run.c`: Linux carries a parent's RSS into a child's \
         `ru_maxrss` across exec, so the programs are forked from it rather than from the \
         orchestrator). Both print to /dev/null (taps a line per flow, C one summary \
         line). A third program, where built, runs in the same repetitions: the same work \
         written with plain tokio (`crates/taps-bench/src/bin/taps-tokio-client.rs`: the \
         command's current-thread runtime, a task per flow, `TcpStream::connect`, \
         TCP_NODELAY, 1 byte, shutdown, read to the end), the floor the runtime itself \
         puts under any tokio program, taps included. A run counts only if it exits 0 and the server saw exactly N flows \
         accepted, N closed and N bytes; anything else fails the phase. Medians over {reps} \
         repetitions (min–max); ratios are medians of per-repetition ratios.\n"
    );
    let _ = writeln!(
        s,
        "| flows | taps CPU ms | C CPU ms | ratio | taps user / sys ms | C user / sys ms | taps peak RSS MiB | C peak RSS MiB | taps − C MiB | server CPU taps/C | wall taps ms | wall C ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for p in &r.connect_cli {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.2} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} | {:.1} | {:+.2} | {:.2} | {:.1} | {:.1} |",
            p.flows,
            ms(&p.taps.cpu_us),
            ms(&p.c.cpu_us),
            p.cpu_ratio,
            p.taps.user_us.median / 1e3,
            p.taps.sys_us.median / 1e3,
            p.c.user_us.median / 1e3,
            p.c.sys_us.median / 1e3,
            p.taps.peak_rss_kib.median / 1024.0,
            p.c.peak_rss_kib.median / 1024.0,
            p.peak_rss_diff_kib / 1024.0,
            p.server_cpu_ratio,
            p.taps.wall_us.median / 1e3,
            p.c.wall_us.median / 1e3,
        );
    }
    tokio_table(s, r);
    s.push('\n');
}

/// The plain tokio client's table, where it was measured.
fn tokio_table(s: &mut String, r: &Results) {
    for p in r.connect_cli.iter().filter(|p| p.tokio.is_none()) {
        if let Some(why) = &p.tokio_problem {
            let _ = writeln!(
                s,
                "\nThe plain tokio client at {} flows: not measured ({why}).",
                p.flows
            );
        }
    }
    if r.connect_cli.iter().all(|p| p.tokio.is_none()) {
        if r.connect_cli.iter().all(|p| p.tokio_problem.is_none()) {
            let _ = writeln!(
                s,
                "\nThe plain tokio client was not measured (`{TOKIO_CLIENT}` was not built \
                 beside `taps-bench`)."
            );
        }
        return;
    }
    let _ = writeln!(
        s,
        "\nThe plain tokio client, same runs:\n\n\
         | flows | tokio CPU ms | tokio / C | taps / tokio | tokio peak RSS MiB | tokio − C MiB | taps − tokio MiB | server CPU tokio/C |\n\
         |---|---|---|---|---|---|---|---|"
    );
    for p in &r.connect_cli {
        let Some(k) = &p.tokio else { continue };
        let _ = writeln!(
            s,
            "| {} | {} | {:.2} | {:.2} | {:.1} | {:+.2} | {:+.2} | {:.2} |",
            p.flows,
            ms(&k.side.cpu_us),
            k.cpu_vs_c,
            k.taps_cpu_vs_tokio,
            k.side.peak_rss_kib.median / 1024.0,
            k.rss_over_c_kib / 1024.0,
            k.taps_rss_over_tokio_kib / 1024.0,
            pairwise(&k.side.server_cpu_us, &p.c.server_cpu_us, ratio),
        );
    }
}
