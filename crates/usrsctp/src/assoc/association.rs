//! The public handles of an established association: [`Association`] and the per-stream
//! [`StreamHandle`].

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::inbox::Inbox;
use super::inner::AssocInner;
use super::message::{Message, Progress};
use super::router::StreamInbox;
use super::shared::AssocShared;
use crate::error::{Error, Result};
use crate::ffi::{self, Plain};
use crate::sys::lock;
use crate::Scheduler;

/// An established SCTP association. Cloning is an `Arc` increment; all clones share the
/// association, which is aborted (ABORT chunk, socket and UDP resources freed) when the last
/// clone and the last [`StreamHandle`] are dropped.
#[derive(Clone)]
pub struct Association {
    pub(crate) inner: Arc<AssocInner>,
}

impl std::fmt::Debug for Association {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Association")
            .field("local", &self.inner.local)
            .field("remote", &self.inner.remote)
            .finish()
    }
}

impl Association {
    fn shared(&self) -> &AssocShared {
        &self.inner.shared
    }

    /// Sends one message on `stream`. Waits (asynchronously) for send-buffer space instead of
    /// failing; messages larger than a piece (half the send buffer, at most 64 KiB) are handed
    /// over in pieces with explicit EOR. Senders on one association are serialised per
    /// message. Cancel-safe between messages only: dropping the future after part of a
    /// multi-piece message was handed over aborts the association. Costs one `usrsctp_sendv`
    /// (a copy into usrsctp's send buffer) per piece.
    pub async fn send(&self, stream: u16, data: &[u8], ordered: bool, ppid: u32) -> Result<()> {
        self.shared().send(stream, data, ordered, ppid, None).await
    }

    /// Receives the next message of a stream that has no [`StreamHandle`] (all streams if
    /// none were claimed and stream accepting is off). `Ok(None)` after a graceful shutdown,
    /// `Err` after an abort. Cancel-safe. No I/O: pops a queue the driver task fills.
    pub async fn recv(&self) -> Result<Option<Message>> {
        let ib = lock(&self.shared().router).default.clone();
        let m = ib.pop().await?;
        if let Some(m) = &m {
            self.shared().release(m.data.len());
        }
        Ok(m)
    }

    /// Negotiated `(inbound, outbound)` stream counts. No I/O.
    pub fn streams(&self) -> (u16, u16) {
        self.shared().streams()
    }

    /// Our UDP address. No I/O.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    /// The peer's UDP address. No I/O.
    pub fn remote_addr(&self) -> SocketAddr {
        self.inner.remote
    }

    /// Graceful close of the whole association: SHUTDOWN once all queued data is
    /// acknowledged, then waits for the shutdown to complete (bound it with a timeout). One
    /// `usrsctp_shutdown`.
    pub async fn close(&self) -> Result<()> {
        let mut rx = self.shared().progress.subscribe();
        match self.shared().sock.shutdown(libc::SHUT_WR) {
            Ok(()) => {}
            Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::ENOTCONN) => {}
            Err(e) => return Err(e),
        }
        loop {
            match &*rx.borrow_and_update() {
                Progress::Closed => return Ok(()),
                Progress::Failed(e) => return Err(e.clone()),
                _ => {}
            }
            if rx.changed().await.is_err() {
                return Ok(());
            }
        }
    }

    /// Aborts the association at once (ABORT chunk); every waiter gets [`Error::Aborted`].
    /// One setsockopt and `usrsctp_close`.
    pub fn abort(&self) {
        self.shared().abort();
    }

    /// Whether the association has ended (closed, lost or aborted). No I/O.
    pub fn is_closed(&self) -> bool {
        lock(&self.shared().router).end.is_some()
    }

    /// Selects the RFC 8260 stream scheduler (`SCTP_PLUGGABLE_SS`). One setsockopt; applies
    /// to data queued from now on (usrsctp re-sorts what is already queued).
    pub fn set_scheduler(&self, s: Scheduler) -> Result<()> {
        self.shared()
            .rrp
            .store(s == Scheduler::RoundRobinPacket, Ordering::Relaxed);
        let v = ffi::sctp_assoc_value {
            assoc_id: 0,
            assoc_value: s.raw(),
        };
        self.shared().sock.setopt(
            ffi::IPPROTO_SCTP,
            ffi::SCTP_PLUGGABLE_SS,
            &v,
            "SCTP_PLUGGABLE_SS",
        )
    }

    /// Sets the scheduler parameter of an outbound stream (`SCTP_SS_VALUE`): the priority for
    /// [`Scheduler::Priority`] (lower value is served first), the weight for
    /// [`Scheduler::FairBandwidth`]. One setsockopt.
    pub fn set_stream_value(&self, stream: u16, value: u16) -> Result<()> {
        let v = ffi::sctp_stream_value {
            assoc_id: 0,
            stream_id: stream,
            stream_value: value,
        };
        self.shared()
            .sock
            .setopt(ffi::IPPROTO_SCTP, ffi::SCTP_SS_VALUE, &v, "SCTP_SS_VALUE")
    }

    /// Bytes handed to usrsctp on `stream` and not yet known to be acknowledged. usrsctp has
    /// no per-stream queue query, so this is our own count: bytes handed over on the stream
    /// since the association's send buffer was last seen empty, capped by the association's
    /// total (an upper bound; exact when one stream has data outstanding; 0 once everything
    /// is acknowledged). One getsockopt.
    pub fn queued_bytes(&self, stream: u16) -> usize {
        self.shared().queued(Some(stream))
    }

    /// Bytes queued or in flight for the whole association (usrsctp's own count, which
    /// includes 16 bytes of DATA chunk header per chunk already built; capped by what we
    /// handed over). One getsockopt.
    pub fn queued_bytes_total(&self) -> usize {
        self.shared().queued(None)
    }

    /// The largest message payload that goes out as one DATA chunk (usrsctp's fragmentation
    /// point: the path MTU less the SCTP common and DATA chunk headers). A message of a
    /// whole number of these fills every packet it takes; any other size leaves a short
    /// last chunk that cannot share a packet with the next message's first, full one (on
    /// loopback, where the point is 65,476 bytes, a 64 KiB message takes two packets).
    /// `None` when usrsctp does not say (the association is gone). One getsockopt
    /// (`SCTP_STATUS`), no system call.
    pub fn fragment_size(&self) -> Option<usize> {
        let mut st = ffi::sctp_status::zeroed();
        self.shared()
            .sock
            .getopt(ffi::IPPROTO_SCTP, ffi::SCTP_STATUS, &mut st, "SCTP_STATUS")
            .ok()
            .map(|()| st.sstat_fragmentation_point as usize)
            .filter(|&f| f > 0)
    }

    /// Claims `stream`: its messages go to the returned handle, those that arrived before
    /// the claim and wait for [`Association::recv`] included (a peer may send on a stream
    /// as soon as the association is up, before this side claims it). Fails if the stream
    /// already has a handle. No I/O: one inbox allocation.
    pub fn stream(&self, id: u16) -> Result<StreamHandle> {
        let (_, outbound) = self.streams();
        if outbound != 0 && id >= outbound {
            return Err(Error::InvalidStream {
                stream: id,
                streams: outbound,
            });
        }
        let mut r = lock(&self.shared().router);
        if r.streams.contains_key(&id) {
            return Err(Error::StreamInUse(id));
        }
        let ib = Inbox::new();
        for m in r.default.take_where(|m| m.stream == id) {
            ib.push(m);
        }
        if let Some(end) = &r.end {
            ib.end(end.clone());
        }
        r.streams.insert(id, ib.clone());
        Ok(StreamHandle {
            pinned: std::sync::Mutex::new(None),
            assoc: self.clone(),
            id,
            inbox: ib,
        })
    }

    /// Waits for a stream the peer started using (a message on a stream without a handle).
    /// The first call switches the association to stream-accepting mode (also settable with
    /// [`SctpOptions::accept_streams`](crate::SctpOptions::accept_streams)); messages
    /// already waiting for `recv` move to their streams. `Ok(None)` after a graceful
    /// shutdown. No I/O.
    pub async fn accept_stream(&self) -> Result<Option<StreamHandle>> {
        let accepts = {
            let mut r = lock(&self.shared().router);
            if !r.accept_mode {
                r.accept_mode = true;
                let waiting = r.default.drain();
                for m in waiting {
                    r.dispatch(m);
                }
            }
            r.accepts.clone()
        };
        Ok(accepts.pop().await?.map(|(id, inbox)| StreamHandle {
            pinned: std::sync::Mutex::new(None),
            assoc: self.clone(),
            id,
            inbox,
        }))
    }
}

/// One stream of an association: sends on it, receives only its messages. Holds the
/// association alive. Dropping it releases the stream id (later messages on it go to
/// `recv`/`accept_stream` again).
pub struct StreamHandle {
    assoc: Association,
    id: u16,
    inbox: StreamInbox,
    /// The path every send of this stream goes to ([`StreamHandle::pin_to_path`]).
    pinned: std::sync::Mutex<Option<crate::PathId>>,
}

impl std::fmt::Debug for StreamHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamHandle")
            .field("id", &self.id)
            .finish()
    }
}

impl StreamHandle {
    /// The stream id. No I/O.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// The association this stream belongs to (a borrow; cloning it is an `Arc` increment).
    pub fn association(&self) -> &Association {
        &self.assoc
    }

    /// Sends one message on this stream; see [`Association::send`] (same cost), or
    /// [`Association::send_on_path`] while the stream is pinned to a path.
    pub async fn send(&self, data: &[u8], ordered: bool, ppid: u32) -> Result<()> {
        let pinned = *crate::sys::lock(&self.pinned);
        match pinned {
            Some(path) => {
                self.assoc
                    .send_on_path(path, self.id, data, ordered, ppid)
                    .await
            }
            None => self.assoc.send(self.id, data, ordered, ppid).await,
        }
    }

    /// Pins this stream to `path` (every later send goes there, `SCTP_ADDR_OVER`, with
    /// the association's CMT on or off: the stream-to-path mapping "Fixed" of CMT
    /// scheduling), or unpins it (`None`: usrsctp chooses again). The path must be one of
    /// the association's ([`Association::paths`]); sends fail with EINVAL otherwise. Needs
    /// the process-wide CMT switch, as [`Association::send_on_path`] does. One lock.
    pub fn pin_to_path(&self, path: Option<crate::PathId>) {
        *crate::sys::lock(&self.pinned) = path;
    }

    /// The path this stream is pinned to, if any. One lock.
    pub fn pinned_path(&self) -> Option<crate::PathId> {
        *crate::sys::lock(&self.pinned)
    }

    /// Receives the next message of this stream. `Ok(None)` when the association shut down
    /// gracefully or the peer reset the stream. Cancel-safe. No I/O: pops this stream's queue.
    pub async fn recv(&self) -> Result<Option<Message>> {
        let m = self.inbox.pop().await?;
        if let Some(m) = &m {
            self.assoc.shared().release(m.data.len());
        }
        Ok(m)
    }

    /// Bytes queued on this stream, see [`Association::queued_bytes`] (one getsockopt).
    pub fn queued_bytes(&self) -> usize {
        self.assoc.queued_bytes(self.id)
    }
}

impl Drop for StreamHandle {
    fn drop(&mut self) {
        let mut r = lock(&self.assoc.shared().router);
        if r.streams
            .get(&self.id)
            .is_some_and(|ib| Arc::ptr_eq(ib, &self.inbox))
        {
            r.streams.remove(&self.id);
        }
        let rest = self.inbox.drain();
        drop(r);
        let n: usize = rest.iter().map(|m| m.data.len()).sum();
        self.assoc.shared().release(n);
    }
}
