//! Plain-socket probes run inside a namespace: TCP connect time, a timed bulk send, and
//! a raw DNS query. They check the lab itself, independently of taps.

#![forbid(unsafe_code)]

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use crate::netns::Netns;
use crate::sink::{pattern_chunk, PATTERN_CHUNK};

/// Connects to `addr` from inside `ns` and returns how long the handshake took (the
/// connection is then closed). A blackholed address gives `TimedOut` after `limit`.
pub fn tcp_connect_time(ns: &Netns, addr: SocketAddr, limit: Duration) -> io::Result<Duration> {
    ns.run(|| {
        let start = Instant::now();
        let s = TcpStream::connect_timeout(&addr, limit)?;
        let took = start.elapsed();
        drop(s);
        Ok(took)
    })?
}

/// Connects to `addr` from inside `ns`, sends `bytes` bytes of the sink's pattern, closes
/// its side and waits for the server to close. Returns the time from the connection's
/// establishment to the server's close (all bytes received), at most `limit`.
pub fn tcp_send_time(
    ns: &Netns,
    addr: SocketAddr,
    bytes: u64,
    limit: Duration,
) -> io::Result<Duration> {
    ns.run(|| {
        let mut s = TcpStream::connect_timeout(&addr, limit)?;
        s.set_write_timeout(Some(limit))?;
        s.set_read_timeout(Some(limit))?;
        let start = Instant::now();
        let chunk = pattern_chunk(PATTERN_CHUNK);
        let mut left = bytes;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            s.write_all(&chunk[..n])?;
            left -= n as u64;
        }
        s.shutdown(std::net::Shutdown::Write)?;
        let mut sink = [0u8; 1024];
        while s.read(&mut sink)? > 0 {}
        Ok(start.elapsed())
    })?
}

/// Sends one DNS query (`qtype`: 1 for A, 28 for AAAA) for `name` to `server` over UDP
/// from inside `ns`; returns the time to the answer and the number of answer records.
pub fn dns_query(
    ns: &Netns,
    server: SocketAddr,
    name: &str,
    qtype: u16,
    limit: Duration,
) -> io::Result<(Duration, u16)> {
    let query = dns_packet(0x4e4c, name, qtype)?;
    ns.run(|| {
        let bind: SocketAddr = if server.is_ipv4() {
            "0.0.0.0:0".parse().expect("literal")
        } else {
            "[::]:0".parse().expect("literal")
        };
        let s = UdpSocket::bind(bind)?;
        s.set_read_timeout(Some(limit))?;
        let start = Instant::now();
        s.send_to(&query, server)?;
        let mut buf = [0u8; 1500];
        let (n, _) = s.recv_from(&mut buf)?;
        let took = start.elapsed();
        if n < 12 || buf[..2] != query[..2] {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "bad DNS reply"));
        }
        Ok((took, u16::from_be_bytes([buf[6], buf[7]])))
    })?
}

fn dns_packet(id: u16, name: &str, qtype: u16) -> io::Result<Vec<u8>> {
    let mut p = Vec::with_capacity(64);
    p.extend_from_slice(&id.to_be_bytes());
    p.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "bad DNS name"));
        }
        p.push(label.len() as u8);
        p.extend_from_slice(label.as_bytes());
    }
    p.push(0);
    p.extend_from_slice(&qtype.to_be_bytes());
    p.extend_from_slice(&1u16.to_be_bytes());
    Ok(p)
}
