//! A pending client association: progress events and the wait for establishment.

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::association::Association;
use super::inner::AssocInner;
use super::message::Progress;
use crate::error::{Error, Result};

/// A pending client association. Await it (it implements `IntoFuture`) for the
/// [`Association`]; use [`Connecting::reachable`] or [`Connecting::progress`] to learn of the
/// INIT ACK first. Dropping it aborts the attempt and frees everything at once.
pub struct Connecting {
    pub(crate) inner: Arc<AssocInner>,
    rx: watch::Receiver<Progress>,
}

impl Connecting {
    pub(crate) fn new(inner: Arc<AssocInner>) -> Connecting {
        let rx = inner.shared.progress.subscribe();
        Connecting { inner, rx }
    }

    /// A receiver of progress events (`Connecting` → `Reachable` → `Established`, or
    /// `Failed`). Cheap (a `watch` receiver); intermediate states can be skipped by a slow
    /// reader, but `Reachable` is always published before `Established`.
    pub fn progress(&self) -> watch::Receiver<Progress> {
        self.rx.clone()
    }

    /// Whether an INIT ACK has arrived. No I/O.
    pub fn is_reachable(&self) -> bool {
        self.inner.shared.reachable_after.get().is_some()
    }

    /// Waits for the INIT ACK (the peer's SCTP stack answered: one RTT) and returns the time
    /// since `connect`. Resolves at once if it already arrived; fails if the attempt failed.
    /// No I/O (waits on the progress channel).
    pub async fn reachable(&mut self) -> Result<Duration> {
        loop {
            if let Some(d) = self.inner.shared.reachable_after.get() {
                return Ok(*d);
            }
            match &*self.rx.borrow_and_update() {
                Progress::Failed(e) => return Err(e.clone()),
                Progress::Closed => return Err(Error::Closed),
                _ => {}
            }
            if self.rx.changed().await.is_err() {
                return Err(Error::Closed);
            }
        }
    }

    /// Waits for COMM_UP and returns the association (same as `.await`). No I/O (waits on the
    /// progress channel).
    pub async fn established(mut self) -> Result<Association> {
        loop {
            match &*self.rx.borrow_and_update() {
                Progress::Established { .. } => {
                    return Ok(Association {
                        inner: self.inner.clone(),
                    })
                }
                Progress::Failed(e) => return Err(e.clone()),
                Progress::Closed => return Err(Error::Closed),
                _ => {}
            }
            if self.rx.changed().await.is_err() {
                return Err(Error::Closed);
            }
        }
    }

    /// Local UDP address of the attempt's socket. No I/O.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    /// The peer's UDP encapsulation address. No I/O.
    pub fn remote_addr(&self) -> SocketAddr {
        self.inner.remote
    }
}

impl IntoFuture for Connecting {
    type Output = Result<Association>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Association>> + Send>>;

    /// Boxes [`Connecting::established`] (one allocation).
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.established())
    }
}
