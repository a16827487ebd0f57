//! Without libusrsctp (here `TAPS_USRSCTP_LIB` names a file that does not exist, set
//! before SCTP is first used): a plan that would run SCTP marks it unavailable with a
//! reason that says what to install, the race skips it (reported, never started) and connects over TCP,
//! and requiring SCTP fails at once with that reason. A process of its own (the library
//! is loaded, or not, once per process).

use taps::taps_core::properties::Protocol;
use taps::taps_core::race::AttemptOutcome;
use taps::taps_core::{Stack, Unavailable};
use taps::{Context, Preconnection, Preference, RemoteEndpoint, TransportProperties};
use tokio::net::TcpListener;

#[tokio::test]
async fn sctp_is_unavailable_and_the_race_connects_over_tcp() {
    // The only test of this process, so no other thread reads the environment meanwhile.
    std::env::set_var("TAPS_USRSCTP_LIB", "/nonexistent/taps-test/libusrsctp.so.2");
    let ctx = Context::builder().build().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accept = tokio::spawn(async move { listener.accept().await.map(|_| ()) });

    // Reliable and ordered: TCP and SCTP both qualify.
    let pre = Preconnection::new(&ctx, TransportProperties::new().compile().unwrap())
        .remote(RemoteEndpoint::new("127.0.0.1", port));
    let plan = pre.plan().unwrap();
    let sctp = plan
        .stacks()
        .iter()
        .find(|s| s.stack == Stack::plain(Protocol::Sctp))
        .expect("SCTP is planned");
    assert_eq!(sctp.unavailable, Some(Unavailable::SctpLibraryMissing));

    let conn = pre.initiate().await.unwrap();
    let info = conn.info();
    assert_eq!(info.stack.protocol, Protocol::Tcp);
    let report = info.race.as_ref().unwrap();
    // SCTP's candidate is reported as skipped, with the reason; only TCP was started.
    for a in &report.attempts {
        match a.candidate.stack.protocol {
            Protocol::Tcp => {}
            Protocol::Sctp => assert!(
                matches!(
                    a.outcome,
                    AttemptOutcome::Skipped(Unavailable::SctpLibraryMissing)
                ),
                "{report:?}"
            ),
            other => panic!("unexpected {other:?} attempt: {report:?}"),
        }
    }
    accept.await.unwrap().unwrap();

    // Requiring SCTP: an error that says why, at once.
    let sctp_only = TransportProperties::new().protocols(Preference::Require, [Protocol::Sctp]);
    let pre = Preconnection::new(&ctx, sctp_only.compile().unwrap())
        .remote(RemoteEndpoint::new("127.0.0.1", port));
    let err = pre.initiate().await.unwrap_err().to_string();
    assert!(err.contains("libusrsctp cannot be loaded"), "{err}");
}
