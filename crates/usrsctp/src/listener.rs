//! A listening SCTP endpoint and how it accepts associations.

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;

use crate::assoc::{AssocInner, AssocShared, Association, Link};
use crate::error::{Error, Result};
use crate::ffi;
use crate::options::{lower_path_mtu, SctpOptions};
use crate::sys::{would_block, Sock};
use crate::udp::{route_sctp_mtu, SharedUdp};

/// A listening SCTP endpoint behind a (shared) UDP socket. Dropping it closes the listening
/// socket (associations not yet accepted are aborted); accepted associations live on.
pub struct SctpListener {
    sock: Arc<Sock>,
    /// The shared UDP socket of an AF_CONN listener; `None` in IP mode (the process's
    /// tunnelling sockets carry its packets).
    udp: Option<Arc<SharedUdp>>,
    /// The local UDP address (IP mode: the first address listened on, or the unspecified
    /// one, with the tunnelling port).
    local: SocketAddr,
    opts: SctpOptions,
    sctp_port: u16,
}

impl std::fmt::Debug for SctpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SctpListener")
            .field("udp", &self.local)
            .field("sctp_port", &self.sctp_port)
            .finish()
    }
}

impl SctpListener {
    /// Binds (or shares) the UDP socket on `udp_local`, creates the listening usrsctp socket
    /// on `sctp_port` with `opts`. One UDP bind if the socket is new, about a dozen usrsctp
    /// calls.
    pub(crate) fn open(
        udp_local: SocketAddr,
        sctp_port: u16,
        opts: &SctpOptions,
    ) -> Result<SctpListener> {
        let udp = SharedUdp::get(udp_local)?;
        // The process ends its associations when it exits (armed once, at the first).
        crate::exit::arm();
        let sock = Sock::new_stream()?;
        // Associations start with the largest MTU; `accept` lowers each to its path's
        // (lowering also shrinks usrsctp's fragment size, raising would not).
        opts.apply(&sock, true, Some(crate::udp::MAX_SCTP_MTU))?;
        sock.bind(0, sctp_port)?;
        sock.listen(opts.backlog.min(i32::MAX as u32) as i32)?;
        Ok(SctpListener {
            sock,
            local: udp.local,
            udp: Some(udp),
            opts: opts.clone(),
            sctp_port,
        })
    }

    /// An IP-mode listener (see [`crate::SctpStack::listen_multihomed`]).
    pub(crate) fn open_ip(
        locals: &[std::net::IpAddr],
        udp_port: u16,
        sctp_port: u16,
        opts: &SctpOptions,
    ) -> Result<SctpListener> {
        let (sock, port) = crate::ip_mode::listen(locals, udp_port, sctp_port, opts)?;
        let ip = locals
            .first()
            .copied()
            .unwrap_or(std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED));
        Ok(SctpListener {
            sock,
            udp: None,
            local: SocketAddr::new(ip, port),
            opts: opts.clone(),
            sctp_port,
        })
    }

    /// Stops listening and returns once the usrsctp socket is closed and, unless accepted
    /// associations still use it, the UDP socket too (its reader task gone), so the same
    /// ports can be listened on again at once. Dropping the listener instead closes the
    /// UDP socket when the runtime next runs (its reader task is aborted, not awaited).
    pub async fn close(self) {
        let SctpListener { sock, udp, .. } = self;
        drop(sock);
        if let Some(udp) = udp {
            SharedUdp::close(udp).await;
        }
    }

    /// The local UDP address. No I/O.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Handles one datagram as if it had arrived on this listener's UDP socket from `from`:
    /// the same demultiplexing and `usrsctp_conninput` as a received one, synchronously on
    /// the calling thread (replies go out to `from`). For fuzzing the inbound path without
    /// the network; built only with `--cfg fuzzing` (scripts/fuzz.sh). Cost: one table
    /// lookup and one `conninput`.
    #[cfg(fuzzing)]
    pub fn inject_datagram(&self, from: SocketAddr, pkt: &[u8]) {
        if let Some(udp) = &self.udp {
            udp.inject(from, pkt);
        }
    }

    /// Handles an ICMP port unreachable as if this listener's UDP socket had queued one
    /// for a datagram it sent to `to` whose payload began with `quoted` (the packet an
    /// ICMP message quotes): the ABORT that stands for it goes to usrsctp from `to`'s
    /// conn address, which ends the association of `to` the quoted packet belongs to (its
    /// verification tag decides) with [`Error::PeerGone`], synchronously on the calling
    /// thread. For tests of the tag check without a peer that sends stale packets; not
    /// part of the API. Cost: one table lookup and one `conninput`.
    #[doc(hidden)]
    pub fn inject_refusal(&self, to: SocketAddr, quoted: &[u8]) {
        if let Some(udp) = &self.udp {
            udp.inject_refusal(to, quoted);
        }
    }

    /// The SCTP port listened on. No I/O.
    pub fn sctp_port(&self) -> u16 {
        self.sctp_port
    }

    /// Waits for the next established association; returns it with the peer's UDP address.
    /// Cancel-safe. Per association: `usrsctp_accept`, the options' setsockopts, one
    /// getsockopt and a spawned driver task.
    pub async fn accept(&self) -> Result<(Association, SocketAddr)> {
        let Some(udp) = &self.udp else {
            let (acc, peer) = self.next(ffi::Socket::accept_ip).await?;
            let sock = Sock::adopt(acc)?;
            return crate::ip_mode::accepted(sock, peer, self.local, &self.opts);
        };
        loop {
            let (acc, id) = self.next(ffi::Socket::accept).await?;
            let sock = Sock::adopt(acc)?;
            let Some(remote) = udp.claim(id) else {
                continue; // remote forgotten meanwhile: `sock` drops and aborts
            };
            let link = Link::Server {
                udp: udp.clone(),
                remote,
            };
            // From here the claim is released by AssocInner's Drop, even on error paths.
            let _ = self.opts.apply(&sock, false, None);
            if let Some(mtu) = route_sctp_mtu(remote) {
                let _ = lower_path_mtu(&sock, &self.opts, mtu);
            }
            let progress = crate::assoc::established(&sock);
            let shared = AssocShared::new(sock, remote, &self.opts, progress);
            let inner = AssocInner::start(shared, link, udp.local, remote);
            return Ok((Association { inner }, remote));
        }
    }

    /// The next association `accept` (`usrsctp_accept` in one of its forms) gives: waits
    /// while none is waiting, skips one aborted before it was taken.
    async fn next<T>(&self, accept: impl Fn(&ffi::Socket) -> Result<T>) -> Result<T> {
        loop {
            let mut readable = pin!(self.sock.wakers.readable.notified());
            readable.as_mut().enable();
            match accept(&self.sock) {
                Ok(v) => return Ok(v),
                Err(Error::Sys { source, .. }) if would_block(&source) => readable.await,
                Err(Error::Sys { source, .. })
                    if source.raw_os_error() == Some(libc::ECONNABORTED) => {}
                Err(e) => return Err(e),
            }
        }
    }
}
