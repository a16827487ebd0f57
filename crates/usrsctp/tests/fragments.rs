//! Messages sized to usrsctp's fragmentation point fill their packets: a message of a
//! whole number of fragments takes exactly that many packets, while a 64 KiB message on
//! loopback (fragmentation point 65,476) takes a full packet and a 60-byte one.

mod pair;

use std::time::Duration;

use tokio::time::timeout;
use usrsctp::{Association, SctpOptions, SctpStack};

const T: Duration = Duration::from_secs(30);
const MESSAGES: usize = 200;
const CHUNK: usize = 64 * 1024;

/// Sends `MESSAGES` messages of `len` bytes from `client` to `server`, waits for all of
/// them, and returns the SCTP packets the stack sent meanwhile (both directions: DATA and
/// SACKs).
async fn packets_for(
    stack: &SctpStack,
    client: &Association,
    server: &Association,
    len: usize,
) -> usize {
    let (_, before) = stack.udp_sends();
    let data = vec![7u8; len];
    let send = async {
        for _ in 0..MESSAGES {
            client.send(1, &data, true, 0).await.unwrap();
        }
    };
    let recv = async {
        let mut got = 0;
        while got < MESSAGES * len {
            let m = timeout(T, server.recv()).await.unwrap().unwrap().unwrap();
            got += m.data.len();
        }
        got
    };
    let ((), got) = tokio::join!(send, recv);
    assert_eq!(got, MESSAGES * len);
    let (_, after) = stack.udp_sends();
    after - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_of_whole_fragments_take_one_packet_per_fragment() {
    let stack = SctpStack::global();
    if let Err(e) = stack.availability() {
        println!("skipped: {e}");
        return;
    }
    let opts = SctpOptions::default();
    let (_listener, server, client) = pair::connected_pair(&stack, &opts).await;

    let fragment = client
        .fragment_size()
        .expect("usrsctp reports its fragmentation point");
    assert!((1000..CHUNK).contains(&fragment), "fragment {fragment}");
    assert_eq!(
        server.fragment_size(),
        Some(fragment),
        "both ends on one path"
    );
    if CHUNK.is_multiple_of(fragment) {
        println!("skipped: {fragment}-byte fragments divide 64 KiB (no short chunk to avoid)");
        return;
    }
    let per_chunk = CHUNK.div_ceil(fragment);
    let aligned = CHUNK / fragment * fragment;

    let whole = packets_for(&stack, &client, &server, aligned).await;
    let sixty_four = packets_for(&stack, &client, &server, CHUNK).await;
    println!(
        "{fragment}-byte fragments: {MESSAGES} messages of {aligned} B took {whole} packets, \
         of 64 KiB {sixty_four} (SACKs included)"
    );
    // DATA: one packet per fragment, and at most as many SACKs again.
    let data_whole = MESSAGES * (aligned / fragment);
    assert!(
        whole >= data_whole && whole <= 2 * data_whole,
        "{whole} packets"
    );
    // The 64 KiB messages add a short DATA packet each: with their SACKs, at least half
    // that many packets more than the whole-fragment ones (665 against 374 here).
    assert!(
        sixty_four >= MESSAGES * per_chunk && sixty_four >= whole + MESSAGES / 2,
        "{sixty_four} packets for 64 KiB messages against {whole} for whole fragments"
    );
    timeout(T, client.close()).await.unwrap().unwrap();
}
