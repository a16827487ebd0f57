//! The multihoming methods of [`Association`]: adding a path, listing paths, the primary
//! path, per-path parameters, CMT, NR-SACK, path events and sends pinned to a path.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use super::{
    lock, set_cmt, sock_key, CmtMode, EventLog, PathEvents, PathId, PathInfo, PathParams,
    PathState, PathThresholds, PeerPath, SctpPath, EVENTS,
};
use crate::assoc::{AssocShared, Association};
use crate::error::{Error, Result};
use crate::ffi::{self, Plain};
use crate::path_events::PathKey;

impl Association {
    fn mh_shared(&self) -> &AssocShared {
        &self.inner.shared
    }

    /// Adds `path` as a new peer path of this established association, on this side (do the
    /// same on the peer with its endpoint of the path). usrsctp sends a HEARTBEAT on it at
    /// once and uses it for data after the HEARTBEAT-ACK (one round trip). Fails with
    /// [`Error::MultihomeUnavailable`] when this build has no multihoming shim (the message
    /// says why), `ENOTCONN` before establishment, `ENOSPC` beyond 8 paths. One call into
    /// usrsctp.
    pub fn add_peer_path(&self, path: SctpPath) -> Result<PeerPath> {
        let sh = self.mh_shared();
        sh.sock.add_peer_path(path.conn.id, &path.shared.attached)?;
        Ok(PeerPath {
            assoc: self.clone(),
            path,
        })
    }

    /// Bytes of `stream` waiting in usrsctp's send buffer and not yet sent: the exact
    /// per-stream "sender queue info" (messages not yet cut into chunks plus chunks not yet
    /// transmitted; in-flight data is not counted), unlike [`Association::queued_bytes`],
    /// our own upper bound, which never falls while the association's buffer stays
    /// non-empty. Needs the multihoming shim ([`Error::MultihomeUnavailable`] otherwise);
    /// `EINVAL` for a stream beyond the association's outbound streams. One call into
    /// usrsctp that walks the stream's queue and the send queue.
    pub fn unsent_bytes(&self, stream: u16) -> Result<usize> {
        self.mh_shared().sock.stream_unsent(stream)
    }

    /// Every path of the association with its state and UDP addresses
    /// (`usrsctp_getpaddrs`, then one `SCTP_GET_PEER_ADDR_INFO` and the socket's addresses
    /// per path, and one `SCTP_PRIMARY_ADDR`), and the bytes each carried (one lock per
    /// path). Works without the shim (one path).
    pub fn paths(&self) -> Result<Vec<PathInfo>> {
        let sock = &self.mh_shared().sock;
        let primary = self.primary_path().ok();
        let ports = self.inner.ip_ports();
        let mut out = Vec::new();
        for id in peer_paths(sock)? {
            let (ip, conn_bytes) = match (ports, id.0) {
                (Some(ports), PathKey::Ip(remote)) => {
                    (Some(crate::ip_paths::path(ports, remote)), None)
                }
                (_, PathKey::Conn(c)) => (None, crate::sys::route_bytes(c)),
                _ => (None, None),
            };
            let mut pi = ffi::sctp_paddrinfo::zeroed();
            pi.spinfo_address = id.storage();
            sock.getopt(
                ffi::IPPROTO_SCTP,
                ffi::SCTP_GET_PEER_ADDR_INFO,
                &mut pi,
                "SCTP_GET_PEER_ADDR_INFO",
            )?;
            out.push(PathInfo {
                id,
                addrs: path_addrs(sock, id, ip.and_then(|b| b.source)),
                state: match pi.spinfo_state {
                    ffi::SCTP_ACTIVE => PathState::Active,
                    ffi::SCTP_INACTIVE => PathState::Inactive,
                    ffi::SCTP_UNCONFIRMED => PathState::Unconfirmed,
                    s => PathState::Other(s),
                },
                primary: primary == Some(id),
                cwnd: pi.spinfo_cwnd,
                srtt_ms: pi.spinfo_srtt,
                rto_ms: pi.spinfo_rto,
                mtu: pi.spinfo_mtu,
                bytes_sent: ip
                    .filter(|_| crate::ip_paths::hooked())
                    .map(|b| b.sent)
                    .or(conn_bytes.map(|b| b.0)),
                bytes_received: ip.map(|b| b.received).or(conn_bytes.map(|b| b.1)),
            });
        }
        Ok(out)
    }

    /// The primary path (`SCTP_PRIMARY_ADDR`): where data without a destination goes.
    pub fn primary_path(&self) -> Result<PathId> {
        let mut p = ffi::sctp_setprim::zeroed();
        self.mh_shared().sock.getopt(
            ffi::IPPROTO_SCTP,
            ffi::SCTP_PRIMARY_ADDR,
            &mut p,
            "SCTP_PRIMARY_ADDR",
        )?;
        PathId::from_storage(&p.ssp_addr).ok_or_else(|| {
            Error::MultihomeUnavailable("the primary path has an unknown address family".into())
        })
    }

    /// Makes `path` the primary path (`SCTP_PRIMARY_ADDR`); EINVAL while it is unconfirmed
    /// or not a path of this association.
    pub fn set_primary(&self, path: PathId) -> Result<()> {
        let mut p = ffi::sctp_setprim::zeroed();
        p.ssp_addr = path.storage();
        self.mh_shared().sock.setopt(
            ffi::IPPROTO_SCTP,
            ffi::SCTP_PRIMARY_ADDR,
            &p,
            "SCTP_PRIMARY_ADDR",
        )
    }

    /// Sets heartbeat interval, `pathmaxrxt` and/or a fixed MTU of one path
    /// (`SCTP_PEER_ADDR_PARAMS`).
    pub fn set_path_params(&self, path: PathId, params: &PathParams) -> Result<()> {
        let mut p = ffi::sctp_paddrparams::zeroed();
        p.spp_address = path.storage();
        if let Some(hb) = params.heartbeat_interval_ms {
            p.spp_hbinterval = hb;
            p.spp_flags |= ffi::SPP_HB_ENABLE;
        }
        if let Some(m) = params.max_retransmits {
            p.spp_pathmaxrxt = m;
        }
        if let Some(mtu) = params.mtu {
            p.spp_pathmtu = mtu;
            p.spp_flags |= ffi::SPP_PMTUD_DISABLE;
        }
        self.mh_shared().sock.setopt(
            ffi::IPPROTO_SCTP,
            ffi::SCTP_PEER_ADDR_PARAMS,
            &p,
            "SCTP_PEER_ADDR_PARAMS",
        )
    }

    /// Sends a HEARTBEAT on `path` now (`SPP_HB_DEMAND`). An unconfirmed path is otherwise
    /// probed again only after the heartbeat interval (usrsctp: 30 s by default), so call
    /// this on the side that added the path first once the peer has added its end.
    pub fn heartbeat_now(&self, path: PathId) -> Result<()> {
        let mut p = ffi::sctp_paddrparams::zeroed();
        p.spp_address = path.storage();
        p.spp_flags = ffi::SPP_HB_DEMAND;
        self.mh_shared().sock.setopt(
            ffi::IPPROTO_SCTP,
            ffi::SCTP_PEER_ADDR_PARAMS,
            &p,
            "SCTP_PEER_ADDR_PARAMS",
        )
    }

    /// Sets the failure and potentially-failed thresholds of one path
    /// (`SCTP_PEER_ADDR_THLDS`).
    pub fn set_path_thresholds(&self, path: PathId, t: &PathThresholds) -> Result<()> {
        let mut p = ffi::sctp_paddrthlds::zeroed();
        p.spt_address = path.storage();
        p.spt_pathmaxrxt = t.max_retransmits;
        p.spt_pathpfthld = t.pf_threshold;
        p.spt_pathcpthld = 0xffff; // usrsctp has no changeover threshold: must be "unset"
        self.mh_shared().sock.setopt(
            ffi::IPPROTO_SCTP,
            ffi::SCTP_PEER_ADDR_THLDS,
            &p,
            "SCTP_PEER_ADDR_THLDS",
        )
    }

    /// Switches CMT for this association (`SCTP_CMT_ON_OFF`). Needs the process-wide switch
    /// ([`crate::set_cmt_global`]); the error says so otherwise.
    pub fn set_cmt(&self, mode: CmtMode) -> Result<()> {
        set_cmt(&self.mh_shared().sock, mode)
    }

    /// Whether NR-SACK was negotiated (both ends offered it, [`crate::SctpOptions::nr_sack`]).
    pub fn nr_sack(&self) -> Result<bool> {
        let mut v = ffi::sctp_assoc_value::default();
        self.mh_shared().sock.getopt(
            ffi::IPPROTO_SCTP,
            ffi::SCTP_NRSACK_SUPPORTED,
            &mut v,
            "SCTP_NRSACK_SUPPORTED",
        )?;
        Ok(v.assoc_value != 0)
    }

    /// Starts receiving this association's path events (subscribes to
    /// `SCTP_PEER_ADDR_CHANGE`: one setsockopt). One watcher per association: a second call
    /// shares the first one's queue.
    pub fn path_events(&self) -> Result<PathEvents> {
        let sock = &self.mh_shared().sock;
        let ev = ffi::sctp_event {
            se_assoc_id: ffi::SCTP_FUTURE_ASSOC,
            se_type: ffi::SCTP_PEER_ADDR_CHANGE,
            se_on: 1,
        };
        sock.setopt(ffi::IPPROTO_SCTP, ffi::SCTP_EVENT, &ev, "SCTP_EVENT")?;
        let log = lock(&EVENTS)
            .entry(sock_key(sock))
            .or_insert_with(|| Arc::new(EventLog::default()))
            .clone();
        Ok(PathEvents {
            assoc: Arc::downgrade(&self.inner),
            key: sock_key(sock),
            log,
        })
    }

    /// Like [`Association::send`] but every chunk of the message goes to `path`
    /// (`usrsctp_sendv` with the path's address and `SCTP_ADDR_OVER`), with the association's
    /// CMT on or off. If the path fails, usrsctp moves its queued chunks to another path.
    /// EINVAL for a path that is not part of this association. Needs the process-wide CMT
    /// switch ([`crate::set_cmt_global`] with `cmt: true`; keep single-path associations with
    /// [`crate::SctpOptions::cmt`] = `Some(CmtMode::Off)`): with it off, libusrsctp 0.9.5's
    /// stream schedulers can loop forever when every queued stream is pinned to another path.
    /// Costs what `send` costs plus one sysctl read.
    pub async fn send_on_path(
        &self,
        path: PathId,
        stream: u16,
        data: &[u8],
        ordered: bool,
        ppid: u32,
    ) -> Result<()> {
        let sh = self.mh_shared();
        sh.check_send(stream, data)?;
        if !ffi::cmt_sysctl_on() {
            return Err(Error::MultihomeUnavailable(
                "send_on_path needs the process-wide CMT switch: call usrsctp::set_cmt_global \
                 with cmt: true first (libusrsctp 0.9.5 can loop forever on path-pinned data \
                 without it)"
                    .into(),
            ));
        }
        sh.send(stream, data, ordered, ppid, Some(path)).await
    }
}

/// The association's paths: its peer's addresses, AF_CONN or IP.
fn peer_paths(sock: &crate::sys::Sock) -> Result<Vec<PathId>> {
    let conns = sock.peer_conns()?;
    if !conns.is_empty() {
        return Ok(conns
            .into_iter()
            .map(|c| PathId(PathKey::Conn(c)))
            .collect());
    }
    Ok(sock
        .peer_ips()?
        .into_iter()
        .map(|a| PathId(PathKey::Ip(a.ip())))
        .collect())
}

/// The UDP addresses path `id` runs over, (ours, the peer's): from the route of an AF_CONN
/// path's socket; for an IP path the tunnelling port, the `source` its packets were last
/// sent from (else the one routing picks for the peer: one UDP socket connected, never
/// sent on) and the peer's encapsulation port.
fn path_addrs(
    sock: &crate::sys::Sock,
    id: PathId,
    source: Option<IpAddr>,
) -> Option<(SocketAddr, SocketAddr)> {
    match id.0 {
        PathKey::Conn(c) => crate::sys::route_addrs(c),
        PathKey::Ip(ip) => {
            let port = sock.encaps_port(ip).ok()?;
            let remote = SocketAddr::new(ip, port);
            let local_port = crate::ip_mode::current_port()?;
            let source = match source {
                Some(s) => s,
                None => crate::ip_paths::route_source(remote)?,
            };
            let local = SocketAddr::new(source, local_port);
            Some((local, remote))
        }
    }
}
