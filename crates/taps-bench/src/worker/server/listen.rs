//! Starting the servers' listeners: raw (tokio TCP, usrsctp) or taps, each accepted
//! connection handed to [`serve`] in a task of its own.

#![forbid(unsafe_code)]

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use taps::{Context, Preconnection, Protocol};
use tokio::net::{TcpListener, TcpSocket};
use usrsctp::{SctpOptions, SctpStack};

use super::serve::{raw_sctp_sink, serve};
use super::Counters;
use crate::worker::protocol::{Listen, ServeMode, ServerSpec};
use crate::worker::setup::{free_tcp_port, free_udp_port, listener_properties, LOCALHOST_V4};

pub(super) async fn start_raw_server(
    spec: &ServerSpec,
    counters: Arc<Counters>,
) -> Result<(u16, u16), String> {
    let mut port = 0;
    if spec.listen.includes_tcp() {
        let first: SocketAddr = if spec.dual {
            (Ipv6Addr::LOCALHOST, 0).into()
        } else {
            (Ipv4Addr::LOCALHOST, 0).into()
        };
        let l = raw_listen(first)?;
        port = l.local_addr().map_err(|e| e.to_string())?.port();
        let mut listeners = vec![l];
        if spec.dual {
            listeners.push(raw_listen(SocketAddr::new(LOCALHOST_V4, port))?);
        }
        for l in listeners {
            let (counters, mode) = (counters.clone(), spec.mode);
            tokio::spawn(async move {
                while let Ok((s, _)) = l.accept().await {
                    let _ = s.set_nodelay(true);
                    counters.count_accepted();
                    tokio::spawn(serve(s, mode, counters.clone()));
                }
            });
        }
    }
    let mut udp_port = 0;
    if spec.listen.includes_sctp() {
        if spec.mode != ServeMode::Sink {
            return Err("the raw SCTP server only sinks".into());
        }
        // SCTP ports are per process (one usrsctp instance): any number will do; use the
        // TCP port when there is one, like taps does.
        if port == 0 {
            port = free_tcp_port(LOCALHOST_V4)?;
        }
        let l = SctpStack::global()
            .listen(
                SocketAddr::new(LOCALHOST_V4, 0),
                port,
                &SctpOptions::default(),
            )
            .map_err(|e| format!("SCTP listen: {e}"))?;
        udp_port = l.local_addr().port();
        tokio::spawn(async move {
            while let Ok((a, _)) = l.accept().await {
                counters.count_accepted();
                tokio::spawn(raw_sctp_sink(a, counters.clone()));
            }
        });
    }
    Ok((port, udp_port))
}

pub(super) async fn start_taps_tcp_server(
    spec: &ServerSpec,
    counters: Arc<Counters>,
) -> Result<(u16, u16), String> {
    let first: SocketAddr = if spec.dual {
        (Ipv6Addr::LOCALHOST, 0).into()
    } else {
        (Ipv4Addr::LOCALHOST, 0).into()
    };
    let ctx = Context::builder()
        .build()
        .map_err(|e| format!("context: {e}"))?;
    let props = listener_properties(Listen::Tcp)?;
    let l = Preconnection::new(&ctx, props.clone())
        .local(first)
        .listen()
        .await
        .map_err(|e| format!("listen on {first}: {e}"))?;
    let port = l
        .local_addrs()
        .first()
        .map(|(_, a)| a.port())
        .ok_or("the listener bound nothing")?;
    let mut listeners = vec![l];
    if spec.dual {
        let second = SocketAddr::new(LOCALHOST_V4, port);
        listeners.push(
            Preconnection::new(&ctx, props)
                .local(second)
                .listen()
                .await
                .map_err(|e| format!("listen on {second}: {e}"))?,
        );
    }
    for l in listeners {
        spawn_taps_accept(l, spec.mode, counters.clone());
    }
    Ok((port, 0))
}

/// A taps listener with SCTP (and TCP if asked): the context gets a free UDP
/// encapsulation port, the listener a port free for TCP (SCTP uses the same number).
pub(super) async fn start_taps_sctp_server(
    spec: &ServerSpec,
    counters: Arc<Counters>,
) -> Result<(u16, u16), String> {
    let props = listener_properties(spec.listen)?;
    let mut last_error = String::new();
    // The probed ports could be taken before we bind them: try a few times.
    for _ in 0..5 {
        let udp_port = free_udp_port(LOCALHOST_V4)?;
        let port = free_tcp_port(LOCALHOST_V4)?;
        let ctx = Context::builder()
            .sctp_udp_port(udp_port)
            .build()
            .map_err(|e| format!("context: {e}"))?;
        let local = SocketAddr::new(LOCALHOST_V4, port);
        match Preconnection::new(&ctx, props.clone())
            .local(local)
            .listen()
            .await
        {
            Ok(l) => {
                let has = |p: Protocol| l.local_addrs().iter().any(|(s, _)| s.protocol == p);
                if has(Protocol::Sctp) && (!spec.listen.includes_tcp() || has(Protocol::Tcp)) {
                    spawn_taps_accept(l, spec.mode, counters);
                    return Ok((port, udp_port));
                }
                last_error = format!("listener bound only {:?}", l.local_addrs());
            }
            Err(e) => last_error = format!("listen on {local} (UDP {udp_port}): {e}"),
        }
    }
    Err(last_error)
}

fn spawn_taps_accept(mut l: taps::Listener, mode: ServeMode, counters: Arc<Counters>) {
    tokio::spawn(async move {
        while let Some(accepted) = l.accept().await {
            let Ok(conn) = accepted else { continue };
            counters.count_accepted();
            tokio::spawn(serve(conn, mode, counters.clone()));
        }
    });
}

/// Listen backlog of the raw servers: the same as taps's listeners.
const RAW_BACKLOG: u32 = 1024;

fn raw_listen(addr: SocketAddr) -> Result<TcpListener, String> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    };
    socket
        .and_then(|s| {
            s.set_reuseaddr(true)?;
            s.bind(addr)?;
            s.listen(RAW_BACKLOG)
        })
        .map_err(|e| format!("listen on {addr}: {e}"))
}
