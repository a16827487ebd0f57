//! Plain network facts shared by the core and the I/O side: address families and
//! local interfaces. Reading them from the OS is the I/O side's job.

use std::fmt;
use std::net::IpAddr;

/// An IP address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The family of `addr`.
    pub fn of(addr: &IpAddr) -> Family {
        match addr {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    /// Its IP version number, 4 or 6 (what the `ip_version` property names). Free.
    pub fn version(self) -> i64 {
        match self {
            Family::V4 => 4,
            Family::V6 => 6,
        }
    }

    /// The other family.
    pub fn other(self) -> Family {
        match self {
            Family::V4 => Family::V6,
            Family::V6 => Family::V4,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        })
    }
}

/// What kind of link an interface is, as far as the OS tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InterfaceKind {
    /// The loopback interface.
    Loopback,
    /// Wired Ethernet (or anything with an Ethernet-like hardware address).
    Ethernet,
    /// Wireless LAN.
    Wireless,
    /// A tunnel or TUN/TAP device.
    Tunnel,
    /// Anything else.
    Other,
}

impl InterfaceKind {
    /// The name used in properties and policies (`"loopback"`, `"ethernet"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            InterfaceKind::Loopback => "loopback",
            InterfaceKind::Ethernet => "ethernet",
            InterfaceKind::Wireless => "wireless",
            InterfaceKind::Tunnel => "tunnel",
            InterfaceKind::Other => "other",
        }
    }
}

/// One address configured on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InterfaceAddress {
    /// The address.
    pub addr: IpAddr,
    /// Its prefix length.
    pub prefix_len: u8,
}

/// A local network interface with its addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// OS name, e.g. `lo` or `eth0`.
    pub name: String,
    /// OS interface index (0 if unknown).
    pub index: u32,
    /// Link kind.
    pub kind: InterfaceKind,
    /// Whether the interface is administratively up and running.
    pub up: bool,
    /// Configured addresses.
    pub addresses: Vec<InterfaceAddress>,
}

impl Interface {
    /// Addresses of `family` on this interface.
    pub fn addresses_of(&self, family: Family) -> impl Iterator<Item = IpAddr> + '_ {
        self.addresses
            .iter()
            .map(|a| a.addr)
            .filter(move |a| Family::of(a) == family)
    }

    /// The loopback interface as every Linux host has it (`lo`, 127.0.0.1 and ::1).
    /// Used as a fallback and in tests.
    pub fn loopback() -> Interface {
        Interface {
            name: "lo".into(),
            index: 1,
            kind: InterfaceKind::Loopback,
            up: true,
            addresses: vec![
                InterfaceAddress {
                    addr: IpAddr::from([127, 0, 0, 1]),
                    prefix_len: 8,
                },
                InterfaceAddress {
                    addr: IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
                    prefix_len: 128,
                },
            ],
        }
    }
}
