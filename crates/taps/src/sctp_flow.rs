//! Connections over SCTP streams, and transparent flow mapping.
//!
//! A [`SctpFlow`] is one stream of an association. The first connection to a remote uses
//! stream 0 of a fresh association; with flow mapping (on by default, see
//! [`crate::ContextBuilder::flow_mapping`]) a later connection from a preconnection with
//! the same properties to the same remote endpoint, or [`crate::Connection::clone_flow`],
//! becomes the next free stream of that association instead of a new handshake. The new
//! stream announces itself with one message of [`STREAM_OPEN_PPID`], so the peer's
//! listener sees the new connection at once; receivers drop those messages.
//!
//! Ending a flow's sending side (`poll_shutdown`, or close) sends one message of
//! [`FLOW_END_PPID`] after the data: the peer reads end of stream, like after a TCP FIN,
//! and can still answer. The association lives while any of its flows does. Closing the
//! last flow shuts the association down gracefully (SHUTDOWN after queued data); closing
//! another flow only releases its stream. Dropping the last flow without closing aborts
//! the association. (Standard per-stream reset, RFC 6525, would serve non-taps peers too,
//! but usrsctp allows one outstanding reset request per association, which many flows
//! closing at once would contend for.)
//!
//! Cost: a mapped flow costs a stream-table entry and one 1-byte message instead of a
//! four-way handshake, a UDP socket and a usrsctp socket. `AsyncRead`/`AsyncWrite` box
//! one future per pending call.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context as TaskContext, Poll};

use tokio::io::ReadBuf;
use usrsctp::{Association, StreamHandle};

use crate::security::quic::SharedQuic;
use crate::transport::sctp::{DATA_PPID, EMPTY_PPID, FLOW_END_PPID, STREAM_OPEN_PPID};

/// Largest message written by one `poll_write` (the rest is written by later calls): it
/// bounds the copy a write makes and how long one flow's message holds the association's
/// other streams back (without I-DATA a message's chunks go out back to back).
const WRITE_CHUNK: usize = 64 * 1024;

/// How much of a write of `len` bytes becomes one message. A write that fits in
/// [`WRITE_CHUNK`] goes whole (one message, as the application wrote it). From a longer
/// one the message takes the largest whole number of `fragment`s (usrsctp's fragmentation
/// point) that fits, so each of its chunks fills a packet: a 64 KiB message on loopback
/// (point 65,476) would take a full packet and a 60-byte one, and the short one cannot
/// join the next message's full first chunk. Only the end of the write can leave a short
/// chunk.
fn message_len(len: usize, fragment: Option<usize>) -> usize {
    if len <= WRITE_CHUNK {
        return len;
    }
    match fragment {
        Some(f) if f > 0 && f <= WRITE_CHUNK => WRITE_CHUNK / f * f,
        _ => WRITE_CHUNK,
    }
}

type IoFuture<T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send>>;

/// An association shared by the flows mapped onto it.
pub(crate) struct SharedAssociation {
    association: Association,
    /// How many stream ids this side has handed out (the next one to try follows).
    next_stream: AtomicU16,
    /// This side started the association (its last flow closing shuts it down); the
    /// accepting side keeps it open for the peer's next streams until the peer shuts down.
    initiator: bool,
    /// Open flows, and whether the association is shutting down. One lock, so a flow
    /// mapped onto the association and the last flow closing it cannot cross.
    flows: Mutex<Membership>,
}

#[derive(Default)]
struct Membership {
    open: usize,
    closing: bool,
}

impl SharedAssociation {
    /// The association this side started.
    pub(crate) fn initiated(association: Association) -> Arc<SharedAssociation> {
        SharedAssociation::new(association, true)
    }

    /// An association a listener accepted.
    pub(crate) fn accepted(association: Association) -> Arc<SharedAssociation> {
        SharedAssociation::new(association, false)
    }

    fn new(association: Association, initiator: bool) -> Arc<SharedAssociation> {
        Arc::new(SharedAssociation {
            association,
            next_stream: AtomicU16::new(0),
            initiator,
            flows: Mutex::new(Membership::default()),
        })
    }

    fn membership(&self) -> std::sync::MutexGuard<'_, Membership> {
        self.flows.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one more flow unless the association is shutting down.
    fn join(&self) -> bool {
        let mut m = self.membership();
        if m.closing {
            return false;
        }
        m.open += 1;
        true
    }

    /// Counts one flow less; `true` when it was the initiator's last one, which must now
    /// shut the association down (no flow can join any more).
    fn leave(&self) -> bool {
        let mut m = self.membership();
        m.open = m.open.saturating_sub(1);
        if m.open == 0 && self.initiator && !m.closing {
            m.closing = true;
            return true;
        }
        false
    }

    /// The association.
    pub(crate) fn association(&self) -> &Association {
        &self.association
    }

    /// Claims the next free stream of this side's half: the initiator opens odd ids
    /// (1, 3, 5 …), the accepting side even ones (2, 4 …), so both can open streams at
    /// the same moment without picking the same id; 0 belongs to the first flow. Cost:
    /// one stream-table insert, more only when ids wrap around to streams still in use.
    fn claim_stream(&self) -> Option<StreamHandle> {
        let (_, outbound) = self.association.streams();
        let first: u16 = if self.initiator { 1 } else { 2 };
        // Ids of this side's parity below the stream count.
        let ours = outbound.saturating_sub(first).div_ceil(2);
        (0..ours).find_map(|_| {
            let i = self.next_stream.fetch_add(1, Ordering::Relaxed) % ours;
            self.association.stream(first + 2 * i).ok()
        })
    }
}

/// Why an association takes no more flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoSibling {
    /// Its last flow closed it.
    ShuttingDown,
    /// Every stream id this side may open is in use.
    StreamsInUse,
}

/// One RFC 9622 connection carried by one SCTP stream.
pub(crate) struct SctpFlow {
    shared: Arc<SharedAssociation>,
    stream: Arc<StreamHandle>,
    read: Mutex<Option<IoFuture<Option<Vec<u8>>>>>,
    pending: Option<(Vec<u8>, usize)>,
    write: Mutex<Option<IoFuture<usize>>>,
    /// The whole message [`SctpFlow::poll_send`] is sending.
    sending: Mutex<Option<IoFuture<()>>>,
    /// The peer ended its sending side: reads return end of stream.
    read_ended: bool,
    /// Our sending side is ended ([`FLOW_END_PPID`] handed to usrsctp).
    write_ended: bool,
    /// The end marker being sent by `poll_shutdown`.
    ending: Mutex<Option<IoFuture<()>>>,
    /// Counted in the association's open flows (until closed or dropped).
    member: bool,
}

impl SctpFlow {
    /// The flow on `stream` of `shared`, counted as one of its flows even if the
    /// association is shutting down (an accepted stream exists already).
    pub(crate) fn new(shared: Arc<SharedAssociation>, stream: StreamHandle) -> SctpFlow {
        shared.membership().open += 1;
        SctpFlow::member(shared, stream)
    }

    fn member(shared: Arc<SharedAssociation>, stream: StreamHandle) -> SctpFlow {
        SctpFlow {
            shared,
            stream: Arc::new(stream),
            read: Mutex::new(None),
            pending: None,
            write: Mutex::new(None),
            sending: Mutex::new(None),
            read_ended: false,
            write_ended: false,
            ending: Mutex::new(None),
            member: true,
        }
    }

    /// The first flow of an association this side started: stream 0.
    pub(crate) fn first(association: Association) -> io::Result<SctpFlow> {
        let stream = association.stream(0).map_err(flow_error)?;
        Ok(SctpFlow::new(
            SharedAssociation::initiated(association),
            stream,
        ))
    }

    /// A new flow on the next free stream of the same association, announced to the
    /// peer with a [`STREAM_OPEN_PPID`] message. `Ok(Err(_))` when the association takes
    /// no more flows (shutting down, or every stream of this side in use): open a new
    /// association instead.
    pub(crate) async fn open_sibling(
        shared: &Arc<SharedAssociation>,
    ) -> io::Result<Result<SctpFlow, NoSibling>> {
        if !shared.join() {
            return Ok(Err(NoSibling::ShuttingDown));
        }
        // Counted from here: dropping `flow` on an error below leaves the count right.
        let Some(stream) = shared.claim_stream() else {
            shared.leave();
            return Ok(Err(NoSibling::StreamsInUse));
        };
        let flow = SctpFlow::member(shared.clone(), stream);
        flow.stream
            .send(&[0], true, STREAM_OPEN_PPID)
            .await
            .map_err(flow_error)?;
        Ok(Ok(flow))
    }

    /// The association this flow shares with its siblings.
    pub(crate) fn shared(&self) -> &Arc<SharedAssociation> {
        &self.shared
    }

    /// The stream id.
    pub(crate) fn stream_id(&self) -> u16 {
        self.stream.id()
    }

    /// Bytes of this stream queued and not yet acknowledged.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.stream.queued_bytes()
    }

    /// This flow's stream (to pin it to a path).
    pub(crate) fn stream(&self) -> &StreamHandle {
        &self.stream
    }

    /// Sends one message (one SCTP user message, ordered, however long: usrsctp takes it
    /// in pieces with explicit end of record). SCTP cannot carry an empty message, so
    /// one is sent as one byte of [`EMPTY_PPID`]. The caller repeats the same message
    /// after `Pending` (as with `poll_write`); the first call copies it into a boxed
    /// future.
    pub(crate) fn poll_send(
        &mut self,
        cx: &mut TaskContext<'_>,
        msg: &[u8],
    ) -> Poll<io::Result<()>> {
        let slot = self.sending.get_mut().unwrap_or_else(|e| e.into_inner());
        let fut = slot.get_or_insert_with(|| {
            let (data, ppid) = if msg.is_empty() {
                (vec![0u8], EMPTY_PPID)
            } else {
                (msg.to_vec(), DATA_PPID)
            };
            let stream = self.stream.clone();
            Box::pin(async move { stream.send(&data, true, ppid).await.map_err(flow_error) })
        });
        let r = fut.as_mut().poll(cx);
        if r.is_ready() {
            *slot = None;
        }
        r
    }

    /// Receives one whole message (what a byte read left of one first); `None` when
    /// the stream or association ended. Pending keeps the receive for the next call.
    pub(crate) fn poll_receive(
        &mut self,
        cx: &mut TaskContext<'_>,
    ) -> Poll<io::Result<Option<Vec<u8>>>> {
        if let Some((d, off)) = self.pending.take() {
            return Poll::Ready(Ok(Some(d[off..].to_vec())));
        }
        if self.read_ended {
            return Poll::Ready(Ok(None));
        }
        let slot = self.read.get_mut().unwrap_or_else(|e| e.into_inner());
        let fut = slot.get_or_insert_with(|| Box::pin(recv_data(self.stream.clone())));
        let m = std::task::ready!(fut.as_mut().poll(cx));
        *slot = None;
        let m = m?;
        self.read_ended = m.is_none();
        Poll::Ready(Ok(m))
    }

    /// Closes: the initiator's last flow of the association shuts it down gracefully
    /// (SHUTDOWN after queued data, awaited); any other flow ends its sending side (if not
    /// done yet) and releases its stream.
    pub(crate) async fn close(mut self) -> io::Result<()> {
        self.member = false;
        if self.shared.leave() {
            return self.shared.association.close().await.map_err(flow_error);
        }
        if !self.write_ended {
            // A failure means the association is gone, which ends the flow as well.
            let _ = self.stream.send(&[0], true, FLOW_END_PPID).await;
        }
        Ok(())
    }

    /// Aborts the whole association (every flow mapped onto it ends).
    pub(crate) fn abort(self) {
        self.shared.association.abort();
    }

    pub(crate) fn poll_read(
        &mut self,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // Empty messages carry no bytes: skip them (0 bytes read would mean EOF).
        while self.pending.is_none() {
            if self.read_ended {
                return Poll::Ready(Ok(()));
            }
            let slot = self.read.get_mut().unwrap_or_else(|e| e.into_inner());
            let fut = slot.get_or_insert_with(|| Box::pin(recv_data(self.stream.clone())));
            match fut.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(r) => {
                    *slot = None;
                    match r? {
                        Some(d) if d.is_empty() => {}
                        Some(d) => self.pending = Some((d, 0)),
                        None => {
                            self.read_ended = true;
                            return Poll::Ready(Ok(()));
                        }
                    }
                }
            }
        }
        if let Some((d, off)) = &mut self.pending {
            let n = (d.len() - *off).min(buf.remaining());
            buf.put_slice(&d[*off..*off + n]);
            *off += n;
            if *off == d.len() {
                self.pending = None;
            }
        }
        Poll::Ready(Ok(()))
    }

    pub(crate) fn poll_write(
        &mut self,
        cx: &mut TaskContext<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let slot = self.write.get_mut().unwrap_or_else(|e| e.into_inner());
        let fut = slot.get_or_insert_with(|| {
            // The caller repeats the same data after Pending (AsyncWrite contract).
            let fragment = (data.len() > WRITE_CHUNK)
                .then(|| self.stream.association().fragment_size())
                .flatten();
            let chunk = data[..message_len(data.len(), fragment)].to_vec();
            let stream = self.stream.clone();
            Box::pin(async move {
                let n = chunk.len();
                if n > 0 {
                    stream
                        .send(&chunk, true, DATA_PPID)
                        .await
                        .map_err(flow_error)?;
                }
                Ok(n)
            })
        });
        let r = fut.as_mut().poll(cx);
        if r.is_ready() {
            *slot = None;
        }
        r
    }

    pub(crate) fn poll_flush(&mut self, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        let slot = self.write.get_mut().unwrap_or_else(|e| e.into_inner());
        match slot {
            Some(fut) => {
                let r = fut.as_mut().poll(cx);
                if r.is_ready() {
                    *slot = None;
                }
                r.map(|r| r.map(|_| ()))
            }
            None => Poll::Ready(Ok(())),
        }
    }

    /// Flushes, then ends the sending side with one [`FLOW_END_PPID`] message (once).
    pub(crate) fn poll_shutdown(&mut self, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        if self.write_ended {
            return Poll::Ready(Ok(()));
        }
        std::task::ready!(self.poll_flush(cx))?;
        let stream = self.stream.clone();
        let slot = self.ending.get_mut().unwrap_or_else(|e| e.into_inner());
        let fut = slot.get_or_insert_with(|| {
            Box::pin(async move {
                stream
                    .send(&[0], true, FLOW_END_PPID)
                    .await
                    .map_err(flow_error)
            })
        });
        let r = std::task::ready!(fut.as_mut().poll(cx));
        *slot = None;
        self.write_ended = r.is_ok();
        Poll::Ready(r)
    }
}

impl Drop for SctpFlow {
    /// Dropping without close: the flow stops counting. When no handle of the association
    /// is left, dropping the `Association` aborts it.
    fn drop(&mut self) {
        if self.member {
            self.shared.membership().open -= 1;
        }
    }
}

/// A usrsctp error as the I/O error a flow reports: the kind says how the association
/// ended (the peer gone or aborting it reads as a reset, like TCP's RST; an abort of
/// ours as aborted), the text says why.
pub(crate) fn flow_error(e: usrsctp::Error) -> io::Error {
    let kind = match &e {
        usrsctp::Error::PeerGone(_) | usrsctp::Error::Lost(_) => io::ErrorKind::ConnectionReset,
        usrsctp::Error::Aborted => io::ErrorKind::ConnectionAborted,
        usrsctp::Error::Closed => io::ErrorKind::NotConnected,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, e)
}

/// The next data message of `stream` (announcements dropped).
async fn recv_data(stream: Arc<StreamHandle>) -> io::Result<Option<Vec<u8>>> {
    loop {
        match stream.recv().await.map_err(flow_error)? {
            None => return Ok(None),
            Some(m) if m.ppid == STREAM_OPEN_PPID => continue,
            Some(m) if m.ppid == EMPTY_PPID => return Ok(Some(Vec::new())),
            Some(m) if m.ppid == FLOW_END_PPID => return Ok(None),
            Some(m) => return Ok(Some(m.data)),
        }
    }
}

/// Associations open for flow mapping, by remote endpoint and property set.
#[derive(Default)]
pub(crate) struct FlowMap {
    slots: Mutex<HashMap<FlowKey, Arc<tokio::sync::Mutex<Slot>>>>,
}

/// Remote endpoint (`host:port`) and the address of the compiled property set: flows
/// are mapped only between preconnections sharing properties (a pointer comparison).
type FlowKey = (Arc<str>, usize);

/// What is known for one key.
#[derive(Default)]
pub(crate) struct Slot {
    /// The association flows are mapped onto, while any flow uses it.
    pub(crate) association: Weak<SharedAssociation>,
    /// The QUIC connection flows are mapped onto, while any flow uses it.
    pub(crate) quic: Weak<SharedQuic>,
    /// The last race for this key picked a stack without streams (TCP, TLS, UDP):
    /// later flows race on their own.
    pub(crate) unmappable: bool,
    /// When the last race for this key failed, and its error: the flows that were
    /// waiting for it fail with that error at once; a flow that comes later races anew.
    pub(crate) failed: Option<(std::time::Instant, crate::error::EstablishError)>,
}

impl FlowMap {
    /// The slot for `key`, created empty on first use. Entries whose association ended
    /// are dropped on the way (one pass over the map, which holds one entry per remote
    /// endpoint and property set in use).
    pub(crate) fn slot(&self, endpoint: &Arc<str>, props: usize) -> Arc<tokio::sync::Mutex<Slot>> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.retain(|_, s| {
            Arc::strong_count(s) > 1
                || s.try_lock()
                    .map(|s| s.association.strong_count() > 0 || s.quic.strong_count() > 0)
                    .unwrap_or(true)
        });
        slots.entry((endpoint.clone(), props)).or_default().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::{message_len, WRITE_CHUNK};

    #[test]
    fn a_write_that_fits_goes_whole() {
        assert_eq!(message_len(1, Some(65_476)), 1);
        assert_eq!(message_len(WRITE_CHUNK, Some(65_476)), WRITE_CHUNK);
        assert_eq!(message_len(WRITE_CHUNK, Some(1_444)), WRITE_CHUNK);
    }

    #[test]
    fn a_longer_write_is_cut_at_whole_fragments() {
        // Loopback: one full packet per message, not a full one and a 60-byte one.
        assert_eq!(message_len(1 << 20, Some(65_476)), 65_476);
        // A 1500-byte path: 45 full packets.
        assert_eq!(message_len(1 << 20, Some(1_444)), 45 * 1_444);
        // Unknown or odd fragmentation points: the plain limit.
        assert_eq!(message_len(1 << 20, None), WRITE_CHUNK);
        assert_eq!(message_len(1 << 20, Some(0)), WRITE_CHUNK);
        assert_eq!(message_len(1 << 20, Some(WRITE_CHUNK + 1)), WRITE_CHUNK);
    }
}
