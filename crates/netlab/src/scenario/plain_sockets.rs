//! The lab itself, checked with plain sockets and no taps (`probe`): delay, blackhole,
//! DNS answers and their delay, rate limit and loss.

#![forbid(unsafe_code)]

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::checks::millis_f64;
use super::runner::{Ctx, Outcome};
use crate::dns::RecordType;
use crate::lab::{addresses, fqdn, Lab, SERVICE_PORT};
use crate::probe;
use crate::rules::{Direction, Match, Rule};

/// How many bytes the rate-limit and loss probes send.
const SIZE: u64 = 2_000_000;

pub(super) fn probe(lab: &Lab, _ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let rd = addresses("rd");
    let (rd6, rd4) = (rd[0].addr, rd[1].addr);
    delay_sets_connect_time(lab, out, rd4, rd6)?;
    dead_address_times_out(lab, out);
    dns_answers_with_delay(lab, out)?;
    rate_limit_holds(lab, out, rd4)?;
    loss_keeps_bytes_intact(lab, out, rd6)
}

fn io_error(e: std::io::Error) -> String {
    e.to_string()
}

/// 50 ms each way to rd's addresses: a plain TCP connect takes one round trip of the
/// delay (100 ms) and less than two, five times over each family. The upper bound tells
/// the delay applied once each way from applied twice (or a SYN retransmitted, after a
/// second); what a busy machine adds to the bridge's forwarding stays far below it.
fn delay_sets_connect_time(
    lab: &Lab,
    out: &mut Outcome,
    rd4: IpAddr,
    rd6: IpAddr,
) -> Result<(), String> {
    let one_way = Duration::from_millis(50);
    lab.set_rules(vec![
        Rule::new(Match::host(rd4)).delay(one_way),
        Rule::new(Match::host(rd6)).delay(one_way),
    ]);
    out.say("  rules: 50 ms each way to rd's addresses");
    for ip in [rd4, rd6] {
        let addr = SocketAddr::new(ip, SERVICE_PORT);
        let mut times = Vec::new();
        for _ in 0..5 {
            times.push(
                probe::tcp_connect_time(lab.client(), addr, Duration::from_secs(2))
                    .map_err(io_error)?,
            );
        }
        let list: Vec<String> = times
            .iter()
            .map(|t| format!("{:.1}", millis_f64(*t)))
            .collect();
        out.say(format!("  TCP connect to {addr}: {} ms", list.join(", ")));
        let rtt = 2 * one_way;
        out.check(
            times.iter().all(|t| *t >= rtt && *t < 2 * rtt),
            format!(
                "TCP connect to {addr} took one round trip of the delay each time ({} ms \
                 up to, not including, {} ms; 50 ms each way)",
                rtt.as_millis(),
                (2 * rtt).as_millis()
            ),
        );
    }
    Ok(())
}

/// A dead (blackholed) address gives no answer at all: the connect times out.
fn dead_address_times_out(lab: &Lab, out: &mut Outcome) {
    let dead = SocketAddr::new(addresses("rx")[0].addr, SERVICE_PORT);
    let r = probe::tcp_connect_time(lab.client(), dead, Duration::from_millis(300));
    out.check(
        matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::TimedOut),
        format!("TCP connect to dead {dead} gets no answer (times out after 300 ms): {r:?}"),
    );
}

/// DNS answers, and its per-type delay.
fn dns_answers_with_delay(lab: &Lab, out: &mut Outcome) -> Result<(), String> {
    let dns = lab.dns_addr();
    let (t, n) = probe::dns_query(lab.client(), dns, &fqdn("rxz4"), 1, Duration::from_secs(2))
        .map_err(io_error)?;
    out.check(
        n == 2,
        format!(
            "DNS A rxz4 answered {n} records in {:.1} ms (expected 2)",
            millis_f64(t)
        ),
    );
    let delay = Duration::from_millis(300);
    lab.dns().set_delay(RecordType::AAAA, delay);
    let q = probe::dns_query(lab.client(), dns, &fqdn("rxxx"), 28, Duration::from_secs(2));
    lab.dns().clear_delays();
    let (t, n) = q.map_err(io_error)?;
    // At least the delay, and less than twice it (the delay applied once, not twice).
    out.check(
        n == 3 && t >= delay && t < 2 * delay,
        format!("DNS AAAA rxxx with a 300 ms delay answered {n} records in {:.1} ms (expected 3, 300..600 ms)", millis_f64(t)),
    );
    Ok(())
}

/// Rate limit: 2 MB at 16 Mbit/s takes a second at least, and less than two (the limit
/// applied, not half of it).
fn rate_limit_holds(lab: &Lab, out: &mut Outcome, rd4: IpAddr) -> Result<(), String> {
    lab.set_rules(vec![Rule::new(
        Match::host(rd4).tcp().direction(Direction::ToServer),
    )
    .rate(16_000_000)]);
    lab.sink().clear();
    let t = probe::tcp_send_time(
        lab.client(),
        SocketAddr::new(rd4, SERVICE_PORT),
        SIZE,
        Duration::from_secs(10),
    )
    .map_err(io_error)?;
    let recs = lab.sink().wait_for(1, Duration::from_secs(2));
    let got: u64 = recs.iter().map(|r| r.bytes).sum();
    out.check(
        got == SIZE && t >= Duration::from_millis(1000) && t < Duration::from_millis(2000),
        format!("2 MB over a 16 Mbit/s limit took {:.0} ms (expected 1000..2000), server got {got} bytes", millis_f64(t)),
    );
    Ok(())
}

/// Loss: 5% each way, no delay; 2 MB still arrives intact.
fn loss_keeps_bytes_intact(lab: &Lab, out: &mut Outcome, rd6: IpAddr) -> Result<(), String> {
    lab.set_rules(vec![Rule::new(Match::host(rd6)).loss(0.05)]);
    lab.sink().clear();
    let before = lab.stats();
    let t = probe::tcp_send_time(
        lab.client(),
        SocketAddr::new(rd6, SERVICE_PORT),
        SIZE,
        Duration::from_secs(30),
    )
    .map_err(io_error)?;
    let recs = lab.sink().wait_for(1, Duration::from_secs(2));
    let got: u64 = recs.iter().map(|r| r.bytes).sum();
    let bad: u64 = recs.iter().map(|r| r.mismatched).sum();
    let lost = lab.stats().to_server.lost - before.to_server.lost;
    out.check(
        got == SIZE && bad == 0 && lost > 0,
        format!("2 MB over 5% loss arrived intact in {:.0} ms ({got} bytes, {bad} wrong, {lost} packets dropped)", millis_f64(t)),
    );
    Ok(())
}
