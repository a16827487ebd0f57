//! Whether a peer's host refuses SCTP over UDP before an association is made: a
//! zero-length datagram to the peer's port, and the ICMP port unreachable the kernel
//! answers with while the send runs when the peer is this host (elsewhere the answer
//! comes a round trip later, to the association's own socket). No knowledge of SCTP.

use std::io;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};

use socket2::{Domain, Protocol, Socket, Type};

use crate::pktinfo::{enable_recverr, take_refusal};
use crate::sys::lock;

/// Whether `error` (from a send, or a socket's pending error) is a refusal: an ICMP port
/// unreachable, `ECONNREFUSED` on a connected UDP socket. Any other error is not.
pub(crate) fn is_refusal(error: Option<io::Error>) -> bool {
    error.is_some_and(|e| e.kind() == io::ErrorKind::ConnectionRefused)
}

/// Sends a zero-length datagram on the connected `s` and says whether the peer's host
/// refused it by the time the send returned (ICMP port unreachable, taken with
/// `getsockopt(SO_ERROR)`). Two syscalls.
pub(crate) fn probe_refused(s: &Socket) -> bool {
    is_refusal(s.send(&[]).err().or_else(|| s.take_error().ok().flatten()))
}

/// The process's port-probe sockets, one per family, made on first use and kept: not
/// connected, their ICMP errors queued with the offending destination (IP_RECVERR). `None`
/// where one could not be made.
fn prober(v6: bool) -> Option<&'static Mutex<Socket>> {
    static V4: OnceLock<Option<Mutex<Socket>>> = OnceLock::new();
    static V6: OnceLock<Option<Mutex<Socket>>> = OnceLock::new();
    let (cell, domain) = if v6 {
        (&V6, Domain::IPV6)
    } else {
        (&V4, Domain::IPV4)
    };
    cell.get_or_init(|| {
        let s = Socket::new(domain, Type::DGRAM.nonblocking(), Some(Protocol::UDP)).ok()?;
        enable_recverr(&s, v6).then(|| Mutex::new(s))
    })
    .as_ref()
}

/// Sends a zero-length datagram to `remote` from the shared probe socket of its family
/// and says whether the peer's host refused it by the time the send returned (on the same
/// host the kernel answers inside the send; elsewhere the answer comes a round trip later
/// and this says `Some(false)`). Two syscalls (`sendto`, one `recvmsg` of the error
/// queue), against the five of a fresh connected socket probed and closed, which a dead
/// port's attempt paid. `None` when there is no probe socket or the send failed: the
/// caller probes its own socket instead. Probes are serialised (one lock), so one probe
/// cannot take another's answer; errors of earlier probes still queued are dropped.
pub(crate) fn shared_probe_refused(remote: SocketAddr) -> Option<bool> {
    let s = lock(prober(remote.is_ipv6())?);
    match s.send_to(&[], &remote.into()) {
        Ok(_) => {}
        // An earlier probe's error, reported by this send: the queue below says whether
        // this one was refused too.
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
        Err(_) => return None,
    }
    take_refusal(&*s, remote).ok()
}
