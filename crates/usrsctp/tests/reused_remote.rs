//! A listener hearing a new association from a UDP address an earlier association used
//! (a NAT, or the kernel handing a just-freed ephemeral port to the next client) while
//! that earlier association is still open on the server: the new one's handshake and
//! accept must not depend on when the server drops the old one.
//!
//! A relay in the middle gives every client the same UDP address at the server, and can
//! hold the client's packets to put the old association's end exactly inside the new
//! one's handshake.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::time::{sleep, timeout};
use usrsctp::{Association, SctpListener, SctpOptions, SctpStack};

const T: Duration = Duration::from_secs(10);

/// Forwards datagrams from its front (clients) to the server from one back socket, and
/// the server's answers to the client heard from last. After `pass` more client packets,
/// it holds the rest until `release`.
struct Relay {
    front: SocketAddr,
    /// Client packets still to forward before holding (`usize::MAX`: never hold).
    pass: Arc<AtomicUsize>,
    held: Arc<Mutex<Vec<Vec<u8>>>>,
    back: Arc<UdpSocket>,
}

impl Relay {
    async fn start(server: SocketAddr) -> Relay {
        let front = Arc::new(UdpSocket::bind("127.0.0.1:0").await.expect("front"));
        let back = Arc::new(UdpSocket::bind("127.0.0.1:0").await.expect("back"));
        back.connect(server).await.expect("connect back");
        let pass = Arc::new(AtomicUsize::new(usize::MAX));
        let held = Arc::new(Mutex::new(Vec::new()));
        let client: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
        {
            let (front, back, pass, held, client) = (
                front.clone(),
                back.clone(),
                pass.clone(),
                held.clone(),
                client.clone(),
            );
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok((n, from)) = front.recv_from(&mut buf).await {
                    *client.lock().unwrap() = Some(from);
                    let left = pass.load(Ordering::SeqCst);
                    if left == 0 {
                        held.lock().unwrap().push(buf[..n].to_vec());
                        continue;
                    }
                    if left != usize::MAX {
                        pass.store(left - 1, Ordering::SeqCst);
                    }
                    let _ = back.send(&buf[..n]).await;
                }
            });
        }
        {
            let (front, back) = (front.clone(), back.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok(n) = back.recv(&mut buf).await {
                    let to = *client.lock().unwrap();
                    if let Some(to) = to {
                        let _ = front.send_to(&buf[..n], to).await;
                    }
                }
            });
        }
        Relay {
            front: front.local_addr().expect("front addr"),
            pass,
            held,
            back,
        }
    }

    /// Forwards what was held, in order, and stops holding.
    async fn release(&self) {
        let held: Vec<Vec<u8>> = std::mem::take(&mut *self.held.lock().unwrap());
        self.pass.store(usize::MAX, Ordering::SeqCst);
        for p in held {
            let _ = self.back.send(&p).await;
        }
    }

    async fn wait_held(&self, n: usize) {
        for _ in 0..500 {
            if self.held.lock().unwrap().len() >= n {
                return;
            }
            sleep(Duration::from_millis(10)).await;
        }
        panic!("the relay held fewer than {n} packets");
    }
}

/// Association A through `relay`: connected and accepted, then closed by its client; the
/// server's side (returned) has read its end but stays open.
async fn ended_by_its_client(l: &SctpListener, relay: &Relay, port: u16) -> Association {
    let opts = SctpOptions::default();
    let a = SctpStack::global()
        .connect(relay.front, port, &opts)
        .expect("connect A");
    let (sa, ca) = tokio::join!(timeout(T, l.accept()), timeout(T, a.into_future()));
    let (sa, _) = sa.expect("accept A timed out").expect("accept A");
    let ca = ca.expect("connect A timed out").expect("connect A");
    ca.close().await.expect("close A");
    drop(ca);
    let end = timeout(T, sa.recv()).await.expect("EOF of A timed out");
    assert!(end.expect("recv A").is_none(), "A sent data");
    sa
}

/// A listener on SCTP `port`, a relay in front of it, and an association A through the
/// relay, ended by its client and still open on the server (its server side returned).
async fn with_ended_association(port: u16) -> (SctpListener, Relay, Association) {
    let l = SctpStack::global()
        .listen(
            "127.0.0.1:0".parse().unwrap(),
            port,
            &SctpOptions::default(),
        )
        .expect("listen");
    let relay = Relay::start(l.local_addr()).await;
    let sa = ended_by_its_client(&l, &relay, port).await;
    (l, relay, sa)
}

/// The next association `l` accepts.
async fn accepted(l: &SctpListener) -> Association {
    let (a, _) = timeout(T, l.accept())
        .await
        .expect("accept timed out")
        .expect("accept");
    a
}

/// A message from `client` reaches `server`.
async fn carries(client: &Association, server: &Association) {
    client.send(0, b"after", true, 1).await.expect("send");
    let m = timeout(T, server.recv())
        .await
        .expect("nothing arrived")
        .expect("recv")
        .expect("message");
    assert_eq!(m.data, b"after");
}

/// The old association ends on the server between the new one's INIT-ACK and its
/// COOKIE ECHO.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_association_dropped_inside_the_new_handshake() {
    let (stack, opts, port) = (SctpStack::global(), SctpOptions::default(), 5301);
    let (l, relay, sa) = with_ended_association(port).await;

    // B: its INIT passes, its COOKIE ECHO waits at the relay.
    relay.pass.store(1, Ordering::SeqCst);
    let b = tokio::spawn(
        stack
            .connect(relay.front, port, &opts)
            .expect("connect B")
            .into_future(),
    );
    relay.wait_held(1).await;
    // The server drops A now, then B's COOKIE ECHO arrives.
    drop(sa);
    sleep(Duration::from_millis(50)).await;
    relay.release().await;

    let cb = timeout(T, b)
        .await
        .expect("B's handshake did not finish")
        .expect("join")
        .expect("connect B");
    let sb = accepted(&l).await;
    carries(&cb, &sb).await;
}

/// The old association ends on the server after the new one's handshake, before the
/// new one is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_association_dropped_before_the_new_one_is_accepted() {
    let (stack, opts, port) = (SctpStack::global(), SctpOptions::default(), 5302);
    let (l, relay, sa) = with_ended_association(port).await;

    // B connects completely while the server still has A.
    let cb = timeout(
        T,
        stack
            .connect(relay.front, port, &opts)
            .expect("connect B")
            .into_future(),
    )
    .await
    .expect("B's handshake did not finish")
    .expect("connect B");
    drop(sa);
    sleep(Duration::from_millis(50)).await;
    let sb = accepted(&l).await;
    carries(&cb, &sb).await;
}

/// Control: the old association ends on the server after the new one was accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_association_dropped_after_the_new_one_is_accepted() {
    let (stack, opts, port) = (SctpStack::global(), SctpOptions::default(), 5303);
    let (l, relay, sa) = with_ended_association(port).await;

    let b = stack.connect(relay.front, port, &opts).expect("connect B");
    let (sb, cb) = tokio::join!(timeout(T, l.accept()), timeout(T, b.into_future()));
    let (sb, _) = sb.expect("accept B timed out").expect("accept B");
    let cb = cb.expect("connect B timed out").expect("connect B");
    drop(sa);
    sleep(Duration::from_millis(50)).await;
    carries(&cb, &sb).await;
}
