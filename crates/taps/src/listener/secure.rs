//! The listener's secure datagram stacks: QUIC, DTLS, and both on one UDP port.

use std::net::SocketAddr;
use std::sync::Arc;

use taps_core::properties::Protocol;
use taps_core::{Security, Stack};
use tokio::sync::mpsc;

use super::{accept_dtls, accept_quic, Binder};
use crate::transport;
use crate::{Error, ListenFailure};

impl Binder {
    /// QUIC on the same port (UDP), with the listener's identity.
    pub(super) fn quic(&mut self, addr: SocketAddr) -> Result<(), Error> {
        let Some(security) = &self.security else {
            return Ok(());
        };
        let stack = Stack::new(Protocol::Quic, Security::QuicTls);
        match crate::security::quic::listen(addr, security.quic()) {
            Ok(endpoint) => {
                self.bound.push((stack, endpoint.local_addr()?));
                let acc = self.accepting();
                self.tasks.spawn(accept_quic(endpoint, acc));
            }
            Err(e) => self.miss(stack, addr, ListenFailure::socket(e)),
        }
        Ok(())
    }

    /// QUIC and DTLS over UDP on one port ([`crate::security::shared_port`]).
    pub(super) fn quic_and_dtls(&mut self, addr: SocketAddr) -> Result<(), Error> {
        let Some(security) = self.security.clone() else {
            return Ok(());
        };
        let quic = Stack::new(Protocol::Quic, Security::QuicTls);
        let dtls = Stack::new(Protocol::Udp, Security::Dtls);
        let server = match security.dtls() {
            Ok(server) => server,
            Err(why) => {
                // An identity DTLS cannot use (RSA) still serves QUIC.
                self.miss(dtls, addr, why);
                return self.quic(addr);
            }
        };
        let port = match crate::security::shared_port::listen(addr, security.quic()) {
            Ok(port) => port,
            Err(e) => {
                let e = ListenFailure::socket(e);
                self.miss(quic, addr, e.clone());
                self.miss(dtls, addr, e);
                return Ok(());
            }
        };
        let local = port.endpoint.local_addr()?;
        self.bound.push((quic, local));
        self.bound.push((dtls, local));
        let accepting = self.accepting();
        self.tasks.spawn(accept_quic(port.endpoint, accepting));
        let (atx, arx) = mpsc::channel((self.limits.backlog as usize).max(1));
        let inbound = crate::security::dtls::Inbound::Queue(port.dtls_inbound);
        let serve = crate::security::dtls::serve(port.dtls_socket, inbound, server, atx);
        self.tasks.spawn(serve);
        let task = accept_dtls(arx, dtls, self.accepting());
        self.tasks.spawn(task);
        Ok(())
    }

    /// DTLS over UDP or UDP-Lite, with the listener's identity: one flow per remote
    /// endpoint, handed on when its handshake is done.
    pub(super) fn dtls(&mut self, addr: SocketAddr, p: Protocol, lite: bool) -> Result<(), Error> {
        let Some(security) = self.security.clone() else {
            return Ok(());
        };
        let stack = Stack::new(p, Security::Dtls);
        let server = match security.dtls() {
            Ok(server) => server,
            Err(why) => {
                self.miss(stack, addr, why);
                return Ok(());
            }
        };
        match transport::bind_udp(addr, lite, &self.opts) {
            Ok(s) => {
                self.bound.push((stack, s.local_addr()?));
                let (atx, arx) = mpsc::channel((self.limits.backlog as usize).max(1));
                let inbound = crate::security::dtls::Inbound::Socket;
                let serve = crate::security::dtls::serve(Arc::new(s), inbound, server, atx);
                self.tasks.spawn(serve);
                let task = accept_dtls(arx, stack, self.accepting());
                self.tasks.spawn(task);
            }
            Err(e) => self.miss(stack, addr, ListenFailure::socket(e)),
        }
        Ok(())
    }
}
