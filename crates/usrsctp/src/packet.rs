//! SCTP packets as bytes: the checks our UDP readers make before usrsctp sees a packet.

/// Whether the SCTP packet's checksum (RFC 9260 appendix A, CRC32c over the packet with
/// the checksum field zero) is right. One pass with the CPU's CRC32c instruction; checked
/// here only for packets that would open state for a new remote (`conninput` checks every
/// packet).
pub(crate) fn checksum_ok(pkt: &[u8]) -> bool {
    crate::ffi::crc32c_ok(pkt)
}

/// Walks the chunks of an SCTP packet (12-byte common header, then type/flags/length chunks
/// padded to 4 bytes) and reports whether one has type `ty`. Never panics on bad input.
pub(crate) fn has_chunk(pkt: &[u8], ty: u8) -> bool {
    let mut off = 12usize;
    while off + 4 <= pkt.len() {
        let t = pkt[off];
        let len = u16::from_be_bytes([pkt[off + 2], pkt[off + 3]]) as usize;
        if t == ty {
            return true;
        }
        if len < 4 {
            return false;
        }
        off = match off.checked_add((len + 3) & !3) {
            Some(o) => o,
            None => return false,
        };
    }
    false
}

#[cfg(test)]
mod tests {
    use super::{checksum_ok, has_chunk};

    #[test]
    fn checksum() {
        // An INIT with the checksum the RFC 9260 algorithm gives it (CRC32c, reflected,
        // little-endian in bytes 8..12), computed outside this code.
        let mut p = vec![0x13, 0x88, 0x1c, 0xe9, 0, 0, 0, 0, 21, 229, 89, 158];
        p.extend_from_slice(&[
            1, 0, 0, 20, 0, 0, 0, 1, 0, 1, 0, 0, 0, 10, 0, 10, 0, 0, 0, 1,
        ]);
        assert!(checksum_ok(&p));
        p[20] ^= 1;
        assert!(!checksum_ok(&p));
        assert!(!checksum_ok(&p[..11]));
    }

    #[test]
    fn chunk_walk() {
        let mut p = vec![0u8; 12];
        p.extend_from_slice(&[0x02, 0, 0, 5, 1, 0, 0, 0]);
        assert!(has_chunk(&p, 2));
        assert!(!has_chunk(&p, 1));
        let mut q = vec![0u8; 12];
        q.extend_from_slice(&[0x00, 0, 0, 6, 1, 2, 0, 0, 0x02, 0, 0, 4]);
        assert!(has_chunk(&q, 2));
        assert!(!has_chunk(&q[..14], 2));
        let mut bad = vec![0u8; 12];
        bad.extend_from_slice(&[0x00, 0, 0, 0]);
        assert!(!has_chunk(&bad, 2));
        assert!(!has_chunk(&[], 2));
    }
}
