use super::pattern::PATTERN_PERIOD;
use super::*;

/// A flow that begins waiting for its peer after `after` and never ends.
fn waits_forever(
    waiting: &Waiting,
    after: Duration,
) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
    Box::pin(async move {
        tokio::time::sleep(after).await;
        let _w = waiting.begin();
        std::future::pending::<()>().await;
    })
}

#[tokio::test(start_paused = true)]
async fn the_run_gives_up_once_every_flow_has_waited_the_drain_timeout() {
    let waiting = Waiting::new();
    let t0 = tokio::time::Instant::now();
    // One flow waits from the start, the other sends for 15 s first: the run ends
    // DRAIN_TIMEOUT after the second began waiting, not after the first.
    let running: FuturesUnordered<_> = [Duration::ZERO, Duration::from_secs(15)]
        .into_iter()
        .map(|after| waits_forever(&waiting, after))
        .collect();
    run_flows(running, &waiting).await;
    assert_eq!(t0.elapsed(), Duration::from_secs(15) + DRAIN_TIMEOUT);
    assert_eq!(
        waiting.count.load(Ordering::Relaxed),
        0,
        "the flows were dropped"
    );
}

#[tokio::test(start_paused = true)]
async fn the_run_ends_when_its_flows_do() {
    let waiting = Waiting::new();
    let t0 = tokio::time::Instant::now();
    let running: FuturesUnordered<_> = (1..=3)
        .map(|s| {
            let waiting = &waiting;
            async move {
                let _w = waiting.begin();
                tokio::time::sleep(Duration::from_secs(s)).await;
            }
        })
        .collect();
    run_flows(running, &waiting).await;
    assert_eq!(t0.elapsed(), Duration::from_secs(3));
}

#[test]
fn every_chunk_starts_at_phase_zero() {
    assert_eq!(PATTERN_CHUNK % PATTERN_PERIOD, 0);
    const { assert!(PATTERN_CHUNK <= 256 * 1024) };
    let c = send_pattern(PATTERN_CHUNK);
    assert_eq!(
        (c[0], c[250], c[251], c[PATTERN_CHUNK - 1]),
        (0, 250, 0, 250)
    );
}

#[test]
fn the_connected_line_reads_as_the_formatter_writes_it() {
    use taps::taps_core::properties::Protocol;
    use taps::taps_core::Stack;
    let addrs: [std::net::SocketAddr; 4] = [
        "127.0.0.1:45894".parse().unwrap(),
        "0.0.0.0:0".parse().unwrap(),
        "255.255.255.255:65535".parse().unwrap(),
        "[2001:db8::1]:443".parse().unwrap(),
    ];
    let tooks =
        [0, 1, 499, 500, 146_499, 146_500, 999_999, 12_345_678_901].map(Duration::from_nanos);
    for (stack, flow) in [
        (Stack::plain(Protocol::Tcp), None),
        (Stack::plain(Protocol::Sctp), Some(1024)),
    ] {
        for local in &addrs {
            for remote in &addrs {
                for took in tooks {
                    let mut fast = Vec::new();
                    write_connected(&mut fast, flow, &stack, local, remote, took).unwrap();
                    let prefix = flow.map_or(String::new(), |n| format!("flow {n}: "));
                    let slow = format!(
                        "{prefix}connected: {stack} {local} -> {remote} in {:.3} ms\n",
                        millis_f64(took)
                    );
                    assert_eq!(String::from_utf8(fast).unwrap(), slow);
                }
            }
        }
    }
}
