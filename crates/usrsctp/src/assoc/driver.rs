//! The per-association driver task: reads what usrsctp has, reassembles messages, routes
//! them to stream inboxes and handles notifications.

use std::cell::RefCell;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::message::{Message, Progress};
use super::shared::AssocShared;
use crate::error::{Error, Result};
use crate::ffi;
use crate::sys::{lock, would_block};
use crate::udp::MAX_DATAGRAM;

impl AssocShared {
    /// One non-blocking `usrsctp_recvv` appended to `buf`. `Ok(None)`: would block.
    fn recv_once(
        &self,
        buf: &mut Vec<u8>,
    ) -> Result<Option<(usize, ffi::sctp_rcvinfo, libc::c_int)>> {
        match self.sock.recvv_append(buf) {
            Ok(v) => Ok(Some(v)),
            Err(Error::Sys { source, .. }) if would_block(&source) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn on_notification(&self, n: &[u8], shutdown_comp: &mut bool) {
        let u16_at = |o: usize| n.get(o..o + 2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
        let Some(ty) = u16_at(0) else { return };
        match ty {
            ffi::SCTP_ASSOC_CHANGE => {
                let (Some(state), Some(error), Some(outbound), Some(inbound)) =
                    (u16_at(8), u16_at(10), u16_at(12), u16_at(14))
                else {
                    return;
                };
                match state {
                    ffi::SCTP_COMM_UP | ffi::SCTP_RESTART => {
                        self.streams.store(
                            (u32::from(inbound) << 16) | u32::from(outbound),
                            Ordering::SeqCst,
                        );
                        let _ = self.reachable_after.set(self.started.elapsed());
                        self.progress
                            .send_modify(|p| *p = Progress::Established { inbound, outbound });
                    }
                    ffi::SCTP_COMM_LOST => self.finish(Some(Error::Lost(error))),
                    ffi::SCTP_CANT_STR_ASSOC => self.finish(Some(Error::CannotStart(error))),
                    ffi::SCTP_SHUTDOWN_COMP => *shutdown_comp = true,
                    _ => {}
                }
            }
            ffi::SCTP_SENDER_DRY_EVENT => self.on_sender_dry(),
            ffi::SCTP_PEER_ADDR_CHANGE => crate::path_events::on_peer_addr_change(&self.sock, n),
            ffi::SCTP_STREAM_RESET_EVENT => {
                let Some(flags) = u16_at(2) else { return };
                if flags & ffi::SCTP_STREAM_RESET_INCOMING_SSN == 0 {
                    return;
                }
                let len = n
                    .get(4..8)
                    .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize)
                    .min(n.len());
                let mut r = lock(&self.router);
                let mut o = 12;
                while o + 2 <= len {
                    if let Some(sid) = u16_at(o) {
                        if let Some(ib) = r.streams.remove(&sid) {
                            ib.end(None);
                        }
                    }
                    o += 2;
                }
            }
            _ => {}
        }
    }
}

/// A read of at least this many bytes that starts a message becomes the message's buffer
/// as it is (the thread gets a new buffer); a smaller one is copied out.
const MOVE_AT: usize = 4096;

thread_local! {
    /// The buffer drivers on this thread read into (empty between reads; capacity
    /// `MAX_DATAGRAM`).
    static MSG_BUF: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(MAX_DATAGRAM));
}

/// Runs `f` with this thread's message buffer, emptied (one `usrsctp_recvv` appends to it).
/// `f` must not re-enter this function.
fn with_msg_buf<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    MSG_BUF.with(|b| {
        let mut b = b.borrow_mut();
        b.clear();
        if b.capacity() < MAX_DATAGRAM {
            b.reserve_exact(MAX_DATAGRAM);
        }
        f(&mut b)
    })
}

/// The bytes of one read that starts a message: a large read is taken as it is, without a
/// copy (its spare capacity returned to the allocator; the thread's buffer is allocated
/// anew at the next read), a small one is copied into a buffer of its size.
fn take_read(buf: &mut Vec<u8>) -> Vec<u8> {
    if buf.len() < MOVE_AT {
        return buf.clone();
    }
    let mut data = std::mem::take(buf);
    data.shrink_to_fit();
    data
}

/// Reads everything usrsctp has for this socket, reassembles messages, handles notifications.
/// Stops reading while more than `recv_budget` bytes wait in our inboxes (so the SCTP receive
/// window closes when the application does not read).
pub(super) async fn driver(shared: Arc<AssocShared>) {
    let mut partial: HashMap<u16, Message> = HashMap::new();
    let mut notif: Vec<u8> = Vec::new();
    let mut shutdown_comp = false;
    /// What the driver does after one read.
    enum Step {
        Again,
        Wait,
        Done,
    }
    loop {
        if lock(&shared.router).end.is_some() {
            return;
        }
        if shared.buffered.load(Ordering::SeqCst) >= shared.recv_budget {
            let mut d = pin!(shared.drained.notified());
            d.as_mut().enable();
            if shared.buffered.load(Ordering::SeqCst) >= shared.recv_budget
                && lock(&shared.router).end.is_none()
            {
                d.await;
            }
            continue;
        }
        let mut readable = pin!(shared.sock.wakers.readable.notified());
        readable.as_mut().enable();
        // One read into this thread's message buffer; what it gives is moved or copied out
        // (into a message or the notification) before the driver awaits again.
        let step = with_msg_buf(|buf| match shared.recv_once(buf) {
            Ok(Some((n, info, flags))) => {
                if flags & ffi::MSG_NOTIFICATION != 0 {
                    notif.extend_from_slice(buf);
                    if flags & ffi::MSG_EOR != 0 {
                        let nb = std::mem::take(&mut notif);
                        shared.on_notification(&nb, &mut shutdown_comp);
                    }
                    return Step::Again;
                }
                if n == 0 {
                    shared.finish(None);
                    return Step::Done;
                }
                let sid = info.rcv_sid;
                match partial.entry(sid) {
                    Entry::Occupied(mut m) => m.get_mut().data.extend_from_slice(buf),
                    Entry::Vacant(v) => {
                        v.insert(Message {
                            stream: sid,
                            ppid: u32::from_be(info.rcv_ppid),
                            unordered: info.rcv_flags & ffi::SCTP_UNORDERED != 0,
                            data: take_read(buf),
                        });
                    }
                }
                if flags & ffi::MSG_EOR != 0 {
                    if let Some(m) = partial.remove(&sid) {
                        // Only complete messages count against the budget: a message larger
                        // than the budget must still be read whole to be delivered.
                        shared.buffered.fetch_add(m.data.len(), Ordering::SeqCst);
                        lock(&shared.router).dispatch(m);
                    }
                }
                Step::Again
            }
            Ok(None) => {
                if shutdown_comp {
                    shared.finish(None);
                    Step::Done
                } else {
                    Step::Wait
                }
            }
            Err(Error::Sys { source, .. })
                if source.raw_os_error() == Some(libc::ENOTCONN) && shared.is_connecting() =>
            {
                Step::Wait
            }
            Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::ENOTCONN) => {
                shared.finish(None);
                Step::Done
            }
            Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::ECONNRESET) => {
                shared.finish(Some(Error::Lost(0)));
                Step::Done
            }
            Err(Error::Closed) => {
                shared.finish(Some(Error::Aborted));
                Step::Done
            }
            Err(e) => {
                shared.finish(Some(e));
                Step::Done
            }
        });
        match step {
            Step::Again => {}
            Step::Wait => readable.await,
            Step::Done => return,
        }
    }
}
