//! Local interfaces, read from the OS once and refreshed when they change, never per flow.
//!
//! [`read_interfaces`] takes a snapshot with `getifaddrs(3)`. [`InterfaceWatcher`] keeps a
//! snapshot current: a task listens on a `NETLINK_ROUTE` socket for link and address
//! changes and re-reads the list after each burst of notifications, publishing it on a
//! [`tokio::sync::watch`] channel.

// FFI: getifaddrs, ioctls and netlink sockets through libc (each block says why it is
// sound); the rest of the crate denies unsafe code.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::ffi::CStr;
use std::fmt;
use std::io;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use taps_core::{Interface, InterfaceAddress, InterfaceKind};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// `ARPHRD_IP6GRE` from `<linux/if_arp.h>` (missing from the libc crate).
const ARPHRD_IP6GRE: u16 = 823;

/// Reads the local interfaces and their addresses with `getifaddrs(3)`, sorted by index.
///
/// Costs one netlink dump in libc (the index comes from each link's `AF_PACKET` entry;
/// an `if_nametoindex`, three syscalls, only for a link without one) and a `stat` under
/// `/sys/class/net` per Ethernet-like link: tens of microseconds to a millisecond.
/// Call it when the list is needed or has changed, not per flow; [`InterfaceWatcher`]
/// does that.
///
/// Kinds: `IFF_LOOPBACK` → loopback; names `wl*` (or a `wireless` entry in sysfs) →
/// wireless; names `tun*`, `tap*`, `wg*` and IP-tunnel link types → tunnel; other links
/// with an Ethernet hardware type → Ethernet; the rest → other. `up` means both
/// `IFF_UP` and `IFF_RUNNING`. Interfaces without addresses are listed too.
pub fn read_interfaces() -> io::Result<Vec<Interface>> {
    let list = IfAddrs::get()?;
    // Per interface: the entry, its flags, its link-layer type if known.
    let mut found: Vec<(Interface, libc::c_uint, Option<u16>)> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for ifa in list.iter() {
        if ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: getifaddrs gives a NUL-terminated name that lives as long as `list`.
        let c_name = unsafe { CStr::from_ptr(ifa.ifa_name) };
        let name = c_name.to_string_lossy().into_owned();
        let slot = *by_name.entry(name.clone()).or_insert_with(|| {
            found.push((
                Interface {
                    name,
                    index: 0, // from the link's AF_PACKET entry, else by name below
                    kind: InterfaceKind::Other,
                    up: false,
                    addresses: Vec::new(),
                },
                0,
                None,
            ));
            found.len() - 1
        });
        let entry = &mut found[slot];
        entry.1 |= ifa.ifa_flags;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: non-null `ifa_addr` points to a sockaddr whose family says its real type
        // and size; the netmask, if set, has the same family.
        let address = unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    let addr = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                    let prefix_len = if ifa.ifa_netmask.is_null() {
                        32
                    } else {
                        let mask = &*(ifa.ifa_netmask as *const libc::sockaddr_in);
                        mask.sin_addr.s_addr.count_ones() as u8
                    };
                    Some(InterfaceAddress {
                        addr: IpAddr::V4(addr),
                        prefix_len,
                    })
                }
                libc::AF_INET6 => {
                    let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    let addr = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                    let prefix_len = if ifa.ifa_netmask.is_null() {
                        128
                    } else {
                        let mask = &*(ifa.ifa_netmask as *const libc::sockaddr_in6);
                        mask.sin6_addr
                            .s6_addr
                            .iter()
                            .map(|b| b.count_ones() as u8)
                            .sum()
                    };
                    Some(InterfaceAddress {
                        addr: IpAddr::V6(addr),
                        prefix_len,
                    })
                }
                libc::AF_PACKET => {
                    let sll = &*(ifa.ifa_addr as *const libc::sockaddr_ll);
                    entry.2 = Some(sll.sll_hatype);
                    entry.0.index = u32::try_from(sll.sll_ifindex).unwrap_or(0);
                    None
                }
                _ => None,
            }
        };
        if let Some(a) = address {
            if !entry.0.addresses.contains(&a) {
                entry.0.addresses.push(a);
            }
        }
    }
    drop(list);
    for (iface, _, _) in found.iter_mut().filter(|(i, _, _)| i.index == 0) {
        iface.index = index_by_name(&iface.name);
    }

    let mut out: Vec<Interface> = found
        .into_iter()
        .map(|(mut iface, flags, hatype)| {
            let flags = flags as libc::c_int;
            iface.up = flags & libc::IFF_UP != 0 && flags & libc::IFF_RUNNING != 0;
            iface.kind = classify(&iface.name, flags, hatype);
            iface
        })
        .collect();
    out.sort_by(|a, b| (a.index, &a.name).cmp(&(b.index, &b.name)));
    Ok(out)
}

/// The kernel's index of the interface called `name` (`if_nametoindex`: three syscalls),
/// 0 if there is none.
fn index_by_name(name: &str) -> u32 {
    let Ok(c_name) = std::ffi::CString::new(name) else {
        return 0;
    };
    // SAFETY: `c_name` is a valid C string.
    unsafe { libc::if_nametoindex(c_name.as_ptr()) }
}

fn classify(name: &str, flags: libc::c_int, hatype: Option<u16>) -> InterfaceKind {
    if flags & libc::IFF_LOOPBACK != 0 || hatype == Some(libc::ARPHRD_LOOPBACK) {
        return InterfaceKind::Loopback;
    }
    if name.starts_with("wl") || hatype == Some(libc::ARPHRD_IEEE80211) {
        return InterfaceKind::Wireless;
    }
    if ["tun", "tap", "wg"].iter().any(|p| name.starts_with(p)) {
        return InterfaceKind::Tunnel;
    }
    match hatype {
        Some(
            libc::ARPHRD_NONE
            | libc::ARPHRD_TUNNEL
            | libc::ARPHRD_TUNNEL6
            | libc::ARPHRD_SIT
            | libc::ARPHRD_IPGRE
            | ARPHRD_IP6GRE,
        ) => InterfaceKind::Tunnel,
        Some(libc::ARPHRD_ETHER) => {
            // Wi-Fi drivers show an Ethernet hardware type; sysfs tells them apart.
            if std::path::Path::new("/sys/class/net")
                .join(name)
                .join("wireless")
                .exists()
            {
                InterfaceKind::Wireless
            } else {
                InterfaceKind::Ethernet
            }
        }
        Some(_) => InterfaceKind::Other,
        None if name.starts_with("eth") || name.starts_with("en") => InterfaceKind::Ethernet,
        None => InterfaceKind::Other,
    }
}

/// The list from `getifaddrs`, freed on drop.
struct IfAddrs(*mut libc::ifaddrs);

impl IfAddrs {
    fn get() -> io::Result<IfAddrs> {
        let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
        // SAFETY: `head` is a valid out-pointer; on success it owns a list we free in Drop.
        if unsafe { libc::getifaddrs(&mut head) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(IfAddrs(head))
    }

    fn iter(&self) -> impl Iterator<Item = &libc::ifaddrs> + '_ {
        let mut cur = self.0;
        std::iter::from_fn(move || {
            // SAFETY: every node of the list stays valid until `self` is dropped.
            let node = unsafe { cur.as_ref()? };
            cur = node.ifa_next;
            Some(node)
        })
    }
}

impl Drop for IfAddrs {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the pointer came from a successful getifaddrs and is freed once.
            unsafe { libc::freeifaddrs(self.0) };
        }
    }
}

/// Keeps the interface list current: reads it once, then re-reads it whenever the kernel
/// reports a link or address change (netlink `RTMGRP_LINK | RTMGRP_IPV4_IFADDR |
/// RTMGRP_IPV6_IFADDR`), publishing only lists that differ from the last one.
///
/// Costs one netlink socket and one tokio task, idle between changes. Dropping the
/// watcher stops the task and closes the socket; subscribers then see the channel close.
pub struct InterfaceWatcher {
    rx: watch::Receiver<Arc<Vec<Interface>>>,
    task: JoinHandle<()>,
}

impl InterfaceWatcher {
    /// Subscribes to interface changes, reads the list, and spawns the watching task.
    /// Must be called within a tokio runtime (an error otherwise). The socket is opened
    /// before the first read, so no change after the read is missed.
    pub fn spawn() -> io::Result<InterfaceWatcher> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(io::Error::other(
                "the interface watcher needs a tokio runtime",
            ));
        }
        let fd = open_netlink()?;
        // SAFETY: an `OwnedFd` always returns the same descriptor, open until it is dropped
        // with the `AsyncFd`.
        let socket = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            .map_err(io::Error::from)?;
        let initial = read_interfaces()?;
        let (tx, rx) = watch::channel(Arc::new(initial));
        let task = tokio::spawn(watch_task(socket, tx));
        Ok(InterfaceWatcher { rx, task })
    }

    /// The latest list. Cheap: clones an `Arc` under a read lock.
    pub fn current(&self) -> Arc<Vec<Interface>> {
        self.rx.borrow().clone()
    }

    /// A receiver that is told of every new list (the current one counts as seen).
    /// Cheap: clones a channel handle.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Vec<Interface>>> {
        self.rx.clone()
    }
}

impl fmt::Debug for InterfaceWatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InterfaceWatcher")
            .field("interfaces", &self.rx.borrow().len())
            .finish_non_exhaustive()
    }
}

impl Drop for InterfaceWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A non-blocking `NETLINK_ROUTE` socket subscribed to link and address changes.
fn open_netlink() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: all-zero is a valid sockaddr_nl.
    let mut sa: libc::sockaddr_nl = unsafe { mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    sa.nl_groups = (libc::RTMGRP_LINK | libc::RTMGRP_IPV4_IFADDR | libc::RTMGRP_IPV6_IFADDR) as u32;
    // SAFETY: `sa` is a valid sockaddr_nl of the given length.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_nl).cast(),
            mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Drains notifications; after each burst re-reads the list and publishes it if it
/// changed. The content of the messages is not parsed: any message means "look again".
async fn watch_task(socket: AsyncFd<OwnedFd>, tx: watch::Sender<Arc<Vec<Interface>>>) {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let mut guard = match socket.readable().await {
            Ok(guard) => guard,
            Err(error) => {
                tracing::warn!(%error, "interface watcher stops");
                return;
            }
        };
        let mut changed = false;
        loop {
            let got = guard.try_io(|fd| {
                // SAFETY: `buf` is valid for writes of its length.
                let n = unsafe {
                    libc::recv(
                        fd.as_raw_fd(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        libc::MSG_DONTWAIT,
                    )
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match got {
                Ok(Ok(_)) => changed = true,
                // The kernel dropped notifications: we re-read anyway.
                Ok(Err(e)) if e.raw_os_error() == Some(libc::ENOBUFS) => changed = true,
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(error)) => {
                    tracing::warn!(%error, "interface watcher stops");
                    return;
                }
                // Drained: readiness is cleared, wait for the next notification.
                Err(_would_block) => break,
            }
        }
        if !changed {
            continue;
        }
        match read_interfaces() {
            Ok(list) => {
                tx.send_if_modified(|current| {
                    if **current == list {
                        false
                    } else {
                        *current = Arc::new(list);
                        true
                    }
                });
            }
            Err(error) => tracing::warn!(%error, "cannot re-read interfaces"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let lo = libc::IFF_LOOPBACK | libc::IFF_UP;
        assert_eq!(classify("lo", lo, None), InterfaceKind::Loopback);
        assert_eq!(
            classify("wlp2s0", 0, Some(libc::ARPHRD_ETHER)),
            InterfaceKind::Wireless
        );
        assert_eq!(
            classify("tun0", 0, Some(libc::ARPHRD_NONE)),
            InterfaceKind::Tunnel
        );
        assert_eq!(
            classify("wg0", 0, Some(libc::ARPHRD_NONE)),
            InterfaceKind::Tunnel
        );
        assert_eq!(
            classify("gre1", 0, Some(libc::ARPHRD_IPGRE)),
            InterfaceKind::Tunnel
        );
        assert_eq!(
            classify("veth-x-does-not-exist", 0, Some(libc::ARPHRD_ETHER)),
            InterfaceKind::Ethernet
        );
        assert_eq!(classify("eth9", 0, None), InterfaceKind::Ethernet);
        assert_eq!(
            classify("ppp0", 0, Some(libc::ARPHRD_PPP)),
            InterfaceKind::Other
        );
    }
}
