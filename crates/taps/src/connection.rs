//! [`Connection`]: an established flow, whatever stack won.
//!
//! Two ways to use it:
//! - messages: [`Connection::send`] / [`Connection::receive`]. Datagram stacks carry one
//!   message per datagram (DTLS: per record, one datagram, up to 16 KiB), SCTP one message per SCTP user message on the connection's
//!   stream. Byte-stream stacks (TCP, MPTCP) frame each message with a 4-byte
//!   big-endian length prefix (documented framing, so peers in any language can speak
//!   it); messages are limited to 16 MiB by default, settable per connection with
//!   [`Connection::set_max_message_size`]. A received length over the limit is an error
//!   ([`Error::MessageTooBig`]) before anything is allocated, and the buffer of an
//!   accepted length grows with the bytes that actually arrive (a peer announcing 16 MiB
//!   and sending nothing costs nothing); after such an error the receiving side stays
//!   failed (the framing is lost).
//! - bytes: `Connection` implements tokio's `AsyncRead` and `AsyncWrite` (raw bytes on
//!   stream stacks; one datagram per write/read on datagram stacks; on SCTP each write
//!   of up to 64 KiB is one message and reads return message bytes in order).
//!
//! Counters are plain integers updated in place: statistics cost nothing per call
//! beyond an addition; RTT comes from `TCP_INFO` only when asked for.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context as TaskContext, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use taps_core::candidates::Candidate;
use taps_core::properties::Protocol;
use taps_core::race::RaceReport;
use taps_core::{Security, Stack};

use crate::framing::{FrameReader, FrameWriter};
use crate::sctp_flow::{NoSibling, SctpFlow};
use crate::security::quic::SharedQuic;
use crate::security::{dtls, DtlsFlow, QuicStream, SecurityInfo};
use crate::transport::{Established, Stream};
use crate::{Error, UsageError};

/// Default largest message [`Connection::send`] and [`Connection::receive`] accept on a
/// framed byte stream (16 MiB), so a corrupt length cannot make the receiver allocate
/// gigabytes; see [`Connection::set_max_message_size`].
pub(crate) const MAX_MESSAGE: usize = 16 << 20;

/// One of a listener's connection slots, held by an accepted connection: dropping it
/// frees the slot (the permit) and lowers the listener's live count. One atomic
/// decrement.
pub(crate) struct Slot {
    pub(crate) permit: tokio::sync::OwnedSemaphorePermit,
    pub(crate) live: Arc<std::sync::atomic::AtomicUsize>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let _ = &self.permit;
        self.live.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// What was established and how.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    /// The stack in use.
    pub stack: Stack,
    /// Local address.
    pub local: SocketAddr,
    /// Remote address.
    pub remote: SocketAddr,
    /// For MPTCP: whether MPTCP is in use (false = fell back to plain TCP).
    pub mptcp_active: Option<bool>,
    /// The race that made it: for a connection `initiate` raced. `None` for accepted
    /// connections, for flows mapped onto an existing SCTP association or QUIC
    /// connection and for clones (their path is the first flow's; read its info). Its
    /// `timeline` is empty unless the preconnection asked for one
    /// ([`Preconnection::race_timeline`](crate::Preconnection::race_timeline)).
    pub race: Option<RaceReport>,
    /// What the security handshake established (secure stacks).
    pub security: Option<SecurityInfo>,
}

impl ConnectionInfo {
    /// The winning candidate of the race that made this connection (see
    /// [`race`](Self::race)): the report's winner, not a copy. Cost: an index into the
    /// report's attempts.
    pub fn candidate(&self) -> Option<&Candidate> {
        self.race.as_ref()?.won().map(|a| &a.candidate)
    }
}

/// Traffic counters and transport statistics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Statistics {
    /// Bytes sent (payload, without framing).
    pub bytes_sent: u64,
    /// Bytes received (payload, without framing).
    pub bytes_received: u64,
    /// Messages sent.
    pub messages_sent: u64,
    /// Messages received.
    pub messages_received: u64,
    /// Smoothed RTT from `TCP_INFO` (TCP and MPTCP only).
    pub rtt: Option<Duration>,
    /// RTT variance from `TCP_INFO`.
    pub rtt_var: Option<Duration>,
}

pub(crate) enum Io {
    Stream(Stream),
    Datagram(UdpSocket),
    /// A datagram flow accepted by a listener: shared socket, datagrams demultiplexed
    /// to this flow by peer address.
    Accepted {
        socket: Arc<UdpSocket>,
        peer: SocketAddr,
        rx: mpsc::Receiver<Vec<u8>>,
        pending: Option<(Vec<u8>, usize)>,
    },
    /// One stream of an SCTP association.
    Sctp(SctpFlow),
    /// A DTLS session: one message per record.
    Dtls(DtlsFlow),
}

impl Io {
    /// The TCP socket underneath, if there is one.
    fn tcp(&self) -> Option<&tokio::net::TcpStream> {
        match self {
            Io::Stream(s) => s.tcp(),
            _ => None,
        }
    }
}

/// An established connection.
pub struct Connection {
    io: Io,
    /// Boxed: the winning candidate, the race report and the security summary are large
    /// and read rarely, while the connection is moved through every layer that returns
    /// it and sits in the caller's futures (sizes in docs/benchmarks.md).
    info: Box<ConnectionInfo>,
    stats: Statistics,
    /// Largest framed message sent or received (byte streams).
    max_message: usize,
    /// A received length was over the limit: the framing is lost, receiving fails.
    framing_lost: Option<usize>,
    /// The framed message being received (byte streams).
    frame_in: FrameReader,
    /// The framed message being sent (byte streams).
    frame_out: FrameWriter,
    /// The sending side was shut down (FIN sent): `close` does not repeat it (a second
    /// shutdown of a TCP socket whose peer has closed fails with ENOTCONN).
    write_shut: bool,
    /// The listener's connection slot (accepted connections): freed on drop.
    _slot: Option<Slot>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("stack", &self.info.stack)
            .field("local", &self.info.local)
            .field("remote", &self.info.remote)
            .finish_non_exhaustive()
    }
}

impl Connection {
    pub(crate) fn from_established(
        est: Established,
        stack: Stack,
        race: Option<RaceReport>,
    ) -> io::Result<Connection> {
        let mut security = None;
        let (io, mptcp_active) = match est {
            Established::Tcp(s, flavor) => (Io::Stream(Stream::Plain(s)), flavor.mptcp_active),
            Established::Tls(t, flavor, info) => {
                security = Some(*info);
                (Io::Stream(Stream::Tls(t)), flavor.mptcp_active)
            }
            Established::Quic(q, info) => {
                security = Some(*info);
                (Io::Stream(Stream::Quic(q)), None)
            }
            Established::Dtls(d, info) => {
                security = Some(*info);
                (Io::Dtls(*d), None)
            }
            Established::Udp(s, _) => (Io::Datagram(s), None),
            Established::Sctp(a) => (Io::Sctp(SctpFlow::first(a)?), None),
        };
        let mut conn = Connection::new(io, stack, mptcp_active, race)?;
        conn.info.security = security;
        Ok(conn)
    }

    pub(crate) fn new(
        io: Io,
        stack: Stack,
        mptcp_active: Option<bool>,
        race: Option<RaceReport>,
    ) -> io::Result<Connection> {
        // An initiated connection's peer is its candidate's address: no getpeername.
        let known_peer = race
            .as_ref()
            .and_then(RaceReport::won)
            .map(|a| a.candidate.remote);
        let (local, remote) = match &io {
            Io::Stream(s) => s.addrs(known_peer)?,
            Io::Datagram(s) => (s.local_addr()?, s.peer_addr()?),
            Io::Accepted { socket, peer, .. } => (socket.local_addr()?, *peer),
            Io::Dtls(d) => (d.local, d.peer),
            Io::Sctp(f) => (
                f.shared().association().local_addr(),
                f.shared().association().remote_addr(),
            ),
        };
        Ok(Connection::assemble(
            io,
            stack,
            mptcp_active,
            local,
            remote,
            race,
        ))
    }

    /// A plain stream a listener accepted from `peer`; `local` when the listener knows
    /// it (bound to one address), else asked for (one `getsockname`).
    pub(crate) fn accepted(
        stream: tokio::net::TcpStream,
        stack: Stack,
        mptcp_active: Option<bool>,
        local: Option<SocketAddr>,
        peer: SocketAddr,
    ) -> io::Result<Connection> {
        let local = match local {
            Some(l) => l,
            None => stream.local_addr()?,
        };
        let io = Io::Stream(Stream::Plain(stream));
        Ok(Connection::assemble(
            io,
            stack,
            mptcp_active,
            local,
            peer,
            None,
        ))
    }

    /// The connection, its addresses known.
    fn assemble(
        io: Io,
        stack: Stack,
        mptcp_active: Option<bool>,
        local: SocketAddr,
        remote: SocketAddr,
        race: Option<RaceReport>,
    ) -> Connection {
        Connection {
            io,
            info: Box::new(ConnectionInfo {
                stack,
                local,
                remote,
                mptcp_active,
                race,
                security: None,
            }),
            stats: Statistics::default(),
            max_message: MAX_MESSAGE,
            framing_lost: None,
            frame_in: FrameReader::default(),
            frame_out: FrameWriter::default(),
            write_shut: false,
            _slot: None,
        }
    }

    /// Holds one of a listener's connection slots until this connection is dropped.
    pub(crate) fn with_slot(mut self, slot: Slot) -> Connection {
        self._slot = Some(slot);
        self
    }

    /// Sets the largest message [`send`](Self::send) and [`receive`](Self::receive) accept
    /// on a framed byte stream (TCP, MPTCP, TLS, QUIC streams; default 16 MiB; at most `u32::MAX`, what the 4-byte prefix can say). A received length
    /// over it fails with [`Error::MessageTooBig`] before any allocation. No effect on
    /// datagram stacks and SCTP (their messages are bounded by the stack). Free.
    pub fn set_max_message_size(&mut self, max: usize) {
        self.max_message = max.min(u32::MAX as usize);
    }

    /// The largest framed message this connection sends or receives. Free.
    pub fn max_message_size(&self) -> usize {
        self.max_message
    }

    /// Records what the security handshake established (accepted TLS connections).
    pub(crate) fn set_security(&mut self, info: SecurityInfo) {
        self.info.security = Some(info);
    }

    /// What was established, and the race report for initiated connections.
    pub fn info(&self) -> &ConnectionInfo {
        &self.info
    }

    /// Counters, plus RTT from `TCP_INFO` on TCP (one getsockopt).
    pub fn statistics(&self) -> Statistics {
        let mut s = self.stats.clone();
        if let Some(t) = self.io.tcp() {
            if let Some(info) = crate::transport::tcp_info(t) {
                s.rtt = Some(info.rtt);
                s.rtt_var = Some(info.rttvar);
            }
        }
        s
    }

    /// Sends one message (framed on byte streams, one datagram otherwise, one SCTP
    /// message on SCTP). Not cancel-safe on byte streams and SCTP: a send dropped after
    /// part of the message went leaves the stream mid-message.
    pub async fn send(&mut self, msg: &[u8]) -> Result<(), Error> {
        std::future::poll_fn(|cx| self.poll_send(cx, msg)).await
    }

    /// The poll form of [`send`](Self::send), for callers that drive the connection
    /// from their own future: `Pending` until the whole message is handed to the
    /// transport; call again with the same message (as with `AsyncWrite::poll_write`).
    /// On SCTP the message goes whole, however long (usrsctp takes it in pieces with
    /// explicit end of record); on UDP and DTLS it is one datagram. Costs what `send`
    /// costs: a copy into the transport (SCTP: one boxed future per message).
    pub fn poll_send(&mut self, cx: &mut TaskContext<'_>, msg: &[u8]) -> Poll<Result<(), Error>> {
        let r = match &mut self.io {
            Io::Stream(s) => self.frame_out.poll_frame(cx, s, msg, self.max_message),
            Io::Datagram(s) => s.poll_send(cx, msg).map_ok(drop).map_err(Error::from),
            Io::Accepted { socket, peer, .. } => socket
                .poll_send_to(cx, msg, *peer)
                .map_ok(drop)
                .map_err(Error::from),
            Io::Sctp(f) => f.poll_send(cx, msg).map_err(Error::from),
            Io::Dtls(d) => {
                if msg.len() > dtls::MAX_MESSAGE {
                    return Poll::Ready(Err(Error::MessageTooBig {
                        size: msg.len(),
                        max: dtls::MAX_MESSAGE,
                    }));
                }
                d.poll_write(cx, msg).map_ok(drop).map_err(Error::from)
            }
        };
        if let Poll::Ready(Ok(())) = r {
            self.stats.bytes_sent += msg.len() as u64;
            self.stats.messages_sent += 1;
        }
        r
    }

    /// Receives one message; `None` when the peer closed (byte streams) or the listener
    /// stopped (accepted datagram flows). Cancel-safe: what a dropped call read is kept
    /// for the next one.
    pub async fn receive(&mut self) -> Result<Option<Vec<u8>>, Error> {
        std::future::poll_fn(|cx| self.poll_receive(cx)).await
    }

    /// The poll form of [`receive`](Self::receive), for callers that drive the
    /// connection from their own future: `Ready` with one whole message (an SCTP
    /// message however long, one datagram, one framed message), `Ready(Ok(None))` at
    /// the end. A datagram read allocates 64 KiB and keeps what arrived.
    pub fn poll_receive(
        &mut self,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Result<Option<Vec<u8>>, Error>> {
        let msg = match &mut self.io {
            Io::Stream(s) => {
                if let Some(size) = self.framing_lost {
                    let max = self.max_message;
                    return Poll::Ready(Err(Error::MessageTooBig { size, max }));
                }
                match ready!(self.frame_in.poll_frame(cx, s, self.max_message)) {
                    Ok(Some(m)) => m,
                    Ok(None) => return Poll::Ready(Ok(None)),
                    Err(Error::MessageTooBig { size, max }) => {
                        // The rest of the stream cannot be framed any more.
                        self.framing_lost = Some(size);
                        return Poll::Ready(Err(Error::MessageTooBig { size, max }));
                    }
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            Io::Datagram(s) => loop {
                ready!(s.poll_recv_ready(cx))?;
                let mut buf = vec![0; 65536];
                match s.try_recv(&mut buf) {
                    Ok(n) => {
                        buf.truncate(n);
                        break buf;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Poll::Ready(Err(e.into())),
                }
            },
            Io::Accepted { rx, pending, .. } => match pending.take() {
                Some((d, off)) => d[off..].to_vec(),
                None => match ready!(rx.poll_recv(cx)) {
                    Some(d) => d,
                    None => return Poll::Ready(Ok(None)),
                },
            },
            Io::Sctp(f) => match ready!(f.poll_receive(cx))? {
                Some(d) => d,
                None => return Poll::Ready(Ok(None)),
            },
            Io::Dtls(d) => match ready!(d.poll_receive(cx))? {
                Some(m) => m,
                None => return Poll::Ready(Ok(None)),
            },
        };
        self.stats.bytes_received += msg.len() as u64;
        self.stats.messages_received += 1;
        Poll::Ready(Ok(Some(msg)))
    }

    /// Closes gracefully: on byte streams, sends FIN after queued data; the peer reads
    /// to the end.
    /// On SCTP, the last connection of an association shuts it down gracefully
    /// (SHUTDOWN after queued data); others release their stream. On DTLS, the session
    /// sends close_notify after the queued messages.
    ///
    /// The returned future holds only the transport (the rest of the connection, its
    /// info and race report, is freed at the call) and is a few hundred bytes; SCTP's
    /// shutdown state is allocated only for an SCTP connection.
    pub fn close(self) -> impl Future<Output = Result<(), Error>> + Send + 'static {
        let Connection {
            io,
            write_shut,
            _slot: slot,
            ..
        } = self;
        async move {
            match io {
                Io::Stream(mut s) if !write_shut => s.shutdown().await?,
                Io::Sctp(f) => Box::pin(f.close()).await?,
                _ => {}
            }
            // A listener's slot is freed once the connection has closed.
            drop(slot);
            Ok(())
        }
    }

    /// Aborts: on TCP, resets the connection (RST) instead of closing it; on SCTP,
    /// aborts the association (with every connection mapped onto it).
    pub fn abort(self) {
        match self.io {
            Io::Stream(Stream::Quic(q)) => q.shared.conn.close(0u32.into(), b"abort"),
            Io::Stream(s) => {
                if let Some(t) = s.tcp() {
                    let _ = t.set_zero_linger();
                }
            }
            Io::Sctp(f) => f.abort(),
            _ => {}
        }
    }

    /// RFC 9622 Clone: a new connection to the same peer with the same properties. On
    /// SCTP it is a new stream of this connection's association, on QUIC a new stream of
    /// its QUIC connection (no handshake; the peer sees a new connection); other stacks
    /// cannot clone here and return a usage error (initiate again from the
    /// preconnection instead). The clone ran no race: its `info().race` is `None`.
    pub async fn clone_flow(&self) -> Result<Connection, Error> {
        match &self.io {
            Io::Stream(Stream::Quic(q)) => Connection::quic_sibling(&q.shared)
                .await?
                .ok_or(Error::usage(UsageError::QuicNoStream)),
            Io::Sctp(f) => {
                let flow = SctpFlow::open_sibling(f.shared()).await?.map_err(|why| {
                    Error::usage(match why {
                        NoSibling::ShuttingDown => UsageError::SctpShuttingDown,
                        NoSibling::StreamsInUse => UsageError::SctpStreamsInUse,
                    })
                })?;
                Ok(Connection::new(
                    Io::Sctp(flow),
                    self.info.stack,
                    None,
                    None,
                )?)
            }
            _ => Err(Error::usage(UsageError::NotCloneable)),
        }
    }

    /// The SCTP stream this connection uses (`None` on other stacks).
    pub fn sctp_stream(&self) -> Option<u16> {
        match &self.io {
            Io::Sctp(f) => Some(f.stream_id()),
            _ => None,
        }
    }

    /// Bytes this connection has queued and not yet acknowledged by the peer (SCTP: the
    /// stream's send queue; `None` on other stacks). One lock, no I/O.
    pub fn queued_bytes(&self) -> Option<usize> {
        match &self.io {
            Io::Sctp(f) => Some(f.queued_bytes()),
            _ => None,
        }
    }

    /// The TCP (or MPTCP) socket under this connection, if it has one.
    pub(crate) fn tcp_stream(&self) -> Option<&tokio::net::TcpStream> {
        self.io.tcp()
    }

    /// The QUIC connection this one is a stream of, if it is.
    pub(crate) fn quic_shared(&self) -> Option<&Arc<SharedQuic>> {
        match &self.io {
            Io::Stream(Stream::Quic(q)) => Some(&q.shared),
            _ => None,
        }
    }

    /// The QUIC connection this one is a stream of, with that stream given up (reset
    /// with `code`): HTTP/3 opens its own streams on the connection. `None` (and the
    /// connection kept as it was) if it is not a QUIC stream.
    #[cfg(feature = "http")]
    pub(crate) fn take_quic(&mut self, code: u32) -> Option<Arc<SharedQuic>> {
        match &mut self.io {
            Io::Stream(Stream::Quic(q)) => {
                q.cancel(code);
                Some(q.shared.clone())
            }
            _ => None,
        }
    }

    /// A new stream of `shared` as a connection (no handshake); `None` if the QUIC
    /// connection is closing or the peer grants no stream now.
    pub(crate) async fn quic_sibling(shared: &Arc<SharedQuic>) -> io::Result<Option<Connection>> {
        let Some(stream) = QuicStream::sibling(shared).await else {
            return Ok(None);
        };
        let stack = Stack::new(Protocol::Quic, Security::QuicTls);
        let mut conn = Connection::new(
            Io::Stream(Stream::Quic(Box::new(stream))),
            stack,
            None,
            None,
        )?;
        conn.info.security = Some(shared.info.clone());
        Ok(Some(conn))
    }

    pub(crate) fn sctp_flow(&self) -> Option<&SctpFlow> {
        match &self.io {
            Io::Sctp(f) => Some(f),
            _ => None,
        }
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = match &mut this.io {
            Io::Stream(s) => Pin::new(s).poll_read(cx, buf),
            Io::Datagram(s) => s.poll_recv(cx, buf),
            Io::Accepted { rx, pending, .. } => {
                if pending.is_none() {
                    match rx.poll_recv(cx) {
                        Poll::Ready(Some(d)) => *pending = Some((d, 0)),
                        Poll::Ready(None) => return Poll::Ready(Ok(())),
                        Poll::Pending => return Poll::Pending,
                    }
                }
                if let Some((d, off)) = pending {
                    let n = (d.len() - *off).min(buf.remaining());
                    buf.put_slice(&d[*off..*off + n]);
                    *off += n;
                    if *off == d.len() {
                        *pending = None;
                    }
                }
                Poll::Ready(Ok(()))
            }
            Io::Sctp(f) => f.poll_read(cx, buf),
            Io::Dtls(d) => d.poll_read(cx, buf),
        };
        this.stats.bytes_received += (buf.filled().len() - before) as u64;
        r
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = match &mut this.io {
            Io::Stream(s) => Pin::new(s).poll_write(cx, data),
            Io::Datagram(s) => s.poll_send(cx, data),
            Io::Accepted { socket, peer, .. } => socket.poll_send_to(cx, data, *peer),
            Io::Sctp(f) => f.poll_write(cx, data),
            Io::Dtls(d) => d.poll_write(cx, data),
        };
        if let Poll::Ready(Ok(n)) = &r {
            this.stats.bytes_sent += *n as u64;
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Stream(s) => Pin::new(s).poll_flush(cx),
            Io::Sctp(f) => f.poll_flush(cx),
            _ => Poll::Ready(Ok(())),
        }
    }

    /// Ends the sending side: a FIN on TCP; on SCTP a one-byte end-of-flow message after
    /// the data (the peer reads end of stream; the association stays up until
    /// [`Connection::close`]).
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match &mut this.io {
            Io::Stream(s) => {
                let done = Pin::new(s).poll_shutdown(cx);
                if matches!(done, Poll::Ready(Ok(()))) {
                    this.write_shut = true;
                }
                done
            }
            Io::Sctp(f) => f.poll_shutdown(cx),
            _ => Poll::Ready(Ok(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framing::read_frame;

    fn decode(mut bytes: &[u8]) -> Vec<Result<Option<Vec<u8>>, String>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut out = Vec::new();
            loop {
                let r = read_frame(&mut bytes, MAX_MESSAGE)
                    .await
                    .map_err(|e| e.to_string());
                let last = !matches!(r, Ok(Some(_)));
                out.push(r);
                if last {
                    return out;
                }
            }
        })
    }

    #[test]
    fn frames_decode_in_order_and_end_cleanly() {
        let r = decode(b"\0\0\0\x02hi\0\0\0\0");
        assert_eq!(r, [Ok(Some(b"hi".to_vec())), Ok(Some(vec![])), Ok(None)]);
    }

    #[test]
    fn an_end_inside_a_length_is_an_error() {
        // A stream that ends after 1-3 bytes of a header is a truncated message, not a
        // clean end.
        for cut in [&b"\0"[..], b"\0\0", b"\0\0\0", b"\0\0\0\x01x\0\0"] {
            let r = decode(cut);
            assert!(
                matches!(r.last(), Some(Err(e)) if e.contains("4-byte length")),
                "{cut:?}: {r:?}"
            );
        }
    }

    #[test]
    fn a_huge_length_is_an_error_before_any_allocation() {
        let r = decode(b"\xff\xff\xff\xffabc");
        assert!(
            matches!(&r[..], [Err(e)] if e.contains("16777216")),
            "{r:?}"
        );
    }

    #[test]
    fn a_body_cut_short_is_an_error() {
        let r = decode(b"\0\0\0\x05abc");
        assert!(matches!(&r[..], [Err(_)]), "{r:?}");
    }
}
