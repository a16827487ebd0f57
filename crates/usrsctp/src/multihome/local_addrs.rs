//! Local addresses added to or removed from an established IP-mode association: usrsctp
//! tells the peer with an ASCONF (RFC 5061 ADD-IP, DELETE-IP), and the peer adds or
//! removes its path to that address, so a path can be set up after the handshake with no
//! step on the peer's side.

use std::net::IpAddr;
use std::sync::Arc;

use crate::assoc::Association;
use crate::error::{Error, Result};

impl Association {
    /// Adds `ip` to the addresses this end of the association uses and tells the peer
    /// (ASCONF ADD-IP); the peer then has a path to `ip`, which it confirms with a
    /// heartbeat before sending data on it. Only an association in IP mode (made with
    /// `connect_multihomed`/`listen_multihomed`, which taps uses for `multihoming`) can, and only with an address this host had
    /// when SCTP was first used in the process; an IPv6 address needs an association that
    /// already has one (its socket is IPv6). Returns once usrsctp's iterator thread has
    /// queued and sent the ASCONF; one `usrsctp_bindx` and a wait for that thread.
    pub fn add_local_address(&self, ip: IpAddr) -> Result<()> {
        self.rebind(ip, true)
    }

    /// Removes `ip` from the addresses this end of the association uses and tells the peer
    /// (ASCONF DELETE-IP), which then drops its path to `ip`. The last address cannot be
    /// removed. Only in IP mode, as [`Association::add_local_address`]; returns, as it
    /// does, once the ASCONF is sent, and the address is no longer the association's (a
    /// later removal of the last other address is refused).
    pub fn remove_local_address(&self, ip: IpAddr) -> Result<()> {
        self.rebind(ip, false)
    }

    fn rebind(&self, ip: IpAddr, add: bool) -> Result<()> {
        let what = if add { "add" } else { "remove" };
        if !self.inner.is_ip_mode() {
            return Err(Error::MultihomeUnavailable(format!(
                "cannot {what} local address {ip}: only an association over real addresses \
                 (multihoming, usrsctp's IP mode) has several local addresses"
            )));
        }
        let ports = self.inner.ip_ports();
        let sock = &self.inner.shared.sock;
        let others = |ip: IpAddr| -> Vec<IpAddr> {
            let listed = crate::ip_mode::listed_now(sock);
            listed.into_iter().filter(|a| *a != ip).collect()
        };
        if let (Some(ports), false) = (ports, add) {
            // No packet leaves from it from now on.
            crate::ip_paths::register(ports, others(ip));
        }
        let done = sock.rebind_ip(ip, add);
        match (ports, add) {
            // Listed once the peer has acknowledged it (usrsctp lists it then).
            (Some(ports), true) => crate::ip_mode::relist(sock, ports, Some(ip)),
            (Some(ports), false) if done.is_ok() => crate::ip_paths::register(ports, others(ip)),
            // Not removed: usrsctp's list as it is.
            (Some(ports), false) => crate::ip_mode::relist(sock, ports, None),
            (None, _) => {}
        }
        done.map_err(|e| match e {
            Error::Sys { source, .. } => {
                let why = match source.raw_os_error() {
                    Some(libc::EADDRNOTAVAIL) if add => {
                        "it is not one of the addresses this host had when SCTP was first \
                             used in this process"
                            .to_string()
                    }
                    Some(libc::EADDRNOTAVAIL) => "the association does not use it".to_string(),
                    Some(libc::EINVAL) if !add => {
                        "it is the association's last local address, or not one of them".to_string()
                    }
                    Some(libc::EINVAL) if ip.is_ipv6() => {
                        "the association's socket is IPv4 only (it was made with IPv4 \
                             addresses alone)"
                            .to_string()
                    }
                    _ => source.to_string(),
                };
                Error::Sys {
                    op: "bindx",
                    source: Arc::new(std::io::Error::new(
                        source.kind(),
                        format!("cannot {what} local address {ip}: {why}"),
                    )),
                }
            }
            e => e,
        })
    }
}
