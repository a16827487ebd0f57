//! Routing of received messages to stream inboxes: a stream with a handle gets its own inbox,
//! the rest go to `Association::recv`, or (stream-accepting mode) open a new stream.

use std::collections::HashMap;
use std::sync::Arc;

use super::inbox::Inbox;
use super::message::Message;
use crate::error::Error;

/// The inboxes of an association and how messages are routed to them.
pub(super) type StreamInbox = Arc<Inbox<Message>>;

pub(super) struct Router {
    pub(super) default: StreamInbox,
    pub(super) streams: HashMap<u16, StreamInbox>,
    pub(super) accept_mode: bool,
    pub(super) accepts: Arc<Inbox<(u16, StreamInbox)>>,
    pub(super) end: Option<Option<Error>>,
}

impl Router {
    pub(super) fn dispatch(&mut self, m: Message) {
        if let Some(ib) = self.streams.get(&m.stream) {
            ib.push(m);
        } else if self.accept_mode {
            let ib = Inbox::new();
            let sid = m.stream;
            ib.push(m);
            self.streams.insert(sid, ib.clone());
            self.accepts.push((sid, ib));
        } else {
            self.default.push(m);
        }
    }
}
