//! The lab itself, checked with plain sockets and no taps (`probe`): delay, blackhole,
//! DNS answers and their delay, rate limit and loss.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::time::Duration;

use super::checks::ms;
use super::runner::{Ctx, Outcome};
use crate::dns::RecordType;
use crate::lab::{addresses, fqdn, Lab, SERVICE_PORT};
use crate::probe;
use crate::rules::{Direction, Match, Rule};

pub(super) fn probe(lab: &Lab, _ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let rd = addresses("rd");
    let (rd6, rd4) = (rd[0].addr, rd[1].addr);
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
                probe::tcp_connect_time(lab.client(), addr, Duration::from_secs(2)).map_err(io)?,
            );
        }
        let list: Vec<String> = times.iter().map(|t| format!("{:.1}", ms(*t))).collect();
        out.say(format!("  TCP connect to {addr}: {} ms", list.join(", ")));
        let (lo, hi) = (Duration::from_millis(100), Duration::from_millis(110));
        out.check(
            times.iter().all(|t| *t >= lo && *t <= hi),
            format!("TCP connect to {addr} took 100..110 ms each time (50 ms each way)"),
        );
    }

    // A dead (blackholed) address gives no answer at all: the connect times out.
    let dead = SocketAddr::new(addresses("rx")[0].addr, SERVICE_PORT);
    let r = probe::tcp_connect_time(lab.client(), dead, Duration::from_millis(300));
    out.check(
        matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::TimedOut),
        format!("TCP connect to dead {dead} gets no answer (times out after 300 ms): {r:?}"),
    );

    // DNS, and its per-type delay.
    let dns = lab.dns_addr();
    let (t, n) = probe::dns_query(lab.client(), dns, &fqdn("rxz4"), 1, Duration::from_secs(2))
        .map_err(io)?;
    out.check(
        n == 2,
        format!(
            "DNS A rxz4 answered {n} records in {:.1} ms (expected 2)",
            ms(t)
        ),
    );
    lab.dns()
        .set_delay(RecordType::AAAA, Duration::from_millis(300));
    let q = probe::dns_query(lab.client(), dns, &fqdn("rxxx"), 28, Duration::from_secs(2));
    lab.dns().clear_delays();
    let (t, n) = q.map_err(io)?;
    out.check(
        n == 3 && t >= Duration::from_millis(300) && t < Duration::from_millis(400),
        format!("DNS AAAA rxxx with a 300 ms delay answered {n} records in {:.1} ms (expected 3, 300..400 ms)", ms(t)),
    );

    // Rate limit: 2 MB at 16 Mbit/s takes about a second.
    lab.set_rules(vec![Rule::new(
        Match::host(rd4).tcp().direction(Direction::ToServer),
    )
    .rate(16_000_000)]);
    lab.sink().clear();
    let size = 2_000_000u64;
    let t = probe::tcp_send(
        lab.client(),
        SocketAddr::new(rd4, SERVICE_PORT),
        size,
        Duration::from_secs(10),
    )
    .map_err(io)?;
    let recs = lab.sink().wait_for(1, Duration::from_secs(2));
    let got: u64 = recs.iter().map(|r| r.bytes).sum();
    out.check(
        got == size && t >= Duration::from_millis(1000) && t <= Duration::from_millis(1400),
        format!("2 MB over a 16 Mbit/s limit took {:.0} ms (expected 1000..1400), server got {got} bytes", ms(t)),
    );

    // Loss: 5% each way, no delay; 2 MB still arrives intact.
    lab.set_rules(vec![Rule::new(Match::host(rd6)).loss(0.05)]);
    lab.sink().clear();
    let before = lab.stats();
    let t = probe::tcp_send(
        lab.client(),
        SocketAddr::new(rd6, SERVICE_PORT),
        size,
        Duration::from_secs(30),
    )
    .map_err(io)?;
    let recs = lab.sink().wait_for(1, Duration::from_secs(2));
    let got: u64 = recs.iter().map(|r| r.bytes).sum();
    let bad: u64 = recs.iter().map(|r| r.mismatched).sum();
    let lost = lab.stats().to_server.lost - before.to_server.lost;
    out.check(
        got == size && bad == 0 && lost > 0,
        format!("2 MB over 5% loss arrived intact in {:.0} ms ({got} bytes, {bad} wrong, {lost} packets dropped)", ms(t)),
    );
    Ok(())
}
