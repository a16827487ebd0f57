//! Reading local interfaces and following their changes. The change test runs in a
//! network namespace of its own (root only), so the host's interfaces are never touched.

use std::net::{IpAddr, Ipv6Addr};
use std::process::Command;
use std::time::Duration;

use taps::interfaces::{read_interfaces, InterfaceWatcher};
use taps_core::{Interface, InterfaceAddress, InterfaceKind};

fn find<'a>(list: &'a [Interface], name: &str) -> Option<&'a Interface> {
    list.iter().find(|i| i.name == name)
}

fn has(iface: &Interface, addr: &str, prefix_len: u8) -> bool {
    iface.addresses.contains(&InterfaceAddress {
        addr: addr.parse().unwrap(),
        prefix_len,
    })
}

#[test]
fn reading_finds_loopback_with_both_families() {
    let list = read_interfaces().unwrap();
    let lo = list
        .iter()
        .find(|i| i.kind == InterfaceKind::Loopback)
        .unwrap_or_else(|| panic!("no loopback in {list:?}"));
    assert!(lo.up, "{lo:?}");
    assert!(lo.index > 0);
    assert!(has(lo, "127.0.0.1", 8), "{lo:?}");
    assert!(has(lo, "::1", 128), "{lo:?}");
    let v6: Vec<IpAddr> = lo.addresses_of(taps_core::Family::V6).collect();
    assert!(v6.contains(&IpAddr::from(Ipv6Addr::LOCALHOST)));
    // Indexes are unique and the list is sorted by them.
    assert!(list.windows(2).all(|w| w[0].index < w[1].index), "{list:?}");
    // Each is the kernel's (taken from the link's AF_PACKET entry, not asked per name).
    for i in &list {
        let sysfs = std::fs::read_to_string(format!("/sys/class/net/{}/ifindex", i.name));
        if let Ok(index) = sysfs {
            assert_eq!(index.trim().parse::<u32>().unwrap(), i.index, "{i:?}");
        }
    }
    // No other interface claims to be loopback.
    assert_eq!(
        list.iter()
            .filter(|i| i.kind == InterfaceKind::Loopback)
            .count(),
        1
    );
}

#[tokio::test]
async fn watcher_starts_with_the_current_list() {
    let watcher = InterfaceWatcher::spawn().unwrap();
    let read = read_interfaces().unwrap();
    assert_eq!(*watcher.current(), read);
    let rx = watcher.subscribe();
    assert_eq!(**rx.borrow(), read);
    assert!(!rx.has_changed().unwrap());
    // The task ends with the watcher: subscribers see the channel close.
    let mut rx = watcher.subscribe();
    drop(watcher);
    let closed = tokio::time::timeout(Duration::from_secs(5), rx.changed()).await;
    assert!(matches!(closed, Ok(Err(_))), "{closed:?}");
}

#[test]
fn watcher_needs_a_runtime() {
    assert!(InterfaceWatcher::spawn().is_err());
}

/// Runs `ip ARGS` from the calling thread (hence in its network namespace).
fn ip_cmd(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {args:?}: {status}");
}

#[test]
fn watcher_follows_changes_in_a_private_namespace() {
    // Network namespaces are per thread: this thread moves to a new one, the rest of
    // the test process (and the host) stays where it is.
    let outcome = std::thread::spawn(|| {
        // SAFETY: unshare(2) only affects this thread.
        #[allow(unsafe_code)]
        let unshared = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        if unshared != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if Command::new("ip").arg("-V").output().is_err() {
            return Err(std::io::Error::other("no ip command"));
        }
        // A current-thread runtime: the watcher's socket, its task and every read stay
        // on this thread, in the new namespace.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let watcher = InterfaceWatcher::spawn().unwrap();
            let mut rx = watcher.subscribe();
            let start = watcher.current();
            let lo = find(&start, "lo").expect("lo in a new namespace");
            assert!(!lo.up, "lo starts down: {lo:?}");
            assert!(lo.addresses.is_empty(), "{lo:?}");
            assert_eq!(start.len(), 1, "only lo: {start:?}");

            async fn wait_for(
                rx: &mut tokio::sync::watch::Receiver<std::sync::Arc<Vec<Interface>>>,
                what: &str,
                ok: impl Fn(&Interface) -> bool,
            ) {
                let wait = async {
                    loop {
                        if find(&rx.borrow_and_update(), "lo").is_some_and(&ok) {
                            return;
                        }
                        rx.changed().await.expect("watcher alive");
                    }
                };
                if tokio::time::timeout(Duration::from_secs(5), wait)
                    .await
                    .is_err()
                {
                    panic!("not seen within 5 s: {what}; last: {:?}", rx.borrow());
                }
            }

            ip_cmd(&["link", "set", "lo", "up"]);
            wait_for(&mut rx, "lo up with 127.0.0.1 and ::1", |lo| {
                lo.up && has(lo, "127.0.0.1", 8) && has(lo, "::1", 128)
            })
            .await;

            ip_cmd(&["addr", "add", "192.0.2.55/24", "dev", "lo"]);
            wait_for(&mut rx, "192.0.2.55/24 added", |lo| {
                has(lo, "192.0.2.55", 24)
            })
            .await;

            ip_cmd(&["addr", "add", "2001:db8::55/64", "dev", "lo"]);
            wait_for(&mut rx, "2001:db8::55/64 added", |lo| {
                has(lo, "2001:db8::55", 64)
            })
            .await;

            ip_cmd(&["addr", "del", "192.0.2.55/24", "dev", "lo"]);
            wait_for(&mut rx, "192.0.2.55 removed", |lo| {
                !has(lo, "192.0.2.55", 24)
            })
            .await;

            ip_cmd(&["link", "set", "lo", "down"]);
            wait_for(&mut rx, "lo down", |lo| !lo.up).await;

            assert_eq!(*watcher.current(), read_interfaces().unwrap());
        });
        Ok(())
    })
    .join()
    .expect("the namespace thread does not panic");
    if let Err(e) = outcome {
        taps_testkit::skip(
            "watcher_follows_changes_in_a_private_namespace",
            &format!("cannot make a network namespace here ({e})"),
        );
    }
}
