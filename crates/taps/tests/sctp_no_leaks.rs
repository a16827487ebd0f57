//! The SCTP attempt a TCP winner cancels leaves no usrsctp socket, conn address or UDP
//! socket behind. In its own test binary: usrsctp's socket count is per process, and
//! other tests' associations would blur it.

mod common;
use common::{sctp_context, sctp_then_tcp};
use std::net::UdpSocket as StdUdp;
use std::time::Duration;

use taps::taps_core::properties::Protocol;
use taps::taps_core::race::AttemptOutcome;
use taps::{Preconnection, RemoteEndpoint};
use usrsctp::SctpStack;

#[tokio::test]
async fn tcp_only_server_tcp_wins_and_the_sctp_attempt_leaves_nothing() {
    let ctx = sctp_context(false);
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = tcp.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        while let Ok((s, _)) = tcp.accept().await {
            drop(s);
        }
    });
    // Something silent on the UDP encapsulation port: the SCTP INIT gets no answer (and
    // no ICMP), so the SCTP attempt is still pending when TCP wins.
    let silent = StdUdp::bind(("127.0.0.1", ctx.sctp_udp_port())).unwrap();
    let before = SctpStack::global().live_sockets();
    let props = sctp_then_tcp()
        .attempt_delay(Duration::from_millis(30))
        .compile()
        .unwrap();
    let pre = Preconnection::new(&ctx, props)
        .race_timeline(true)
        .remote(RemoteEndpoint::new("127.0.0.1", port));
    let c = pre.initiate().await.unwrap();
    let report = c.info().race.clone().unwrap();
    assert_eq!(c.info().stack.protocol, Protocol::Tcp, "{}", report.trace());
    let sctp = &report.attempts[0];
    assert_eq!(sctp.candidate.stack.protocol, Protocol::Sctp);
    assert_eq!(
        sctp.outcome,
        AttemptOutcome::Cancelled,
        "{}",
        report.trace()
    );
    // The cancelled association's usrsctp socket, conn address and UDP socket are gone.
    let mut left = SctpStack::global().live_sockets();
    for _ in 0..50 {
        if left <= before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        left = SctpStack::global().live_sockets();
    }
    assert!(
        left <= before,
        "{left} usrsctp resources alive, {before} before"
    );
    drop(silent);
    server.abort();
}
