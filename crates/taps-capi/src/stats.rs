//! Exports that report on flows: NEAT's statistics JSON and the flows' addresses.

use std::ffi::{c_char, c_int};
use std::net::SocketAddr;

use crate::boundary::{self, export};
use crate::core::{Flow, State};
use crate::task::Cmd;
use crate::types::*;
use crate::{guard, task, NeatCtx, NeatFlow};

fn stack_name(stack: i32) -> &'static str {
    match stack {
        NEAT_STACK_TCP => "TCP",
        NEAT_STACK_MPTCP => "MPTCP",
        NEAT_STACK_SCTP => "SCTP",
        NEAT_STACK_UDP => "UDP",
        NEAT_STACK_UDPLITE => "UDP-Lite",
        _ => "",
    }
}

/// NEAT's statistics JSON (a `malloc`ed string the caller frees): every flow, newest
/// first, with taps' counters, on TCP the round-trip time from TCP_INFO, and on SCTP
/// each path of the association (`paths`, a taps addition).
///
/// # Safety
/// `nc` is NULL or live; `neat_stats` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn neat_get_stats(
    nc: *mut NeatCtx,
    neat_stats: *mut *mut c_char,
) -> NeatError {
    export(|| {
        let ctx = boundary::context(nc)?;
        let neat_stats = boundary::out(neat_stats)?;
        use serde_json::{json, Map, Value};
        let mut root = Map::new();
        let (mut sent, mut recvd, mut n) = (0u64, 0u64, 0usize);
        let mut ids: Vec<u64> = ctx.flows.keys().copied().collect();
        ids.sort_unstable_by(|a, b| b.cmp(a));
        for id in ids {
            let Some(&f) = ctx.flows.get(&id) else {
                continue;
            };
            // SAFETY: flows in the context's map are live (closed ones leave it), each
            // its own allocation; the reference lives for this iteration, no callback
            // runs.
            let fr: &Flow = unsafe { &*f };
            if fr.state == State::Listening || fr.state == State::New {
                continue;
            }
            n += 1;
            let (stats, paths) = match fr.state {
                State::Open => task::ask(&fr.shared, Cmd::Stats).unzip(),
                _ => (None, None),
            };
            let (bs, br) = stats
                .as_ref()
                .map_or((fr.io.bytes_sent, fr.io.bytes_received), |s| {
                    (s.bytes_sent, s.bytes_received)
                });
            sent += bs;
            recvd += br;
            let stack = fr.peer.info.map_or(0, |i| i.stack);
            let props: Map<String, Value> = crate::props::merged(&fr.props).into_iter().collect();
            let mut o = json!({
                "flow number": n,
                "remote_host": fr.peer.host,
                "socket type": if fr.peer.info.is_some_and(|i| i.message) { libc::SOCK_DGRAM } else { libc::SOCK_STREAM },
                "sock_protocol": match stack { NEAT_STACK_TCP | NEAT_STACK_MPTCP => libc::IPPROTO_TCP, NEAT_STACK_UDP => libc::IPPROTO_UDP, NEAT_STACK_UDPLITE => libc::IPPROTO_UDPLITE, NEAT_STACK_SCTP => libc::IPPROTO_SCTP, _ => 0 },
                "transport": stack_name(stack),
                "port": fr.peer.port,
                "ecn": 0,
                "qos": 0,
                "write_size": task::IO_SIZE,
                "read_size": task::IO_SIZE,
                "bytes sent": bs,
                "bytes received": br,
                "priority": 0.5,
                "flow_properties": props,
            });
            if matches!(stack, NEAT_STACK_TCP | NEAT_STACK_MPTCP) {
                let us = |d: Option<std::time::Duration>| d.map(|d| d.as_micros() as u64);
                o["tcpstats"] = json!({
                    "retransmits": null, "pmtu": null, "rcv_ssthresh": null,
                    "rtt": us(stats.as_ref().and_then(|s| s.rtt)),
                    "rttvar": us(stats.as_ref().and_then(|s| s.rtt_var)),
                    "ssthresh": null, "snd_cwnd": null, "advmss": null,
                    "reordering": null, "total retrans": null,
                });
            }
            if let Some(paths) = paths.filter(|_| stack == NEAT_STACK_SCTP) {
                o["paths"] = paths.iter().map(path_json).collect();
            }
            root.insert(format!("flow-{n}"), o);
        }
        root.insert("Number of flows".into(), json!(n));
        root.insert("Total bytes sent".into(), json!(sent));
        root.insert("Total bytes received".into(), json!(recvd));
        let mut out = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
        let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
        serde::Serialize::serialize(&Value::Object(root), &mut ser)
            .map_err(|_| NEAT_ERROR_INTERNAL)?;
        *neat_stats = c_string(&out)?;
        Ok(())
    })
}

/// One path of an SCTP flow in the statistics: addresses, state, primary, usrsctp's
/// figures (times in ms) and, on a multihomed association, the bytes each way.
fn path_json(p: &taps::Path) -> serde_json::Value {
    let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_millis() as u64);
    serde_json::json!({
        "local": p.local.to_string(),
        "remote": p.remote.to_string(),
        "state": p.state.as_str(),
        "primary": p.primary,
        "srtt": ms(p.srtt),
        "rto": ms(p.rto),
        "cwnd": p.cwnd,
        "mtu": p.mtu,
        "bytes_sent": p.bytes_sent,
        "bytes_received": p.bytes_received,
    })
}

/// A `malloc`ed, NUL-terminated copy of `bytes` (the caller frees it with `free`).
fn c_string(bytes: &[u8]) -> Result<*mut c_char, NeatError> {
    // SAFETY: a fresh allocation of len + 1 bytes, filled within its bounds.
    unsafe {
        let p = libc::malloc(bytes.len() + 1) as *mut u8;
        if p.is_null() {
            return Err(NEAT_ERROR_OUT_OF_MEMORY);
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
        *p.add(bytes.len()) = 0;
        Ok(p.cast())
    }
}

/// Writes `flow`'s local (`local` != 0) or remote address into a `malloc`ed array and
/// returns how many (1), or -1. Free with neat_freelpaddrs.
///
/// # Safety
/// Pointers are NULL or live; `addrs` is writable.
#[no_mangle]
pub unsafe extern "C" fn neat_getlpaddrs(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    addrs: *mut *mut libc::sockaddr,
    local: c_int,
) -> c_int {
    guard(-1, || {
        let Ok((_ctx, f)) = boundary::flow(nc, flow) else {
            return -1;
        };
        let Ok(addrs) = boundary::out(addrs) else {
            return -1;
        };
        let Some(info) = f.peer.info else { return -1 };
        let a = if local != 0 { info.local } else { info.remote };
        let p = match a {
            SocketAddr::V4(v4) => {
                // SAFETY: all-zero bytes are a valid sockaddr_in.
                let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
                sa.sin_family = libc::AF_INET as libc::sa_family_t;
                sa.sin_port = v4.port().to_be();
                sa.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
                c_copy(sa).map(|p| p.cast::<libc::sockaddr>())
            }
            SocketAddr::V6(v6) => {
                // SAFETY: all-zero bytes are a valid sockaddr_in6.
                let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
                sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                sa.sin6_port = v6.port().to_be();
                sa.sin6_addr.s6_addr = v6.ip().octets();
                sa.sin6_scope_id = v6.scope_id();
                c_copy(sa).map(|p| p.cast::<libc::sockaddr>())
            }
        };
        match p {
            Some(p) => {
                *addrs = p;
                1
            }
            None => -1,
        }
    })
}

/// A `malloc`ed copy of `value` (the caller frees it with `free`); `None` without memory.
fn c_copy<T: Copy>(value: T) -> Option<*mut T> {
    // SAFETY: a fresh allocation of T's size (malloc aligns for any standard type),
    // written once within its bounds.
    unsafe {
        let p = libc::malloc(std::mem::size_of::<T>()).cast::<T>();
        if p.is_null() {
            return None;
        }
        p.write(value);
        Some(p)
    }
}

/// Frees what neat_getlpaddrs returned.
///
/// # Safety
/// `addrs` is NULL or came from neat_getlpaddrs.
#[no_mangle]
pub unsafe extern "C" fn neat_freelpaddrs(addrs: *mut libc::sockaddr) {
    // SAFETY: a pointer from calloc (or NULL).
    unsafe { libc::free(addrs.cast()) };
}
