//! A peer whose host refuses our UDP packets: nothing listens on its encapsulation port
//! any more (its process exited or was killed), and the host answers each packet we send
//! there with an ICMP or ICMPv6 port unreachable.
//!
//! RFC 6951 section 5.5 says such an error SHOULD be treated like an ICMP protocol
//! unreachable, which RFC 9260 (appendix C, as RFC 4960's) turns into an ABORT of the
//! association, provided the verification tag of the packet the ICMP message quotes
//! matches the association's peer tag; otherwise the error is dropped. Our UDP sockets
//! ask for their ICMP errors (IP_RECVERR / IPV6_RECVERR): the kernel queues each with the
//! destination of the datagram that drew it and what the ICMP message quoted of that
//! datagram, i.e. the SCTP packet we sent. For each port unreachable we hand usrsctp, as
//! input from that destination's conn address, the ABORT the peer would have sent if it
//! could: the T bit set and the quoted packet's verification tag (the peer's own tag,
//! which a T-bit ABORT carries, RFC 9260 8.5.1), the ports swapped. usrsctp checks the tag
//! against each association it finds for that address and those ports, ends the one it
//! belongs to as if the peer had aborted (SCTP_COMM_LOST), and drops it otherwise (a stale
//! packet of an association that is gone, another association of the same remote). The
//! ABORT carries a cause whose reason is a marker random per process, so the association
//! it ends reports [`Error::PeerGone`](crate::Error::PeerGone) rather than a plain loss.
//! The ABORT never leaves the process.

use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::OnceLock;

use crate::pktinfo::take_queued_error;

/// SCTP chunk type ABORT (RFC 9260 section 3.3.7).
const ABORT: u8 = 6;
/// The ABORT chunk's T bit: the verification tag is the receiver's peer's own tag.
const T_BIT: u8 = 0x01;
/// Error cause "User-Initiated Abort" (RFC 9260 section 3.3.10.12): its "upper layer
/// abort reason" carries the marker.
const USER_ABORT: u16 = 12;
/// Bytes of the marker.
const MARKER_LEN: usize = 8;
/// The cause: code, length, marker.
const CAUSE_LEN: usize = 4 + MARKER_LEN;
/// The ABORT chunk: type, flags, length, one cause.
const CHUNK_LEN: usize = 4 + CAUSE_LEN;
/// The SCTP common header.
const COMMON_HEADER: usize = 12;
/// The whole packet we feed usrsctp.
pub(crate) const ABORT_LEN: usize = COMMON_HEADER + CHUNK_LEN;

/// The marker, random per process (the keys of a std `RandomState`, drawn from the OS).
fn marker() -> [u8; MARKER_LEN] {
    static MARKER: OnceLock<[u8; MARKER_LEN]> = OnceLock::new();
    *MARKER.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write(b"usrsctp peer gone");
        h.finish().to_be_bytes()
    })
}

/// The ABORT that stands for an ICMP port unreachable quoting `quoted` (the start of an
/// SCTP packet we sent): ports swapped, the quoted verification tag, T bit, the marker
/// cause, CRC32c filled in. `None` when `quoted` is shorter than the common header or
/// carries tag 0 (an INIT, which no association's tag can match; the attempt's own
/// refusal path reports it).
pub(crate) fn abort_for(quoted: &[u8]) -> Option<[u8; ABORT_LEN]> {
    let header = quoted.get(..COMMON_HEADER)?;
    let tag = &header[4..8];
    if tag == [0; 4] {
        return None;
    }
    let mut p = [0u8; ABORT_LEN];
    p[0..2].copy_from_slice(&header[2..4]);
    p[2..4].copy_from_slice(&header[0..2]);
    p[4..8].copy_from_slice(tag);
    let chunk = COMMON_HEADER;
    p[chunk] = ABORT;
    p[chunk + 1] = T_BIT;
    p[chunk + 2..chunk + 4].copy_from_slice(&(CHUNK_LEN as u16).to_be_bytes());
    let cause = chunk + 4;
    p[cause..cause + 2].copy_from_slice(&USER_ABORT.to_be_bytes());
    p[cause + 2..cause + 4].copy_from_slice(&(CAUSE_LEN as u16).to_be_bytes());
    p[cause + 4..].copy_from_slice(&marker());
    // RFC 9260 appendix A: over the packet with the checksum field zero, little-endian.
    let crc = crc32c::crc32c(&p);
    p[8..12].copy_from_slice(&crc.to_le_bytes());
    Some(p)
}

/// Whether `chunk` (what an SCTP_COMM_LOST notification carries after its fixed part:
/// usrsctp copies the ABORT chunk that ended the association there) is an ABORT made by
/// [`abort_for`] in this process.
pub(crate) fn is_ours(chunk: &[u8]) -> bool {
    chunk.len() >= CHUNK_LEN
        && chunk[0] == ABORT
        && chunk[4..6] == USER_ABORT.to_be_bytes()
        && chunk[6..8] == (CAUSE_LEN as u16).to_be_bytes()
        && chunk[8..CHUNK_LEN] == marker()
}

/// Takes every error queued on `sock` (IP_RECVERR): for each ICMP port unreachable,
/// `conn_for(destination)` names the conn address the refused packet was sent for (`None`:
/// none known, the error is dropped), and the matching ABORT ([`abort_for`]) goes to
/// usrsctp as input from it, on this thread (`conninput`, under the usrsctp lock). Other
/// errors are dropped. Reading the last error clears the socket's pending error. One
/// `recvmsg` per error and one more; per refusal a 28-byte packet through usrsctp.
/// Returns the refusals seen.
pub(crate) fn take_refusals(
    sock: &impl AsFd,
    mut conn_for: impl FnMut(SocketAddr) -> Option<usize>,
) -> io::Result<usize> {
    take_refusals_with(sock, |to, abort| {
        if let Some(conn) = conn_for(to) {
            crate::sys::conninput(conn, abort);
        }
    })
}

/// Like [`take_refusals`], for a socket whose packets usrsctp sends itself (IP mode):
/// each refusal's ABORT goes to `deliver` with the refused destination, which hands it
/// to usrsctp as coming from there. Returns the refusals seen.
pub(crate) fn take_refusals_with(
    sock: &impl AsFd,
    mut deliver: impl FnMut(SocketAddr, &[u8]),
) -> io::Result<usize> {
    let mut seen = 0;
    // Only the common header of the quoted packet is needed.
    let mut quoted = [0u8; COMMON_HEADER];
    while let Some(e) = take_queued_error(sock, &mut quoted)? {
        let (true, Some(to)) = (e.refused, e.to) else {
            continue;
        };
        seen += 1;
        if let Some(abort) = abort_for(&quoted[..e.len]) {
            deliver(to, &abort);
        }
    }
    Ok(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The common header of a packet from SCTP port 5000 to 6000 with tag 0x01020304.
    fn sent() -> Vec<u8> {
        let mut p = vec![0x13, 0x88, 0x17, 0x70, 1, 2, 3, 4, 0xaa, 0xbb, 0xcc, 0xdd];
        p.extend_from_slice(&[0, 0, 0, 16]); // a chunk header: only the header is read
        p
    }

    #[test]
    fn abort_reflects_the_quoted_packet() {
        let a = abort_for(&sent()).expect("an ABORT");
        assert_eq!(&a[0..4], &[0x17, 0x70, 0x13, 0x88], "ports swapped");
        assert_eq!(&a[4..8], &[1, 2, 3, 4], "the quoted tag");
        assert_eq!((a[12], a[13]), (ABORT, T_BIT));
        assert_eq!(u16::from_be_bytes([a[14], a[15]]) as usize, CHUNK_LEN);
        assert!(
            crate::packet::checksum_ok(&a),
            "CRC32c as usrsctp's input expects"
        );
        assert!(is_ours(&a[COMMON_HEADER..]));
    }

    #[test]
    fn short_or_untagged_quotes_are_ignored() {
        assert!(abort_for(&sent()[..11]).is_none());
        assert!(abort_for(&[]).is_none());
        let mut init = sent();
        init[4..8].fill(0);
        assert!(abort_for(&init).is_none());
        // Exactly the common header is enough.
        assert!(abort_for(&sent()[..12]).is_some());
    }

    #[test]
    fn other_aborts_are_not_ours() {
        let a = abort_for(&sent()).unwrap();
        let mut chunk = a[COMMON_HEADER..].to_vec();
        assert!(is_ours(&chunk));
        chunk[CHUNK_LEN - 1] ^= 1;
        assert!(!is_ours(&chunk), "another marker");
        assert!(!is_ours(&a[COMMON_HEADER..COMMON_HEADER + 8]), "too short");
        // A peer's ABORT with no cause.
        assert!(!is_ours(&[ABORT, 0, 0, 4]));
    }
}
