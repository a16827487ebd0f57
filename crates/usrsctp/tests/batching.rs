//! What one UDP send carries during a bulk transfer on a path of Ethernet size: the
//! datagrams of one GRO read go to usrsctp together, so the data their SACKs release leaves
//! in one GSO send, not a send per SACK.

mod pair;

use std::time::Duration;

use tokio::time::timeout;
use usrsctp::{SctpOptions, SctpStack};

const T: Duration = Duration::from_secs(30);
/// SCTP path MTU (without the common header) of a 1500-byte IPv4 path, as taps derives it.
const MTU: u32 = 1460;
const BYTES: usize = 20_000_000;
const CHUNK: usize = 64 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_transfer_sends_many_packets_per_udp_send() {
    let stack = SctpStack::global();
    if let Err(e) = stack.availability() {
        println!("skipped: {e}");
        return;
    }
    let opts = SctpOptions {
        path_mtu: Some(MTU),
        ..SctpOptions::default()
    };
    let (_listener, server, client) = pair::connected_pair(&stack, &opts).await;

    let (sends_before, packets_before) = stack.udp_sends();
    let sender = tokio::spawn(async move {
        let chunk = vec![5u8; CHUNK];
        let mut sent = 0;
        while sent < BYTES {
            let n = CHUNK.min(BYTES - sent);
            client.send(1, &chunk[..n], true, 0).await.unwrap();
            sent += n;
        }
        client
    });
    let mut got = 0;
    while got < BYTES {
        let m = timeout(T, server.recv()).await.unwrap().unwrap().unwrap();
        got += m.data.len();
    }
    let client = timeout(T, sender).await.unwrap().unwrap();
    let (sends, packets) = stack.udp_sends();
    let (sends, packets) = (sends - sends_before, packets - packets_before);
    assert_eq!(got, BYTES);
    // Both directions counted: data packets, SACKs. At most MTU-sized, so at least this many.
    assert!(packets >= BYTES / MTU as usize, "{packets} packets");
    let per_send = packets as f64 / sends as f64;
    println!("{packets} packets in {sends} UDP sends: {per_send:.1} per send");
    if !stack.udp_gso() {
        println!("skipped: the kernel refused UDP GSO (one packet per send is all it can do)");
        return;
    }
    // Handing each datagram to usrsctp on its own (a send per SACK's worth of data) gave
    // 1.9 here; one hold of the lock per read gives 11-12.
    assert!(per_send >= 6.0, "{per_send:.1} packets per UDP send");
    timeout(T, client.close()).await.unwrap().unwrap();
}
