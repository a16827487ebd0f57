//! What a name's HTTPS records (RFC 9460, ServiceMode) say about how to reach it: the
//! application protocols it serves (ALPN; `h3` means QUIC), another port, address hints,
//! and an Encrypted Client Hello configuration. A leaf module: plain data the resolver
//! fills and the race reads.

use std::fmt;
use std::net::IpAddr;

use crate::net::Family;

/// One HTTPS/SVCB record in ServiceMode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceRecord {
    /// SvcPriority (1 and up; lower first).
    pub priority: u16,
    /// TargetName; `.` means the name asked for.
    pub target: String,
    /// The application protocols the endpoint serves (`alpn`), e.g. `h3`, `h2`.
    pub alpn: Vec<String>,
    /// `no-default-alpn`: only the listed protocols (not `http/1.1`) are served.
    pub no_default_alpn: bool,
    /// `port`: the port to use instead of the origin's.
    pub port: Option<u16>,
    /// `ipv4hint` and `ipv6hint` addresses.
    pub hints: Vec<IpAddr>,
    /// Whether it carries an `ech` configuration.
    pub ech: bool,
}

/// The ServiceMode records of a name, lowest SvcPriority first. Cost: a few small vectors.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceInfo {
    /// The records, sorted by priority.
    pub records: Vec<ServiceRecord>,
}

impl ServiceInfo {
    /// The records sorted by priority.
    pub fn new(mut records: Vec<ServiceRecord>) -> ServiceInfo {
        records.sort_by_key(|r| r.priority);
        ServiceInfo { records }
    }

    /// Whether any record serves HTTP/3 (`h3`): QUIC candidates are worth racing. With no
    /// record at all nothing is known and QUIC stays in.
    pub fn allows_quic(&self) -> bool {
        self.records.is_empty()
            || self
                .records
                .iter()
                .any(|r| r.alpn.iter().any(|a| a == "h3" || a.starts_with("h3-")))
    }

    /// The port of the best record that names one.
    pub fn port(&self) -> Option<u16> {
        self.records.iter().find_map(|r| r.port)
    }

    /// The hinted addresses of `family`, best record first, without duplicates.
    pub fn hints(&self, family: Family) -> Vec<IpAddr> {
        let mut out: Vec<IpAddr> = Vec::new();
        for ip in self.records.iter().flat_map(|r| r.hints.iter()) {
            if Family::of(ip) == family && !out.contains(ip) {
                out.push(*ip);
            }
        }
        out
    }
}

impl fmt::Display for ServiceRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.priority, self.target)?;
        if !self.alpn.is_empty() {
            write!(f, " alpn={}", self.alpn.join(","))?;
        }
        if self.no_default_alpn {
            f.write_str(" no-default-alpn")?;
        }
        if let Some(p) = self.port {
            write!(f, " port={p}")?;
        }
        for ip in &self.hints {
            let key = if ip.is_ipv4() { "ipv4hint" } else { "ipv6hint" };
            write!(f, " {key}={ip}")?;
        }
        if self.ech {
            f.write_str(" ech")?;
        }
        Ok(())
    }
}
