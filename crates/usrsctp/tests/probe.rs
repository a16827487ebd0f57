//! The port probe (`SctpOptions::probe_port`): to a UDP port where nothing listens on
//! this host, a probed connect is refused before any usrsctp socket exists; to a live
//! listener, the probe (a zero-length datagram) is dropped and the association comes up.
//! A process of its own: the test counts every usrsctp socket the process makes.

use std::time::Duration;

use tokio::time::timeout;
use usrsctp::{Error, SctpOptions, SctpStack};

const T: Duration = Duration::from_secs(10);

/// A UDP port on 127.0.0.1 that nothing listens on (bound, read, closed).
fn dead_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probed_connect_to_a_dead_port_makes_no_association_and_a_live_one_connects() {
    let stack = SctpStack::global();
    let probed = SctpOptions {
        probe_port: true,
        ..SctpOptions::default()
    };
    let dead = format!("127.0.0.1:{}", dead_port()).parse().unwrap();

    // Without the probe, the refusal is known only after the INIT: one socket made.
    let made = stack.sockets_made();
    let r = stack.connect(dead, 5004, &SctpOptions::default());
    assert!(matches!(r, Err(Error::Refused(_))), "{:?}", r.map(|_| ()));
    assert_eq!(stack.sockets_made(), made + 1);

    // With it: refused, and no usrsctp socket made.
    let made = stack.sockets_made();
    let r = stack.connect(dead, 5004, &probed);
    assert!(matches!(r, Err(Error::Refused(_))), "{:?}", r.map(|_| ()));
    assert_eq!(stack.sockets_made(), made, "the probe must come first");

    // A live listener drops the empty datagram; the association comes up and carries data.
    let listener = stack
        .listen(
            "127.0.0.1:0".parse().unwrap(),
            5005,
            &SctpOptions::default(),
        )
        .unwrap();
    let udp = listener.local_addr();
    let accept = tokio::spawn(async move { (timeout(T, listener.accept()).await, listener) });
    let assoc = timeout(T, stack.connect(udp, 5005, &probed).unwrap())
        .await
        .unwrap()
        .unwrap();
    let (acc, _listener) = accept.await.unwrap();
    let (server, _) = acc.unwrap().unwrap();
    assoc.send(0, b"x", true, 0).await.unwrap();
    let got = timeout(T, server.recv()).await.unwrap().unwrap().unwrap();
    assert_eq!(got.data, b"x");
    drop((assoc, server));
}
