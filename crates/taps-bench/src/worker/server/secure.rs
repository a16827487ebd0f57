//! The secure servers: raw (tokio-rustls over tokio TCP, or quinn's own `Endpoint`) or a
//! taps listener with an identity (TLS/TCP, or TLS/TCP and QUIC on one port). Every
//! connection is handed to [`serve`] in a task of its own.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use taps::taps_core::properties::Name;
use taps::{Context, Preconnection, Preference, Protocol, TransportProperties};
use tokio_rustls::TlsAcceptor;

use super::serve::serve;
use super::Counters;
use crate::worker::protocol::{Impl, SecureListen, SecureServe, ServeMode};
use crate::worker::secure;
use crate::worker::setup::{compile, free_tcp_port, localhost_v4, LOCALHOST_V4};

/// How long a finished QUIC connection waits for the peer to acknowledge its stream
/// before closing: what a taps QUIC connection does when dropped (its linger).
pub(crate) const QUIC_LINGER: Duration = Duration::from_secs(5);

/// Starts a secure server; returns its port (TCP and UDP).
pub(super) async fn start_secure_server(
    imp: Impl,
    mode: ServeMode,
    spec: &SecureServe,
    counters: Arc<Counters>,
) -> Result<u16, String> {
    match imp {
        Impl::Raw => start_raw(mode, spec, counters),
        Impl::Taps => start_taps(mode, spec, counters).await,
    }
}

fn start_raw(mode: ServeMode, spec: &SecureServe, counters: Arc<Counters>) -> Result<u16, String> {
    match spec.listen {
        SecureListen::Tls => {
            let acceptor = TlsAcceptor::from(Arc::new(secure::raw_server(&spec.pki)?));
            let std = std::net::TcpListener::bind(localhost_v4(0))
                .and_then(|l| l.set_nonblocking(true).map(|_| l))
                .map_err(|e| format!("TLS listen: {e}"))?;
            let port = std.local_addr().map_err(|e| e.to_string())?.port();
            let l = tokio::net::TcpListener::from_std(std).map_err(|e| e.to_string())?;
            tokio::spawn(async move {
                while let Ok((s, _)) = l.accept().await {
                    let _ = s.set_nodelay(true);
                    let (acceptor, counters) = (acceptor.clone(), counters.clone());
                    tokio::spawn(async move {
                        if let Ok(tls) = acceptor.accept(s).await {
                            counters.count_accepted();
                            serve(tls, mode, counters).await;
                        }
                    });
                }
            });
            Ok(port)
        }
        SecureListen::Quic => {
            let endpoint =
                quinn::Endpoint::server(secure::raw_quic_server(&spec.pki)?, localhost_v4(0))
                    .map_err(|e| format!("QUIC listen: {e}"))?;
            let port = endpoint.local_addr().map_err(|e| e.to_string())?.port();
            tokio::spawn(async move {
                while let Some(incoming) = endpoint.accept().await {
                    tokio::spawn(raw_quic_serve(incoming, mode, counters.clone()));
                }
            });
            Ok(port)
        }
        SecureListen::Both => Err("the raw secure servers listen on one stack each".into()),
    }
}

/// One raw QUIC connection: its first bidirectional stream served like a taps
/// connection's, then (like a dropped taps QUIC connection) closed once the peer has
/// acknowledged the stream.
async fn raw_quic_serve(incoming: quinn::Incoming, mode: ServeMode, counters: Arc<Counters>) {
    let Ok(conn) = incoming.await else { return };
    let Ok((send, recv)) = conn.accept_bi().await else {
        return;
    };
    counters.count_accepted();
    let mut stream = tokio::io::join(recv, send);
    serve(&mut stream, mode, counters).await;
    let (_, mut send) = stream.into_inner();
    let _ = send.finish();
    let _ = tokio::time::timeout(QUIC_LINGER, send.stopped()).await;
    conn.close(0u32.into(), b"");
}

/// A taps listener requiring security (TLS/TCP and QUIC, or TCP required: TLS/TCP only)
/// with the test identity, on a port free for TCP and UDP.
async fn start_taps(
    mode: ServeMode,
    spec: &SecureServe,
    counters: Arc<Counters>,
) -> Result<u16, String> {
    let mut props = TransportProperties::for_listener().require(Name::Security);
    if spec.listen == SecureListen::Tls {
        props = props.protocols(Preference::Require, [Protocol::Tcp]);
    } else if spec.listen == SecureListen::Quic {
        return Err("a taps secure listener always offers TLS/TCP".into());
    }
    let props = compile(props)?;
    let ctx = Context::builder()
        .build()
        .map_err(|e| format!("context: {e}"))?;
    let mut last_error = String::new();
    // The probed port could be taken (for TCP or UDP) before we bind it: try a few times.
    for _ in 0..5 {
        let port = free_tcp_port(LOCALHOST_V4)?;
        let local = SocketAddr::new(LOCALHOST_V4, port);
        match Preconnection::new(&ctx, props.clone())
            .local(local)
            .security(secure::taps_server(&spec.pki))
            .listen()
            .await
        {
            Ok(mut l) => {
                let has = |p: Protocol| l.local_addrs().iter().any(|(s, _)| s.protocol == p);
                // A listener offering MPTCP accepts plain TCP on the same socket.
                let tcp = has(Protocol::Tcp) || has(Protocol::Mptcp);
                if tcp && (spec.listen == SecureListen::Tls || has(Protocol::Quic)) {
                    tokio::spawn(async move {
                        let _ctx = ctx;
                        while let Some(accepted) = l.accept().await {
                            let Ok(conn) = accepted else { continue };
                            counters.count_accepted();
                            tokio::spawn(serve(conn, mode, counters.clone()));
                        }
                    });
                    return Ok(port);
                }
                last_error = format!("listener bound only {:?}", l.local_addrs());
            }
            Err(e) => last_error = format!("listen on {local}: {e}"),
        }
    }
    Err(last_error)
}
