//! Sending with back-pressure (messages handed to usrsctp in pieces, waiting for buffer
//! space), the round-robin-per-packet workaround, and send-queue accounting.

use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::shared::AssocShared;
use crate::error::{Error, Result};
use crate::ffi::{self, Plain};
use crate::path_events::PathId;
use crate::sys::{lock, would_block};

/// Whether `SCTP_GET_SNDBUF_USE` works (probed on first use): 0 unknown, 1 yes, 2 no.
static SNDBUF_USE: AtomicUsize = AtomicUsize::new(0);

impl AssocShared {
    /// One non-blocking `usrsctp_sendv` of a piece, to `path` (a conn address) if given;
    /// `Ok(None)`: no buffer space (also when usrsctp took nothing: with explicit EOR,
    /// `sctp_lower_sosend` returns 0 without an error when the free space is positive but no
    /// more than `sctp_add_more_threshold`, 1452 bytes, and smaller than the piece).
    fn send_piece(
        &self,
        stream: u16,
        data: &[u8],
        ordered: bool,
        ppid: u32,
        path: Option<PathId>,
        eor: bool,
    ) -> Result<Option<usize>> {
        let mut acct = lock(&self.acct);
        let mut flags = 0u16;
        if !ordered {
            flags |= ffi::SCTP_UNORDERED;
        }
        if eor {
            flags |= ffi::SCTP_EOR;
        }
        let info = ffi::sctp_sndinfo {
            snd_sid: stream,
            snd_flags: flags,
            snd_ppid: ppid.to_be(),
            snd_context: 0,
            snd_assoc_id: 0,
        };
        let sent = match path {
            Some(path) => self.sock.sendv_to(data, &info, &path.storage()),
            None => self.sock.sendv(data, &info, None),
        };
        match sent {
            Ok(0) => Ok(None),
            Ok(n) => {
                *acct.entry(stream).or_default() += n;
                Ok(Some(n))
            }
            Err(Error::Sys { source, .. }) if would_block(&source) => Ok(None),
            Err(Error::Sys { op, source }) => match self.end_error() {
                Some(end) => Err(end),
                None => match source.raw_os_error() {
                    Some(libc::EPIPE) | Some(libc::ENOTCONN) | Some(libc::ECONNRESET) => {
                        Err(Error::Closed)
                    }
                    _ => Err(Error::Sys { op, source }),
                },
            },
            Err(e) => Err(e),
        }
    }

    /// Why a message of `data` on `stream` cannot be sent now (empty, no such stream, the
    /// association ended), before anything is handed over.
    pub(crate) fn check_send(&self, stream: u16, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Err(Error::EmptyMessage);
        }
        let (_, outbound) = self.streams();
        if outbound != 0 && stream >= outbound {
            return Err(Error::InvalidStream {
                stream,
                streams: outbound,
            });
        }
        match self.end_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Sends one message in pieces, waiting for buffer space; every piece to `path` (a
    /// conn address, `SCTP_ADDR_OVER`) when given, else where usrsctp chooses.
    pub(crate) async fn send(
        &self,
        stream: u16,
        data: &[u8],
        ordered: bool,
        ppid: u32,
        path: Option<PathId>,
    ) -> Result<()> {
        self.check_send(stream, data)?;
        let _serial = self.send_lock.lock().await;
        let kick = self.rrp.load(Ordering::Relaxed) && self.sndbuf_use() == Some(0);
        // Aborts the association if this future is dropped with a message half handed over.
        struct Partial<'a>(&'a AssocShared, bool);
        impl Drop for Partial<'_> {
            fn drop(&mut self) {
                if self.1 {
                    self.0.abort();
                }
            }
        }
        let mut partial = Partial(self, false);
        let mut off = 0;
        while off < data.len() {
            let end = (off + self.piece).min(data.len());
            let eor = end == data.len();
            let mut writable = pin!(self.sock.wakers.writable.notified());
            writable.as_mut().enable();
            match self.send_piece(stream, &data[off..end], ordered, ppid, path, eor)? {
                Some(n) => {
                    off += n;
                    partial.1 = off < data.len();
                }
                None => {
                    if let Some(e) = self.end_error() {
                        return Err(e);
                    }
                    writable.await;
                }
            }
        }
        partial.1 = false;
        if kick {
            self.kick();
        }
        Ok(())
    }

    /// Works around libusrsctp 0.9.5's round-robin-per-packet scheduler: its `select` returns
    /// the stream chosen when the previous packet was done, which is none when the association
    /// was idle, so a message queued on an idle association waits for the next packet of any
    /// kind (the 30 s heartbeat). An on-demand HEARTBEAT runs the output path once more, and
    /// the message goes out bundled with it. Costs one getpaddrs, one setsockopt and a
    /// HEARTBEAT chunk, only when a message is queued on an idle RRP association.
    fn kick(&self) {
        let peer = self.sock.first_peer_addr();
        if let Ok(Some(spp_address)) = peer {
            let mut p = ffi::sctp_paddrparams::zeroed();
            p.spp_address = spp_address;
            p.spp_flags = ffi::SPP_HB_DEMAND;
            let _ = self.sock.setopt(
                ffi::IPPROTO_SCTP,
                ffi::SCTP_PEER_ADDR_PARAMS,
                &p,
                "SCTP_PEER_ADDR_PARAMS",
            );
        }
    }

    /// Total bytes in usrsctp's send queue (queued + in flight, DATA chunk headers of chunked
    /// data included), via the internal `SCTP_GET_SNDBUF_USE` option if this libusrsctp has it.
    fn sndbuf_use(&self) -> Option<usize> {
        if SNDBUF_USE.load(Ordering::Relaxed) == 2 {
            return None;
        }
        let mut ss = ffi::sctp_sockstat::default();
        match self.sock.getopt(
            ffi::IPPROTO_SCTP,
            ffi::SCTP_GET_SNDBUF_USE,
            &mut ss,
            "SCTP_GET_SNDBUF_USE",
        ) {
            Ok(()) => {
                SNDBUF_USE.store(1, Ordering::Relaxed);
                Some(ss.ss_total_sndbuf as usize)
            }
            Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::ENOPROTOOPT) => {
                SNDBUF_USE.store(2, Ordering::Relaxed);
                None
            }
            Err(_) => None,
        }
    }

    pub(super) fn queued(&self, stream: Option<u16>) -> usize {
        let mut acct = lock(&self.acct);
        let total = self.sndbuf_use();
        if let Some(t) = total {
            if t == 0 {
                acct.clear();
            } else {
                for v in acct.values_mut() {
                    *v = (*v).min(t);
                }
            }
        }
        let sum: usize = acct.values().sum();
        match stream {
            Some(s) => acct.get(&s).copied().unwrap_or(0),
            None => total.map_or(sum, |t| t.min(sum)),
        }
    }

    pub(super) fn on_sender_dry(&self) {
        // The send queue was empty when usrsctp queued this event, which the driver may
        // read much later, after more sends (a busy machine). With the exact total
        // (probed here if no one asked yet) the accounting follows it, so a late event
        // forgets nothing; without it, the event is the only sign the queue emptied and
        // the accounting restarts from zero (bytes handed over since are forgotten).
        if self.sndbuf_use().is_some() {
            let _ = self.queued(None);
        } else {
            lock(&self.acct).clear();
        }
    }
}
