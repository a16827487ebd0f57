//! Options of `taps connect` and `taps listen` that choose local addresses and multipath:
//! each becomes a transport property set before `--props` (which can still override it).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use serde_json::json;
use taps::TransportProperties;

use crate::common::CliError;

/// Local addresses and multipath.
#[derive(clap::Args, Clone, Default)]
pub(crate) struct PathArgs {
    /// Use this local address (repeatable; NEAT's `local_ips`, required). A listener
    /// listens on the first; with `--multihoming` every one becomes a path of one
    /// connection.
    #[arg(long = "local", value_name = "ADDR")]
    pub local: Vec<IpAddr>,
    /// Use several paths for one connection (NEAT's `multihoming`, required: SCTP binds
    /// every `--local` address, or every address of the host, and lists them to the peer;
    /// MPTCP opens subflows).
    #[arg(long)]
    pub multihoming: bool,
    /// How several paths are used (RFC 9622 `multipathPolicy`): `handover` (one at a time,
    /// the others for failover), `interactive`, or `aggregate` (SCTP: CMT, data over every
    /// path at once).
    #[arg(long, value_name = "POLICY", value_parser = ["handover", "interactive", "aggregate"])]
    pub multipath_policy: Option<String>,
}

impl PathArgs {
    /// Where a listener listens: the first `--local` address, else every address (IPv6
    /// and IPv4), on `port`.
    pub(crate) fn listen_addr(&self, port: u16) -> SocketAddr {
        let ip = self.local.first().copied();
        SocketAddr::new(ip.unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED)), port)
    }

    /// `base` with these options' properties. A few map insertions.
    pub(crate) fn apply(&self, base: TransportProperties) -> Result<TransportProperties, CliError> {
        let mut props = serde_json::Map::new();
        if !self.local.is_empty() {
            let ips: Vec<String> = self.local.iter().map(|a| a.to_string()).collect();
            props.insert("local_ips".into(), json!({"value": ips, "precedence": 2}));
        }
        if self.multihoming {
            props.insert(
                "multihoming".into(),
                json!({"value": true, "precedence": 2}),
            );
        }
        if let Some(p) = &self.multipath_policy {
            props.insert("multipathPolicy".into(), json!(p));
        }
        if props.is_empty() {
            return Ok(base);
        }
        base.merge_neat_json(&serde_json::Value::Object(props).to_string())
            .map_err(|e| CliError::usage(format!("--local/--multihoming: {e}")))
    }
}
