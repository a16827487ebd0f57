//! The socket layer against real sockets on loopback (127.0.0.1 and ::1 only).
//!
//! Every test takes one lock and builds its own runtime inside it, so that the
//! file-descriptor count checked by the cancellation test sees no other test's sockets.

use std::future::{poll_fn, Future};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::pin;
use std::sync::Mutex;
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::error::{NotSupported, SocketOption};
use crate::transport::{
    self, bind_udp, connect, is_mptcp, listen_tcp, listen_tcp_backlog, tcp_info, AttemptError,
    DatagramKind, Established, SocketOptions, TcpFlavor,
};
use socket2::SockRef;
use taps_core::candidates::{Candidate, LocalBinding};
use taps_core::policy::History;
use taps_core::properties::{CapacityProfile, Name, Protocol, TransportProperties};
use taps_core::InterfaceKind;
use taps_core::{Security, Stack};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

const V4: &str = "127.0.0.1:0";
const V6: &str = "[::1]:0";
const IPPROTO_UDPLITE: i32 = 136;
const UDPLITE_SEND_CSCOV: i32 = 10;
const UDPLITE_RECV_CSCOV: i32 = 11;

static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `f` on a fresh current-thread runtime while holding the test lock.
fn run<F: Future>(f: F) -> F::Output {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let out = rt.block_on(f);
    drop(rt);
    out
}

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("socket address")
}

fn cand(protocol: Protocol, remote: SocketAddr) -> Candidate {
    Candidate {
        stack: Stack::plain(protocol),
        remote,
        local: None,
        score: 0.0,
        history: History::Unknown,
        reasons: Vec::new().into(),
        unavailable: None,
    }
}

/// Connects `protocol` to `listener` and accepts the other side (the kernel completes
/// the handshake before `accept`).
async fn pair(
    protocol: Protocol,
    listener: &TcpListener,
    opts: &SocketOptions,
) -> (TcpStream, TcpFlavor, TcpStream) {
    let c = cand(protocol, listener.local_addr().unwrap());
    let est = connect(&c, opts).await;
    let Established::Tcp(client, flavor) = est.expect("connect") else {
        panic!("expected a stream");
    };
    let (server, _) = listener.accept().await.expect("accept");
    (client, flavor, server)
}

fn get_int(fd: &impl std::os::fd::AsRawFd, level: i32, name: i32) -> i32 {
    super::sys::get_int(fd, level, name).expect("getsockopt")
}

/// IPv4 TCP sockets of this host connecting (SYN_SENT) to local port `port`, from
/// /proc/net/tcp: what a pending attempt to that port holds open. Only this test's
/// sockets match (the port is its own), so tests running beside it in the process do
/// not change the count, as they did a count of the process's file descriptors.
fn connecting_to(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let remote = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let mut cols = line.split_whitespace().skip(2);
            let (Some(rem), Some(state)) = (cols.next(), cols.next()) else {
                return false;
            };
            rem.ends_with(&remote) && state == "02"
        })
        .count()
}

/// The socket behind file descriptor `fd` (`socket:[inode]`), while it is open.
fn socket_of(fd: i32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()
}

#[test]
fn tcp_connects_over_both_families() {
    run(async {
        let opts = SocketOptions::default();
        for a in [V4, V6] {
            let l = listen_tcp(addr(a), false, &opts).unwrap();
            let (mut client, flavor, mut server) = pair(Protocol::Tcp, &l, &opts).await;
            assert_eq!(flavor, TcpFlavor { mptcp_active: None });
            assert_eq!(client.peer_addr().unwrap(), l.local_addr().unwrap());
            assert_eq!(client.local_addr().unwrap(), server.peer_addr().unwrap());
            assert!(client.nodelay().unwrap(), "TCP_NODELAY on by default");
            client.write_all(b"ping").await.unwrap();
            let mut buf = [0u8; 4];
            server.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"ping");
            let info = tcp_info(&client).expect("TCP_INFO");
            assert!(info.snd_mss > 0 && info.pmtu > 0, "{info:?}");
            assert!(info.rtt > Duration::ZERO, "{info:?}");
            assert_eq!(is_mptcp(&client), None);
            assert_eq!(is_mptcp(&server), None);
        }
    });
}

#[test]
fn established_reports_addresses() {
    run(async {
        let opts = SocketOptions::default();
        let l = listen_tcp(addr(V6), false, &opts).unwrap();
        let c = cand(Protocol::Tcp, l.local_addr().unwrap());
        let est = connect(&c, &opts).await.unwrap();
        let (_server, from) = l.accept().await.unwrap();
        assert_eq!(est.peer_addr().unwrap(), l.local_addr().unwrap());
        assert_eq!(est.local_addr().unwrap(), from);
    });
}

#[test]
fn binds_the_candidate_local_address() {
    run(async {
        let opts = SocketOptions::default();
        let l = listen_tcp(addr(V4), false, &opts).unwrap();
        let local = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
        let mut c = cand(Protocol::Tcp, l.local_addr().unwrap());
        c.local = Some(LocalBinding {
            interface: "lo".into(),
            kind: InterfaceKind::Loopback,
            addr: local,
        });
        let est = connect(&c, &opts).await.unwrap();
        let (_server, from) = l.accept().await.unwrap();
        assert_eq!(est.local_addr().unwrap().ip(), local);
        assert_eq!(from.ip(), local);

        let u = UdpSocket::bind(V4).await.unwrap();
        let mut c = cand(Protocol::Udp, u.local_addr().unwrap());
        c.local = Some(LocalBinding {
            interface: "lo".into(),
            kind: InterfaceKind::Loopback,
            addr: local,
        });
        assert_eq!(
            connect(&c, &opts).await.unwrap().local_addr().unwrap().ip(),
            local
        );
    });
}

#[test]
fn refused_port_fails_quickly() {
    run(async {
        for a in [V4, V6] {
            // A port that was free a moment ago: nothing listens there now.
            let port = std::net::TcpListener::bind(a)
                .unwrap()
                .local_addr()
                .unwrap();
            let start = Instant::now();
            let err = connect(&cand(Protocol::Tcp, port), &SocketOptions::default())
                .await
                .unwrap_err();
            assert!(matches!(err, AttemptError::Refused), "{err:?}");
            assert_eq!(err.to_string(), "connection refused");
            assert!(
                start.elapsed() < Duration::from_secs(1),
                "{:?}",
                start.elapsed()
            );
            let err = connect(&cand(Protocol::Mptcp, port), &SocketOptions::default())
                .await
                .unwrap_err();
            assert!(matches!(err, AttemptError::Refused), "MPTCP: {err:?}");
        }
    });
}

#[test]
fn mptcp_client_to_mptcp_listener_is_active() {
    run(async {
        let opts = SocketOptions::default();
        for a in [V4, V6] {
            let l = listen_tcp(addr(a), true, &opts).unwrap();
            let (mut client, flavor, mut server) = pair(Protocol::Mptcp, &l, &opts).await;
            assert_eq!(flavor.mptcp_active, Some(true), "{a}");
            assert_eq!(is_mptcp(&client), Some(true));
            assert_eq!(is_mptcp(&server), Some(true));
            client.write_all(b"multipath").await.unwrap();
            let mut buf = [0u8; 9];
            server.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"multipath");
            assert!(tcp_info(&client).is_some(), "TCP_INFO on an MPTCP socket");
            // The subflows (one here): the connection's own addresses, with figures.
            let subflows = super::mptcp_subflows(&client).expect("MPTCP subflows listed");
            let (local, remote, info) = subflows.first().expect("one subflow");
            assert_eq!(
                (*local, *remote),
                (client.local_addr().unwrap(), client.peer_addr().unwrap()),
                "{a}"
            );
            assert!(info.snd_mss > 0 && info.snd_cwnd > 0, "{a}: {info:?}");
        }
    });
}

#[test]
fn mptcp_client_to_plain_listener_falls_back() {
    run(async {
        let opts = SocketOptions::default();
        for a in [V4, V6] {
            let l = listen_tcp(addr(a), false, &opts).unwrap();
            let (mut client, flavor, mut server) = pair(Protocol::Mptcp, &l, &opts).await;
            assert_eq!(flavor.mptcp_active, Some(false), "{a}");
            assert_eq!(is_mptcp(&client), Some(false));
            assert_eq!(is_mptcp(&server), None);
            client.write_all(b"tcp").await.unwrap();
            let mut buf = [0u8; 3];
            server.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"tcp");
        }
    });
}

#[test]
fn mptcp_listener_accepts_plain_tcp_clients() {
    run(async {
        let opts = SocketOptions::default();
        for a in [V4, V6] {
            let l = listen_tcp(addr(a), true, &opts).unwrap();
            let (_client, flavor, server) = pair(Protocol::Tcp, &l, &opts).await;
            assert_eq!(flavor.mptcp_active, None);
            // The kernel hands out a plain TCP socket for a plain TCP client.
            assert_eq!(is_mptcp(&server), None, "{a}");
        }
    });
}

#[test]
fn udplite_round_trip_with_coverage() {
    run(async {
        let opts = SocketOptions {
            udplite_coverage: Some(8),
            ..SocketOptions::default()
        };
        for a in [V4, V6] {
            let server = bind_udp(addr(a), true, &opts).unwrap();
            let est = connect(
                &cand(Protocol::UdpLite, server.local_addr().unwrap()),
                &opts,
            )
            .await
            .unwrap();
            let Established::Udp(client, DatagramKind::UdpLite) = est else {
                panic!("expected a UDP-Lite socket, got {est:?}");
            };
            for s in [&client, &server] {
                assert_eq!(get_int(s, IPPROTO_UDPLITE, UDPLITE_SEND_CSCOV), 8);
                assert_eq!(get_int(s, IPPROTO_UDPLITE, UDPLITE_RECV_CSCOV), 8);
                assert_eq!(
                    get_int(s, libc::SOL_SOCKET, libc::SO_PROTOCOL),
                    IPPROTO_UDPLITE
                );
            }
            let msg = b"partially covered datagram";
            client.send(msg).await.unwrap();
            let mut buf = [0u8; 64];
            let (n, from) = server.recv_from(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], msg);
            assert_eq!(from, client.local_addr().unwrap());
            server.send_to(b"reply", from).await.unwrap();
            let n = client.recv(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"reply");
        }
    });
}

#[test]
fn udp_connects_at_once_and_round_trips() {
    run(async {
        let opts = SocketOptions::default();
        for a in [V4, V6] {
            let server = bind_udp(addr(a), false, &opts).unwrap();
            assert_eq!(
                get_int(&server, libc::SOL_SOCKET, libc::SO_PROTOCOL),
                libc::IPPROTO_UDP
            );
            let est = connect(&cand(Protocol::Udp, server.local_addr().unwrap()), &opts)
                .await
                .unwrap();
            assert_eq!(est.peer_addr().unwrap(), server.local_addr().unwrap());
            let Established::Udp(client, DatagramKind::Udp) = est else {
                panic!("expected a UDP socket, got {est:?}");
            };
            client.send(b"datagram").await.unwrap();
            let mut buf = [0u8; 16];
            let (n, _) = server.recv_from(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"datagram");
        }
    });
}

#[test]
fn dscp_is_marked_per_family() {
    run(async {
        let opts = SocketOptions {
            dscp: Some(46),
            ..SocketOptions::default()
        };
        let tos = 46 << 2;
        for (a, v6) in [(V4, false), (V6, true)] {
            let read = |s: SockRef<'_>| {
                if v6 {
                    s.tclass_v6().unwrap()
                } else {
                    s.tos_v4().unwrap()
                }
            };
            for proto in [Protocol::Tcp, Protocol::Mptcp] {
                let l = listen_tcp(addr(a), proto == Protocol::Mptcp, &opts).unwrap();
                let (client, flavor, server) = pair(proto, &l, &opts).await;
                if proto == Protocol::Mptcp && v6 {
                    // This kernel's MPTCP rejects IPV6_TCLASS: marking is skipped (DSCP is
                    // advisory) and the attempt still succeeds.
                    assert_eq!(flavor.mptcp_active, Some(true));
                    continue;
                }
                assert_eq!(read(SockRef::from(&l)), tos, "{proto} listener {a}");
                assert_eq!(read(SockRef::from(&client)), tos, "{proto} client {a}");
                assert_eq!(read(SockRef::from(&server)), tos, "{proto} accepted {a}");
            }
            for lite in [false, true] {
                let server = bind_udp(addr(a), lite, &opts).unwrap();
                assert_eq!(read(SockRef::from(&server)), tos);
                let p = if lite {
                    Protocol::UdpLite
                } else {
                    Protocol::Udp
                };
                let est = connect(&cand(p, server.local_addr().unwrap()), &opts)
                    .await
                    .unwrap();
                let Established::Udp(client, _) = est else {
                    unreachable!()
                };
                assert_eq!(read(SockRef::from(&client)), tos, "{p} client {a}");
            }
        }
    });
}

#[test]
fn congestion_control_is_applied_by_name() {
    run(async {
        let opts = SocketOptions {
            congestion_control: Some("reno".into()),
            ..SocketOptions::default()
        };
        for proto in [Protocol::Tcp, Protocol::Mptcp] {
            let l = listen_tcp(
                addr(V4),
                proto == Protocol::Mptcp,
                &SocketOptions::default(),
            )
            .unwrap();
            let (client, _, _server) = pair(proto, &l, &opts).await;
            let name = SockRef::from(&client).tcp_congestion().unwrap();
            let name = String::from_utf8_lossy(&name);
            assert_eq!(name.trim_end_matches('\0'), "reno", "{proto}");
        }
    });
}

#[test]
fn unknown_congestion_control_is_named_in_the_error() {
    run(async {
        let l = listen_tcp(addr(V4), false, &SocketOptions::default()).unwrap();
        let opts = SocketOptions {
            congestion_control: Some("nosuchcc".into()),
            ..SocketOptions::default()
        };
        let err = connect(&cand(Protocol::Tcp, l.local_addr().unwrap()), &opts)
            .await
            .unwrap_err();
        assert!(matches!(err, AttemptError::Unsupported(_)), "{err:?}");
        assert!(err.to_string().contains("'nosuchcc'"), "{err}");
        let err = listen_tcp(addr(V4), false, &opts).unwrap_err();
        assert!(err.to_string().contains("'nosuchcc'"), "{err}");
        let opts = SocketOptions {
            congestion_control: Some("a-name-much-too-long-for-the-kernel".into()),
            ..SocketOptions::default()
        };
        let err = connect(&cand(Protocol::Tcp, l.local_addr().unwrap()), &opts)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("a-name-much-too-long"), "{err}");
    });
}

#[test]
fn keepalive_and_user_timeout_are_applied() {
    run(async {
        let opts = SocketOptions {
            keepalive: Some(Duration::from_secs(30)),
            user_timeout: Some(Duration::from_millis(2500)),
            nodelay: false,
            ..SocketOptions::default()
        };
        let l = listen_tcp(addr(V6), false, &SocketOptions::default()).unwrap();
        let (client, _, _server) = pair(Protocol::Tcp, &l, &opts).await;
        let s = SockRef::from(&client);
        assert!(s.keepalive().unwrap());
        assert_eq!(s.tcp_keepalive_time().unwrap(), Duration::from_secs(30));
        assert_eq!(
            s.tcp_user_timeout().unwrap(),
            Some(Duration::from_millis(2500))
        );
        assert!(!s.tcp_nodelay().unwrap());

        // MPTCP takes keep-alive; this kernel's MPTCP has no TCP_USER_TIMEOUT, which fails
        // the attempt by name rather than silently dropping the option.
        let keepalive_only = SocketOptions {
            user_timeout: None,
            ..opts.clone()
        };
        let (client, flavor, _server) = pair(Protocol::Mptcp, &l, &keepalive_only).await;
        assert_eq!(flavor.mptcp_active, Some(false), "plain listener");
        let s = SockRef::from(&client);
        assert!(s.keepalive().unwrap());
        let mptcp = cand(Protocol::Mptcp, l.local_addr().unwrap());
        match connect(&mptcp, &opts).await {
            Ok(Established::Tcp(c, _)) => {
                let t = SockRef::from(&c).tcp_user_timeout().unwrap();
                assert_eq!(t, Some(Duration::from_millis(2500)), "a kernel that has it");
            }
            Ok(other) => panic!("{other:?}"),
            Err(AttemptError::Unsupported(m)) => assert_eq!(
                m,
                NotSupported::SocketOption {
                    option: SocketOption::UserTimeout,
                    protocol: Protocol::Mptcp
                }
            ),
            Err(e) => panic!("{e:?}"),
        }
        // A listener asked for MPTCP with such an option falls back to plain TCP.
        let l = listen_tcp(addr(V4), true, &opts).unwrap();
        let (_c, flavor, server) = pair(Protocol::Mptcp, &l, &keepalive_only).await;
        let mptcp_listener = is_mptcp(&server).is_some();
        assert_eq!(flavor.mptcp_active, Some(mptcp_listener));
    });
}

#[test]
fn dropping_a_connect_future_closes_its_socket() {
    use std::os::fd::AsRawFd;
    run(async {
        let l = listen_tcp(addr(V4), false, &SocketOptions::default()).unwrap();
        // A listener whose accept queue is full (backlog 0, one connection queued and
        // never accepted): the kernel drops further SYNs, so an attempt to it stays
        // pending. (To an open loopback port a connect is done inside `connect()`.)
        let full = listen_tcp_backlog(addr(V4), false, &SocketOptions::default(), 0).unwrap();
        let full_addr = full.local_addr().unwrap();
        let _queued = std::net::TcpStream::connect(full_addr).unwrap();
        let opts = SocketOptions::default();
        for proto in [Protocol::Tcp, Protocol::Mptcp] {
            let c = cand(proto, full_addr);
            {
                let mut fut = pin!(connect(&c, &opts));
                assert_eq!(
                    connecting_to(full_addr.port()),
                    0,
                    "no socket before the first poll"
                );
                // One poll starts the non-blocking connect, which is not done: the
                // attempt waits for writability.
                let first = poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).is_pending())).await;
                assert!(first, "{proto}: attempt finished on its first poll");
                assert_eq!(
                    connecting_to(full_addr.port()),
                    1,
                    "{proto}: the attempt's socket is open"
                );
            }
            assert_eq!(
                connecting_to(full_addr.port()),
                0,
                "{proto}: dropping the attempt closed its socket"
            );
        }
        // A completed attempt whose result is dropped also leaves nothing behind: its
        // descriptor no longer names its socket.
        let est = connect(&cand(Protocol::Tcp, l.local_addr().unwrap()), &opts)
            .await
            .unwrap();
        let Established::Tcp(stream, _) = &est else {
            panic!("not a TCP stream")
        };
        let fd = stream.as_raw_fd();
        let socket = socket_of(fd).expect("the stream's descriptor is open");
        drop(est);
        assert_ne!(socket_of(fd), Some(socket), "dropping the stream closed it");
    });
}

#[test]
fn secured_and_other_stacks_are_unsupported() {
    run(async {
        let remote = addr("127.0.0.1:9");
        let opts = SocketOptions::default();
        for stack in [
            Stack::new(Protocol::Tcp, Security::Tls),
            Stack::new(Protocol::Udp, Security::Dtls),
            Stack::new(Protocol::Quic, Security::QuicTls),
        ] {
            let mut c = cand(Protocol::Tcp, remote);
            c.stack = stack;
            let err = connect(&c, &opts).await.unwrap_err();
            assert!(
                matches!(err, AttemptError::Unsupported(_)),
                "{stack}: {err:?}"
            );
            assert!(err.to_string().contains(&stack.to_string()), "{err}");
        }
        let mut c = cand(Protocol::Tcp, remote);
        c.unavailable = Some(taps_core::Unavailable::NotBuilt);
        let err = connect(&c, &opts).await.unwrap_err();
        let why = taps_core::Unavailable::NotBuilt.to_string();
        assert!(err.to_string().contains(&why), "{err}");
    });
}

#[test]
fn listeners_bind_both_families_on_one_port() {
    run(async {
        let opts = SocketOptions::default();
        for mptcp in [false, true] {
            let v6 = listen_tcp(addr("[::]:0"), mptcp, &opts).unwrap();
            let port = v6.local_addr().unwrap().port();
            let v4 = listen_tcp(
                SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port),
                mptcp,
                &opts,
            )
            .unwrap();
            assert_eq!(v4.local_addr().unwrap().port(), port);
            let u6 = bind_udp(addr("[::]:0"), mptcp, &opts).unwrap();
            let port = u6.local_addr().unwrap().port();
            bind_udp(
                SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port),
                mptcp,
                &opts,
            )
            .unwrap();
        }
    });
}

#[test]
fn options_from_properties() {
    let props = TransportProperties::new().compile().unwrap();
    assert_eq!(
        SocketOptions::from_properties(&props),
        SocketOptions::default()
    );
    assert!(SocketOptions::default().nodelay);

    let props = TransportProperties::new()
        .capacity_profile(CapacityProfile::LowLatencyInteractive)
        .compile()
        .unwrap();
    assert_eq!(SocketOptions::from_properties(&props).dscp, Some(46));

    let props = TransportProperties::new()
        .capacity_profile(CapacityProfile::Scavenger)
        .merge_neat_json(r#"{"dscp_value": {"value": 10, "precedence": 1}}"#)
        .unwrap()
        .compile()
        .unwrap();
    assert_eq!(SocketOptions::from_properties(&props).dscp, Some(10));

    let props = TransportProperties::new()
        .capacity_profile(CapacityProfile::LowLatencyInteractive)
        .merge_neat_json(r#"{"dscp_value": {"value": 0, "precedence": 1}}"#)
        .unwrap()
        .compile()
        .unwrap();
    assert_eq!(
        SocketOptions::from_properties(&props).dscp,
        None,
        "0 means unmarked"
    );

    let props = TransportProperties::new()
        .require(Name::KeepAlive)
        .avoid(Name::FullChecksumSend)
        .compile()
        .unwrap();
    let opts = SocketOptions::from_properties(&props);
    assert_eq!(opts.keepalive, Some(transport::options::DEFAULT_KEEPALIVE));
    assert_eq!(
        opts.udplite_coverage,
        Some(transport::options::HEADER_ONLY_COVERAGE)
    );

    // RFC 9622 connTimeout (abort) -> TCP_USER_TIMEOUT and SCTP's retransmission bound;
    // keepAliveTimeout -> keep-alive idle time and SCTP heartbeats.
    let props = TransportProperties::from_neat_json(r#"{"connTimeout": 3, "keepAliveTimeout": 2}"#)
        .unwrap()
        .compile()
        .unwrap();
    let opts = SocketOptions::from_properties(&props);
    assert_eq!(opts.user_timeout, Some(Duration::from_secs(3)));
    assert_eq!(opts.keepalive, Some(Duration::from_secs(2)));
    let sctp = transport::sctp::sctp_options(&opts);
    assert_eq!((sctp.rto_max_ms, sctp.max_retransmits), (600, 4));
    assert_eq!(sctp.heartbeat_interval_ms, 2000);
    let none = transport::sctp::sctp_options(&SocketOptions::default());
    assert_eq!(
        (
            none.rto_max_ms,
            none.max_retransmits,
            none.heartbeat_interval_ms
        ),
        (0, 0, 0)
    );
    // 0 leaves the system's default; keep-alive avoided wins over an interval.
    let props = TransportProperties::from_neat_json(
        r#"{"connTimeout": 0, "keepAliveTimeout": 2, "keepAlive": {"value": false, "precedence": 1}}"#,
    )
    .unwrap()
    .compile()
    .unwrap();
    let opts = SocketOptions::from_properties(&props);
    assert_eq!((opts.user_timeout, opts.keepalive), (None, None));
}

#[test]
fn attempt_errors_read_well() {
    use std::io::{Error, ErrorKind};
    let classify = |errno| AttemptError::from(Error::from_raw_os_error(errno));
    assert!(matches!(
        classify(libc::ECONNREFUSED),
        AttemptError::Refused
    ));
    assert!(matches!(
        classify(libc::ENETUNREACH),
        AttemptError::Unreachable
    ));
    assert!(matches!(
        classify(libc::EHOSTUNREACH),
        AttemptError::Unreachable
    ));
    assert!(matches!(classify(libc::ETIMEDOUT), AttemptError::TimedOut));
    assert!(matches!(classify(libc::EADDRINUSE), AttemptError::Io(_)));
    assert_eq!(AttemptError::Refused.to_string(), "connection refused");
    assert_eq!(
        AttemptError::Unreachable.to_string(),
        "network or host unreachable"
    );
    assert_eq!(AttemptError::TimedOut.to_string(), "timed out");
    assert_eq!(
        AttemptError::Unsupported(NotSupported::Protocol(Protocol::Mptcp)).to_string(),
        "MPTCP not available in this kernel"
    );
    let io: Error = AttemptError::Refused.into();
    assert_eq!(io.kind(), ErrorKind::ConnectionRefused);
}

#[test]
fn connect_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let c = cand(Protocol::Tcp, addr("127.0.0.1:9"));
    let opts = SocketOptions::default();
    assert_send(&connect(&c, &opts));
}
