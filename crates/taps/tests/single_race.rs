//! A race to an address literal that gives one candidate runs the one race driver, as
//! every race does, whether or not a subscriber listens: logging changes what is said,
//! not what runs. Each case here runs both ways, over real sockets, and compares what
//! the application sees.

use std::net::{SocketAddr, TcpListener as StdListener};
use std::process::Command;
use std::time::Duration;

use taps::taps_core::properties::Protocol;
use taps::taps_core::race::{AttemptId, AttemptOutcome, DnsSource};
use taps::taps_core::Family;
use taps::{AttemptCause, Context, Preconnection, Preference, RemoteEndpoint, TransportProperties};
use taps_testkit::Blackhole;

/// Whether a subscriber listens while the race runs.
#[derive(Clone, Copy, Debug)]
enum Way {
    /// No subscriber: spans and events are not built.
    Quiet,
    /// A subscriber listens at every level (and discards what it hears).
    Logged,
}

const BOTH: [Way; 2] = [Way::Quiet, Way::Logged];

/// While alive, this thread's events go to a subscriber that takes every level and
/// writes nowhere (a test's runtime is this thread's).
fn listening(way: Way) -> Option<tracing::subscriber::DefaultGuard> {
    match way {
        Way::Quiet => None,
        Way::Logged => {
            let sub = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_writer(std::io::sink)
                .finish();
            Some(tracing::subscriber::set_default(sub))
        }
    }
}

fn tcp_to(ctx: &Context, remote: SocketAddr) -> Preconnection {
    let props = TransportProperties::new()
        .protocols(Preference::Require, [Protocol::Tcp])
        .compile()
        .unwrap();
    Preconnection::new(ctx, props).remote(RemoteEndpoint::addr(remote))
}

/// An error's text with its numbers (times) taken out.
fn without_numbers(text: &str) -> String {
    text.chars().filter(|c| !c.is_ascii_digit()).collect()
}

#[tokio::test]
async fn a_connection_reports_and_is_learned_alike() {
    let server = StdListener::bind("127.0.0.1:0").unwrap();
    let remote = server.local_addr().unwrap();
    for way in BOTH {
        let _log = listening(way);
        let ctx = Context::builder().build().unwrap();
        let conn = tcp_to(&ctx, remote).initiate().await.unwrap();
        let report = conn.info().race.as_ref().expect("a race report");
        assert_eq!(report.winner, Some(AttemptId(1)), "{way:?}");
        assert_eq!(report.attempts.len(), 1, "{way:?}: {report:?}");
        let a = &report.attempts[0];
        assert_eq!(a.outcome, AttemptOutcome::Won, "{way:?}");
        assert_eq!(a.candidate.remote, remote, "{way:?}");
        assert!(a.end.is_some() && a.ended_at.is_some(), "{way:?}: {a:?}");
        assert!(report.total.is_some(), "{way:?}");
        assert_eq!(report.dns.len(), 1, "{way:?}: {report:?}");
        let dns = &report.dns[0];
        assert_eq!(
            (dns.family, &dns.result, dns.source),
            (Family::V4, &Ok(1), DnsSource::Answer),
            "{way:?}"
        );
        assert!(
            report.timeline.is_empty() && report.service.is_none(),
            "{way:?}"
        );
        // The CIB learned the success, as after any race.
        let learned: Vec<_> = ctx
            .cib_outcomes()
            .into_iter()
            .map(|(k, o)| (k.remote, o.last, o.rtt_samples.len()))
            .collect();
        assert_eq!(learned, [(remote, Ok(()), 1)], "{way:?}");
    }
}

#[tokio::test]
async fn a_refusal_fails_alike() {
    let closed = {
        let l = StdListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut texts = Vec::new();
    for way in BOTH {
        let _log = listening(way);
        let ctx = Context::builder().build().unwrap();
        let err = tcp_to(&ctx, closed).initiate().await.unwrap_err();
        assert_eq!(
            err.attempt_causes(),
            [AttemptCause::Refused],
            "{way:?}: {err}"
        );
        let race = err.race().expect("a race error");
        assert_eq!(race.report().attempts.len(), 1, "{way:?}");
        assert!(ctx
            .cib_outcomes()
            .iter()
            .any(|(_, o)| o.last == Err(AttemptCause::Refused)));
        texts.push(without_numbers(&err.to_string()));
    }
    assert_eq!(texts[0], texts[1]);
}

/// In virtual time: the establishment timeout cuts a silent attempt off at 30 s, both
/// ways, with the same cause and words.
#[tokio::test(start_paused = true)]
async fn a_silent_address_times_out_alike() {
    let dead = Blackhole::v6().unwrap();
    let mut texts = Vec::new();
    for way in BOTH {
        let _log = listening(way);
        let ctx = Context::builder().build().unwrap();
        let begun = tokio::time::Instant::now();
        let err = tcp_to(&ctx, dead.addr()).initiate().await.unwrap_err();
        assert_eq!(begun.elapsed(), Duration::from_secs(30), "{way:?}: {err}");
        assert_eq!(
            err.attempt_causes(),
            [AttemptCause::TimedOut {
                after: Some(Duration::from_secs(30))
            }],
            "{way:?}: {err}"
        );
        texts.push(err.to_string());
    }
    assert_eq!(texts[0], texts[1]);
}

/// Runs `ip ARGS` in the calling thread's network namespace.
fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {args:?}: {status}");
}

/// In a private network namespace: an attempt to an address on a link whose packets go
/// nowhere (one end of a veth pair, the other silent) fails as unreachable as soon as that link goes down (the context's interface
/// watcher), not at the establishment timeout, both ways.
#[test]
fn an_attempt_whose_link_goes_down_fails_at_once() {
    let outcome = std::thread::spawn(|| {
        // SAFETY: unshare(2) with CLONE_NEWNET moves only this thread.
        #[allow(unsafe_code)]
        let unshared = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        if unshared != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        let made = Command::new("ip")
            .args(["link", "add", "d0", "type", "veth", "peer", "name", "d1"])
            .status()
            .map_err(|e| e.to_string())?;
        if !made.success() {
            return Err("no veth links here".into());
        }
        // The runtime, the watcher's socket and the attempts stay on this thread.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        for way in BOTH {
            ip(&["link", "set", "lo", "up"]);
            ip(&["addr", "replace", "192.0.2.2/24", "dev", "d0"]);
            ip(&["link", "set", "d1", "up"]);
            ip(&["link", "set", "d0", "up"]);
            ip(&[
                "neigh",
                "replace",
                "192.0.2.9",
                "lladdr",
                "02:00:00:00:00:09",
                "dev",
                "d0",
            ]);
            rt.block_on(async {
                let _log = listening(way);
                let ctx = Context::builder().build().unwrap();
                // The far end of the veth pair has no address and the remote's neighbour
                // entry names a MAC nobody has: the SYN goes nowhere (and no ARP
                // timeout fails the attempt on its own).
                let remote: SocketAddr = "192.0.2.9:80".parse().unwrap();
                let begun = std::time::Instant::now();
                let pre = tcp_to(&ctx, remote);
                let down = async {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    ip(&["link", "set", "d0", "down"]);
                };
                let race = tokio::time::timeout(Duration::from_secs(10), pre.initiate());
                let (result, ()) = tokio::join!(race, down);
                let err = result
                    .expect("failed before the establishment timeout")
                    .unwrap_err();
                assert_eq!(
                    err.attempt_causes(),
                    [AttemptCause::Unreachable],
                    "{way:?}: {err}"
                );
                assert!(
                    begun.elapsed() < Duration::from_secs(5),
                    "{way:?}: {:?}",
                    begun.elapsed()
                );
            });
        }
        Ok(())
    })
    .join()
    .expect("the namespace thread does not panic");
    if let Err(e) = outcome {
        taps_testkit::skip(
            "an_attempt_whose_link_goes_down_fails_at_once",
            &format!("cannot make a network namespace with a veth pair here ({e})"),
        );
    }
}
