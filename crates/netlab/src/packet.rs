//! Just enough IPv4/IPv6 parsing to classify a packet: addresses, protocol and ports.
//!
//! IPv6 extension headers (hop-by-hop, routing, destination options, fragment, AH) are
//! walked to find the transport header. Non-first fragments and unknown protocols have no
//! ports. Nothing is validated beyond what is needed to read these fields safely.

#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IP protocol numbers netlab names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Proto {
    /// TCP (6).
    Tcp,
    /// UDP (17).
    Udp,
    /// SCTP (132).
    Sctp,
    /// UDP-Lite (136).
    UdpLite,
    /// ICMP (1) or ICMPv6 (58).
    Icmp,
    /// Any other protocol number.
    Other(u8),
}

impl Proto {
    /// The protocol for an IP protocol number (1 and 58 both give [`Proto::Icmp`]).
    pub fn from_number(n: u8) -> Proto {
        match n {
            6 => Proto::Tcp,
            17 => Proto::Udp,
            132 => Proto::Sctp,
            136 => Proto::UdpLite,
            1 | 58 => Proto::Icmp,
            n => Proto::Other(n),
        }
    }

    /// Whether packets of this protocol carry 16-bit source and destination ports first.
    fn has_ports(self) -> bool {
        matches!(self, Proto::Tcp | Proto::Udp | Proto::Sctp | Proto::UdpLite)
            || self == Proto::Other(33) // DCCP
    }
}

/// What the bridge needs to know about one IP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PacketInfo {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Transport protocol.
    pub proto: Proto,
    /// Source port, if the protocol has ports and this is the first (or only) fragment.
    pub src_port: Option<u16>,
    /// Destination port, likewise.
    pub dst_port: Option<u16>,
    /// Where the transport header starts (first or only fragment with ports).
    pub l4: Option<usize>,
}

/// Parses the IP header of `pkt` (a raw IPv4 or IPv6 packet, as read from a TUN device
/// opened with `IFF_NO_PI`). `None` if it is too short or not IPv4/IPv6.
pub(crate) fn parse(pkt: &[u8]) -> Option<PacketInfo> {
    match pkt.first()? >> 4 {
        4 => parse_v4(pkt),
        6 => parse_v6(pkt),
        _ => None,
    }
}

fn parse_v4(pkt: &[u8]) -> Option<PacketInfo> {
    if pkt.len() < 20 {
        return None;
    }
    let ihl = usize::from(pkt[0] & 0x0f) * 4;
    if ihl < 20 || pkt.len() < ihl {
        return None;
    }
    let proto = Proto::from_number(pkt[9]);
    let src = IpAddr::V4(Ipv4Addr::new(pkt[12], pkt[13], pkt[14], pkt[15]));
    let dst = IpAddr::V4(Ipv4Addr::new(pkt[16], pkt[17], pkt[18], pkt[19]));
    let frag_offset = u16::from_be_bytes([pkt[6], pkt[7]]) & 0x1fff;
    let (src_port, dst_port) = if frag_offset == 0 && proto.has_ports() {
        ports(&pkt[ihl..])
    } else {
        (None, None)
    };
    Some(PacketInfo {
        src,
        dst,
        proto,
        src_port,
        dst_port,
        l4: src_port.map(|_| ihl),
    })
}

fn parse_v6(pkt: &[u8]) -> Option<PacketInfo> {
    if pkt.len() < 40 {
        return None;
    }
    let addr = |at: usize| {
        let mut b = [0u8; 16];
        b.copy_from_slice(&pkt[at..at + 16]);
        IpAddr::V6(Ipv6Addr::from(b))
    };
    let (src, dst) = (addr(8), addr(24));
    let mut next = pkt[6];
    let mut at = 40;
    let mut first_fragment = true;
    // Walk at most a few extension headers.
    for _ in 0..8 {
        match next {
            // Hop-by-hop, routing, destination options: length in 8-octet units, +1.
            0 | 43 | 60 => {
                let hdr = pkt.get(at..at + 2)?;
                next = hdr[0];
                at += (usize::from(hdr[1]) + 1) * 8;
            }
            // Fragment: fixed 8 octets.
            44 => {
                let hdr = pkt.get(at..at + 8)?;
                next = hdr[0];
                first_fragment = u16::from_be_bytes([hdr[2], hdr[3]]) >> 3 == 0;
                at += 8;
            }
            // Authentication header: length in 4-octet units, +2.
            51 => {
                let hdr = pkt.get(at..at + 2)?;
                next = hdr[0];
                at += (usize::from(hdr[1]) + 2) * 4;
            }
            _ => break,
        }
    }
    let proto = Proto::from_number(next);
    let (src_port, dst_port) = match pkt.get(at..) {
        Some(rest) if first_fragment && proto.has_ports() => ports(rest),
        _ => (None, None),
    };
    Some(PacketInfo {
        src,
        dst,
        proto,
        src_port,
        dst_port,
        l4: src_port.map(|_| at),
    })
}

fn ports(l4: &[u8]) -> (Option<u16>, Option<u16>) {
    if l4.len() < 4 {
        return (None, None);
    }
    (
        Some(u16::from_be_bytes([l4[0], l4[1]])),
        Some(u16::from_be_bytes([l4[2], l4[3]])),
    )
}

/// One DATA (or I-DATA) chunk of a UDP-encapsulated SCTP packet: whose association
/// (the packet's verification tag), its TSN, stream and user data bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DataChunk {
    pub vtag: u32,
    pub tsn: u32,
    pub stream: u16,
    pub bytes: u64,
}

/// A SACK (or NR-SACK) chunk: what the receiver had in order, and its receive window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SackChunk {
    pub vtag: u32,
    /// Cumulative TSN ack: every TSN up to it arrived.
    pub cum_tsn: u32,
    /// Advertised receiver window credit (bytes).
    pub a_rwnd: u32,
    /// Gap ack blocks: ranges above `cum_tsn` that arrived (holes between them).
    pub gap_blocks: u16,
    /// TSNs above `cum_tsn` the gap ack blocks cover (in an NR-SACK, the renegable ones).
    pub gap_acked: u32,
    /// TSNs above `cum_tsn` an NR-SACK's NR gap blocks cover: the receiver will not
    /// renege on them (usrsctp: delivered to the socket), so the sender may free them.
    pub nr_acked: u32,
}

/// The chunks [`sctp_chunks`] reads from an SCTP packet.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct SctpChunks {
    pub data: Vec<DataChunk>,
    pub sacks: Vec<SackChunk>,
}

/// The DATA (and I-DATA) and SACK (and NR-SACK) chunks of an SCTP packet carried in the
/// UDP datagram `pkt` (RFC 6951): `None` unless `pkt` is UDP whose payload is an SCTP
/// packet with a right CRC32c (so other UDP traffic is never mistaken for it). One CRC
/// over the payload and one walk of its chunks.
pub(crate) fn sctp_chunks(pkt: &[u8], info: &PacketInfo) -> Option<SctpChunks> {
    if info.proto != Proto::Udp {
        return None;
    }
    let sctp = pkt.get(info.l4? + 8..)?;
    if sctp.len() < 16 {
        return None;
    }
    let crc = crc32c::crc32c(&sctp[..8]);
    let crc = crc32c::crc32c_append(crc, &[0; 4]);
    let crc = crc32c::crc32c_append(crc, &sctp[12..]);
    if crc.to_le_bytes() != sctp[8..12] {
        return None;
    }
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let vtag = be32(&sctp[4..8]);
    let mut out = SctpChunks::default();
    let mut at = 12;
    while let Some(h) = sctp.get(at..at + 4) {
        let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
        if len < 4 {
            break;
        }
        // DATA: TSN, stream id, SSN, PPID (16-byte header); I-DATA: TSN, stream id,
        // reserved, MID, PPID/FSN (20 bytes).
        let header = match h[0] {
            0 => 16,
            64 => 20,
            _ => 0,
        };
        if header > 0 && len >= header {
            if let Some(c) = sctp.get(at + 4..at + 10) {
                out.data.push(DataChunk {
                    vtag,
                    tsn: be32(&c[..4]),
                    stream: u16::from_be_bytes([c[4], c[5]]),
                    bytes: (len - header) as u64,
                });
            }
        }
        // SACK (3) and NR-SACK (16): cumulative TSN ack, a_rwnd, number of gap blocks.
        if matches!(h[0], 3 | 16) && len >= 16 {
            if let Some(chunk) = sctp.get(at..at + len) {
                out.sacks.push(sack_chunk(vtag, h[0] == 16, chunk));
            }
        }
        at += (len + 3) & !3;
    }
    Some(out)
}

/// A SACK (`nr` false) or NR-SACK chunk, header included. An NR-SACK's header has the
/// NR gap block count and the duplicates' count after the gap block count (RFC draft
/// natarajan-tsvwg-sctp-nrsack, as usrsctp sends it); its gap blocks follow, then its NR
/// gap blocks. Block counts that run past the chunk count only the blocks it holds.
fn sack_chunk(vtag: u32, nr: bool, c: &[u8]) -> SackChunk {
    let be16 = |at: usize| u16::from_be_bytes([c[at], c[at + 1]]);
    let gap_blocks = be16(12);
    let (nr_blocks, first_block) = if nr && c.len() >= 20 {
        (be16(14), 20)
    } else {
        (0, 16)
    };
    // Each block: start and end offsets from the cumulative TSN ack, both included.
    let covered = |from: usize, blocks: u16| -> u32 {
        (0..usize::from(blocks))
            .filter_map(|i| c.get(from + 4 * i..from + 4 * i + 4))
            .map(|b| {
                let (start, end) = (
                    u16::from_be_bytes([b[0], b[1]]),
                    u16::from_be_bytes([b[2], b[3]]),
                );
                u32::from(end.saturating_sub(start)) + u32::from(end >= start)
            })
            .sum()
    };
    SackChunk {
        vtag,
        cum_tsn: u32::from_be_bytes([c[4], c[5], c[6], c[7]]),
        a_rwnd: u32::from_be_bytes([c[8], c[9], c[10], c[11]]),
        gap_blocks,
        gap_acked: covered(first_block, gap_blocks),
        nr_acked: covered(first_block + 4 * usize::from(gap_blocks), nr_blocks),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal IPv4 packet with a transport header carrying `sport` and `dport`.
    pub(crate) fn v4(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&40u16.to_be_bytes());
        p[9] = proto;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p
    }

    /// A minimal IPv6 packet, optionally with a hop-by-hop header before the transport.
    pub(crate) fn v6(
        src: Ipv6Addr,
        dst: Ipv6Addr,
        proto: u8,
        sport: u16,
        dport: u16,
        hbh: bool,
    ) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x60;
        p[8..24].copy_from_slice(&src.octets());
        p[24..40].copy_from_slice(&dst.octets());
        if hbh {
            p[6] = 0;
            p.extend_from_slice(&[proto, 0, 0, 0, 0, 0, 0, 0]);
        } else {
            p[6] = proto;
        }
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&[0u8; 16]);
        p
    }

    #[test]
    fn ipv4_tcp() {
        let p = v4([198, 51, 100, 2], [192, 0, 2, 11], 6, 40000, 80);
        let i = parse(&p).unwrap();
        assert_eq!(i.src, "198.51.100.2".parse::<IpAddr>().unwrap());
        assert_eq!(i.dst, "192.0.2.11".parse::<IpAddr>().unwrap());
        assert_eq!(i.proto, Proto::Tcp);
        assert_eq!((i.src_port, i.dst_port), (Some(40000), Some(80)));
    }

    #[test]
    fn ipv4_non_first_fragment_has_no_ports() {
        let mut p = v4([1, 1, 1, 1], [2, 2, 2, 2], 17, 1, 53);
        p[6] = 0x00;
        p[7] = 0x10;
        let i = parse(&p).unwrap();
        assert_eq!(i.proto, Proto::Udp);
        assert_eq!(i.dst_port, None);
    }

    #[test]
    fn ipv6_udp_with_extension_header() {
        let s: Ipv6Addr = "2001:db8:c::2".parse().unwrap();
        let d: Ipv6Addr = "2001:db8:5::53".parse().unwrap();
        for hbh in [false, true] {
            let i = parse(&v6(s, d, 17, 5353, 53, hbh)).unwrap();
            assert_eq!(i.src, IpAddr::V6(s));
            assert_eq!(i.dst, IpAddr::V6(d));
            assert_eq!(i.proto, Proto::Udp);
            assert_eq!((i.src_port, i.dst_port), (Some(5353), Some(53)));
        }
    }

    #[test]
    fn garbage_is_rejected() {
        assert_eq!(parse(&[]), None);
        assert_eq!(parse(&[0x45, 0, 0]), None);
        assert_eq!(parse(&[0x20; 60]), None);
        assert_eq!(parse(&[0x60; 20]), None);
        // ICMP has no ports.
        let i = parse(&v4([1, 1, 1, 1], [2, 2, 2, 2], 1, 8, 0)).unwrap();
        assert_eq!((i.proto, i.dst_port), (Proto::Icmp, None));
    }

    /// A UDP datagram carrying an SCTP packet with one DATA chunk (stream 3, TSN 7, 5
    /// bytes) and a right CRC32c: read back; a wrong CRC: not SCTP.
    #[test]
    fn sctp_data_chunks_in_udp() {
        let mut sctp = vec![0x26, 0xab, 0x26, 0xab, 0, 0, 0, 9, 0, 0, 0, 0];
        sctp.extend_from_slice(&[0, 3, 0, 21, 0, 0, 0, 7, 0, 3, 0, 0, 0, 0, 0, 0]);
        sctp.extend_from_slice(b"hello\0\0\0");
        let crc = crc32c::crc32c(&sctp);
        sctp[8..12].copy_from_slice(&crc.to_le_bytes());
        let mut p = v4([192, 0, 2, 1], [192, 0, 2, 2], 17, 9899, 9899);
        p.truncate(28);
        p.extend_from_slice(&sctp);
        let info = parse(&p).unwrap();
        let chunks = sctp_chunks(&p, &info).unwrap().data;
        assert_eq!(
            chunks,
            vec![DataChunk {
                vtag: 9,
                tsn: 7,
                stream: 3,
                bytes: 5
            }]
        );
        p[40] ^= 1;
        assert_eq!(sctp_chunks(&p, &parse(&p).unwrap()), None);
    }

    /// A SACK with gap blocks 2-3 and 5-5 above cumulative TSN 100: 3 TSNs gap-acked; an
    /// NR-SACK with the renegable block 2-3 and the NR block 5-7: 2 and 3; a block count
    /// past the chunk's end counts only the blocks present.
    #[test]
    fn sack_gap_blocks_are_counted() {
        let mut sack = vec![3, 0, 0, 28, 0, 0, 0, 100, 0, 0, 0x40, 0, 0, 2, 0, 0];
        sack.extend_from_slice(&[0, 2, 0, 3, 0, 5, 0, 5]);
        let s = sack_chunk(9, false, &sack);
        assert_eq!((s.cum_tsn, s.a_rwnd, s.gap_blocks), (100, 0x4000, 2));
        assert_eq!((s.gap_acked, s.nr_acked), (3, 0));
        let mut nr = vec![
            16, 0, 0, 28, 0, 0, 0, 100, 0, 0, 0x40, 0, 0, 1, 0, 1, 0, 0, 0, 0,
        ];
        nr.extend_from_slice(&[0, 2, 0, 3, 0, 5, 0, 7]);
        let s = sack_chunk(9, true, &nr);
        assert_eq!((s.gap_blocks, s.gap_acked, s.nr_acked), (1, 2, 3));
        sack[13] = 9;
        assert_eq!(sack_chunk(9, false, &sack).gap_acked, 3);
    }
}
