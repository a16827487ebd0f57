//! The process-wide stack handle: connecting, listening and the resource counts.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use crate::assoc::{AssocInner, AssocShared, Connecting, Link, Progress};
use crate::error::{Error, Result};
use crate::listener::SctpListener;
use crate::options::SctpOptions;
use crate::sys::{global, started, would_block, Sock};
use crate::udp::ClientLink;

/// Counts of what the stack holds, for leak checks. Plain integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StackStats {
    /// Open usrsctp sockets (associations, pending connects, listeners).
    pub sctp_sockets: usize,
    /// Registered AF_CONN addresses (one per client association, one per server-side remote).
    pub conn_addrs: usize,
    /// UDP sockets we own whose reader task is alive.
    pub udp_sockets: usize,
}

/// Handle to the process-wide usrsctp instance. Copying it is free.
#[derive(Clone, Copy, Debug)]
pub struct SctpStack {
    _private: (),
}

fn require_runtime() -> Result<()> {
    tokio::runtime::Handle::try_current()
        .map(|_| ())
        .map_err(|_| Error::NoRuntime)
}

impl SctpStack {
    /// Returns the process-wide stack, loading and initialising usrsctp on first use (once
    /// per process; a library that cannot be loaded makes connect and listen fail with
    /// [`Error::Unavailable`]; the timer thread starts with the first socket). Later calls:
    /// one atomic load.
    pub fn global() -> SctpStack {
        let _ = global();
        SctpStack { _private: () }
    }

    /// Whether the stack can run: `Ok` once libusrsctp is loaded and initialised,
    /// [`Error::Unavailable`] (saying which library could not be loaded and why) when it
    /// cannot be. Loads the library on first call, as [`SctpStack::global`] does; later
    /// calls: one atomic load and a clone of the error.
    pub fn availability(&self) -> Result<()> {
        global().lib().map(|_| ())
    }

    /// Starts an association to the SCTP endpoint on `sctp_port` behind the UDP
    /// encapsulation address `remote`. Binds a fresh UDP socket (ephemeral port, connected
    /// to `remote`), registers a conn address, creates a usrsctp socket and sends INIT.
    /// Returns at once; await the [`Connecting`] for the association. Needs a tokio runtime.
    /// [`Error::Refused`] at once when the refusal is already known as the INIT leaves
    /// (the peer is this host and nothing listens on its UDP port: the kernel answers
    /// while sending), or, with [`SctpOptions::probe_port`], as the probe leaves, before
    /// the usrsctp socket exists; otherwise the [`Connecting`] reports it when the ICMP
    /// arrives.
    pub fn connect(
        &self,
        remote: SocketAddr,
        sctp_port: u16,
        opts: &SctpOptions,
    ) -> Result<Connecting> {
        require_runtime()?;
        let (mut link, udp_recv) = ClientLink::open(remote, opts.probe_port)?;
        // The process ends its associations when it exits (armed once, at the first).
        crate::exit::arm();
        let sock = Sock::new_stream()?;
        opts.apply(&sock, true, link.path_mtu)?;
        sock.bind(link.addr.id, opts.local_port)?;
        let shared = AssocShared::new(sock.clone(), remote, opts, Progress::Connecting);
        // The INIT leaves during this call. The tasks start after it: nothing reaches
        // them before the INIT has left, and a refusal known by then (the peer is this
        // host and nothing listens on its UDP port) ends the attempt here, with no task
        // spawned and no wait for the network.
        match sock.connect(link.addr.id, sctp_port) {
            Ok(()) => {}
            Err(Error::Sys { source, .. }) if would_block(&source) => {}
            Err(e) => return Err(e),
        }
        // With the probe, a refusal known as the INIT left was either taken by the INIT's
        // send (and kept) or is still on the socket for the reader: no syscall here.
        if link.refused_already(!opts.probe_port) {
            // ABORT goes out while the conn address is still registered (`link` drops
            // last).
            sock.close(true);
            return Err(Error::Refused(remote));
        }
        link.start(udp_recv, shared.clone())?;
        let local = link.local;
        let inner = AssocInner::start(shared, Link::Client(link), local, remote);
        Ok(Connecting::new(inner))
    }

    /// Listens for associations to `sctp_port` arriving on the UDP address `udp_local`
    /// (e.g. `[::]:9899`). The UDP socket is shared with other listeners on the same
    /// `udp_local` in this process. Needs a tokio runtime.
    pub fn listen(
        &self,
        udp_local: SocketAddr,
        sctp_port: u16,
        opts: &SctpOptions,
    ) -> Result<SctpListener> {
        require_runtime()?;
        SctpListener::open(udp_local, sctp_port, opts)
    }

    /// Starts an IP-mode association (see the crate docs, "IP mode"): bound to this host's
    /// addresses `locals` (every address of the host if empty; with two or more, or all,
    /// the INIT lists them, so the peer learns every path), to the SCTP endpoint on
    /// `sctp_port` at `remote`, the peer's IP address and UDP encapsulation port. The peer
    /// learns this side's paths, and this side the peer's, from the handshake itself. The
    /// first IP-mode call of the process opens its tunnelling UDP sockets (an ephemeral
    /// port). Needs the multihoming shim ([`Error::MultihomeUnavailable`] says why not) and
    /// a tokio runtime. [`Connecting::reachable`] resolves with the COOKIE-ACK in IP mode.
    pub fn connect_multihomed(
        &self,
        locals: &[std::net::IpAddr],
        remote: SocketAddr,
        sctp_port: u16,
        opts: &SctpOptions,
    ) -> Result<Connecting> {
        require_runtime()?;
        crate::ip_mode::connect(locals, remote, sctp_port, opts)
    }

    /// Listens in IP mode for associations to `sctp_port` on `locals` (every address of
    /// this host if empty), tunnelled over UDP port `udp_port` (0: the process's, or an
    /// ephemeral one; a process has one tunnelling port, so another non-zero port than its
    /// first fails). The INIT-ACK lists every address listened on. Needs the multihoming
    /// shim and a tokio runtime.
    pub fn listen_multihomed(
        &self,
        locals: &[std::net::IpAddr],
        udp_port: u16,
        sctp_port: u16,
        opts: &SctpOptions,
    ) -> Result<SctpListener> {
        require_runtime()?;
        SctpListener::open_ip(locals, udp_port, sctp_port, opts)
    }

    /// Sum of [`StackStats`]: usrsctp sockets + registered conn addresses + live UDP
    /// sockets. Three atomic loads.
    pub fn live_sockets(&self) -> usize {
        let s = self.stats();
        s.sctp_sockets + s.conn_addrs + s.udp_sockets
    }

    /// usrsctp sockets made since the stack started, closed ones included: what an attempt
    /// refused before any association state ([`SctpOptions::probe_port`]) saves. One
    /// atomic load (0 before the first connect or listen).
    pub fn sockets_made(&self) -> usize {
        started().map_or(0, |g| g.made_socks.load(Ordering::Relaxed))
    }

    /// UDP sends of SCTP packets since the stack started, and the packets they carried
    /// (with UDP GSO one send carries several: their ratio is the batching a transfer
    /// got). Two atomic loads ((0, 0) before the first connect or listen).
    pub fn udp_sends(&self) -> (usize, usize) {
        started().map_or((0, 0), |g| {
            (
                g.udp_sends.load(Ordering::Relaxed),
                g.packets_sent.load(Ordering::Relaxed),
            )
        })
    }

    /// Whether SCTP packets leave in UDP GSO batches: true until the kernel refuses one
    /// (then every packet is its own send). One atomic load.
    pub fn udp_gso(&self) -> bool {
        crate::sys::gso_enabled()
    }

    /// What the stack currently holds. Three atomic loads (all zero, and nothing loaded,
    /// before the first connect or listen).
    pub fn stats(&self) -> StackStats {
        let Some(g) = started() else {
            return StackStats::default();
        };
        StackStats {
            sctp_sockets: g.live_socks.load(Ordering::SeqCst),
            conn_addrs: g.live_addrs.load(Ordering::SeqCst),
            udp_sockets: g.live_udp.load(Ordering::SeqCst),
        }
    }
}
