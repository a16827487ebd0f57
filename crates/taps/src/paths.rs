//! The network paths of a connection, as the application sees them: an SCTP association
//! has one per pair of addresses it uses (each with its state and figures, one of them
//! primary); every other connection has the one path it was made on.

use std::net::SocketAddr;
use std::time::Duration;

use taps_core::properties::Protocol;

use crate::connection::Connection;
use crate::error::{Error, UsageError};
use crate::sctp_flow::flow_error;

/// One network path of a connection: the two ends and how the protocol sees the path.
/// Plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Path {
    /// This side's address.
    pub local: SocketAddr,
    /// The peer's address.
    pub remote: SocketAddr,
    /// Whether the protocol may send on it.
    pub state: PathState,
    /// Whether data goes here unless the protocol moves it (SCTP's primary path; the
    /// only path of other connections).
    pub primary: bool,
    /// Smoothed round-trip time, where the protocol measures it (SCTP, TCP, MPTCP).
    pub srtt: Option<Duration>,
    /// Retransmission timeout (SCTP).
    pub rto: Option<Duration>,
    /// Congestion window in bytes (SCTP).
    pub cwnd: Option<u32>,
    /// Path MTU in bytes (SCTP).
    pub mtu: Option<u32>,
}

/// Whether a path may carry data (RFC 9260's path states, as usrsctp reports them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathState {
    /// Reachable: carries data.
    Active,
    /// Not yet confirmed by a heartbeat's answer: carries no data, cannot be primary.
    Unconfirmed,
    /// Unreachable after too many timeouts in a row; heartbeats go on, and an answer
    /// makes it active again.
    Inactive,
}

impl PathState {
    /// The state as one lower-case word (`active`, `unconfirmed`, `inactive`), as the CLI
    /// and the C API's statistics print it.
    pub fn as_str(self) -> &'static str {
        match self {
            PathState::Active => "active",
            PathState::Unconfirmed => "unconfirmed",
            PathState::Inactive => "inactive",
        }
    }
}

impl Connection {
    /// The connection's paths. An SCTP association lists each path it knows with its
    /// state, round-trip time, retransmission timeout, congestion window and MTU (a few
    /// socket options per path, under usrsctp's lock); any other connection gives the one
    /// path it runs on (with the RTT from `TCP_INFO` on TCP and MPTCP).
    pub fn paths(&self) -> Result<Vec<Path>, Error> {
        let Some(flow) = self.sctp_flow() else {
            let info = self.info();
            return Ok(vec![Path {
                local: info.local,
                remote: info.remote,
                state: PathState::Active,
                primary: true,
                srtt: self.statistics().rtt,
                rto: None,
                cwnd: None,
                mtu: None,
            }]);
        };
        let paths = flow.shared().association().paths().map_err(flow_error)?;
        let ms = |v: u32| Some(Duration::from_millis(v.into()));
        Ok(paths
            .into_iter()
            .filter_map(|p| {
                let (local, remote) = p.addrs?;
                Some(Path {
                    local,
                    remote,
                    state: match p.state {
                        usrsctp::PathState::Active => PathState::Active,
                        usrsctp::PathState::Unconfirmed => PathState::Unconfirmed,
                        // Anything else usrsctp reports is not reachable by its reckoning.
                        _ => PathState::Inactive,
                    },
                    primary: p.primary,
                    srtt: ms(p.srtt_ms),
                    rto: ms(p.rto_ms),
                    cwnd: Some(p.cwnd),
                    mtu: Some(p.mtu),
                })
            })
            .collect())
    }

    /// Makes the path to the peer's address `remote` the primary one: where SCTP sends
    /// new data unless that path fails (`SCTP_PRIMARY_ADDR`). Fails with
    /// [`UsageError::NotAPath`] when `remote` is not the peer's end of one of the
    /// connection's paths, and with an I/O error when the path cannot be primary yet (an
    /// unconfirmed SCTP path). On other connections the one path is already primary.
    /// Costs what [`paths`](Self::paths) costs, plus one socket option.
    pub fn set_primary_path(&self, remote: SocketAddr) -> Result<(), Error> {
        let Some(flow) = self.sctp_flow() else {
            return match self.info().remote == remote {
                true => Ok(()),
                false => Err(Error::usage(UsageError::NotAPath {
                    remote,
                    protocol: self.info().stack.protocol,
                })),
            };
        };
        let association = flow.shared().association();
        let paths = association.paths().map_err(flow_error)?;
        let Some(path) = paths
            .iter()
            .find(|p| p.addrs.is_some_and(|(_, r)| r == remote))
        else {
            return Err(Error::usage(UsageError::NotAPath {
                remote,
                protocol: Protocol::Sctp,
            }));
        };
        association.set_primary(path.id).map_err(flow_error)?;
        Ok(())
    }
}
