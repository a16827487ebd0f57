//! Per-association settings and the stream schedulers, and how they are applied to a usrsctp
//! socket.

use crate::error::Result;
use crate::ffi::{self, Plain};
use crate::sys::Sock;

/// RFC 8260 stream schedulers offered by usrsctp (`SCTP_PLUGGABLE_SS`). Selecting one costs
/// one setsockopt ([`SctpOptions::scheduler`],
/// [`Association::set_scheduler`](crate::Association::set_scheduler)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheduler {
    /// First come, first served: messages leave in the order they were queued, across streams.
    FirstCome,
    /// Round robin over streams with data, one message per turn.
    RoundRobin,
    /// Round robin over streams, one packet per turn.
    RoundRobinPacket,
    /// Strict priority by
    /// [`Association::set_stream_value`](crate::Association::set_stream_value) (lower value
    /// first); round robin among equal priorities.
    Priority,
    /// Fair bandwidth: equal bytes per stream, weighted by the stream value.
    FairBandwidth,
}

impl Scheduler {
    /// The usrsctp constant (`SCTP_SS_*`).
    pub(crate) fn raw(self) -> u32 {
        match self {
            Scheduler::FirstCome => ffi::SCTP_SS_FIRST_COME,
            Scheduler::RoundRobin => ffi::SCTP_SS_ROUND_ROBIN,
            Scheduler::RoundRobinPacket => ffi::SCTP_SS_ROUND_ROBIN_PACKET,
            Scheduler::Priority => ffi::SCTP_SS_PRIORITY,
            Scheduler::FairBandwidth => ffi::SCTP_SS_FAIR_BANDWITH,
        }
    }
}

/// Per-association settings, applied with a few setsockopts at socket creation. Cloning
/// copies a few integers.
#[derive(Debug, Clone)]
pub struct SctpOptions {
    /// Inbound and outbound streams requested in INIT (SCTP_INITMSG). Default 256: usrsctp
    /// allocates and walks every stream's state when an association starts and ends, and
    /// at 1024 a handshake cost 175-190 µs of CPU (client + server, loopback) against
    /// 110-115 µs at 256 (`examples/attempt_cost`).
    pub streams: u16,
    /// Local SCTP port of a client (0: usrsctp picks an ephemeral one). Default 0.
    pub local_port: u16,
    /// usrsctp send buffer (SO_SNDBUF) in bytes; `None`: the stack default (1 MiB, set at init).
    pub send_buffer: Option<u32>,
    /// usrsctp receive buffer (SO_RCVBUF) in bytes; `None`: the stack default (1 MiB, set at init).
    pub recv_buffer: Option<u32>,
    /// Bytes of received messages we buffer for the application before we stop reading from
    /// usrsctp (which then closes the receive window). Default 256 KiB.
    pub recv_budget: usize,
    /// Stream scheduler set before the association starts; `None`: usrsctp's default.
    pub scheduler: Option<Scheduler>,
    /// Disable Nagle-like bundling delay (SCTP_NODELAY). Default true.
    pub nodelay: bool,
    /// Start in stream-accepting mode (see
    /// [`Association::accept_stream`](crate::Association::accept_stream)). Default false.
    pub accept_streams: bool,
    /// Maximum INIT retransmissions (0: usrsctp's default, 8).
    pub init_attempts: u16,
    /// Maximum INIT retransmission timeout in ms (0: usrsctp's default, 60 s).
    pub init_max_timeout_ms: u16,
    /// Upper bound of the retransmission timeout in ms (SCTP_RTOINFO `srto_max`; the
    /// initial and minimum RTO are lowered to it when larger). 0: usrsctp's default, 60 s.
    pub rto_max_ms: u32,
    /// Consecutive retransmissions (of data or heartbeats) without an answer after which
    /// the association is given up and reported lost (SCTP_ASSOCINFO `sasoc_asocmaxrxt`
    /// and, per path, `spp_pathmaxrxt`). 0: usrsctp's default, 10 (5 per path). With
    /// [`SctpOptions::rto_max_ms`] this bounds how long a dead path goes unnoticed while
    /// data is outstanding: at most `(max_retransmits + 1) × rto_max_ms`.
    pub max_retransmits: u16,
    /// Heartbeat interval in ms on idle paths (SCTP_PEER_ADDR_PARAMS `spp_hbinterval`).
    /// 0: usrsctp's default, 30 s.
    pub heartbeat_interval_ms: u32,
    /// SCTP path MTU in bytes (SCTP_PEER_ADDR_PARAMS `spp_pathmtu`: the packet without its
    /// 12-byte common header; 512..=65492). `None` (default): the kernel's route to the
    /// peer decides (IP_MTU of the client's connected UDP socket; for a listener, of the
    /// route to each accepted peer), e.g. 65492 on loopback and 1460 on an IPv4 path of
    /// MTU 1500. Set it for peers that cannot read datagrams that large.
    pub path_mtu: Option<u32>,
    /// Listeners: established associations usrsctp queues for
    /// [`SctpListener::accept`](crate::SctpListener::accept) (`listen` backlog). Default 1024.
    pub backlog: u32,
    /// Offer NR-SACK (non-renegable SACKs, `SCTP_NRSACK_SUPPORTED`) in INIT / INIT-ACK; used
    /// when both ends offer it. Default false. Must be set before the association exists.
    pub nr_sack: bool,
    /// Concurrent multipath transfer for this socket's associations (`SCTP_CMT_ON_OFF`);
    /// `None`: inherit the process-wide sysctl. Modes other than `Off` need the process-wide
    /// switch first (`set_cmt_global`).
    pub cmt: Option<crate::cmt::CmtMode>,
    /// Clients: before any usrsctp state or UDP socket of the association, send a
    /// zero-length datagram from the process's shared probe socket (one per family, its
    /// ICMP errors queued with IP_RECVERR) and fail with
    /// [`Error::Refused`](crate::Error::Refused) if the peer's host already refused it
    /// (ICMP port unreachable, known while the send runs when the peer is this host).
    /// Saves the association's socket, creation and teardown where nothing listens (a
    /// refused attempt is a `sendto` between two `recvmsg`s of the error queue); costs the
    /// same three calls where something does (the peer drops the datagram: shorter than
    /// an SCTP header). Elsewhere the ICMP comes a round trip later and ends the attempt
    /// as before. Default false.
    pub probe_port: bool,
}

impl Default for SctpOptions {
    fn default() -> Self {
        SctpOptions {
            streams: 256,
            local_port: 0,
            send_buffer: None,
            recv_buffer: None,
            recv_budget: 256 * 1024,
            scheduler: None,
            nodelay: true,
            accept_streams: false,
            init_attempts: 0,
            init_max_timeout_ms: 0,
            rto_max_ms: 0,
            max_retransmits: 0,
            heartbeat_interval_ms: 0,
            path_mtu: None,
            backlog: 1024,
            nr_sack: false,
            cmt: None,
            probe_port: false,
        }
    }
}

impl SctpOptions {
    /// Applies these options to a usrsctp socket: SCTP_INITMSG when `listening_or_new`, the
    /// buffer sizes if set, receive info, explicit EOR, NODELAY, the four notifications we
    /// handle, the path MTU `mtu` (if given) and the scheduler if set. About ten
    /// setsockopts.
    pub(crate) fn apply(
        &self,
        sock: &Sock,
        listening_or_new: bool,
        mtu: Option<u32>,
    ) -> Result<()> {
        let opts = self;
        if listening_or_new {
            let init = ffi::sctp_initmsg {
                sinit_num_ostreams: opts.streams.max(1),
                sinit_max_instreams: opts.streams.max(1),
                sinit_max_attempts: opts.init_attempts,
                sinit_max_init_timeo: opts.init_max_timeout_ms,
            };
            sock.setopt(ffi::IPPROTO_SCTP, ffi::SCTP_INITMSG, &init, "SCTP_INITMSG")?;
        }
        if let Some(b) = opts.send_buffer {
            sock.setopt(
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                &(b as libc::c_int),
                "SO_SNDBUF",
            )?;
        }
        if let Some(b) = opts.recv_buffer {
            sock.setopt(
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                &(b as libc::c_int),
                "SO_RCVBUF",
            )?;
        }
        sock.sctp_opt_int(ffi::SCTP_RECVRCVINFO, 1, "SCTP_RECVRCVINFO")?;
        sock.sctp_opt_int(ffi::SCTP_EXPLICIT_EOR, 1, "SCTP_EXPLICIT_EOR")?;
        sock.sctp_opt_int(ffi::SCTP_NODELAY, i32::from(opts.nodelay), "SCTP_NODELAY")?;
        for ty in [
            ffi::SCTP_ASSOC_CHANGE,
            ffi::SCTP_SHUTDOWN_EVENT,
            ffi::SCTP_SENDER_DRY_EVENT,
            ffi::SCTP_STREAM_RESET_EVENT,
        ] {
            let ev = ffi::sctp_event {
                se_assoc_id: ffi::SCTP_FUTURE_ASSOC,
                se_type: ty,
                se_on: 1,
            };
            sock.setopt(ffi::IPPROTO_SCTP, ffi::SCTP_EVENT, &ev, "SCTP_EVENT")?;
        }
        opts.apply_path_params(sock, mtu)?;
        crate::cmt::apply_options(opts.nr_sack, opts.cmt, sock)?;
        if let Some(s) = opts.scheduler {
            let v = ffi::sctp_assoc_value {
                assoc_id: ffi::SCTP_FUTURE_ASSOC,
                assoc_value: s.raw(),
            };
            sock.setopt(
                ffi::IPPROTO_SCTP,
                ffi::SCTP_PLUGGABLE_SS,
                &v,
                "SCTP_PLUGGABLE_SS",
            )?;
        }
        Ok(())
    }

    /// Applies the RTO bound, the retransmission limit, the heartbeat interval and the path
    /// MTU `mtu` for future associations of `sock` (one setsockopt for each group that is
    /// set).
    fn apply_path_params(&self, sock: &Sock, mtu: Option<u32>) -> Result<()> {
        if self.rto_max_ms > 0 {
            let rto = ffi::sctp_rtoinfo {
                srto_assoc_id: ffi::SCTP_FUTURE_ASSOC,
                // usrsctp needs min <= initial <= max: lower its defaults (1 s, 3 s).
                srto_initial: DEFAULT_RTO_INITIAL_MS.min(self.rto_max_ms),
                srto_max: self.rto_max_ms,
                srto_min: DEFAULT_RTO_MIN_MS.min(self.rto_max_ms),
            };
            sock.setopt(ffi::IPPROTO_SCTP, ffi::SCTP_RTOINFO, &rto, "SCTP_RTOINFO")?;
        }
        if self.max_retransmits > 0 {
            let assoc = ffi::sctp_assocparams {
                sasoc_assoc_id: ffi::SCTP_FUTURE_ASSOC,
                sasoc_asocmaxrxt: self.max_retransmits,
                ..Default::default()
            };
            sock.setopt(
                ffi::IPPROTO_SCTP,
                ffi::SCTP_ASSOCINFO,
                &assoc,
                "SCTP_ASSOCINFO",
            )?;
        }
        let mtu = self.path_mtu.or(mtu);
        if self.max_retransmits > 0 || self.heartbeat_interval_ms > 0 || mtu.is_some() {
            let mut p = ffi::sctp_paddrparams::zeroed();
            p.spp_assoc_id = ffi::SCTP_FUTURE_ASSOC;
            p.spp_pathmaxrxt = self.max_retransmits;
            if self.heartbeat_interval_ms > 0 {
                p.spp_hbinterval = self.heartbeat_interval_ms;
                p.spp_flags = ffi::SPP_HB_ENABLE;
            }
            if let Some(m) = mtu {
                p.spp_pathmtu = m.clamp(MIN_PATH_MTU, crate::udp::MAX_SCTP_MTU);
                p.spp_flags |= ffi::SPP_PMTUD_DISABLE;
            }
            sock.setopt(
                ffi::IPPROTO_SCTP,
                ffi::SCTP_PEER_ADDR_PARAMS,
                &p,
                "SCTP_PEER_ADDR_PARAMS",
            )?;
        }
        Ok(())
    }
}

/// usrsctp's smallest path MTU (`SCTP_SMALLEST_PMTU`).
const MIN_PATH_MTU: u32 = 512;

/// Lowers the path MTU of `sock`'s (established) association to `mtu` unless
/// [`SctpOptions::path_mtu`] fixes it. One setsockopt.
pub(crate) fn lower_path_mtu(sock: &Sock, opts: &SctpOptions, mtu: u32) -> Result<()> {
    if opts.path_mtu.is_some() {
        return Ok(());
    }
    let mut p = ffi::sctp_paddrparams::zeroed();
    p.spp_assoc_id = ffi::SCTP_FUTURE_ASSOC;
    p.spp_pathmtu = mtu.clamp(MIN_PATH_MTU, crate::udp::MAX_SCTP_MTU);
    p.spp_flags = ffi::SPP_PMTUD_DISABLE;
    sock.setopt(
        ffi::IPPROTO_SCTP,
        ffi::SCTP_PEER_ADDR_PARAMS,
        &p,
        "SCTP_PEER_ADDR_PARAMS",
    )
}

/// usrsctp's default initial RTO in ms (`sctp_rto_initial_default`).
const DEFAULT_RTO_INITIAL_MS: u32 = 3000;
/// usrsctp's default minimum RTO in ms (`sctp_rto_min_default`).
const DEFAULT_RTO_MIN_MS: u32 = 1000;
