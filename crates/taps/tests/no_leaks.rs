//! After each race, the process holds no socket of a losing attempt. This is its own
//! test binary (its own process) so that no other test's sockets disturb the count.

use std::net::TcpListener as StdListener;
use std::time::Duration;

use taps::taps_core::properties::Protocol;
use taps::taps_core::race::AttemptOutcome;
use taps::{Context, Preconnection, RemoteEndpoint, TransportProperties};
use taps_testkit::{open_sockets, Blackhole, DnsServer};

#[tokio::test]
async fn losers_leave_no_socket_behind() {
    let dns = DnsServer::start("test.", &[]);
    let ctx = Context::builder()
        .name_servers(vec![dns.addr()])
        .build()
        .unwrap();
    // ::1 never answers (full accept queue); 127.0.0.1 accepts.
    let v6 = Blackhole::v6().unwrap();
    let port = v6.addr().port();
    let v4 = StdListener::bind(("127.0.0.1", port)).unwrap();
    let props = TransportProperties::new()
        .protocols(taps::Preference::Require, [Protocol::Tcp])
        .attempt_delay(Duration::from_millis(50))
        .compile()
        .unwrap();
    let pre = Preconnection::new(&ctx, props).remote(RemoteEndpoint::new("localhost", port));
    let mut cancelled = 0;
    for round in 0..5 {
        let before = open_sockets();
        let conn = pre.initiate().await.unwrap();
        // Exactly one new socket: the winner. Any ::1 attempt is already closed.
        assert_eq!(open_sockets(), before + 1, "round {round}");
        let report = conn.info().race.clone().unwrap();
        cancelled += report
            .attempts
            .iter()
            .filter(|a| matches!(a.outcome, AttemptOutcome::Cancelled))
            .count();
        drop(conn);
        let _ = v4.accept().unwrap();
        assert_eq!(open_sockets(), before, "round {round}");
    }
    // The first race had a live ::1 attempt that lost and was cancelled.
    assert!(cancelled >= 1, "no race cancelled a loser");
}
