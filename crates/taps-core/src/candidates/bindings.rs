//! The local side of candidates: which interface and address to bind for a remote
//! address, when the properties ask for one.

use std::net::IpAddr;
use std::sync::Arc;

use super::reasons::Violation;
use crate::net::{Family, Interface, InterfaceKind};
use crate::policy::PropertySet;
use crate::properties::{Name, Precedence, Value};

/// The local side of a candidate: an interface and address to bind, when the
/// properties ask for one (otherwise the OS routes).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LocalBinding {
    /// Interface name.
    pub interface: Arc<str>,
    /// Interface kind.
    pub kind: InterfaceKind,
    /// Address to bind.
    pub addr: IpAddr,
}

/// Local bindings for a remote address: one per matching interface when the properties
/// name interfaces or local addresses, else `None` (the OS routes) after checking that
/// some interface can reach the address's family.
pub(super) fn local_bindings(
    set: &PropertySet,
    remote: IpAddr,
    interfaces: &[Interface],
) -> Result<Vec<Option<LocalBinding>>, Violation> {
    let family = Family::of(&remote);
    let usable = |i: &Interface, a: &IpAddr| {
        i.up && if remote.is_loopback() {
            i.kind == InterfaceKind::Loopback
        } else {
            let link_local = match a {
                IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
                IpAddr::V4(v4) => v4.is_link_local(),
            };
            i.kind != InterfaceKind::Loopback && !link_local || *a == remote
        }
    };
    // Naming interfaces (to use or to avoid) makes one candidate per interface, so an
    // avoided or prohibited one is not reached through the OS's default route.
    let explicit = [Name::Interface, Name::LocalIps].iter().any(|n| {
        set.get(n).is_some_and(|e| {
            e.precedence > Precedence::None
                && (n == &Name::Interface || !matches!(e.value, Value::Not(_)))
        })
    });
    let mut out = Vec::new();
    for i in interfaces {
        for a in i.addresses_of(family) {
            if !usable(i, &a) {
                continue;
            }
            if !explicit {
                return Ok(vec![None]);
            }
            out.push(Some(LocalBinding {
                interface: i.name.as_str().into(),
                kind: i.kind,
                addr: a,
            }));
            if set.get(&Name::LocalIps).is_none() {
                break; // one address per interface unless addresses were named
            }
        }
    }
    if out.is_empty() {
        // A remote that is one of our own addresses is reached over loopback.
        if !explicit
            && interfaces
                .iter()
                .any(|i| i.addresses.iter().any(|a| a.addr == remote))
        {
            return Ok(vec![None]);
        }
        return Err(Violation::NoLocalAddress { family });
    }
    Ok(out)
}

/// The first address a required `local_ips` names that no interface has: binding it
/// would fail, so the candidates say which address it is instead. One look per stack and
/// gathering (it does not depend on the remote address).
pub(super) fn foreign_local_ip(set: &PropertySet, interfaces: &[Interface]) -> Option<IpAddr> {
    let entry = set
        .get(&Name::LocalIps)
        .filter(|e| e.precedence == Precedence::Required)?;
    if matches!(entry.value, Value::Not(_)) {
        return None;
    }
    entry
        .value
        .items()
        .iter()
        .filter_map(|v| v.as_str()?.parse::<IpAddr>().ok())
        .find(|ip| {
            !interfaces
                .iter()
                .any(|i| i.addresses.iter().any(|a| a.addr == *ip))
        })
}
