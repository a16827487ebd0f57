//! What an association owns (usrsctp socket, driver task, UDP link) and frees when its last
//! handle goes.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::task::JoinHandle;

use super::driver::driver;
use super::shared::AssocShared;
use crate::error::Error;
use crate::udp::{ClientLink, SharedUdp};

/// How the association reaches the network.
pub(crate) enum Link {
    /// Held for what it owns (the UDP socket, its reader task, the conn address), which
    /// its drop releases; nothing reads it.
    Client(#[allow(dead_code)] ClientLink),
    Server {
        udp: Arc<SharedUdp>,
        remote: SocketAddr,
    },
    /// IP mode: the process's tunnelling sockets carry the packets; nothing to hold but
    /// the SCTP ports (this side's, the peer's) its per-path counters are kept under.
    Ip { ports: (u16, u16) },
}

/// Owns the association's resources; dropped when the last handle goes.
pub(crate) struct AssocInner {
    pub(crate) shared: Arc<AssocShared>,
    pub(super) driver: Option<JoinHandle<()>>,
    pub(super) link: Link,
    pub(super) local: SocketAddr,
    pub(super) remote: SocketAddr,
}

impl Drop for AssocInner {
    fn drop(&mut self) {
        // ABORT goes out through the link, which is still registered here.
        self.shared.sock.close(true);
        self.shared.finish(Some(Error::Aborted));
        if let Some(d) = self.driver.take() {
            d.abort();
        }
        match &self.link {
            Link::Server { udp, remote } => udp.unclaim(*remote),
            Link::Ip { ports } => crate::ip_paths::forget(*ports),
            Link::Client(_) => {}
        }
        // Then `link` drops: a client's reader task is aborted and its conn address deregistered.
    }
}

impl AssocInner {
    /// Spawns the driver task and bundles what the association owns.
    pub(crate) fn start(
        shared: Arc<AssocShared>,
        link: Link,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Arc<AssocInner> {
        let driver = tokio::spawn(driver(shared.clone()));
        Arc::new(AssocInner {
            shared,
            driver: Some(driver),
            link,
            local,
            remote,
        })
    }

    /// Whether the association runs in IP mode (real addresses, usrsctp's own UDP
    /// encapsulation), where it can add and remove local addresses.
    pub(crate) fn is_ip_mode(&self) -> bool {
        matches!(self.link, Link::Ip { .. })
    }

    /// In IP mode, the SCTP ports (this side's, the peer's).
    pub(crate) fn ip_ports(&self) -> Option<(u16, u16)> {
        match self.link {
            Link::Ip { ports } => Some(ports),
            _ => None,
        }
    }
}
