//! A connected flow of either implementation, how a client opens one, and opening many
//! at once.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use taps::taps_core::race::AttemptOutcome;
use taps::{Connection, Preconnection, Protocol};
use tokio::net::{TcpSocket, TcpStream};
use usrsctp::{Association, SctpOptions, SctpStack};

use super::note_failure;
use crate::worker::protocol::{ClientResult, Proto};
use crate::worker::setup::localhost_v4;

/// A connected flow of either implementation. Not boxed: boxing would add an allocation
/// per flow to the taps side only.
#[allow(clippy::large_enum_variant)]
pub(super) enum Flow {
    /// A taps connection (TCP or SCTP).
    Taps(Connection),
    /// A raw tokio TCP stream.
    RawTcp(TcpStream),
    /// A raw usrsctp association.
    RawSctp(Association),
}

impl Flow {
    /// Whether the flow runs over SCTP.
    pub(super) fn is_sctp(&self) -> bool {
        match self {
            Flow::Taps(c) => c.info().stack.protocol == Protocol::Sctp,
            Flow::RawTcp(_) => false,
            Flow::RawSctp(_) => true,
        }
    }

    /// Connection attempts this flow took: the race's started attempts (taps; 0 for a
    /// flow mapped onto an existing association), one connect (raw).
    pub(super) fn attempts(&self) -> usize {
        match self {
            Flow::Taps(c) => started_attempts(c),
            Flow::RawTcp(_) | Flow::RawSctp(_) => 1,
        }
    }
}

/// How a client opens a flow.
#[derive(Clone)]
pub(super) enum Dial {
    /// taps: `initiate` on a shared preconnection.
    Taps(Arc<Preconnection>),
    /// Raw TCP to this address.
    RawTcp(SocketAddr),
    /// Raw usrsctp association to SCTP `port` behind the UDP address `udp`.
    RawSctp {
        /// The server's SCTP encapsulation UDP address.
        udp: SocketAddr,
        /// The server's SCTP port.
        port: u16,
    },
}

impl Dial {
    /// The raw dial for `proto` to `127.0.0.1`.
    pub(super) fn raw(proto: Proto, port: u16, udp_port: u16) -> Dial {
        match proto {
            Proto::Tcp => Dial::RawTcp(localhost_v4(port)),
            Proto::Sctp => Dial::RawSctp {
                udp: localhost_v4(udp_port),
                port,
            },
        }
    }

    /// Opens one flow.
    pub(super) async fn open(&self) -> Result<Flow, String> {
        match self {
            Dial::Taps(pre) => pre
                .initiate()
                .await
                .map(Flow::Taps)
                .map_err(|e| e.to_string()),
            Dial::RawTcp(addr) => raw_connect(*addr)
                .await
                .map(Flow::RawTcp)
                .map_err(|e| e.to_string()),
            Dial::RawSctp { udp, port } => raw_sctp_connect(*udp, *port)
                .await
                .map(Flow::RawSctp)
                .map_err(|e| format!("SCTP to {udp} port {port}: {e}")),
        }
    }
}

/// The raw TCP baseline's connect: a tokio `TcpSocket` with no-delay.
async fn raw_connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_nodelay(true)?;
    socket.connect(addr).await
}

/// The raw SCTP baseline's connect: one association (with taps's defaults: 1024 streams,
/// no-delay) per flow, straight from the `usrsctp` crate.
async fn raw_sctp_connect(udp: SocketAddr, port: u16) -> usrsctp::Result<Association> {
    SctpStack::global()
        .connect(udp, port, &SctpOptions::default())?
        .await
}

/// The attempts the connection's race started (skipped ones not counted).
pub(super) fn started_attempts(conn: &Connection) -> usize {
    conn.info().race.as_ref().map_or(0, |rep| {
        rep.attempts
            .iter()
            .filter(|a| !matches!(a.outcome, AttemptOutcome::Skipped(_)))
            .count()
    })
}

/// Opens `flows` concurrent flows (each its own task); returns them with their delays.
pub(super) async fn open_flows(dial: &Dial, flows: usize, r: &mut ClientResult) -> Vec<Flow> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..flows {
        let dial = dial.clone();
        set.spawn(async move {
            let t = Instant::now();
            let flow = dial.open().await;
            (t.elapsed(), flow)
        });
    }
    let mut out = Vec::with_capacity(flows);
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((d, Ok(flow))) => {
                r.delays_us.push(d.as_secs_f64() * 1e6);
                r.attempts += flow.attempts();
                r.sctp += usize::from(flow.is_sctp());
                r.ok += 1;
                out.push(flow);
            }
            Ok((_, Err(e))) => note_failure(r, e),
            Err(e) => note_failure(r, format!("flow task failed: {e}")),
        }
    }
    out
}
