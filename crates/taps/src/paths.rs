//! The network paths of a connection, as the application sees them: an SCTP association
//! has one per pair of addresses it uses (each with its state and figures, one of them
//! primary); every other connection has the one path it was made on.

use std::net::{IpAddr, SocketAddr};
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
    /// Bytes sent on the path as the protocol counts them: TCP's and each MPTCP subflow's
    /// payload bytes, retransmissions included (`tcp_info`); SCTP's packets (every chunk),
    /// counted as taps' UDP sockets carry them. `None` where nothing counts them (UDP,
    /// QUIC, DTLS).
    pub bytes_sent: Option<u64>,
    /// Bytes received on the path, counted as [`bytes_sent`](Self::bytes_sent) is.
    pub bytes_received: Option<u64>,
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
    /// state, round-trip time, retransmission timeout, congestion window, MTU and bytes
    /// each way (a few socket options per path, under usrsctp's lock);
    /// an MPTCP connection lists its subflows (`MPTCP_SUBFLOW_ADDRS` and `MPTCP_TCPINFO`,
    /// Linux 5.16 and later: RTT, RTO, cwnd, MTU, bytes each); any other connection gives
    /// the one path it runs on (with the RTT and bytes from `TCP_INFO` on TCP, one
    /// `getsockopt`).
    pub fn paths(&self) -> Result<Vec<Path>, Error> {
        if let Some(subflows) = self.mptcp_paths() {
            return Ok(subflows);
        }
        let Some(flow) = self.sctp_flow() else {
            let info = self.info();
            let tcp = self.tcp_stream().and_then(crate::transport::tcp_info);
            return Ok(vec![Path {
                local: info.local,
                remote: info.remote,
                state: PathState::Active,
                primary: true,
                srtt: self.statistics().rtt,
                rto: None,
                cwnd: None,
                mtu: None,
                bytes_sent: tcp.map(|t| t.bytes_sent),
                bytes_received: tcp.map(|t| t.bytes_received),
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
                    bytes_sent: p.bytes_sent,
                    bytes_received: p.bytes_received,
                })
            })
            .collect())
    }

    /// An MPTCP connection's subflows as paths (the first subflow primary), where the
    /// kernel lists them.
    fn mptcp_paths(&self) -> Option<Vec<Path>> {
        if self.info().mptcp_active != Some(true) {
            return None;
        }
        let subflows = crate::transport::mptcp_subflows(self.tcp_stream()?)?;
        Some(
            subflows
                .into_iter()
                .enumerate()
                .map(|(i, (local, remote, info))| Path {
                    local,
                    remote,
                    state: PathState::Active,
                    primary: i == 0,
                    srtt: Some(info.rtt),
                    rto: Some(info.rto),
                    cwnd: Some(info.snd_cwnd.saturating_mul(info.snd_mss)),
                    mtu: Some(info.pmtu),
                    bytes_sent: Some(info.bytes_sent),
                    bytes_received: Some(info.bytes_received),
                })
                .collect(),
        )
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
        let path = path_to(flow, remote)?;
        flow.shared()
            .association()
            .set_primary(path)
            .map_err(flow_error)?;
        Ok(())
    }

    /// Pins this connection to the path whose peer end is `remote`: on SCTP everything it
    /// sends from now on goes over that path (usrsctp's `SCTP_ADDR_OVER`), whether the
    /// association spreads other data over every path (`multipathPolicy` aggregate, CMT)
    /// or not. With several connections on one association (flow mapping), pinning each to
    /// a path is the stream-to-path mapping "Fixed" of CMT stream scheduling. `None`
    /// unpins. If the path fails, SCTP moves what is queued on it to another path. Fails
    /// with [`UsageError::NotAPath`] as [`set_primary_path`](Self::set_primary_path)
    /// does; on other connections only their one path is accepted (and changes nothing).
    /// The first pin of the process allows SCTP's multipath sending process-wide (one
    /// sysctl; every association made afterwards states its own CMT mode). Costs what
    /// [`paths`](Self::paths) costs; later sends cost what they did.
    pub fn pin_to_path(&self, remote: Option<SocketAddr>) -> Result<(), Error> {
        let Some(flow) = self.sctp_flow() else {
            return match remote.is_none_or(|r| r == self.info().remote) {
                true => Ok(()),
                false => Err(Error::usage(UsageError::NotAPath {
                    remote: remote.unwrap_or(self.info().remote),
                    protocol: self.info().stack.protocol,
                })),
            };
        };
        let Some(remote) = remote else {
            flow.stream().pin_to_path(None);
            return Ok(());
        };
        let path = path_to(flow, remote)?;
        crate::transport::sctp::allow_cmt().map_err(flow_error)?;
        flow.stream().pin_to_path(Some(path));
        Ok(())
    }

    /// Bytes this connection has handed to SCTP that have not been sent yet (still in
    /// its stream's queue or cut into chunks and waiting to go; in-flight data is not
    /// counted): what a CMT stream scheduler reads to keep each path's streams filled
    /// (the "sender queue info" of the seed's sender). `None` on other stacks or without
    /// the multihoming shim. One call into usrsctp that walks the stream's queue.
    pub fn unsent_bytes(&self) -> Option<usize> {
        let flow = self.sctp_flow()?;
        flow.shared()
            .association()
            .unsent_bytes(flow.stream_id())
            .ok()
    }
}

impl Connection {
    /// Adds `ip` to this end's addresses of the connection and tells the peer, which then
    /// has one more path to this side (SCTP's ASCONF ADD-IP, RFC 5061; the peer confirms
    /// the path with a heartbeat before it carries data). Only an SCTP connection made
    /// with `multihoming` (or `multipath` active) can; others fail with
    /// [`UsageError::FixedLocalAddresses`]. `ip` must be one of this host's addresses when
    /// SCTP was first used in the process, and of a family the association already uses;
    /// otherwise the error names it and says why. One call into usrsctp; the ASCONF goes
    /// out from usrsctp's own thread.
    pub fn add_local_address(&self, ip: IpAddr) -> Result<(), Error> {
        self.change_local_address(ip, true)
    }

    /// Removes `ip` from this end's addresses of the connection and tells the peer, which
    /// drops its path to it (SCTP's ASCONF DELETE-IP). The last address cannot be removed.
    /// Fails as [`add_local_address`](Self::add_local_address) does; costs the same.
    pub fn remove_local_address(&self, ip: IpAddr) -> Result<(), Error> {
        self.change_local_address(ip, false)
    }

    fn change_local_address(&self, ip: IpAddr, add: bool) -> Result<(), Error> {
        let fixed = || {
            Error::usage(UsageError::FixedLocalAddresses {
                protocol: self.info().stack.protocol,
            })
        };
        let flow = self.sctp_flow().ok_or_else(fixed)?;
        let assoc = flow.shared().association();
        let done = if add {
            assoc.add_local_address(ip)
        } else {
            assoc.remove_local_address(ip)
        };
        match done {
            Err(usrsctp::Error::MultihomeUnavailable(_)) => Err(fixed()),
            r => Ok(r.map_err(flow_error)?),
        }
    }
}

/// The path of `flow`'s association whose peer end is `remote`; [`UsageError::NotAPath`]
/// naming it when there is none. Lists the paths once.
fn path_to(
    flow: &crate::sctp_flow::SctpFlow,
    remote: SocketAddr,
) -> Result<usrsctp::PathId, Error> {
    let paths = flow.shared().association().paths().map_err(flow_error)?;
    paths
        .iter()
        .find(|p| p.addrs.is_some_and(|(_, r)| r == remote))
        .map(|p| p.id)
        .ok_or_else(|| {
            Error::usage(UsageError::NotAPath {
                remote,
                protocol: Protocol::Sctp,
            })
        })
}

/// What happened to one of a connection's paths (RFC 9622's PathChange event, naming the
/// path and the change).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathChangeKind {
    /// The path may carry data: confirmed by a heartbeat's answer, or reachable again.
    Up,
    /// The path failed (too many timeouts in a row, or potentially failed): data moves to
    /// another path while one is up.
    Down,
    /// The path became the primary one.
    PrimaryChanged,
    /// The peer added the path (ASCONF).
    Added,
    /// The path was removed.
    Removed,
}

impl PathChangeKind {
    /// The change as one lower-case word (`up`, `down`, `primary`, `added`, `removed`).
    pub fn as_str(self) -> &'static str {
        match self {
            PathChangeKind::Up => "up",
            PathChangeKind::Down => "down",
            PathChangeKind::PrimaryChanged => "primary",
            PathChangeKind::Added => "added",
            PathChangeKind::Removed => "removed",
        }
    }
}

/// One path change: which path (the peer's address, as [`Path::remote`] names it) and
/// what happened. Plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PathChange {
    /// The peer's end of the path.
    pub remote: SocketAddr,
    /// What happened.
    pub kind: PathChangeKind,
}

/// The path changes of one connection, from [`Connection::path_changes`]; [`next`]
/// waits for the next one.
///
/// [`next`]: PathChanges::next
#[derive(Debug)]
pub struct PathChanges {
    /// The association's events (they hold the association weakly: watching does not keep
    /// the connection alive); `None` for a connection whose one path never changes.
    sctp: Option<usrsctp::PathEvents>,
}

impl PathChanges {
    /// The next change; `None` once the connection has ended (at once for a connection
    /// with one fixed path). Cancel-safe. Each change costs one listing of the paths (to
    /// name the path by its addresses).
    pub async fn next(&mut self) -> Option<PathChange> {
        let events = self.sctp.as_mut()?;
        loop {
            let ev = events.next().await?;
            let kind = match ev.kind {
                usrsctp::PathEventKind::Available | usrsctp::PathEventKind::Confirmed => {
                    PathChangeKind::Up
                }
                usrsctp::PathEventKind::Unreachable | usrsctp::PathEventKind::PotentiallyFailed => {
                    PathChangeKind::Down
                }
                usrsctp::PathEventKind::MadePrimary => PathChangeKind::PrimaryChanged,
                usrsctp::PathEventKind::Added => PathChangeKind::Added,
                usrsctp::PathEventKind::Removed => PathChangeKind::Removed,
                _ => continue,
            };
            let Some(id) = ev.path else { continue };
            let paths = events.association().and_then(|a| a.paths().ok());
            let remote = paths.and_then(|paths| {
                paths
                    .into_iter()
                    .find(|p| p.id == id)
                    .and_then(|p| p.addrs)
                    .map(|(_, r)| r)
            });
            // A removed path is no longer listed: an IP path is still named by its address.
            let remote = match (remote, id.ip()) {
                (Some(r), _) => r,
                (None, Some(ip)) => SocketAddr::new(ip, 0),
                (None, None) => continue,
            };
            return Some(PathChange { remote, kind });
        }
    }
}

impl Connection {
    /// Starts watching the connection's path changes (path up, down, primary changed,
    /// added, removed): SCTP reports them as they happen (one socket option to subscribe;
    /// changes before this call are not reported, so call it right after the connection
    /// is made). Any other connection has one path that never changes: its
    /// [`PathChanges`] ends at once.
    pub fn path_changes(&self) -> Result<PathChanges, Error> {
        let Some(flow) = self.sctp_flow() else {
            return Ok(PathChanges { sctp: None });
        };
        let events = flow
            .shared()
            .association()
            .path_events()
            .map_err(flow_error)?;
        Ok(PathChanges { sctp: Some(events) })
    }
}
