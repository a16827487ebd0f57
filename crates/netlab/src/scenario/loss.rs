//! Transfers over a lossy path: 10 MB over TCP (`loss`) and over SCTP (`sctp-loss`)
//! arrive complete and intact.

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

pub(super) fn loss(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let cc = lab
        .client()
        .run(|| std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control"))
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    out.say(format!("  client congestion control: {}", cc.trim()));
    transfer_over_loss(lab, ctx, out, tcp_to("rd"), "TCP", Proto::Tcp)
}

pub(super) fn sctp_loss(lab: &Lab, ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    out.say(format!(
        "  SCTP only, to the SCTP server on {} (UDP port {SCTP_UDP_PORT}); usrsctp's congestion control",
        fqdn(SCTP_HOST)
    ));
    let mut c = Connect::new(fqdn(SCTP_HOST));
    c.props = Some(SCTP_ONLY.to_string());
    transfer_over_loss(lab, ctx, out, c, "SCTP", Proto::Sctp)
}

/// 2% loss each way and a 100 ms RTT to every zone address; `c` sends 10 MB; checks it
/// connected over `stack`, sent everything, and the server (`protocol`) got every byte
/// right and saw a clean close.
fn transfer_over_loss(
    lab: &Lab,
    ctx: &Ctx,
    out: &mut Outcome,
    mut c: Connect,
    stack: &str,
    protocol: Proto,
) -> Result<(), String> {
    const SIZE: u64 = 10 * 1024 * 1024;
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
    c.send_bytes = Some(SIZE);
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
        f.bytes_sent == SIZE,
        format!("#1 taps sent {} bytes (expected {SIZE})", f.bytes_sent),
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
            && got == SIZE
            && bad == 0
            && recs.iter().all(|s| s.clean_close && s.protocol == protocol),
        format!(
            "server received {got} bytes over {} on {} connection(s), {bad} wrong, closed cleanly (expected {SIZE} over {stack}, 0 wrong)",
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
    Ok(())
}
