//! Whether a peer's host refuses SCTP over UDP before an association is made: a
//! zero-length datagram to the peer's port, and the ICMP port unreachable the kernel
//! answers with while the send runs when the peer is this host (elsewhere the answer
//! comes a round trip later, to the association's own socket). No knowledge of SCTP.

use std::io;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};

use socket2::{Domain, Protocol, Socket, Type};

use crate::pktinfo::{drain_errors, drop_incoming, enable_recverr, take_refusal};
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
/// connected, their ICMP errors queued with the offending destination (IP_RECVERR), every
/// datagram that arrives for them dropped. `None` while one cannot be made (tried again
/// on the next probe).
fn prober(v6: bool) -> Option<&'static Mutex<Socket>> {
    static V4: OnceLock<Mutex<Socket>> = OnceLock::new();
    static V6: OnceLock<Mutex<Socket>> = OnceLock::new();
    let (cell, domain) = if v6 {
        (&V6, Domain::IPV6)
    } else {
        (&V4, Domain::IPV4)
    };
    if let Some(m) = cell.get() {
        return Some(m);
    }
    let s = Socket::new(domain, Type::DGRAM.nonblocking(), Some(Protocol::UDP)).ok()?;
    if !(enable_recverr(&s, v6) && drop_incoming(&s)) {
        return None;
    }
    // Two threads may both get here: one socket is kept, the other closes.
    let _ = cell.set(Mutex::new(s));
    cell.get()
}

/// Sends a zero-length datagram to `remote` from the shared probe socket of its family
/// and says whether the peer's host refused it by the time the send returned (on the same
/// host the kernel answers inside the send; elsewhere the answer comes a round trip later
/// and this says `Some(false)`). Three syscalls (a `recvmsg` that empties the error queue,
/// the `sendto`, a `recvmsg` of the answer), against the five of a fresh connected socket
/// probed and closed, which a dead port's attempt paid. The queue is emptied first
/// because answers from other hosts arrive after their probe has looked: left there, one
/// would make the next send fail (a queued error is also the socket's pending error) and
/// could be taken for a later probe's answer. Probes are serialised (one lock), so one
/// probe cannot take another's answer. `None` when there is no probe socket or the send
/// failed: the caller probes its own socket instead.
pub(crate) fn shared_probe_refused(remote: SocketAddr) -> Option<bool> {
    let s = lock(prober(remote.is_ipv6())?);
    drain_errors(&*s).ok()?;
    let send = || s.send_to(&[], &remote.into());
    match send() {
        Ok(_) => {}
        // An answer to an earlier probe came between the drain and the send; the failed
        // send took it as the pending error, so one more try goes out.
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            send().ok()?;
        }
        Err(_) => return None,
    }
    take_refusal(&*s, remote).ok()
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;

    use super::*;

    /// A UDP port on 127.0.0.1 that nothing listens on (bound, read, closed).
    fn dead() -> SocketAddr {
        UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    }

    /// Leaves an answer in the shared socket's error queue, as one from another host
    /// that arrives after its probe has looked: a probe sent and not read.
    fn leave_answer(to: SocketAddr) {
        let s = lock(prober(false).unwrap());
        s.send_to(&[], &to.into()).unwrap();
    }

    #[test]
    fn answers_left_from_earlier_probes_neither_block_nor_count() {
        // A refusal left queued is also the socket's pending error: the next probe's
        // send must still go out, and that probe's own refusal must be seen.
        let (a, b) = (dead(), dead());
        leave_answer(a);
        assert_eq!(shared_probe_refused(b), Some(true));
        // A refusal left queued for a port that has come alive since is not its answer.
        let c = dead();
        leave_answer(c);
        let live = UdpSocket::bind(c).unwrap();
        assert_eq!(shared_probe_refused(c), Some(false));
        drop(live);
        assert_eq!(shared_probe_refused(c), Some(true));
    }
}
