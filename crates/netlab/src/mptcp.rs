//! MPTCP in the lab: the sink's MPTCP listener, and the kernel's path manager set up in
//! the namespaces from RFC 9622's `multipathPolicy` (section 6.2.15).
//!
//! Linux's in-kernel path manager is configured **per network namespace**, not per
//! socket: its endpoints (which local addresses open extra subflows, and whether those
//! are backups) and its limits apply to every MPTCP connection of the namespace. No
//! socket option picks a policy per connection (`SOL_MPTCP` offers only information:
//! `MPTCP_INFO`, `MPTCP_TCPINFO`, `MPTCP_SUBFLOW_ADDRS`, `MPTCP_FULL_INFO`). So the
//! policy is set here, for the client namespace, as an administrator would for a host;
//! what taps decides per connection is whether to use MPTCP at all (`multipath`).
//!
//! | policy | client endpoints (links 1..) | what the kernel does |
//! |---|---|---|
//! | `handover` | `subflow backup` | the extra subflows are opened at once but carry data only when no non-backup subflow is usable (the first path died) |
//! | `interactive` | `subflow` | every subflow may carry data; the default scheduler sends on the one that drains its queue soonest (lowest latency first when idle) |
//! | `aggregate` | `subflow` | the same endpoints: the default scheduler fills every subflow's window, so the paths add up |
//!
//! Linux's default scheduler does not distinguish interactive from aggregate (a BPF
//! scheduler could, `net.mptcp.scheduler`); both get non-backup subflows on every link.
//! Limits in both namespaces: `subflows` = the number of extra links, `add_addr_accepted`
//! the same.

#![forbid(unsafe_code)]

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};

use crate::links;
use crate::netns::Netns;

/// `IPPROTO_MPTCP`.
const IPPROTO_MPTCP: i32 = 262;

/// An MPTCP listener on `addr` (in the calling thread's namespace), as a std listener
/// (an MPTCP socket is a TCP socket to the socket API). Fails where the kernel has no
/// MPTCP.
pub(crate) fn listener(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let s = Socket::new(
        Domain::for_address(addr),
        Type::STREAM,
        Some(Protocol::from(IPPROTO_MPTCP)),
    )?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(128)?;
    Ok(s.into())
}

/// RFC 9622's multipath policies (section 6.2.15), as the lab maps them onto the path
/// manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Extra paths are backups: used only when the first one fails.
    Handover,
    /// Every path may carry data; latency first.
    Interactive,
    /// Every path carries data; throughput first.
    Aggregate,
}

impl Policy {
    /// The policy named by RFC 9622's word (`handover`, `interactive`, `aggregate`).
    pub fn parse(word: &str) -> Option<Policy> {
        match word.to_ascii_lowercase().as_str() {
            "handover" => Some(Policy::Handover),
            "interactive" => Some(Policy::Interactive),
            "aggregate" => Some(Policy::Aggregate),
            _ => None,
        }
    }

    /// RFC 9622's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Handover => "handover",
            Policy::Interactive => "interactive",
            Policy::Aggregate => "aggregate",
        }
    }
}

/// The `ip -batch` lines for the client namespace of a lab with `links` links under
/// `policy`: limits, then one endpoint per extra link (flushed first).
pub fn client_script(policy: Policy, links: usize) -> String {
    let extra = links.saturating_sub(1);
    let mut s = format!(
        "mptcp endpoint flush\nmptcp limits set subflows {extra} add_addr_accepted {extra}\n"
    );
    let flags = match policy {
        Policy::Handover => "subflow backup",
        Policy::Interactive | Policy::Aggregate => "subflow",
    };
    for n in 1..links {
        s.push_str(&format!(
            "mptcp endpoint add {} dev {} {flags}\n",
            links::client_v4(n),
            links::device(n)
        ));
    }
    s
}

/// The `ip -batch` lines for the server namespace: limits that accept the client's
/// extra subflows (the server announces no addresses of its own).
pub fn server_script(links: usize) -> String {
    let extra = links.saturating_sub(1);
    format!("mptcp endpoint flush\nmptcp limits set subflows {extra} add_addr_accepted {extra}\n")
}

/// Sets the path manager of both namespaces for `policy` over `links` links.
pub fn configure(client: &Netns, server: &Netns, policy: Policy, links: usize) -> io::Result<()> {
    client.ip_batch(&client_script(policy, links))?;
    server.ip_batch(&server_script(links))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handover_makes_backup_endpoints_and_aggregate_plain_ones() {
        let h = client_script(Policy::Handover, 2);
        assert!(
            h.contains("limits set subflows 1 add_addr_accepted 1"),
            "{h}"
        );
        assert!(
            h.contains("endpoint add 198.51.100.66 dev nltun1 subflow backup"),
            "{h}"
        );
        let a = client_script(Policy::Aggregate, 3);
        assert!(
            a.contains("endpoint add 198.51.100.130 dev nltun2 subflow\n"),
            "{a}"
        );
        assert!(!a.contains("backup"), "{a}");
        assert_eq!(Policy::parse("Aggregate"), Some(Policy::Aggregate));
        assert_eq!(Policy::parse("sometimes"), None);
    }
}
