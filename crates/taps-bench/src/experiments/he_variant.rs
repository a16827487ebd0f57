//! The client variants of experiments 3 and 4 (raw, taps single-protocol, taps races)
//! and the servers they talk to.

#![forbid(unsafe_code)]

use serde::Serialize;

use crate::process::{Launcher, Server};
use crate::worker::{ClientKind, Impl, Listen, ServeMode, ServerSpec};

/// A variant of the Happy Eyeballs experiment (and the client variants of experiment 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeVariant {
    /// Raw tokio TCP to 127.0.0.1 (`raw` in the results).
    #[serde(rename = "raw")]
    RawTcp,
    /// Raw usrsctp association to 127.0.0.1 (no taps).
    RawSctp,
    /// taps requiring TCP, to 127.0.0.1: one candidate, no DNS, no race.
    TapsSingle,
    /// taps requiring SCTP, to 127.0.0.1: one candidate, no race.
    TapsSctp,
    /// taps with `transport: ["SCTP", "TCP"]` to 127.0.0.1; nothing listens on the SCTP
    /// encapsulation port (ICMP port unreachable: refused), so SCTP fails and TCP wins.
    RaceSctpDead,
    /// taps with `transport: ["SCTP", "TCP"]` to 127.0.0.1; the server listens on both,
    /// SCTP wins.
    RaceBothAlive,
    /// taps requiring TCP, to `localhost`: ::1 and 127.0.0.1 raced; nothing listens on
    /// ::1 (refused).
    RaceV6Dead,
    /// Only the taps resolver's lookup of `localhost`, no connection (what DNS adds to
    /// the family race).
    ResolveOnly,
    /// taps requiring TCP and IPv4, to `localhost`: the same lookup as the family race,
    /// one candidate, no race (the family race's single-protocol baseline).
    TapsSingleName,
}

impl HeVariant {
    /// A short label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            HeVariant::RawTcp => "raw TCP",
            HeVariant::RawSctp => "raw SCTP (usrsctp)",
            HeVariant::TapsSingle => "taps TCP only",
            HeVariant::TapsSctp => "taps SCTP only",
            HeVariant::RaceSctpDead => "taps race SCTP/TCP, SCTP dead",
            HeVariant::RaceBothAlive => "taps race SCTP/TCP, both alive",
            HeVariant::RaceV6Dead => "taps family race (TCP), ::1 dead",
            HeVariant::ResolveOnly => "taps resolve localhost only",
            HeVariant::TapsSingleName => "taps TCP only, localhost IPv4 only",
        }
    }

    /// How the client connects.
    pub(super) fn client_kind(self) -> ClientKind {
        match self {
            HeVariant::RawTcp => ClientKind::RawTcp,
            HeVariant::RawSctp => ClientKind::RawSctp,
            HeVariant::TapsSingle => ClientKind::TapsSingle,
            HeVariant::TapsSctp => ClientKind::TapsSctp,
            HeVariant::RaceSctpDead | HeVariant::RaceBothAlive => ClientKind::TapsRace,
            HeVariant::RaceV6Dead => ClientKind::TapsFamilyRace,
            HeVariant::ResolveOnly => ClientKind::TapsResolveOnly,
            HeVariant::TapsSingleName => ClientKind::TapsSingleName,
        }
    }

    /// Whether it races (and so has a cache hit ratio).
    pub(super) fn races(self) -> bool {
        matches!(
            self,
            HeVariant::RaceSctpDead | HeVariant::RaceBothAlive | HeVariant::RaceV6Dead
        )
    }

    /// Whether it makes connections (every variant but [`HeVariant::ResolveOnly`]).
    pub fn connects(self) -> bool {
        self != HeVariant::ResolveOnly
    }

    /// The single-protocol taps connect it is compared with: the one to the protocol
    /// the connections end up on (TCP when SCTP is dead, SCTP when both are alive); for
    /// the family race, TCP to the same name with IPv4 required (same DNS work, no race).
    pub(crate) fn single_baseline(self) -> HeVariant {
        match self {
            HeVariant::RawSctp | HeVariant::TapsSctp | HeVariant::RaceBothAlive => {
                HeVariant::TapsSctp
            }
            HeVariant::RaceV6Dead | HeVariant::TapsSingleName => HeVariant::TapsSingleName,
            _ => HeVariant::TapsSingle,
        }
    }

    /// The raw connect it is compared with (same protocol as [`HeVariant::single`]).
    pub(crate) fn raw_baseline(self) -> HeVariant {
        match self.single_baseline() {
            HeVariant::TapsSctp => HeVariant::RawSctp,
            _ => HeVariant::RawTcp,
        }
    }

    /// Which server it talks to.
    pub(super) fn server(self) -> HeServer {
        match self {
            HeVariant::RawTcp => HeServer::RawTcp,
            HeVariant::RawSctp => HeServer::RawSctp,
            HeVariant::TapsSctp | HeVariant::RaceBothAlive => HeServer::TapsBoth,
            _ => HeServer::TapsTcp,
        }
    }
}

/// The servers of experiments 3 and 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HeServer {
    /// Raw tokio TCP.
    RawTcp,
    /// Raw usrsctp.
    RawSctp,
    /// taps on TCP.
    TapsTcp,
    /// taps on TCP and SCTP (same port).
    TapsBoth,
}

impl HeServer {
    /// Every server, in start order.
    const ALL: [HeServer; 4] = [
        HeServer::RawTcp,
        HeServer::RawSctp,
        HeServer::TapsTcp,
        HeServer::TapsBoth,
    ];

    /// Its spec, serving `mode`.
    fn spec(self, mode: ServeMode) -> ServerSpec {
        let (imp, listen) = match self {
            HeServer::RawTcp => (Impl::Raw, Listen::Tcp),
            HeServer::RawSctp => (Impl::Raw, Listen::Sctp),
            HeServer::TapsTcp => (Impl::Taps, Listen::Tcp),
            HeServer::TapsBoth => (Impl::Taps, Listen::TcpAndSctp),
        };
        ServerSpec {
            imp,
            mode,
            dual: false,
            listen,
            secure: None,
        }
    }
}

/// The UDP port a variant's client sends SCTP to: the server's, or a dead one.
pub(super) fn client_udp_port(v: HeVariant, server: &Server, dead: u16) -> u16 {
    match v {
        HeVariant::RaceSctpDead => dead,
        _ => server.udp_port,
    }
}

/// Starts the servers `variants` need.
pub(super) fn start_servers(
    launcher: &Launcher,
    mode: ServeMode,
    needed: impl Iterator<Item = HeServer> + Clone,
) -> Result<Vec<(HeServer, Server)>, String> {
    let mut servers = Vec::new();
    for s in HeServer::ALL {
        if needed.clone().any(|n| n == s) {
            servers.push((s, Server::start(launcher, s.spec(mode))?));
        }
    }
    Ok(servers)
}

/// The running server of kind `s`.
pub(super) fn server_for(
    servers: &mut [(HeServer, Server)],
    s: HeServer,
) -> Result<&mut Server, String> {
    servers
        .iter_mut()
        .find(|(k, _)| *k == s)
        .map(|(_, srv)| srv)
        .ok_or_else(|| format!("no {s:?} server"))
}
