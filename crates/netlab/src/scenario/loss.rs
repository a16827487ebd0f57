//! Transfers over a lossy path: 10 MiB (or the run's [`RunOptions::loss_transfer`]) over
//! TCP (`loss`) and over SCTP (`sctp-loss`, which also times TCP with CUBIC and with the
//! kernel default on the same path, the same size each) arrive complete and intact.
//!
//! [`RunOptions::loss_transfer`]: super::RunOptions::loss_transfer

#![forbid(unsafe_code)]

use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::checks::{protocol_names, show_connection};
use super::runner::{Ctx, Outcome};
use super::setup::tcp_to;
use crate::lab::{self, fqdn, Lab, SCTP_HOST, SCTP_UDP_PORT};
use crate::packet::Proto;
use crate::rules::{Match, Rule};
use crate::sctp_server::SCTP_ONLY;
use crate::taps::Connect;

/// Where the client namespace's default TCP congestion control is read and set.
const TCP_CC: &str = "/proc/sys/net/ipv4/tcp_congestion_control";

/// The client namespace's default TCP congestion control ("" if unreadable).
fn client_cc(lab: &Lab) -> String {
    lab.client()
        .run(|| std::fs::read_to_string(TCP_CC))
        .ok()
        .and_then(Result::ok)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Sets the TCP congestion control of the client's default routes (route attribute
/// `congctl`; `None` removes it, so the namespace default applies again). A route's
/// algorithm needs no `tcp_allowed_congestion_control` entry, unlike a namespace default.
fn set_route_cc(lab: &Lab, cc: Option<&str>) -> Result<(), String> {
    let routes = [
        ("0.0.0.0/0", lab::CLIENT_V4.to_string()),
        ("::/0", lab::CLIENT_V6.to_string()),
    ];
    for (net, src) in &routes {
        let mut args = vec!["route", "change", net, "dev", lab::TUN_NAME, "src", src];
        if let Some(cc) = cc {
            args.extend(["congctl", cc]);
        }
        lab.client()
            .ip(&args)
            .map_err(|e| format!("setting the congestion control of route {net}: {e}"))?;
    }
    Ok(())
}

pub(super) fn loss(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    out.say(format!("  client congestion control: {}", client_cc(lab)));
    transfer_over_loss(lab, ctx, out, tcp_to("rd"), "TCP", Proto::Tcp).map(|_| ())
}

/// The transfer over SCTP, then over TCP with CUBIC (a loss-based congestion control, like
/// every one usrsctp offers) and over TCP with the kernel's default (BBR on the
/// development machines, which does not slow down for random loss); all three times
/// reported side by side. Figures: `sctp_s`, `tcp_cubic_s`, `tcp_default_s` (seconds);
/// label `default_cc`.
pub(super) fn sctp_loss(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    out.say(format!(
        "  SCTP only, to the SCTP server on {} (UDP port {SCTP_UDP_PORT}); usrsctp's congestion control",
        fqdn(SCTP_HOST)
    ));
    let mut c = Connect::new(fqdn(SCTP_HOST));
    c.props = Some(SCTP_ONLY.to_string());
    let sctp = transfer_over_loss(lab, ctx, out, c, "SCTP", Proto::Sctp)?;
    let default_cc = client_cc(lab);
    out.say("  the same over TCP with CUBIC (the client's routes: congctl cubic)");
    set_route_cc(lab, Some("cubic"))?;
    let cubic = transfer_over_loss(lab, ctx, out, tcp_to("rd"), "TCP", Proto::Tcp);
    set_route_cc(lab, None)?;
    let cubic = cubic?;
    out.say(format!(
        "  the same over TCP with the kernel default ({default_cc})"
    ));
    let default = transfer_over_loss(lab, ctx, out, tcp_to("rd"), "TCP", Proto::Tcp)?;
    let secs = |d: Duration| d.as_secs_f64();
    out.figure("sctp_s", secs(sctp));
    out.figure("tcp_cubic_s", secs(cubic));
    out.figure("tcp_default_s", secs(default));
    out.label("default_cc", default_cc.clone());
    out.say(format!(
        "  {} at 2% loss, 100 ms RTT: SCTP {:.1} s; TCP CUBIC {:.1} s (SCTP {:.2}x); TCP {default_cc} (kernel default) {:.1} s (SCTP {:.2}x)",
        size_text(ctx.loss_transfer),
        secs(sctp),
        secs(cubic),
        secs(sctp) / secs(cubic).max(1e-9),
        secs(default),
        secs(sctp) / secs(default).max(1e-9),
    ));
    Ok(())
}

/// "10 MiB" for a whole number of MiB, else the bytes.
fn size_text(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// 2% loss each way and a 100 ms RTT to every zone address; `c` sends the run's loss
/// transfer size (10 MiB unless set); checks it
/// connected over `stack`, sent everything, and the server (`protocol`) got every byte
/// right and saw a clean close. Returns how long the transfer took.
fn transfer_over_loss(
    lab: &Lab,
    ctx: &Ctx,
    out: &mut Outcome,
    mut c: Connect,
    stack: &str,
    protocol: Proto,
) -> Result<Duration, String> {
    let size = ctx.loss_transfer;
    let rtt = Duration::from_millis(100);
    let (n4, l4) = lab::ZONE_NET_V4;
    let (n6, l6) = lab::ZONE_NET_V6;
    lab.set_rules(vec![
        Rule::new(Match::net(IpAddr::V4(n4), l4))
            .rtt(rtt)
            .loss(0.02),
        Rule::new(Match::net(IpAddr::V6(n6), l6))
            .rtt(rtt)
            .loss(0.02),
    ]);
    out.say("  rules: RTT 100 ms and 2% loss in each direction to every zone address");
    lab.sink().clear();
    c.send_bytes = Some(size);
    c.limit = Duration::from_secs(360);
    let started = Instant::now();
    let r = ctx.connect(lab, c)?;
    let took = started.elapsed();
    show_connection(out, "#1", &r);
    let f = r.flow();
    out.check(
        f.winner.is_some() && f.error.is_none() && r.exit_code == Some(0),
        format!(
            "#1 connected and finished cleanly (exit code {:?})",
            r.exit_code
        ),
    );
    let won = f.winner.as_ref().map_or("none", |w| w.stack.as_str());
    out.check(
        won == stack,
        format!("#1 connected over {stack} (got {won})"),
    );
    out.check(
        f.bytes_sent == size,
        format!("#1 taps sent {} bytes (expected {size})", f.bytes_sent),
    );
    let recs = lab.sink().wait_for(1, Duration::from_secs(5));
    let got: u64 = recs.iter().map(|s| s.bytes).sum();
    let bad: u64 = recs.iter().map(|s| s.mismatched).sum();
    out.say(format!(
        "  transfer: {got} bytes in {:.1} s ({:.0} kB/s)",
        took.as_secs_f64(),
        got as f64 / took.as_secs_f64() / 1e3
    ));
    out.check(
        recs.len() == 1
            && got == size
            && bad == 0
            && recs.iter().all(|s| s.clean_close && s.protocol == protocol),
        format!(
            "server received {got} bytes over {} on {} connection(s), {bad} wrong, closed cleanly (expected {size} over {stack}, 0 wrong)",
            protocol_names(&recs),
            recs.len()
        ),
    );
    let st = lab.stats();
    out.check(
        st.to_server.lost > 0 && st.to_client.lost > 0,
        format!(
            "the bridge dropped packets in both directions ({} to server, {} to client)",
            st.to_server.lost, st.to_client.lost
        ),
    );
    Ok(took)
}
