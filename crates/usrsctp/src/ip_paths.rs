//! IP-mode paths, per association: the local addresses its packets may leave from, and
//! the bytes each path carried.
//!
//! **Source addresses.** usrsctp picks a source address for each packet without knowing
//! the host's routes, and the kernel, given none, picks one by routing that the
//! association may never have listed; the peer answers a packet from an unlisted address
//! with an ABORT. The output hook (`taps_ip_hook_output` in `c/multihome.c`) asks
//! [`source_for`] about every packet: routing's choice when the association lists it,
//! else usrsctp's, else the first listed address of the family, else none: the packet is
//! not sent and usrsctp moves its data to another path ([`pick`]). An
//! association lists what usrsctp reports for it (`usrsctp_getladdrs`, which leaves out an
//! address added by ASCONF until the peer has acknowledged it).
//!
//! **Bytes.** The SCTP packets (common header and every chunk: DATA, SACKs, heartbeats)
//! sent to and received from each peer address, as the tunnelling sockets carry them,
//! counted from the moment the association is registered (a listener's from the accept:
//! the handshake's first packets are not counted). Sent packets are counted only where
//! the hook is installed.
//!
//! An association is known by its SCTP port pair (ours, the peer's; unique between two
//! hosts), a path by the peer's address. Costs per packet: two short locks and hash
//! lookups; per destination and second, one route lookup (a UDP socket connected, never
//! sent on).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Locks `m`, whatever a panic elsewhere left in it (plain counters and lists).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// An association's SCTP ports: ours, the peer's.
pub(crate) type Ports = (u16, u16);

/// What went over one path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PathBytes {
    /// Bytes of SCTP packets sent (0 unless the output hook is installed).
    pub(crate) sent: u64,
    /// Bytes of SCTP packets received.
    pub(crate) received: u64,
    /// The source address chosen for the path's last packet.
    pub(crate) source: Option<IpAddr>,
}

#[derive(Default)]
struct AssocPaths {
    /// Addresses its packets may leave from (empty: not known, routing decides).
    listed: Vec<IpAddr>,
    /// Counts the times `listed` was set by [`register`]: a later [`update_since`] from
    /// a list read before then is stale and not applied.
    generation: u64,
    paths: HashMap<IpAddr, PathBytes>,
}

static ASSOCS: Mutex<Option<HashMap<Ports, AssocPaths>>> = Mutex::new(None);

/// Routing's source address towards a destination, and when it was looked up.
type Route = (Option<IpAddr>, Instant);

/// Routing's source address per destination.
static ROUTES: Mutex<Option<HashMap<IpAddr, Route>>> = Mutex::new(None);

/// How long a route lookup is trusted.
const ROUTE_TTL: Duration = Duration::from_secs(1);

/// Whether sent packets are counted (the output hook is installed).
static HOOKED: AtomicBool = AtomicBool::new(false);

/// Records that the output hook is installed.
pub(crate) fn set_hooked() {
    HOOKED.store(true, Ordering::SeqCst);
}

/// Whether the output hook is installed: sources chosen, sent bytes counted.
pub(crate) fn hooked() -> bool {
    HOOKED.load(Ordering::SeqCst)
}

fn with_assoc<R>(ports: Ports, create: bool, f: impl FnOnce(&mut AssocPaths) -> R) -> Option<R> {
    let mut assocs = lock(&ASSOCS);
    let assocs = assocs.get_or_insert_with(HashMap::new);
    match create {
        true => Some(f(assocs.entry(ports).or_default())),
        false => assocs.get_mut(&ports).map(f),
    }
}

/// Registers the association with `ports` and the addresses it lists (replacing earlier
/// ones; counters are kept).
pub(crate) fn register(ports: Ports, listed: Vec<IpAddr>) {
    with_assoc(ports, true, |a| {
        a.listed = listed;
        a.generation += 1;
    });
}

/// The generation of a registered association's list (see [`update_since`]).
pub(crate) fn generation(ports: Ports) -> Option<u64> {
    with_assoc(ports, false, |a| a.generation)
}

/// Replaces the addresses a registered association lists with `listed`, read when its list
/// was of generation `since`; returns false (nothing done) if it was registered again
/// since, or is gone.
pub(crate) fn update_since(ports: Ports, since: u64, listed: Vec<IpAddr>) -> bool {
    with_assoc(ports, false, |a| {
        let current = a.generation == since;
        if current {
            a.listed = listed;
        }
        current
    })
    .unwrap_or(false)
}

/// The addresses the association with `ports` lists (empty if unknown).
#[cfg(test)]
fn listed(ports: Ports) -> Vec<IpAddr> {
    with_assoc(ports, false, |a| a.listed.clone()).unwrap_or_default()
}

/// Drops what is kept of the association with `ports`.
pub(crate) fn forget(ports: Ports) {
    if let Some(a) = lock(&ASSOCS).as_mut() {
        a.remove(&ports);
    }
}

/// Counts a packet of `len` bytes sent to `remote`.
pub(crate) fn count_sent(ports: Ports, remote: IpAddr, len: usize) {
    with_assoc(ports, false, |a| {
        a.paths.entry(remote).or_default().sent += len as u64
    });
}

/// Counts a packet of `len` bytes received from `remote`.
pub(crate) fn count_received(ports: Ports, remote: IpAddr, len: usize) {
    with_assoc(ports, false, |a| {
        a.paths.entry(remote).or_default().received += len as u64;
    });
}

/// What went over the path to `remote` so far (zeros if nothing did).
pub(crate) fn path(ports: Ports, remote: IpAddr) -> PathBytes {
    with_assoc(ports, false, |a| a.paths.get(&remote).copied())
        .flatten()
        .unwrap_or_default()
}

/// The ports of a packet whose SCTP common header starts `pkt` and that was received
/// (its destination port is ours).
pub(crate) fn received_ports(pkt: &[u8]) -> Option<Ports> {
    let h = pkt.get(..4)?;
    Some((
        u16::from_be_bytes([h[2], h[3]]),
        u16::from_be_bytes([h[0], h[1]]),
    ))
}

/// Where a packet leaves from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// Routing's choice (the association lists it, or lists nothing known).
    Routing,
    /// This address, which the association lists.
    From(IpAddr),
    /// Nowhere: the association lists no address of the destination's family, and the
    /// peer would abort it on a packet from any other. usrsctp is told the destination is
    /// unreachable and moves the packet's data to another path.
    Unreachable,
}

/// The source for a packet of the association with `ports` to `dst`, for which usrsctp
/// chose `chosen`; `asconf`: the packet carries an ASCONF chunk (see [`pick`]).
pub(crate) fn source_for(ports: Ports, dst: IpAddr, chosen: IpAddr, asconf: bool) -> Source {
    let routed = route(dst);
    with_assoc(ports, false, |a| {
        let source = match a.listed.is_empty() {
            true => Source::Routing,
            false => pick(&a.listed, routed, chosen, asconf),
        };
        // What the path's packets leave from, kept for `paths`.
        let from = match source {
            Source::Routing => routed,
            Source::From(ip) => Some(ip),
            Source::Unreachable => None,
        };
        if from.is_some() {
            a.paths.entry(dst).or_default().source = from;
        }
        source
    })
    .unwrap_or(Source::Routing)
}

/// Where a packet leaves from, given the addresses its association lists: routing's
/// choice `routed` if listed; else usrsctp's `chosen` if listed, or if the packet carries
/// an ASCONF (`asconf`: one that adds an address may leave from it before the peer knows
/// it, RFC 5061, the peer finding the association by the address the ASCONF names); else
/// the first listed address of the destination's family (that of `chosen`); else nowhere.
pub(crate) fn pick(
    listed: &[IpAddr],
    routed: Option<IpAddr>,
    chosen: IpAddr,
    asconf: bool,
) -> Source {
    if routed.is_some_and(|r| listed.contains(&r)) {
        return Source::Routing;
    }
    if asconf || listed.contains(&chosen) {
        return Source::From(chosen);
    }
    listed
        .iter()
        .copied()
        .find(|a| a.is_ipv6() == chosen.is_ipv6())
        .map_or(Source::Unreachable, Source::From)
}

/// Routing's source address towards `dst`, looked up at most once per [`ROUTE_TTL`].
fn route(dst: IpAddr) -> Option<IpAddr> {
    let now = Instant::now();
    if let Some(&(src, at)) = lock(&ROUTES).as_ref().and_then(|r| r.get(&dst)) {
        if now.duration_since(at) < ROUTE_TTL {
            return src;
        }
    }
    let src = route_source(SocketAddr::new(dst, 9));
    lock(&ROUTES)
        .get_or_insert_with(HashMap::new)
        .insert(dst, (src, now));
    src
}

/// The source address routing picks towards `to` (one UDP socket connected, never used).
pub(crate) fn route_source(to: SocketAddr) -> Option<IpAddr> {
    let any: IpAddr = match to {
        SocketAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        SocketAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    };
    let probe = std::net::UdpSocket::bind(SocketAddr::new(any, 0)).ok()?;
    probe
        .connect(SocketAddr::new(to.ip(), to.port().max(1)))
        .ok()?;
    Some(probe.local_addr().ok()?.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn routing_decides_unless_its_choice_is_unlisted() {
        let listed = [ip("198.51.100.2"), ip("2001:db8::2")];
        let pick =
            |routed: Option<&str>, chosen: &str| pick(&listed, routed.map(ip), ip(chosen), false);
        // Routing picks a listed address: left to it.
        assert_eq!(pick(Some("198.51.100.2"), "198.51.100.66"), Source::Routing);
        // Routing picks an unlisted one: usrsctp's choice if listed...
        assert_eq!(
            pick(Some("198.51.100.66"), "198.51.100.2"),
            Source::From(ip("198.51.100.2"))
        );
        // ...else the first listed address of the family...
        assert_eq!(
            pick(Some("198.51.100.66"), "198.51.100.66"),
            Source::From(ip("198.51.100.2"))
        );
        assert_eq!(pick(None, "2001:db8::66"), Source::From(ip("2001:db8::2")));
        // ...else nowhere...
        let v4_only = &listed[..1];
        assert_eq!(
            super::pick(v4_only, None, ip("2001:db8::66"), false),
            Source::Unreachable
        );
        // ...but an ASCONF leaves from usrsctp's choice (the address it adds, say).
        assert_eq!(
            super::pick(v4_only, None, ip("2001:db8::66"), true),
            Source::From(ip("2001:db8::66"))
        );
    }

    #[test]
    fn counts_per_path_of_registered_associations() {
        let a = ip("192.0.2.1");
        let b = ip("192.0.2.2");
        let ports = (61_001, 9);
        let pkt = [0, 9, 0xee, 0x49, 0, 0, 0, 0];
        assert_eq!(received_ports(&pkt), Some(ports));
        assert_eq!(received_ports(&pkt[..3]), None);
        count_received(ports, a, 5);
        assert_eq!(path(ports, a), PathBytes::default(), "not registered yet");
        register(ports, vec![b]);
        assert_eq!(listed(ports), vec![b]);
        let g = generation(ports).unwrap();
        assert!(update_since(ports, g, vec![a, b]));
        assert_eq!(listed(ports), vec![a, b]);
        register(ports, vec![b]);
        assert!(!update_since(ports, g, vec![a]), "stale");
        assert_eq!(listed(ports), vec![b]);
        count_sent(ports, a, 100);
        count_sent(ports, a, 50);
        count_received(ports, a, 30);
        count_received(ports, b, 7);
        assert_eq!(
            path(ports, a),
            PathBytes {
                sent: 150,
                received: 30,
                source: None
            }
        );
        assert_eq!(path(ports, b).received, 7);
        forget(ports);
        assert_eq!(path(ports, a), PathBytes::default());
        assert!(listed(ports).is_empty());
    }
}
