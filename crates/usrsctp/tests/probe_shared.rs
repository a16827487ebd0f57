//! The port probes of many attempts at once share one socket per family
//! (`SctpOptions::probe_port`): each still gets its own answer. A process of its own, so
//! the other probe test's socket counts stay exact.
//!
//! Not covered here: errors that arrive after their probe looked (ICMP from another host,
//! a round trip late), which the next probe drops before it sends; on loopback every
//! answer comes inside the send.

use usrsctp::{Error, SctpOptions, SctpStack};

/// A UDP port on `ip` that nothing listens on, or `None` if `ip` cannot be bound here.
fn dead_port_on(ip: &str) -> Option<std::net::SocketAddr> {
    let s = std::net::UdpSocket::bind(format!("{ip}:0")).ok()?;
    s.local_addr().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_running_at_once_each_get_their_own_answer() {
    let stack = SctpStack::global();
    let probed = SctpOptions {
        probe_port: true,
        ..SctpOptions::default()
    };
    let listener = stack
        .listen(
            "127.0.0.1:0".parse().unwrap(),
            5006,
            &SctpOptions::default(),
        )
        .unwrap();
    let live = listener.local_addr();
    let mut dead: Vec<std::net::SocketAddr> =
        (0..4).map(|_| dead_port_on("127.0.0.1").unwrap()).collect();
    match dead_port_on("[::1]") {
        Some(v6) => {
            dead.push(v6);
            // An IPv4 port written as an IPv4-mapped IPv6 address: probed from the IPv6
            // socket, refused by ICMP (not ICMPv6).
            let v4 = dead_port_on("127.0.0.1").unwrap();
            dead.push(std::net::SocketAddr::new(
                std::net::IpAddr::V6(std::net::Ipv4Addr::LOCALHOST.to_ipv6_mapped()),
                v4.port(),
            ));
        }
        None => println!("skipped the IPv6 part: ::1 cannot be bound here"),
    }
    // Threads of their own, so probes of the shared socket really overlap.
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let dead = dead.clone();
            let probed = probed.clone();
            let handle = tokio::runtime::Handle::current();
            std::thread::spawn(move || {
                let _rt = handle.enter();
                let mut live_ok = 0;
                for i in 0..50 {
                    if (i + t) % 3 == 0 {
                        // A live port is never taken for a refused one.
                        let c = stack.connect(live, 5006, &probed);
                        assert!(c.is_ok(), "live port refused: {:?}", c.map(|_| ()));
                        live_ok += 1;
                    } else {
                        let to = dead[(i + t) % dead.len()];
                        let r = stack.connect(to, 5006, &probed);
                        assert!(
                            matches!(r, Err(Error::Refused(a)) if a == to),
                            "{to}: {:?}",
                            r.map(|_| ())
                        );
                    }
                }
                live_ok
            })
        })
        .collect();
    let mut live_ok = 0;
    for t in threads {
        live_ok += t.join().unwrap();
    }
    assert!(live_ok > 100, "{live_ok}");
    drop(listener);
}
