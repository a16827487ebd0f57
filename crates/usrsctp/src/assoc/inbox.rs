//! An awaitable FIFO, ended with a terminal result: one per stream with a handle, one for
//! `Association::recv`, one for accepted streams.

use std::collections::VecDeque;
use std::pin::pin;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::sys::lock;

/// A FIFO that tasks can await, closed with a terminal result.
pub(crate) struct Inbox<T> {
    st: Mutex<InboxState<T>>,
    notify: Notify,
}

struct InboxState<T> {
    q: VecDeque<T>,
    /// `Some(None)`: ended gracefully; `Some(Some(e))`: ended with an error.
    end: Option<Option<Error>>,
}

impl<T> Inbox<T> {
    pub(super) fn new() -> Arc<Inbox<T>> {
        Arc::new(Inbox {
            st: Mutex::new(InboxState {
                q: VecDeque::new(),
                end: None,
            }),
            notify: Notify::new(),
        })
    }

    pub(super) fn push(&self, v: T) {
        lock(&self.st).q.push_back(v);
        self.notify.notify_waiters();
    }

    pub(super) fn end(&self, end: Option<Error>) {
        let mut st = lock(&self.st);
        if st.end.is_none() {
            st.end = Some(end);
        }
        drop(st);
        self.notify.notify_waiters();
    }

    pub(super) async fn pop(&self) -> Result<Option<T>> {
        loop {
            let mut n = pin!(self.notify.notified());
            n.as_mut().enable();
            {
                let mut st = lock(&self.st);
                if let Some(v) = st.q.pop_front() {
                    return Ok(Some(v));
                }
                match &st.end {
                    Some(None) => return Ok(None),
                    Some(Some(e)) => return Err(e.clone()),
                    None => {}
                }
            }
            n.await;
        }
    }

    pub(super) fn drain(&self) -> Vec<T> {
        lock(&self.st).q.drain(..).collect()
    }

    /// Takes the queued items `pick` selects, in order; the rest stay, in order.
    pub(super) fn take_where(&self, mut pick: impl FnMut(&T) -> bool) -> Vec<T> {
        let mut st = lock(&self.st);
        if !st.q.iter().any(&mut pick) {
            return Vec::new();
        }
        let (taken, kept): (VecDeque<T>, VecDeque<T>) = st.q.drain(..).partition(|v| pick(v));
        st.q = kept;
        taken.into()
    }
}
