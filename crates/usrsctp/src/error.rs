//! The crate's error type.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

/// Everything that can go wrong in this crate. Cheap to clone (I/O errors are behind an
/// `Arc`) so one terminal error can be handed to every waiter of an association.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// A usrsctp call failed; `op` names the call, `source` carries errno.
    #[error("usrsctp {op} failed: {source}")]
    Sys {
        /// The usrsctp function or socket option that failed.
        op: &'static str,
        /// The OS error (errno) usrsctp reported.
        source: Arc<io::Error>,
    },
    /// A UDP socket operation failed (bind, connect, ...).
    #[error("UDP {op} failed: {source}")]
    Udp {
        /// What we tried to do with the UDP socket.
        op: &'static str,
        /// The OS error.
        source: Arc<io::Error>,
    },
    /// The peer's host answered our INIT with ICMP port unreachable (seen as ECONNREFUSED
    /// on the connected UDP socket): nothing listens on that UDP port.
    #[error("connection refused by {0} (ICMP port unreachable: nothing listens on that UDP port)")]
    Refused(SocketAddr),
    /// usrsctp gave up establishing the association (SCTP_CANT_STR_ASSOC: INIT or
    /// COOKIE-ECHO retransmissions exhausted, or the peer answered with ABORT).
    #[error("SCTP association could not be established (error cause {0})")]
    CannotStart(u16),
    /// The association was aborted by the peer or lost (SCTP_COMM_LOST: ABORT received or
    /// retransmissions exhausted).
    #[error(
        "SCTP association lost (the peer stopped acknowledging: retransmission limit reached) \
         or aborted by the peer (error cause {0})"
    )]
    Lost(u16),
    /// The peer's host refused our packets after the association was established (an ICMP
    /// or ICMPv6 port unreachable for the peer's UDP encapsulation port, quoting a packet
    /// of this association: RFC 6951 section 5.5, RFC 9260 appendix C): nothing listens on
    /// that port any more, so the peer's SCTP endpoint is gone (its process exited or was
    /// killed without ending the association). Carries the peer's UDP address.
    #[error(
        "SCTP peer {0} is gone: its host refused our packets (ICMP port unreachable: \
         nothing listens on that UDP port any more)"
    )]
    PeerGone(SocketAddr),
    /// The association was aborted locally (`abort()`, or a send cancelled mid-message).
    #[error("SCTP association aborted locally")]
    Aborted,
    /// The association has been shut down; no more data can be sent.
    #[error("SCTP association is closed")]
    Closed,
    /// The stream id is not below the negotiated number of outbound streams.
    #[error("stream {stream} out of range: {streams} outbound streams negotiated")]
    InvalidStream {
        /// The stream requested.
        stream: u16,
        /// The number of outbound streams negotiated.
        streams: u16,
    },
    /// `Association::stream(id)` was called for a stream that already has a live handle.
    #[error("stream {0} already has a StreamHandle")]
    StreamInUse(u16),
    /// SCTP cannot carry empty user messages.
    #[error("empty messages cannot be sent over SCTP")]
    EmptyMessage,
    /// The call needs a tokio runtime (it spawns tasks) and none is current.
    #[error("no tokio runtime: call from within a tokio runtime")]
    NoRuntime,
    /// libusrsctp cannot be loaded (it is loaded when SCTP is first used); the text says
    /// why and what to install.
    #[error("{0}")]
    Unavailable(String),
    /// A multihoming call (extra peer paths) cannot work in this build or process; the text
    /// says why and what to do (e.g. "SCTP multihoming needs usrsctp's source headers for
    /// version X; run scripts/deps.sh").
    #[error("{0}")]
    MultihomeUnavailable(String),
}

impl Error {
    pub(crate) fn sys(op: &'static str) -> Error {
        Error::Sys {
            op,
            source: Arc::new(io::Error::last_os_error()),
        }
    }
    pub(crate) fn udp(op: &'static str, e: io::Error) -> Error {
        Error::Udp {
            op,
            source: Arc::new(e),
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
