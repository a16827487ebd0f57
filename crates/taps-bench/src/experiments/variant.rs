//! The client/server implementation pairs of experiments 1 and 2.

#![forbid(unsafe_code)]

use serde::Serialize;

use crate::process::Server;
use crate::worker::{Impl, Proto, Target};

/// A client/server implementation pair of experiments 1 and 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Variant {
    /// taps. Over SCTP with flow mapping off: one association per flow, like raw.
    Taps,
    /// The raw baseline: tokio sockets (TCP), the usrsctp crate (SCTP).
    Raw,
    /// taps over SCTP with flow mapping on (the default): the flows are streams of one
    /// association.
    TapsMapped,
    /// TCP, experiment 1 only: the raw client against a taps `Listener`. Its server CPU
    /// set against raw's is the listener's accept path alone: both servers then see the
    /// same client, whose pace changes what any server pays per connection (a raw
    /// server spends ~10 % more CPU on the taps client's 256 flows than on the raw
    /// client's).
    TapsListener,
}

impl Variant {
    /// The implementation of its server.
    pub(super) fn server_imp(self) -> Impl {
        match self {
            Variant::Raw => Impl::Raw,
            Variant::Taps | Variant::TapsMapped | Variant::TapsListener => Impl::Taps,
        }
    }

    /// The implementation of its client.
    pub(super) fn client_imp(self) -> Impl {
        match self {
            Variant::Raw | Variant::TapsListener => Impl::Raw,
            Variant::Taps | Variant::TapsMapped => Impl::Taps,
        }
    }

    /// The flow-mapping switch of the client's context.
    fn mapping(self, proto: Proto) -> bool {
        match (proto, self) {
            // Irrelevant for TCP (taps maps SCTP flows only): the default context.
            (Proto::Tcp, _) => true,
            (Proto::Sctp, v) => v == Variant::TapsMapped,
        }
    }

    /// The client's target: this variant over `proto` against `server`.
    pub(super) fn target(self, proto: Proto, server: &Server) -> Target {
        Target {
            imp: self.client_imp(),
            proto,
            port: server.port,
            udp_port: server.udp_port,
            mapping: self.mapping(proto),
        }
    }

    /// The variants experiment 2 runs for `proto`, in trial order.
    pub(super) fn all(proto: Proto) -> &'static [Variant] {
        match proto {
            Proto::Tcp => &[Variant::Taps, Variant::Raw],
            Proto::Sctp => &[Variant::Taps, Variant::Raw, Variant::TapsMapped],
        }
    }

    /// The variants experiment 1 runs for `proto`, in trial order: over TCP also the
    /// taps listener served to the raw client.
    pub(super) fn connect(proto: Proto) -> &'static [Variant] {
        match proto {
            Proto::Tcp => &[Variant::Taps, Variant::Raw, Variant::TapsListener],
            Proto::Sctp => Variant::all(proto),
        }
    }
}
