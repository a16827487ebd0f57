//! SCTP attempts and listeners on user-space SCTP (usrsctp, UDP-encapsulated per
//! RFC 6951; see the `usrsctp` crate for the threading model and its cost).
//!
//! The candidate's remote port is the SCTP port; the UDP encapsulation port is the
//! context's ([`usrsctp::DEFAULT_UDP_PORT`] unless configured), the same for every peer.
//! Kernel SCTP, where a host has it, is detected ([`kernel_sctp_available`]) but not used
//! yet: usrsctp runs everywhere, so behaviour does not depend on the host.

use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;
use std::time::Duration;

use taps_core::candidates::Candidate;
use usrsctp::{CmtGlobal, CmtMode, SctpListener, SctpOptions, SctpStack};

use super::{AttemptError, Established, SocketOptions};

/// Payload protocol identifier of the one-byte message that announces a flow opened on
/// a new stream of an existing association, so the peer sees the new connection before
/// its first data. Receivers drop these messages. (ASCII "TAPS".)
pub(crate) const STREAM_OPEN_PPID: u32 = 0x5441_5053;

/// Payload protocol identifier of the one-byte stand-in for an empty message, which
/// SCTP cannot carry. Receivers deliver an empty message. (ASCII "TAP0".)
pub(crate) const EMPTY_PPID: u32 = 0x5441_5030;

/// Payload protocol identifier of the one-byte message that ends a flow's sending side
/// (`AsyncWrite::poll_shutdown` or close): the peer reads end of stream, as after a TCP
/// FIN, while the association and the flow's other direction stay up. (ASCII "TAPC".)
pub(crate) const FLOW_END_PPID: u32 = 0x5441_5043;

/// Payload protocol identifier of application messages (0: unspecified, RFC 9260).
pub(crate) const DATA_PPID: u32 = 0;

/// Whether this host's kernel offers SCTP (`socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP)`
/// succeeds). Checked once per process (one socket call).
pub fn kernel_sctp_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::STREAM,
            Some(socket2::Protocol::from(libc::IPPROTO_SCTP)),
        )
        .is_ok()
    })
}

/// Retransmissions without an answer after which an association with an abort timeout
/// is given up: the (`SCTP_ABORT_RETRANSMITS` + 1)-th timeout in a row ends it.
const SCTP_ABORT_RETRANSMITS: u16 = 4;

/// The smallest maximum RTO an abort timeout sets (shorter would retransmit spuriously
/// on ordinary paths); abort timeouts under 5 × this take up to 5 × this.
const SCTP_MIN_RTO_MAX: Duration = Duration::from_millis(100);

/// The usrsctp options for a connection or listener with `opts`. The abort timeout
/// (`connTimeout`, [`SocketOptions::user_timeout`]) becomes SCTP's equivalent of TCP's
/// user timeout: a maximum RTO of a fifth of it and 4 retransmissions, so outstanding
/// data unacknowledged for that long ends the association (`SCTP_COMM_LOST`); the
/// keep-alive interval becomes the heartbeat interval (idle paths).
pub(crate) fn sctp_options(opts: &SocketOptions) -> SctpOptions {
    let millis = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
    let (rto_max_ms, max_retransmits) = match opts.user_timeout {
        Some(t) => {
            let per_try = (t / u32::from(SCTP_ABORT_RETRANSMITS + 1)).max(SCTP_MIN_RTO_MAX);
            (millis(per_try), SCTP_ABORT_RETRANSMITS)
        }
        None => (0, 0),
    };
    let cmt = cmt_mode(opts);
    // CMT sends as much as the receive window lets it, over every path: with more window
    // than the paths' bandwidth-delay products and queues hold, it overfills the
    // bottleneck queues, and the losses cut both paths' windows (docs/sctp.md,
    // "Multihoming": 1.6-1.7x one path's rate with usrsctp's 1 MiB, 1.9-2.0x with
    // 128-256 KiB). The receiving side of a CMT association advertises CMT_WINDOW.
    let window = cmt.filter(|m| *m != CmtMode::Off).map(|_| CMT_WINDOW);
    SctpOptions {
        cmt,
        recv_buffer: window,
        scheduler: opts.sctp_scheduler,
        nodelay: opts.nodelay,
        rto_max_ms,
        max_retransmits,
        heartbeat_interval_ms: match (opts.keepalive, &opts.sctp_multihome) {
            (Some(k), _) => millis(k),
            (None, Some(_)) => millis(MULTIHOMED_HEARTBEAT),
            (None, None) => 0,
        },
        ..SctpOptions::default()
    }
}

/// The heartbeat interval of a multihomed association when `keepAliveTimeout` sets none.
/// usrsctp 0.9.5 probes a path that is not yet confirmed again only once the heartbeat
/// interval has passed since its last probe (later usrsctp probes it every RTO), so with
/// its default of 30 s a path whose first heartbeat was lost (its link down while the
/// association came up) stays unusable for 30 s, and cannot take over when the primary
/// path fails meanwhile. One heartbeat a second on each idle path is the cost.
const MULTIHOMED_HEARTBEAT: Duration = Duration::from_secs(1);

/// The receive buffer (so the window it advertises) of an association with CMT on:
/// usrsctp's stock default, where taps gives single-path associations 1 MiB.
const CMT_WINDOW: u32 = 256 * 1024;

/// Whether this process has allowed CMT (usrsctp's process-wide switch, turned on by the
/// first association that aggregates; from then on every association says its own mode).
static CMT_ALLOWED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The CMT mode of a new association: on (CMT base with delayed acks) for a multihomed one
/// whose policy aggregates, allowing CMT process-wide first (one sysctl, once); off for
/// every other once CMT is allowed (new sockets would inherit it); else untouched.
fn cmt_mode(opts: &SocketOptions) -> Option<CmtMode> {
    use std::sync::atomic::Ordering;
    if opts.sctp_cmt && opts.sctp_multihome.is_some() {
        return match allow_cmt() {
            Ok(()) => Some(CmtMode::Base),
            Err(e) => {
                tracing::warn!("SCTP CMT unavailable, one path at a time: {e}");
                None
            }
        };
    }
    CMT_ALLOWED.load(Ordering::Acquire).then_some(CmtMode::Off)
}

/// Allows CMT process-wide (usrsctp's `sctp_cmt_on_off`, with delayed acks for CMT, and
/// Max.Burst counted per send rather than by cutting a path's window, without which a
/// path a pinned stream is often short of data for keeps a window of a few packets), once:
/// what CMT associations and sends pinned to a path need. Four sysctls the first time, one
/// atomic load after.
pub(crate) fn allow_cmt() -> Result<(), usrsctp::Error> {
    use std::sync::atomic::Ordering;
    if CMT_ALLOWED.load(Ordering::Acquire) {
        return Ok(());
    }
    usrsctp::set_cmt_global(&CmtGlobal {
        cmt: true,
        dac: true,
        max_burst_per_send: true,
        ..CmtGlobal::default()
    })?;
    CMT_ALLOWED.store(true, Ordering::Release);
    Ok(())
}

/// One SCTP attempt: INIT to the candidate's address on the encapsulation port, calling
/// `on_reachable` when the INIT-ACK arrives (one round trip), then waiting for the
/// COOKIE-ACK. Dropping the future aborts the association and frees its UDP socket.
pub(crate) async fn connect(
    candidate: &Candidate,
    opts: &SocketOptions,
    on_reachable: impl FnOnce(),
) -> Result<Established, AttemptError> {
    let udp_remote = SocketAddr::new(candidate.remote.ip(), opts.sctp_udp_port);
    if let Some(locals) = &opts.sctp_multihome {
        return connect_multihomed(locals, udp_remote, candidate, opts, on_reachable).await;
    }
    if candidate.local.is_some() {
        tracing::debug!("SCTP over UDP ignores the local binding of {candidate}");
    }
    let options = SctpOptions {
        // First contact: ask the port before building the association, so a host
        // without SCTP over UDP costs a socket, not an association.
        probe_port: super::first_contact(candidate),
        ..sctp_options(opts)
    };
    let mut connecting = SctpStack::global()
        .connect(udp_remote, candidate.remote.port(), &options)
        .map_err(attempt_error)?;
    connecting.reachable().await.map_err(attempt_error)?;
    on_reachable();
    let association = connecting.established().await.map_err(attempt_error)?;
    if let Some(p) = opts.sctp_priority {
        let _ = association.set_stream_value(0, p);
    }
    Ok(Established::Sctp(association))
}

/// A multihomed attempt (usrsctp's IP mode): bound to `locals` (every address of the host
/// if empty), which the INIT lists, so the peer learns each path from the handshake; the
/// peer's own addresses come back in its INIT-ACK. In IP mode the INIT-ACK is not seen on
/// its own: `on_reachable` is called with the association.
async fn connect_multihomed(
    locals: &[IpAddr],
    udp_remote: SocketAddr,
    candidate: &Candidate,
    opts: &SocketOptions,
    on_reachable: impl FnOnce(),
) -> Result<Established, AttemptError> {
    let connecting = SctpStack::global()
        .connect_multihomed(
            locals,
            udp_remote,
            candidate.remote.port(),
            &sctp_options(opts),
        )
        .map_err(attempt_error)?;
    let association = connecting.established().await.map_err(attempt_error)?;
    on_reachable();
    if let Some(p) = opts.sctp_priority {
        let _ = association.set_stream_value(0, p);
    }
    Ok(Established::Sctp(association))
}

/// Listens for SCTP associations to `port` on `local_ip` and the encapsulation port,
/// with `backlog` established associations queued for accept. With multihoming
/// ([`SocketOptions::sctp_multihome`]) the listener binds every address it names (else
/// `local_ip`, or every address of the host when that is unspecified) and lists them in
/// its INIT-ACKs.
pub(crate) fn listen(
    local_ip: IpAddr,
    port: u16,
    opts: &SocketOptions,
    backlog: u32,
) -> Result<SctpListener, AttemptError> {
    if let Some(locals) = &opts.sctp_multihome {
        let locals: Vec<IpAddr> = match (locals.is_empty(), local_ip.is_unspecified()) {
            (false, _) => locals.to_vec(),
            (true, true) => Vec::new(),
            (true, false) => vec![local_ip],
        };
        return SctpStack::global()
            .listen_multihomed(
                &locals,
                opts.sctp_udp_port,
                port,
                &SctpOptions {
                    backlog,
                    ..sctp_options(opts)
                },
            )
            .map_err(attempt_error);
    }
    SctpStack::global()
        .listen(
            SocketAddr::new(local_ip, opts.sctp_udp_port),
            port,
            &SctpOptions {
                backlog,
                ..sctp_options(opts)
            },
        )
        .map_err(attempt_error)
}

/// Classifies a usrsctp error for the race report.
fn attempt_error(e: usrsctp::Error) -> AttemptError {
    match e {
        usrsctp::Error::Refused(_) => AttemptError::Refused,
        usrsctp::Error::Udp { source, .. } | usrsctp::Error::Sys { source, .. } => {
            match source.raw_os_error() {
                Some(code) => AttemptError::from(std::io::Error::from_raw_os_error(code)),
                None => AttemptError::Io(std::io::Error::other(source.to_string())),
            }
        }
        other => AttemptError::Io(std::io::Error::other(other.to_string())),
    }
}
