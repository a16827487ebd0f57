//! The state an association's handles, driver task and client UDP task share, and how it
//! ends.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};

use super::inbox::Inbox;
use super::message::Progress;
use super::router::Router;
use crate::error::Error;
use crate::sys::{lock, Sock};
use crate::udp::ClientEvents;
use crate::{Scheduler, SctpOptions};

/// State shared by the handles, the driver task and the client UDP task.
pub(crate) struct AssocShared {
    pub(crate) sock: Arc<Sock>,
    pub(super) remote: SocketAddr,
    pub(super) started: Instant,
    pub(super) progress: watch::Sender<Progress>,
    pub(super) reachable_after: OnceLock<Duration>,
    pub(super) router: Mutex<Router>,
    pub(super) buffered: AtomicUsize,
    pub(super) recv_budget: usize,
    pub(super) drained: Notify,
    /// inbound << 16 | outbound.
    pub(super) streams: AtomicU32,
    /// Bytes handed to usrsctp per stream since its send buffer was last seen empty.
    pub(crate) acct: Mutex<HashMap<u16, usize>>,
    pub(crate) send_lock: tokio::sync::Mutex<()>,
    pub(crate) piece: usize,
    /// The round-robin-per-packet scheduler is active (see [`AssocShared::kick`]).
    pub(super) rrp: AtomicBool,
}

impl AssocShared {
    pub(crate) fn new(
        sock: Arc<Sock>,
        remote: SocketAddr,
        opts: &SctpOptions,
        progress: Progress,
    ) -> Arc<AssocShared> {
        let mut sndbuf: libc::c_int = 0;
        let piece = match sock.getopt(libc::SOL_SOCKET, libc::SO_SNDBUF, &mut sndbuf, "SO_SNDBUF") {
            Ok(()) if sndbuf > 0 => (sndbuf as usize / 2).clamp(1024, 64 * 1024),
            _ => 16 * 1024,
        };
        let streams = match &progress {
            Progress::Established { inbound, outbound } => {
                (u32::from(*inbound) << 16) | u32::from(*outbound)
            }
            _ => 0,
        };
        Arc::new(AssocShared {
            sock,
            remote,
            started: Instant::now(),
            progress: watch::Sender::new(progress),
            reachable_after: OnceLock::new(),
            router: Mutex::new(Router {
                default: Inbox::new(),
                streams: HashMap::new(),
                accept_mode: opts.accept_streams,
                accepts: Inbox::new(),
                end: None,
            }),
            buffered: AtomicUsize::new(0),
            recv_budget: opts.recv_budget.max(1),
            drained: Notify::new(),
            streams: AtomicU32::new(streams),
            acct: Mutex::new(HashMap::new()),
            send_lock: tokio::sync::Mutex::new(()),
            piece,
            rrp: AtomicBool::new(opts.scheduler == Some(Scheduler::RoundRobinPacket)),
        })
    }

    pub(crate) fn streams(&self) -> (u16, u16) {
        let v = self.streams.load(Ordering::SeqCst);
        ((v >> 16) as u16, v as u16)
    }

    pub(crate) fn end_error(&self) -> Option<Error> {
        match &lock(&self.router).end {
            None => None,
            Some(None) => Some(Error::Closed),
            Some(Some(e)) => Some(e.clone()),
        }
    }

    /// Ends the association: every inbox ends, waiters wake, progress becomes terminal.
    pub(super) fn finish(&self, end: Option<Error>) {
        {
            let mut r = lock(&self.router);
            if r.end.is_some() {
                return;
            }
            r.end = Some(end.clone());
            r.default.end(end.clone());
            for ib in r.streams.values() {
                ib.end(end.clone());
            }
            r.accepts.end(end.clone());
        }
        self.progress.send_modify(|p| {
            *p = match &end {
                None => Progress::Closed,
                Some(e) => Progress::Failed(e.clone()),
            }
        });
        self.sock.wakers.wake_all();
        self.drained.notify_waiters();
    }

    pub(super) fn release(&self, n: usize) {
        let before = self.buffered.fetch_sub(n, Ordering::SeqCst);
        if before >= self.recv_budget && before - n < self.recv_budget {
            self.drained.notify_waiters();
        }
    }

    pub(crate) fn abort(&self) {
        self.sock.close(true);
        self.finish(Some(Error::Aborted));
    }

    pub(super) fn is_connecting(&self) -> bool {
        matches!(
            *self.progress.borrow(),
            Progress::Connecting | Progress::Reachable { .. }
        )
    }
}

impl ClientEvents for AssocShared {
    fn init_ack(&self) {
        let after = self.started.elapsed();
        let _ = self.reachable_after.set(after);
        self.progress.send_if_modified(|p| {
            if matches!(p, Progress::Connecting) {
                *p = Progress::Reachable { after };
                true
            } else {
                false
            }
        });
    }

    fn refused(&self) {
        if self.is_connecting() {
            self.finish(Some(Error::Refused(self.remote)));
        }
    }
}

/// The progress of an accepted association: established, with the stream counts usrsctp
/// negotiated (`SCTP_STATUS`; zeros if it cannot say). One getsockopt.
pub(crate) fn established(sock: &crate::sys::Sock) -> Progress {
    let mut st = <crate::ffi::sctp_status as crate::ffi::Plain>::zeroed();
    let (inbound, outbound) = match sock.getopt(
        crate::ffi::IPPROTO_SCTP,
        crate::ffi::SCTP_STATUS,
        &mut st,
        "SCTP_STATUS",
    ) {
        Ok(()) => (st.sstat_instrms, st.sstat_outstrms),
        Err(_) => (0, 0),
    };
    Progress::Established { inbound, outbound }
}
