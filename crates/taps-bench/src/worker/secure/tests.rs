//! The fairness guard of the secure experiment: taps and the raw baselines (tokio-rustls,
//! quinn) do the same security work. Every client against every server (taps and raw on
//! both sides) must agree on TLS version, cipher suite, ALPN and resumption (a second
//! connection resumes), and every client must reject a certificate for another name.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use taps::taps_core::properties::Name;
use taps::{Context, Preconnection, Preference, Protocol, RemoteEndpoint, TransportProperties};
use taps_testkit::{TestPki, Validity};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::*;

/// Version, cipher suite, ALPN, resumed: what a handshake agreed on.
type Agreed = (String, String, Option<Vec<u8>>, bool);

fn pki_of(t: &TestPki) -> Pki {
    Pki {
        ca: t.ca.clone(),
        cert: t.cert.clone(),
        key: t.key.clone(),
    }
}

/// Echoes one byte, then reads to the end (so the client sees the session ticket).
async fn echo<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) {
    let mut b = [0u8; 1];
    if s.read_exact(&mut b).await.is_ok() && s.write_all(&b).await.is_ok() {
        let _ = s.flush().await;
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest).await;
        let _ = s.shutdown().await;
    }
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) {
    s.write_all(b"x").await.unwrap();
    let mut b = [0u8; 1];
    s.read_exact(&mut b).await.unwrap();
    s.shutdown().await.unwrap();
}

/// A taps secure listener (TLS/TCP and QUIC) on a free port, echoing.
async fn taps_server_on(pki: &Pki) -> (u16, Context) {
    let ctx = Context::new().unwrap();
    let props = TransportProperties::for_listener()
        .require(Name::Security)
        .compile()
        .unwrap();
    for _ in 0..10 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let Ok(mut l) = Preconnection::new(&ctx, props.clone())
            .local(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
            .security(taps_server(pki))
            .listen()
            .await
        else {
            continue;
        };
        tokio::spawn(async move {
            while let Some(Ok(c)) = l.accept().await {
                tokio::spawn(echo(c));
            }
        });
        return (port, ctx);
    }
    panic!("no port for the taps listener");
}

/// The raw servers: tokio-rustls on TCP and quinn on UDP, same port number.
fn raw_servers_on(pki: &Pki) -> u16 {
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let port = tcp.local_addr().unwrap().port();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(raw_server(pki).unwrap()));
    let tcp = tokio::net::TcpListener::from_std(tcp).unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = tcp.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(t) = acceptor.accept(s).await {
                    echo(t).await;
                }
            });
        }
    });
    let quic = quinn::Endpoint::server(
        raw_quic_server(pki).unwrap(),
        SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
    )
    .unwrap();
    tokio::spawn(async move {
        while let Some(i) = quic.accept().await {
            tokio::spawn(async move {
                let Ok(c) = i.await else { return };
                let Ok((send, recv)) = c.accept_bi().await else {
                    return;
                };
                let mut s = tokio::io::join(recv, send);
                echo(&mut s).await;
                let _ = s.into_inner().1.stopped().await;
            });
        }
    });
    port
}

fn taps_pre(ctx: &Context, pki: &Pki, port: u16, p: Protocol) -> Preconnection {
    let props = TransportProperties::new()
        .require(Name::Security)
        .protocols(Preference::Require, [p])
        .compile()
        .unwrap();
    Preconnection::new(ctx, props)
        .remote(RemoteEndpoint::new("127.0.0.1", port))
        .security(taps_client(pki))
}

/// Two TLS/TCP connections of a taps client (one context) to `port`.
async fn taps_tls(pki: &Pki, port: u16) -> Vec<Result<Agreed, String>> {
    let ctx = Context::new().unwrap();
    let pre = taps_pre(&ctx, pki, port, Protocol::Tcp);
    let mut out = Vec::new();
    for _ in 0..2 {
        out.push(match pre.initiate().await {
            Ok(mut c) => {
                let s = c.info().security.clone().unwrap();
                exchange(&mut c).await;
                Ok((
                    s.version.to_string(),
                    s.cipher_suite.to_string(),
                    s.alpn,
                    s.resumed,
                ))
            }
            Err(e) => Err(e.to_string()),
        });
    }
    out
}

/// Two TLS/TCP connections of a raw client (one configuration) to `port`.
async fn raw_tls(pki: &Pki, port: u16) -> Vec<Result<Agreed, String>> {
    let tls = tokio_rustls::TlsConnector::from(Arc::new(raw_client(pki).unwrap()));
    let mut out = Vec::new();
    for _ in 0..2 {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let name = rustls_pki_types::ServerName::try_from(SERVER_NAME).unwrap();
        out.push(match tls.connect(name, tcp).await {
            Ok(mut s) => {
                let c = s.get_ref().1;
                let agreed = (
                    match c.protocol_version() {
                        Some(rustls::ProtocolVersion::TLSv1_3) => "TLS 1.3".to_string(),
                        v => format!("{v:?}"),
                    },
                    c.negotiated_cipher_suite()
                        .and_then(|s| s.suite().as_str())
                        .unwrap_or("?")
                        .to_string(),
                    c.alpn_protocol().map(<[u8]>::to_vec),
                    c.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
                );
                exchange(&mut s).await;
                Ok(agreed)
            }
            Err(e) => Err(e.to_string()),
        });
    }
    out
}

/// A QUIC connection of a taps client: the ALPN, or the error.
async fn taps_quic(pki: &Pki, port: u16) -> Result<Option<Vec<u8>>, String> {
    let ctx = Context::new().unwrap();
    let mut c = taps_pre(&ctx, pki, port, Protocol::Quic)
        .initiate()
        .await
        .map_err(|e| e.to_string())?;
    let alpn = c.info().security.clone().unwrap().alpn;
    exchange(&mut c).await;
    Ok(alpn)
}

/// A QUIC connection of a raw quinn client: the ALPN, or the error.
async fn raw_quic(pki: &Pki, port: u16) -> Result<Option<Vec<u8>>, String> {
    let ep = quinn::Endpoint::client(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))).unwrap();
    let to = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let c = ep
        .connect_with(raw_quic_client(pki).unwrap(), to, SERVER_NAME)
        .unwrap()
        .await
        .map_err(|e| e.to_string())?;
    let alpn = c
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.protocol);
    let (send, recv) = c.open_bi().await.map_err(|e| e.to_string())?;
    exchange(&mut tokio::io::join(recv, send)).await;
    Ok(alpn)
}

#[tokio::test]
async fn taps_and_raw_do_the_same_security_work() {
    let t = TestPki::new(&[SERVER_NAME]).unwrap();
    let pki = pki_of(&t);
    let (taps_port, _ctx) = taps_server_on(&pki).await;
    let raw_port = raw_servers_on(&pki);
    let first = Ok((
        "TLS 1.3".to_string(),
        "TLS13_AES_256_GCM_SHA384".to_string(),
        Some(ALPN.to_vec()),
        false,
    ));
    let mut resumed = first.clone().unwrap();
    resumed.3 = RESUMPTION;
    for port in [taps_port, raw_port] {
        assert_eq!(
            taps_tls(&pki, port).await,
            [first.clone(), Ok(resumed.clone())]
        );
        assert_eq!(
            raw_tls(&pki, port).await,
            [first.clone(), Ok(resumed.clone())]
        );
        assert_eq!(taps_quic(&pki, port).await, Ok(Some(ALPN.to_vec())));
        assert_eq!(raw_quic(&pki, port).await, Ok(Some(ALPN.to_vec())));
    }

    // A certificate for another name, from the same CA: every client rejects it.
    let (cert, key) = t
        .leaf("other", &["other.example"], Validity::Current)
        .unwrap();
    let other = Pki {
        cert,
        key,
        ..pki.clone()
    };
    let (taps_port, _ctx2) = taps_server_on(&other).await;
    let raw_port = raw_servers_on(&other);
    for port in [taps_port, raw_port] {
        assert!(taps_tls(&pki, port).await.iter().all(Result::is_err));
        assert!(raw_tls(&pki, port).await.iter().all(Result::is_err));
        assert!(taps_quic(&pki, port).await.is_err());
        assert!(raw_quic(&pki, port).await.is_err());
    }
}
