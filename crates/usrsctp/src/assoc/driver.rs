//! The per-association driver task: reads what usrsctp has, reassembles messages, routes
//! them to stream inboxes and handles notifications.

use std::collections::HashMap;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::message::{Message, Progress};
use super::shared::AssocShared;
use crate::error::{Error, Result};
use crate::ffi;
use crate::sys::{lock, would_block};
use crate::udp::with_recv_buf;

impl AssocShared {
    /// One non-blocking `usrsctp_recvv`. `Ok(None)`: would block.
    fn recv_once(&self, buf: &mut [u8]) -> Result<Option<(usize, ffi::sctp_rcvinfo, libc::c_int)>> {
        match self.sock.recvv(buf) {
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
                    // usrsctp copies the ABORT that ended the association after the
                    // notification's fixed part (20 bytes).
                    ffi::SCTP_COMM_LOST if n.get(20..).is_some_and(crate::refusal::is_ours) => {
                        self.finish(Some(Error::PeerGone(self.remote)))
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
        // One read into this thread's receive buffer; what it gives is copied out (into
        // the partial message or the notification) before the driver awaits again.
        let step = with_recv_buf(|buf| match shared.recv_once(buf) {
            Ok(Some((n, info, flags))) => {
                if flags & ffi::MSG_NOTIFICATION != 0 {
                    notif.extend_from_slice(&buf[..n]);
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
                let m = partial.entry(sid).or_insert_with(|| Message {
                    stream: sid,
                    ppid: u32::from_be(info.rcv_ppid),
                    unordered: info.rcv_flags & ffi::SCTP_UNORDERED != 0,
                    data: Vec::new(),
                });
                m.data.extend_from_slice(&buf[..n]);
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
