//! Per-connection socket options, derived once from the transport properties.

use std::io;
use std::time::Duration;

use socket2::{Socket, TcpKeepalive};
use std::net::IpAddr;
use std::sync::Arc;

use taps_core::properties::{
    Multipath, MultipathPolicy, Name, Preference, Properties, Protocol, Value,
};

use super::sys;
use super::AttemptError;
use crate::error::{CongestionProblem, NotSupported, SocketOption};

/// Keep-alive idle time used when the properties ask for keep-alive without a value:
/// the RFC 1122 minimum default of two hours.
pub(crate) const DEFAULT_KEEPALIVE: Duration = Duration::from_secs(2 * 60 * 60);

/// UDP-Lite coverage when full checksums are avoided or prohibited: the 8-byte header only.
pub(crate) const HEADER_ONLY_COVERAGE: u16 = 8;

/// Longest congestion control name the kernel accepts (`TCP_CA_NAME_MAX` - 1).
const TCP_CA_NAME_MAX: usize = 15;

/// Socket options for one connection or listener, computed once per preconnection and
/// shared by every attempt (cloning copies a short string at most). Applying them costs
/// one `setsockopt` per option that is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SocketOptions {
    /// `TCP_NODELAY` (default true: taps frames messages itself, Nagle only delays them).
    pub nodelay: bool,
    /// DSCP code point (0..=63) marked with `IP_TOS` or `IPV6_TCLASS` (ECN bits left 0);
    /// best effort: skipped where the socket type cannot mark (MPTCP over IPv6 here).
    pub dscp: Option<u8>,
    /// `TCP_USER_TIMEOUT`: how long sent data may stay unacknowledged before the
    /// connection is dropped (RFC 9622 `connTimeout`). For SCTP the same bound sets the
    /// retransmission limit and maximum RTO ([`super::sctp::sctp_options`]).
    pub user_timeout: Option<Duration>,
    /// `TCP_CONGESTION` by name (`cubic`, `reno`, `bbr`, ...); a name the kernel does not
    /// offer fails the attempt with [`AttemptError::Unsupported`] naming it.
    pub congestion_control: Option<String>,
    /// `SO_KEEPALIVE` with this idle time (`TCP_KEEPIDLE`, at least 1 s) before the
    /// first probe; for SCTP the heartbeat interval (to the millisecond).
    pub keepalive: Option<Duration>,
    /// UDP-Lite checksum coverage in bytes for sending and the minimum accepted when
    /// receiving (`UDPLITE_SEND_CSCOV` / `UDPLITE_RECV_CSCOV`); 0 = whole datagram, values
    /// below 8 are raised to 8 by the kernel. Ignored by other protocols.
    pub udplite_coverage: Option<u16>,
    /// UDP port SCTP is encapsulated in (RFC 6951), for connecting and listening.
    /// Default [`usrsctp::DEFAULT_UDP_PORT`] (9899); set per context.
    pub sctp_udp_port: u16,
    /// SCTP stream scheduler (RFC 8260) from `connScheduler`; `None`: usrsctp's default.
    pub sctp_scheduler: Option<usrsctp::Scheduler>,
    /// SCTP stream scheduler value from `connPriority` (priority: lower first; fair
    /// bandwidth: weight).
    pub sctp_priority: Option<u16>,
    /// SCTP multihoming (`multihoming` true, or `multipath` active; a listener's default
    /// `passive` keeps one path): the local addresses
    /// an association binds and lists in its INIT/INIT-ACK (`local_ips`; empty: every
    /// address of the host), so the peer learns every path from the handshake (usrsctp's
    /// IP mode). `None`: one path (AF_CONN mode, the default).
    pub sctp_multihome: Option<Arc<[IpAddr]>>,
    /// Concurrent multipath transfer for a multihomed SCTP association: `multipathPolicy`
    /// `aggregate` (data spread over every active path). Other policies keep one path at a
    /// time (handover: the primary, the others for retransmissions and failover).
    pub sctp_cmt: bool,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            nodelay: true,
            dscp: None,
            user_timeout: None,
            congestion_control: None,
            keepalive: None,
            udplite_coverage: None,
            sctp_udp_port: usrsctp::DEFAULT_UDP_PORT,
            sctp_scheduler: None,
            sctp_priority: None,
            sctp_multihome: None,
            sctp_cmt: false,
        }
    }
}

impl SocketOptions {
    /// Derives the options from compiled properties: DSCP from `dscp_value`, else the
    /// capacity profile (0 = unmarked); the user timeout from `connTimeout` (0: the
    /// system's default); keep-alive every `keepAliveTimeout` (unless `keepAlive` is
    /// avoided or prohibited), else [`DEFAULT_KEEPALIVE`] when `keepAlive` is required or
    /// preferred; UDP-Lite header-only coverage when `fullChecksumSend` or
    /// `fullChecksumRecv` is avoided or prohibited. Cost: a few map lookups.
    pub(crate) fn from_properties(props: &Properties) -> SocketOptions {
        let c = props.compiled();
        let dscp = c
            .dscp
            .or(Some(c.capacity_profile.dscp()))
            .filter(|d| *d != 0);
        let pref = |n: Name| props.get(n).and_then(|e| e.as_preference());
        let wants = |n: Name| matches!(pref(n), Some(Preference::Require | Preference::Prefer));
        let avoids = |n: Name| matches!(pref(n), Some(Preference::Avoid | Preference::Prohibit));
        SocketOptions {
            dscp,
            user_timeout: c.abort_timeout.filter(|t| !t.is_zero()),
            keepalive: match c.keep_alive_timeout.filter(|t| !t.is_zero()) {
                Some(_) if avoids(Name::KeepAlive) => None,
                Some(every) => Some(every),
                None => wants(Name::KeepAlive).then_some(DEFAULT_KEEPALIVE),
            },
            udplite_coverage: (avoids(Name::FullChecksumSend) || avoids(Name::FullChecksumRecv))
                .then_some(HEADER_ONLY_COVERAGE),
            sctp_scheduler: props
                .get(Name::ConnScheduler)
                .and_then(|e| e.value.as_str())
                .and_then(scheduler),
            sctp_priority: props
                .get(Name::ConnPriority)
                .and_then(|e| e.value.as_f64())
                .map(|p| p.clamp(0.0, f64::from(u16::MAX)) as u16),
            sctp_multihome: (c.multipath == Multipath::Active
                || matches!(
                    props.get(Name::Multihoming).map(|e| &e.value),
                    Some(Value::Bool(true))
                ))
            .then(|| {
                props
                    .get(Name::LocalIps)
                    .filter(|e| !matches!(e.value, Value::Not(_)))
                    .map(|e| {
                        e.value
                            .items()
                            .iter()
                            .filter_map(|v| v.as_str()?.parse::<IpAddr>().ok())
                            .collect()
                    })
                    .unwrap_or_default()
            }),
            sctp_cmt: c.multipath_policy == MultipathPolicy::Aggregate,
            ..SocketOptions::default()
        }
    }

    /// Applies the options that concern every socket: DSCP, best effort where the
    /// socket type cannot mark (MPTCP over IPv6 rejects `IPV6_TCLASS`), since a capacity
    /// profile is advisory.
    fn apply_common(&self, s: &Socket, v6: bool) -> Result<(), AttemptError> {
        if let Some(dscp) = self.dscp {
            if dscp > 63 {
                return Err(AttemptError::Io(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("DSCP {dscp} is out of range 0..=63"),
                )));
            }
            let tos = u32::from(dscp) << 2;
            let (r, what) = if v6 {
                (s.set_tclass_v6(tos), "IPV6_TCLASS")
            } else {
                (s.set_tos_v4(tos), "IP_TOS")
            };
            match r {
                Ok(()) => {}
                Err(e) if not_supported(&e) => {
                    tracing::debug!("DSCP {dscp} not marked: {what} not supported here: {e}");
                }
                Err(e) => return Err(context(e, &format!("setting {what}"))),
            }
        }
        Ok(())
    }

    /// Applies the options to a TCP or MPTCP socket (before connect or listen). An
    /// option the socket type does not support fails with [`AttemptError::Unsupported`]
    /// naming it (this kernel's MPTCP rejects `TCP_USER_TIMEOUT`, for instance).
    pub(crate) fn apply_stream(
        &self,
        s: &Socket,
        v6: bool,
        mptcp: bool,
    ) -> Result<(), AttemptError> {
        let protocol = if mptcp {
            Protocol::Mptcp
        } else {
            Protocol::Tcp
        };
        let check = |r: io::Result<()>, option: SocketOption| {
            r.map_err(|e| {
                if not_supported(&e) {
                    AttemptError::Unsupported(NotSupported::SocketOption { option, protocol })
                } else {
                    context(e, &format!("setting {option}"))
                }
            })
        };
        self.apply_common(s, v6)?;
        check(s.set_tcp_nodelay(self.nodelay), SocketOption::NoDelay)?;
        if let Some(t) = self.user_timeout {
            check(s.set_tcp_user_timeout(Some(t)), SocketOption::UserTimeout)?;
        }
        if let Some(idle) = self.keepalive {
            // TCP_KEEPIDLE counts whole seconds, at least one.
            let idle = idle.max(Duration::from_secs(1));
            check(
                s.set_tcp_keepalive(&TcpKeepalive::new().with_time(idle)),
                SocketOption::KeepAlive,
            )?;
        }
        if let Some(name) = &self.congestion_control {
            set_congestion(s, name)?;
        }
        Ok(())
    }

    /// Applies the options to a UDP or UDP-Lite socket.
    pub(crate) fn apply_datagram(
        &self,
        s: &Socket,
        v6: bool,
        lite: bool,
    ) -> Result<(), AttemptError> {
        self.apply_common(s, v6)?;
        if let (true, Some(cov)) = (lite, self.udplite_coverage) {
            for opt in [sys::UDPLITE_SEND_CSCOV, sys::UDPLITE_RECV_CSCOV] {
                sys::set_int(s, sys::IPPROTO_UDPLITE, opt, cov.into())
                    .map_err(|e| context(e, "setting UDP-Lite checksum coverage"))?;
            }
        }
        Ok(())
    }
}

/// Pins a socket bound to a candidate's local address to that address's interface
/// (`SO_BINDTODEVICE`), so the attempt leaves through that link even where the routing
/// table would send the address elsewhere. MPTCP sockets are left unpinned (the option
/// would hold every subflow on the first link). Best effort: a kernel or sandbox that
/// refuses it (EPERM without `CAP_NET_RAW` before Linux 5.7) leaves the address binding
/// alone to choose the path. Cost: one `setsockopt` (and one `getsockopt`).
pub(crate) fn bind_device(s: &Socket, interface: &str) -> Result<(), AttemptError> {
    if sys::get_int(s, libc::SOL_SOCKET, libc::SO_PROTOCOL).ok() == Some(sys::IPPROTO_MPTCP) {
        return Ok(());
    }
    match s.bind_device(Some(interface.as_bytes())) {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES)) => {
            tracing::debug!(
                "not pinned to {interface} (SO_BINDTODEVICE: {e}); bound by address only"
            );
            Ok(())
        }
        Err(e) => Err(context(e, &format!("binding to interface {interface}"))),
    }
}

/// Whether the kernel says this socket type lacks the option.
fn not_supported(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOPROTOOPT))
}

/// Sets `TCP_CONGESTION`, turning the kernel's errors into messages naming the algorithm.
fn set_congestion(s: &Socket, name: &str) -> Result<(), AttemptError> {
    let unsupported = |problem| {
        AttemptError::Unsupported(NotSupported::Congestion {
            name: name.into(),
            problem,
        })
    };
    if name.is_empty() || name.len() > TCP_CA_NAME_MAX || name.contains('\0') {
        return Err(unsupported(CongestionProblem::InvalidName));
    }
    s.set_tcp_congestion(name.as_bytes())
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => unsupported(CongestionProblem::Missing),
            Some(libc::EPERM) => unsupported(CongestionProblem::NotPermitted),
            _ => context(e, &format!("setting TCP congestion control '{name}'")),
        })
}

/// Wraps an option error with what was being done, keeping its kind.
fn context(e: io::Error, what: &str) -> AttemptError {
    AttemptError::Io(io::Error::new(e.kind(), format!("{what}: {e}")))
}

/// The usrsctp scheduler for a `connScheduler` word (RFC 8260 names).
fn scheduler(word: &str) -> Option<usrsctp::Scheduler> {
    use usrsctp::Scheduler::*;
    Some(match word {
        "fcfs" => FirstCome,
        "round-robin" => RoundRobin,
        "round-robin-packet" => RoundRobinPacket,
        "priority" => Priority,
        "fair-bandwidth" | "weighted-fair-queueing" => FairBandwidth,
        _ => return None,
    })
}
