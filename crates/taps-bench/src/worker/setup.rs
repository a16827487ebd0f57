//! What the workers set up before measuring: taps properties, contexts and
//! preconnections, and the local ports and addresses the servers and clients use.

#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use taps::taps_core::policy::CibConfig;
use taps::TransportProperties;
use taps::{Context, Preconnection, Preference, Properties, Protocol, RemoteEndpoint};

use super::phases;
use super::protocol::{Listen, Proto};

/// `127.0.0.1`.
pub(super) const LOCALHOST_V4: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// `127.0.0.1:port`.
pub(super) fn localhost_v4(port: u16) -> SocketAddr {
    (Ipv4Addr::LOCALHOST, port).into()
}

/// Compiles `props`, the error as a message.
pub(super) fn compile(props: TransportProperties) -> Result<Properties, String> {
    props.compile().map_err(|e| format!("properties: {e}"))
}

/// Properties for initiating over `proto` only (required).
pub(super) fn client_properties(proto: Proto) -> Result<Properties, String> {
    let p = match proto {
        Proto::Tcp => Protocol::Tcp,
        Proto::Sctp => Protocol::Sctp,
    };
    compile(TransportProperties::new().protocols(Preference::Require, [p]))
}

/// Properties of the race of experiments 3 and 4: NEAT's `transport: ["SCTP", "TCP"]`
/// (one of them required, SCTP preferred).
pub(super) fn race_properties() -> Result<Properties, String> {
    compile(
        TransportProperties::new().protocols(Preference::Require, [Protocol::Sctp, Protocol::Tcp]),
    )
}

/// Properties for a listener on the protocols of `listen` (required).
pub(super) fn listener_properties(listen: Listen) -> Result<Properties, String> {
    let l = TransportProperties::for_listener();
    compile(match listen {
        Listen::Tcp => l.protocols(Preference::Require, [Protocol::Tcp]),
        Listen::Sctp => l.protocols(Preference::Require, [Protocol::Sctp]),
        Listen::TcpAndSctp => l.protocols(Preference::Require, [Protocol::Sctp, Protocol::Tcp]),
    })
}

/// A context for a taps client: `udp_port` (if not 0) is the SCTP encapsulation port,
/// `mapping` the flow-mapping switch, `cib` the CIB settings (default if `None`). Records
/// the [`phases::CONTEXT_START`] … [`phases::CONTEXT_END`] phase around the build, so
/// that a trial can prove its window paid for it.
pub(super) fn client_context(
    udp_port: u16,
    mapping: bool,
    cib: Option<CibConfig>,
) -> Result<Context, String> {
    let mut b = Context::builder();
    if udp_port != 0 {
        b = b.sctp_udp_port(udp_port);
    }
    if !mapping {
        b = b.flow_mapping(false);
    }
    if let Some(c) = cib {
        b = b.cib_config(c);
    }
    phases::mark(phases::CONTEXT_START);
    let ctx = b.build().map_err(|e| format!("context: {e}"));
    phases::mark(phases::CONTEXT_END);
    ctx
}

/// A planned preconnection to `host:port`, shared by the flows a client opens.
pub(super) fn preconnection(
    ctx: &Context,
    props: Properties,
    host: &str,
    port: u16,
) -> Result<Arc<Preconnection>, String> {
    let pre = Preconnection::new(ctx, props).remote(RemoteEndpoint::new(host, port));
    pre.plan().map_err(|e| format!("plan: {e}"))?;
    Ok(Arc::new(pre))
}

/// A UDP port on `ip` nobody uses at this moment (bound and released again). The
/// benchmarks give every SCTP server its own encapsulation port, so runs do not collide
/// with each other or with a taps on the default port 9899; a port nobody listens on is
/// also how "SCTP dead" is made (the kernel answers ICMP port unreachable).
pub(super) fn free_udp_port(ip: IpAddr) -> Result<u16, String> {
    std::net::UdpSocket::bind((ip, 0))
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("probing a free UDP port: {e}"))
}

/// A UDP port on 127.0.0.1 that nobody listens on and that stays so: below the kernel's
/// ephemeral range (`ip_local_port_range`), so no socket bound to port 0 (every client
/// association's UDP socket) can land on it. SCTP sent there fails at once (ICMP port
/// unreachable), which is how the benchmarks make SCTP "dead".
pub(crate) fn dead_udp_port() -> Result<u16, String> {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|w| w.parse::<u16>().ok())
        })
        .unwrap_or(32768);
    let top = low.saturating_sub(1000).max(2000);
    (1024.max(top.saturating_sub(5000))..top)
        .rev()
        .find(|p| std::net::UdpSocket::bind((LOCALHOST_V4, *p)).is_ok())
        .ok_or_else(|| "no free UDP port below the ephemeral range".to_string())
}

/// A TCP port on `ip` nobody uses at this moment.
pub(super) fn free_tcp_port(ip: IpAddr) -> Result<u16, String> {
    std::net::TcpListener::bind((ip, 0))
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("probing a free TCP port: {e}"))
}
