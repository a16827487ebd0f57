//! QUIC and DTLS on one UDP port of a listener, told apart by the first byte of each
//! datagram (RFC 9443, after RFC 7983): 20–63 is a DTLS record, 64–255 QUIC (every QUIC
//! version 1 packet has its fixed bit, 0x40, set; the listener does not offer RFC 9287's
//! greasing of that bit, so no peer may clear it).
//!
//! quinn owns the socket and reads it as usual; [`DemuxSocket`] sits between quinn and
//! the socket and moves each DTLS datagram to the DTLS server's queue before quinn sees
//! it. DTLS sends through a second handle of the same socket. Cost: one comparison per
//! datagram for QUIC, one copy per datagram for DTLS (as the DTLS listener's own
//! demultiplexing by peer address already makes).

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, Endpoint, Runtime, UdpPoller};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

/// A datagram for the DTLS server and the peer it came from.
pub(crate) type Datagram = (Vec<u8>, SocketAddr);

/// DTLS datagrams queued for the DTLS server before new ones are dropped (it reads them
/// in a loop that only hands them on; a peer whose datagrams are dropped retransmits).
const DTLS_QUEUE: usize = 1024;

/// Whether a datagram starting with `first` is a DTLS record (RFC 9443's range).
pub(crate) fn is_dtls(first: u8) -> bool {
    (20..=63).contains(&first)
}

/// Everything a listener needs to serve QUIC and DTLS on one port.
pub(crate) struct SharedPort {
    /// The QUIC endpoint (it owns the socket and reads it).
    pub(crate) endpoint: Endpoint,
    /// The same socket, for the DTLS server's sends.
    pub(crate) dtls_socket: Arc<UdpSocket>,
    /// The DTLS datagrams quinn did not see.
    pub(crate) dtls_inbound: mpsc::Receiver<Datagram>,
}

/// Binds `addr` (UDP; an IPv6 socket takes IPv6 only) and serves QUIC on it with
/// `config`, passing DTLS datagrams on. Needs the tokio runtime.
pub(crate) fn listen(addr: SocketAddr, config: quinn::ServerConfig) -> io::Result<SharedPort> {
    let socket = super::quic::bind_server_socket(addr)?;
    let for_dtls = socket.try_clone()?;
    for_dtls.set_nonblocking(true)?;
    let dtls_socket = Arc::new(UdpSocket::from_std(for_dtls)?);
    let runtime = Arc::new(quinn::TokioRuntime);
    let (tx, dtls_inbound) = mpsc::channel(DTLS_QUEUE);
    let socket = Arc::new(DemuxSocket {
        inner: runtime.wrap_udp_socket(socket)?,
        dtls: tx,
    });
    // Greasing QUIC's fixed bit would put QUIC packets into DTLS's range.
    let mut endpoint_config = quinn::EndpointConfig::default();
    endpoint_config.grease_quic_bit(false);
    let endpoint =
        Endpoint::new_with_abstract_socket(endpoint_config, Some(config), socket, runtime)?;
    Ok(SharedPort {
        endpoint,
        dtls_socket,
        dtls_inbound,
    })
}

/// quinn's socket with DTLS datagrams taken out on the way in.
struct DemuxSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    dtls: mpsc::Sender<Datagram>,
}

impl fmt::Debug for DemuxSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DemuxSocket")
            .field("inner", &self.inner)
            .finish()
    }
}

impl DemuxSocket {
    /// Hands the DTLS datagrams among the first `n` received to the DTLS server and
    /// moves the QUIC ones to the front; returns how many QUIC ones there are.
    fn divert(&self, n: usize, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> usize {
        let mut kept = 0;
        for i in 0..n {
            let m = meta[i];
            let data = &bufs[i][..m.len];
            if data.first().copied().is_some_and(is_dtls) {
                // A GRO batch holds datagrams of one peer, `stride` bytes apart.
                for d in data.chunks(m.stride.max(1)) {
                    let _ = self.dtls.try_send((d.to_vec(), m.addr));
                }
                continue;
            }
            if kept != i {
                let (front, back) = bufs.split_at_mut(i);
                front[kept][..m.len].copy_from_slice(&back[0][..m.len]);
                meta[kept] = m;
            }
            kept += 1;
        }
        kept
    }
}

impl AsyncUdpSocket for DemuxSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        self.inner.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        loop {
            let n = ready!(self.inner.poll_recv(cx, bufs, meta))?;
            let kept = self.divert(n, bufs, meta);
            if kept > 0 {
                return Poll::Ready(Ok(kept));
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::is_dtls;

    #[test]
    fn first_byte_ranges_follow_rfc_9443() {
        // DTLS content types: change_cipher_spec 20, alert 21, handshake 22, data 23,
        // DTLS 1.3's unified header 0x2f..0x3f.
        for b in [20, 21, 22, 23, 0x2f, 0x3f, 63] {
            assert!(is_dtls(b), "{b}");
        }
        // QUIC: short header 0x40..0x7f, long header 0xc0..0xff; STUN 0..3 and
        // anything else below 20 is neither.
        for b in [0, 1, 19, 64, 0x7f, 0x80, 0xc0, 0xff] {
            assert!(!is_dtls(b), "{b}");
        }
    }
}
