//! Socket helpers for leak and dead-path tests on loopback.

use std::net::{Ipv6Addr, SocketAddr, TcpStream};

use socket2::{Domain, Socket, Type};

/// How many sockets this process holds (entries of `/proc/self/fd` that are sockets).
/// Only meaningful in a test binary whose tests do not run concurrently with others
/// that open sockets. Cost: one readlink per open descriptor.
pub fn open_sockets() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|p| p.to_string_lossy().starts_with("socket:"))
                .count()
        })
        .unwrap_or(0)
}

/// A TCP listener on `[::1]` whose accept queue is full, so further SYNs get no answer
/// at all: a silently dead address on loopback, without root or packet filters.
/// Linux queues `backlog + 1` connections, so one connection fills a backlog of 0.
/// Dropping it closes the listener and the filler.
pub struct Blackhole {
    listener: Socket,
    _filler: TcpStream,
    addr: SocketAddr,
}

impl Blackhole {
    /// Binds an ephemeral port on `[::1]` and fills its queue.
    pub fn v6() -> std::io::Result<Blackhole> {
        let listener = Socket::new(Domain::IPV6, Type::STREAM, None)?;
        listener.set_only_v6(true)?;
        listener.bind(&SocketAddr::from((Ipv6Addr::LOCALHOST, 0)).into())?;
        listener.listen(0)?;
        let addr = listener
            .local_addr()?
            .as_socket()
            .ok_or_else(|| std::io::Error::other("no socket address"))?;
        let filler = TcpStream::connect(addr)?;
        Ok(Blackhole {
            listener,
            _filler: filler,
            addr,
        })
    }

    /// The dead address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The listening socket (to check that it stays full).
    pub fn listener(&self) -> &Socket {
        &self.listener
    }
}

/// A port of 127.0.0.1 that is free for both TCP and UDP right now (for a listener that
/// serves TLS/TCP and QUIC or DTLS on one port). Cost: a few binds.
pub fn free_port() -> u16 {
    for _ in 0..50 {
        let Ok(tcp) = std::net::TcpListener::bind("127.0.0.1:0") else {
            continue;
        };
        let Ok(port) = tcp.local_addr().map(|a| a.port()) else {
            continue;
        };
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no port of 127.0.0.1 free for both TCP and UDP");
}
