//! RFC 6724 destination address ordering (the rules that need no source address table):
//! rule 6 (higher precedence first, from the default policy table) and rule 8 (smaller
//! scope first); rule 10 keeps the resolver's order otherwise.

use std::net::{IpAddr, Ipv6Addr};

/// Precedence from the RFC 6724 default policy table.
pub(crate) fn precedence(addr: &IpAddr) -> u8 {
    let v6 = match addr {
        IpAddr::V4(_) => return 35,
        IpAddr::V6(v6) => v6,
    };
    if v6.to_ipv4_mapped().is_some() {
        return 35;
    }
    let seg = v6.segments();
    if *v6 == Ipv6Addr::LOCALHOST {
        50
    } else if seg[0] == 0x2002 {
        30
    } else if seg[0] == 0x2001 && seg[1] == 0 {
        5
    } else if seg[0] & 0xfe00 == 0xfc00 {
        3
    } else if seg[..6] == [0; 6] || seg[0] & 0xffc0 == 0xfec0 || seg[0] == 0x3ffe {
        1
    } else {
        40
    }
}

/// Scope (RFC 4007 values): 2 link-local, 5 site, 14 global.
pub(crate) fn scope(addr: &IpAddr) -> u8 {
    match addr {
        IpAddr::V4(v4) if v4.is_loopback() || v4.is_link_local() => 2,
        IpAddr::V4(_) => 14,
        IpAddr::V6(v6) if v6.is_loopback() || v6.segments()[0] & 0xffc0 == 0xfe80 => 2,
        IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfec0 => 5,
        IpAddr::V6(_) => 14,
    }
}

/// Sort key: smaller sorts first.
pub(crate) fn sort_key(addr: &IpAddr) -> (std::cmp::Reverse<u8>, u8) {
    (std::cmp::Reverse(precedence(addr)), scope(addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_before_ipv4_and_loopback_first() {
        let mut v: Vec<IpAddr> = ["192.0.2.1", "2001:db8::1", "::1", "127.0.0.1", "fd00::1"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        v.sort_by_key(sort_key);
        let s: Vec<String> = v.iter().map(|a| a.to_string()).collect();
        assert_eq!(
            s,
            ["::1", "2001:db8::1", "127.0.0.1", "192.0.2.1", "fd00::1"]
        );
    }
}
