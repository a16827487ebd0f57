//! Endpoints: where to connect (RFC 9622 section 6.1).

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

/// Where to connect: a host name or address literal, and a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteEndpoint {
    /// Host name or address literal (`::1` or `[::1]`).
    pub host: String,
    /// Port.
    pub port: u16,
}

impl RemoteEndpoint {
    /// A remote endpoint by name or literal address.
    pub fn new(host: impl Into<String>, port: u16) -> RemoteEndpoint {
        RemoteEndpoint {
            host: host.into(),
            port,
        }
    }

    /// A remote endpoint by socket address.
    pub fn addr(addr: SocketAddr) -> RemoteEndpoint {
        RemoteEndpoint::new(addr.ip().to_string(), addr.port())
    }

    /// The key the CIB files outcomes under (`host:port`).
    pub fn key(&self) -> Arc<str> {
        format!("{}:{}", self.host.trim_matches(['[', ']']), self.port).into()
    }
}

impl fmt::Display for RemoteEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') && !self.host.starts_with('[') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}
