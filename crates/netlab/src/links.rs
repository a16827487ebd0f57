//! Extra paths between the client and the server: link 1 and link 2 beside the lab's
//! first link (link 0, `nltun0`). Each link is its own pair of TUN devices with its own
//! bridge, so its own rules (delay, rate, loss, queue length) and its own counters; each
//! can be cut and restored during a run (from scenario code or on a [`LinkSchedule`]).
//!
//! ```text
//!  client ns                                   server ns
//!  link 0 nltun0 198.51.100.2    2001:db8:c::2    <== bridge 0 ==>  nltun0 (zone, DNS)
//!  link 1 nltun1 198.51.100.66   2001:db8:c:1::2  <== bridge 1 ==>  nltun1 192.0.2.201
//!  link 2 nltun2 198.51.100.130  2001:db8:c:2::2  <== bridge 2 ==>  nltun2 192.0.2.202
//! ```
//!
//! Each link's client addresses lie in a subnet of their own (198.51.100.0/26, .64/26,
//! .128/26; 2001:db8:c:N::/64). The client's default routes stay on link 0; a packet
//! from link N's address leaves through link N (a routing rule per source address and a
//! table per link, 100 + N), so whatever binds that address (taps' per-interface
//! candidates, an MPTCP subflow) uses that path. The server routes each link's client
//! subnet back over the same link, and is multi-homed: link N also carries a server
//! address of its own ([`server_addr_v4`], reached from the client over that link only).

#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::bridge::LinkSwitch;

/// How many links a lab can have (link 0 and two extra ones).
pub const MAX_LINKS: usize = 3;

/// The client-side (and server-side) TUN device of link `n`: `nltun0`, `nltun1`, ...
pub fn device(n: usize) -> String {
    format!("nltun{n}")
}

/// The client's IPv4 address on link `n` (198.51.100.2, .66, .130: one /26 each).
pub fn client_v4(n: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 51, 100, (64 * n + 2) as u8)
}

/// The client's IPv6 address on link `n` (2001:db8:c:N::2, one /64 each).
pub fn client_v6(n: usize) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, 0xc, n as u16, 0, 0, 0, 2)
}

/// The server's own IPv4 address on link `n` >= 1 (192.0.2.200 + n): the client reaches
/// it over link `n` only (a multi-homed server).
pub fn server_addr_v4(n: usize) -> Ipv4Addr {
    Ipv4Addr::new(192, 0, 2, (200 + n) as u8)
}

/// The server's own IPv6 address on link `n` >= 1 (2001:db8:5:f0::N).
pub fn server_addr_v6(n: usize) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, 5, 0xf0, 0, 0, 0, n as u16)
}

/// The client's address of `family`'s kind on link `n`.
pub fn client_addr(n: usize, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(client_v6(n))
    } else {
        IpAddr::V4(client_v4(n))
    }
}

/// `ip -batch` lines that set link `n` up in the client namespace: the device, its
/// addresses, the routes to the server's link address, and the per-source routing
/// (table 100 + n; the IPv6 rule is [`client_rule_v6`]). For link 0 only the device, addresses and default routes (as the
/// lab always had them).
pub(crate) fn client_script(n: usize) -> String {
    let dev = device(n);
    let (a4, a6) = (client_v4(n), client_v6(n));
    let mut s = format!(
        "link set {dev} up\n\
         address add {a4}/32 dev {dev}\n\
         address add {a6}/128 dev {dev} nodad\n"
    );
    if n == 0 {
        s.push_str(&format!(
            "route add 0.0.0.0/0 dev {dev} src {a4}\n\
             route add ::/0 dev {dev} src {a6}\n"
        ));
        return s;
    }
    let table = 100 + n;
    s.push_str(&format!(
        "route add {}/32 dev {dev} src {a4}\n\
         route add {}/128 dev {dev} src {a6}\n\
         route add 0.0.0.0/0 dev {dev} src {a4} table {table}\n\
         route add ::/0 dev {dev} src {a6} table {table}\n\
         rule add from {a4} table {table} prio {table}\n",
        server_addr_v4(n),
        server_addr_v6(n),
    ));
    s
}

/// The `ip -6` arguments of link `n`'s IPv6 routing rule (`ip -batch` cannot say
/// `-6`, and `ip rule` reads an IPv6 prefix only with it).
pub(crate) fn client_rule_v6(n: usize) -> Vec<String> {
    let table = (100 + n).to_string();
    [
        "-6",
        "rule",
        "add",
        "from",
        &client_v6(n).to_string(),
        "table",
        &table,
        "prio",
        &table,
    ]
    .map(String::from)
    .to_vec()
}

/// `ip -batch` lines that set link `n` >= 1 up in the server namespace: the device, the
/// server's address on it, and routes back to the client's subnet of that link.
pub(crate) fn server_script(n: usize) -> String {
    let dev = device(n);
    let net4 = Ipv4Addr::new(198, 51, 100, (64 * n) as u8);
    let net6 = Ipv6Addr::new(0x2001, 0xdb8, 0xc, n as u16, 0, 0, 0, 0);
    format!(
        "link set {dev} up\n\
         address add {}/32 dev {dev}\n\
         address add {}/128 dev {dev} nodad\n\
         route add {net4}/26 dev {dev}\n\
         route add {net6}/64 dev {dev}\n",
        server_addr_v4(n),
        server_addr_v6(n),
    )
}

/// One change of a link's state at a time into a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkEvent {
    /// When, from the start of the schedule.
    pub at: Duration,
    /// Which link (0 is the lab's first).
    pub link: usize,
    /// `false` cuts the link (every packet dropped silently), `true` restores it.
    pub up: bool,
}

impl LinkEvent {
    /// Link `link` is cut at `at`.
    pub fn down(at: Duration, link: usize) -> LinkEvent {
        LinkEvent {
            at,
            link,
            up: false,
        }
    }

    /// Link `link` is restored at `at`.
    pub fn up(at: Duration, link: usize) -> LinkEvent {
        LinkEvent { at, link, up: true }
    }
}

/// Link changes applied on a thread of their own at their times (see
/// [`Lab::schedule_links`](crate::Lab::schedule_links)). Dropping it stops the events
/// not yet due and joins the thread; [`LinkSchedule::applied`] says when each one
/// happened.
#[derive(Debug)]
pub struct LinkSchedule {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<(LinkEvent, Instant)>>>,
}

impl LinkSchedule {
    /// Starts applying `events` (any order; sorted by time) to `switches` (indexed by
    /// link). Costs one thread that sleeps until each event is due.
    pub(crate) fn start(switches: Vec<LinkSwitch>, mut events: Vec<LinkEvent>) -> LinkSchedule {
        events.sort_by_key(|e| e.at);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let start = Instant::now();
        let thread = std::thread::Builder::new()
            .name("netlab-links".into())
            .spawn(move || {
                let mut done = Vec::new();
                for e in events {
                    while start.elapsed() < e.at {
                        if flag.load(Ordering::Relaxed) {
                            return done;
                        }
                        let left = e.at.saturating_sub(start.elapsed());
                        std::thread::sleep(left.min(Duration::from_millis(5)));
                    }
                    if let Some(s) = switches.get(e.link) {
                        s.set_up(e.up);
                        done.push((e, Instant::now()));
                    }
                }
                done
            })
            .expect("spawn the link schedule thread");
        LinkSchedule {
            stop,
            thread: Some(thread),
        }
    }

    /// Waits for every event to be applied (or the schedule to be stopped) and returns
    /// each applied event with the instant it was applied.
    pub fn applied(mut self) -> Vec<(LinkEvent, Instant)> {
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for LinkSchedule {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_link_has_its_own_subnet_device_and_table() {
        assert_eq!(client_v4(0), Ipv4Addr::new(198, 51, 100, 2));
        assert_eq!(client_v4(1), Ipv4Addr::new(198, 51, 100, 66));
        assert_eq!(client_v6(2).to_string(), "2001:db8:c:2::2");
        let c1 = client_script(1);
        assert!(
            c1.contains("rule add from 198.51.100.66 table 101 prio 101"),
            "{c1}"
        );
        assert!(
            c1.contains("route add 0.0.0.0/0 dev nltun1 src 198.51.100.66 table 101"),
            "{c1}"
        );
        assert!(
            !client_script(0).contains("table"),
            "link 0 keeps the main table"
        );
        let s1 = server_script(1);
        assert!(s1.contains("route add 198.51.100.64/26 dev nltun1"), "{s1}");
        assert!(s1.contains("address add 192.0.2.201/32 dev nltun1"), "{s1}");
        assert_eq!(
            client_rule_v6(1).join(" "),
            "-6 rule add from 2001:db8:c:1::2 table 101 prio 101"
        );
    }
}
