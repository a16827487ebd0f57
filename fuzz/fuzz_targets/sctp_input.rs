//! The SCTP path from a UDP datagram into usrsctp: each input is a sequence of datagrams
//! fed to a listening stack exactly as its UDP reader feeds them (our demultiplexer, then
//! `usrsctp_conninput`), from a few remote addresses. The input's bytes become SCTP packets
//! whose common header (ports, CRC32c) is fixed up unless a flag says otherwise, so
//! usrsctp's chunk parsers see them instead of dropping every packet on the checksum.
//! Replies go to a UDP socket of ours on loopback. A crash inside libusrsctp is a bug
//! there: the reproducer goes in fuzz/crashes/sctp_input/ and a guard on our side in
//! crates/usrsctp/src/udp.rs where one is possible.
#![no_main]

use std::net::{SocketAddr, UdpSocket};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use usrsctp::{SctpListener, SctpOptions, SctpStack};

/// The SCTP port the listener serves.
const PORT: u16 = 5001;

struct World {
    _rt: tokio::runtime::Runtime,
    listener: SctpListener,
    /// Where replies go: our sockets, drained now and then.
    peers: Vec<UdpSocket>,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let listener = rt
            .block_on(async {
                SctpStack::global().listen(
                    "127.0.0.1:0".parse().unwrap(),
                    PORT,
                    &SctpOptions::default(),
                )
            })
            .expect("listen");
        let peers = (0..4)
            .map(|_| {
                let s = UdpSocket::bind("127.0.0.1:0").expect("peer socket");
                s.set_nonblocking(true).expect("nonblocking");
                s
            })
            .collect();
        World {
            _rt: rt,
            listener,
            peers,
        }
    })
}

/// CRC32c (Castagnoli), bitwise: SCTP's checksum (RFC 9260, appendix A).
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Makes `pkt` a packet for the listener: destination port `PORT` and a correct checksum
/// (stored little-endian-of-the-reflected value, as SCTP does).
fn fix_up(pkt: &mut [u8], keep_port: bool) {
    if pkt.len() < 12 {
        return;
    }
    if !keep_port {
        pkt[2..4].copy_from_slice(&PORT.to_be_bytes());
    }
    pkt[8..12].fill(0);
    let crc = crc32c(pkt);
    pkt[8..12].copy_from_slice(&crc.to_le_bytes());
}

fuzz_target!(|data: &[u8]| {
    let w = world();
    // Datagrams: [flags, len_hi, len_lo, bytes...]*. flags bit 0-1: which peer sends it;
    // bit 2: keep the checksum as given; bit 3: keep the destination port.
    let mut rest = data;
    while rest.len() >= 3 {
        let flags = rest[0];
        let len = usize::from(u16::from_be_bytes([rest[1], rest[2]])).min(rest.len() - 3);
        let mut pkt = rest[3..3 + len].to_vec();
        rest = &rest[3 + len..];
        if flags & 4 == 0 {
            fix_up(&mut pkt, flags & 8 != 0);
        }
        let peer = &w.peers[usize::from(flags & 3)];
        let from: SocketAddr = peer.local_addr().expect("peer address");
        w.listener.inject_datagram(from, &pkt);
    }
    // Drop whatever the stack answered (INIT ACKs, ABORTs).
    let mut buf = [0u8; 2048];
    for p in &w.peers {
        while p.recv(&mut buf).is_ok() {}
    }
});
