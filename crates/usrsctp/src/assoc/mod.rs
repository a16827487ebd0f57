//! Associations: the per-association driver task, message routing to streams, sending with
//! back-pressure, schedulers and send-queue accounting.
//!
//! Layout (each file uses only those listed after it): `association` (the public handles
//! `Association` and `StreamHandle`), `connecting` (`Connecting`), `inner` (what an
//! association owns), `driver` (the reading task), `send` (sending and accounting),
//! `shared` (the state they share), `router`, `inbox`, `message`.

mod association;
mod connecting;
mod driver;
mod inbox;
mod inner;
mod message;
mod router;
mod send;
mod shared;

pub use association::{Association, StreamHandle};
pub use connecting::Connecting;
pub use message::{Message, Progress};

pub(crate) use inner::{AssocInner, Link};
pub(crate) use shared::{established, AssocShared};
