//! Exports that report on flows: NEAT's statistics JSON and the flows' addresses.

use std::ffi::{c_char, c_int};
use std::net::SocketAddr;

use crate::core::{Flow, State};
use crate::task::Cmd;
use crate::types::*;
use crate::{both, cx, guard, task, NeatCtx, NeatFlow};

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
/// first, with taps' counters and, on TCP, round-trip time from TCP_INFO.
///
/// # Safety
/// `nc` is NULL or live; `neat_stats` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn neat_get_stats(
    nc: *mut NeatCtx,
    neat_stats: *mut *mut c_char,
) -> NeatError {
    guard(NEAT_ERROR_INTERNAL, || {
        let Some(ctx) = cx(nc) else {
            return NEAT_ERROR_BAD_ARGUMENT;
        };
        if neat_stats.is_null() {
            return NEAT_ERROR_BAD_ARGUMENT;
        }
        use serde_json::{json, Map, Value};
        let mut root = Map::new();
        let (mut sent, mut recvd, mut n) = (0u64, 0u64, 0usize);
        // SAFETY: ctx is live; flows in its map are live; no callbacks run here.
        let flows: Vec<*mut Flow> = unsafe {
            let mut ids: Vec<u64> = (*ctx).flows.keys().copied().collect();
            ids.sort_unstable_by(|a, b| b.cmp(a));
            ids.iter()
                .filter_map(|id| (*ctx).flows.get(id).copied())
                .collect()
        };
        for f in flows {
            // SAFETY: as above.
            let fr = unsafe { &*f };
            if fr.state == State::Listening || fr.state == State::New {
                continue;
            }
            n += 1;
            let stats = if fr.state == State::Open {
                // Straight to the task (not through an inline loop's outbox), and the
                // runtime driven until it answers.
                let (tx, rx) = tokio::sync::oneshot::channel();
                fr.shared.cmds.send(Cmd::Stats(tx));
                crate::runtime::block_on(async {
                    tokio::time::timeout(std::time::Duration::from_secs(1), rx).await
                })
                .ok()
                .and_then(Result::ok)
            } else {
                None
            };
            let (bs, br) = stats
                .as_ref()
                .map_or((fr.bytes_sent, fr.bytes_received), |s| {
                    (s.bytes_sent, s.bytes_received)
                });
            sent += bs;
            recvd += br;
            let stack = fr.info.map_or(0, |i| i.stack);
            let props: Map<String, Value> = crate::props::merged(&fr.props).into_iter().collect();
            let mut o = json!({
                "flow number": n,
                "remote_host": fr.host,
                "socket type": if fr.info.is_some_and(|i| i.message) { libc::SOCK_DGRAM } else { libc::SOCK_STREAM },
                "sock_protocol": match stack { NEAT_STACK_TCP | NEAT_STACK_MPTCP => libc::IPPROTO_TCP, NEAT_STACK_UDP => libc::IPPROTO_UDP, NEAT_STACK_UDPLITE => libc::IPPROTO_UDPLITE, NEAT_STACK_SCTP => libc::IPPROTO_SCTP, _ => 0 },
                "transport": stack_name(stack),
                "port": fr.port,
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
            root.insert(format!("flow-{n}"), o);
        }
        root.insert("Number of flows".into(), json!(n));
        root.insert("Total bytes sent".into(), json!(sent));
        root.insert("Total bytes received".into(), json!(recvd));
        let mut out = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
        let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
        if serde::Serialize::serialize(&Value::Object(root), &mut ser).is_err() {
            return NEAT_ERROR_INTERNAL;
        }
        // SAFETY: a fresh malloc'ed, NUL-terminated copy the caller frees.
        unsafe {
            let p = libc::malloc(out.len() + 1) as *mut u8;
            if p.is_null() {
                return NEAT_ERROR_OUT_OF_MEMORY;
            }
            std::ptr::copy_nonoverlapping(out.as_ptr(), p, out.len());
            *p.add(out.len()) = 0;
            *neat_stats = p.cast();
        }
        NEAT_OK
    })
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
        let Ok((_ctx, f)) = both(nc, flow) else {
            return -1;
        };
        if addrs.is_null() {
            return -1;
        }
        // SAFETY: f is live; the array is a fresh allocation of the right size.
        unsafe {
            let Some(info) = (*f).info else { return -1 };
            let a = if local != 0 { info.local } else { info.remote };
            let (len, p) = match a {
                SocketAddr::V4(v4) => {
                    let p = libc::calloc(1, std::mem::size_of::<libc::sockaddr_in>())
                        as *mut libc::sockaddr_in;
                    if p.is_null() {
                        return -1;
                    }
                    (*p).sin_family = libc::AF_INET as libc::sa_family_t;
                    (*p).sin_port = v4.port().to_be();
                    (*p).sin_addr.s_addr = u32::from(*v4.ip()).to_be();
                    (1, p.cast::<libc::sockaddr>())
                }
                SocketAddr::V6(v6) => {
                    let p = libc::calloc(1, std::mem::size_of::<libc::sockaddr_in6>())
                        as *mut libc::sockaddr_in6;
                    if p.is_null() {
                        return -1;
                    }
                    (*p).sin6_family = libc::AF_INET6 as libc::sa_family_t;
                    (*p).sin6_port = v6.port().to_be();
                    (*p).sin6_addr.s6_addr = v6.ip().octets();
                    (*p).sin6_scope_id = v6.scope_id();
                    (1, p.cast::<libc::sockaddr>())
                }
            };
            *addrs = p;
            len
        }
    })
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
