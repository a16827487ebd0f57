//! The HTTP/3 experiment's baselines, the crates used directly the way their examples
//! use them: h3 + h3-quinn on a plain quinn `Endpoint`, and hyper's HTTP/2 client
//! connection over tokio-rustls over a tokio `TcpStream`. Both do what taps' client does
//! per request: the name looked up for a new connection (the first address taken), the
//! certificate verified against the test CA alone (session resumption on, no 0-RTT,
//! [`secure::client_config`]), the body collected into one buffer, and a connection that
//! is not kept closed with `H3_NO_ERROR` (HTTP/3) or by dropping its sender (HTTP/2).

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use http::{Request, Uri};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::ServerName;
use tokio_rustls::TlsConnector;

use crate::worker::secure;

/// What one request got (from any variant of the HTTP/3 experiment's client).
pub(super) struct Fetched {
    /// The response's status code.
    pub(super) status: u16,
    /// The body's length, bytes.
    pub(super) bytes: usize,
    /// Whether it came over HTTP/3.
    pub(super) h3: bool,
    /// Whether the request opened a new connection.
    pub(super) new_connection: bool,
}

/// HTTP/3's "no error" code, which closes a connection that is done with.
const H3_NO_ERROR: u32 = 0x100;

/// The host and port of `uri`, and its first address.
async fn resolve(uri: &Uri) -> Result<(String, SocketAddr), String> {
    let host = uri.host().ok_or("no host")?.to_string();
    let port = uri.port_u16().unwrap_or(443);
    let addr = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| format!("{host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}: no address"))?;
    Ok((host, addr))
}

/// An HTTP/3 connection of the baseline.
struct H3Conn {
    quic: quinn::Connection,
    send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
}

/// h3 + h3-quinn on one quinn `Endpoint` (dual-stack, as taps' QUIC socket).
pub(super) struct RawH3 {
    endpoint: quinn::Endpoint,
    config: quinn::ClientConfig,
    conn: Option<H3Conn>,
}

impl RawH3 {
    /// The endpoint and its configuration (ALPN `h3`).
    pub(super) fn new(ca: &Path) -> Result<RawH3, String> {
        let tls = secure::client_config(ca, &[b"h3"])?;
        let endpoint = quinn::Endpoint::client((std::net::Ipv6Addr::UNSPECIFIED, 0).into())
            .or_else(|_| quinn::Endpoint::client((std::net::Ipv4Addr::UNSPECIFIED, 0).into()))
            .map_err(|e| format!("QUIC endpoint: {e}"))?;
        Ok(RawH3 {
            endpoint,
            config: secure::quic_client(tls)?,
            conn: None,
        })
    }

    async fn connect(&self, uri: &Uri) -> Result<H3Conn, String> {
        let (host, addr) = resolve(uri).await?;
        let quic = self
            .endpoint
            .connect_with(self.config.clone(), addr, &host)
            .map_err(|e| format!("QUIC: {e}"))?
            .await
            .map_err(|e| format!("QUIC: {e}"))?;
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(quic.clone()))
            .await
            .map_err(|e| format!("HTTP/3 setup: {e}"))?;
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok(H3Conn { quic, send })
    }

    /// One GET over the kept connection or a new one; `close`: closed after it.
    pub(super) async fn fetch(&mut self, uri: &Uri, close: bool) -> Result<Fetched, String> {
        let new_connection = self.conn.is_none();
        if new_connection {
            self.conn = Some(self.connect(uri).await?);
        }
        let conn = self.conn.as_mut().ok_or("no connection")?;
        let got = get_h3(&mut conn.send, uri).await;
        if close || got.is_err() {
            if let Some(c) = self.conn.take() {
                c.quic.close(H3_NO_ERROR.into(), b"");
            }
        }
        let (status, body) = got?;
        Ok(Fetched {
            status,
            bytes: body.len(),
            h3: true,
            new_connection,
        })
    }
}

/// One HTTP/3 GET: the head, the stream finished, the response read whole.
async fn get_h3(
    send: &mut h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    uri: &Uri,
) -> Result<(u16, Bytes), String> {
    let req = Request::get(uri.clone())
        .body(())
        .map_err(|e| e.to_string())?;
    let mut stream = send.send_request(req).await.map_err(|e| e.to_string())?;
    match stream.finish().await {
        // The server needs no more of the request; its response still comes (RFC 9114
        // §4.1).
        Err(h3::error::StreamError::RemoteTerminate { code, .. })
            if code == h3::error::Code::H3_NO_ERROR => {}
        Err(e) => return Err(e.to_string()),
        Ok(()) => {}
    }
    let res = stream.recv_response().await.map_err(|e| e.to_string())?;
    let mut body = BytesMut::new();
    while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
        let n = chunk.remaining();
        body.extend_from_slice(&chunk.copy_to_bytes(n));
    }
    Ok((res.status().as_u16(), body.freeze()))
}

/// hyper's HTTP/2 client connection over tokio-rustls (ALPN `h2`, `http/1.1`, as taps'
/// TLS/TCP leg offers).
pub(super) struct RawH2 {
    tls: TlsConnector,
    send: Option<http2::SendRequest<Empty<Bytes>>>,
}

impl RawH2 {
    /// The TLS connector.
    pub(super) fn new(ca: &Path) -> Result<RawH2, String> {
        let config = secure::client_config(ca, &[b"h2", b"http/1.1"])?;
        Ok(RawH2 {
            tls: TlsConnector::from(Arc::new(config)),
            send: None,
        })
    }

    async fn connect(&self, uri: &Uri) -> Result<http2::SendRequest<Empty<Bytes>>, String> {
        let (host, addr) = resolve(uri).await?;
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("TCP: {e}"))?;
        tcp.set_nodelay(true).map_err(|e| format!("TCP: {e}"))?;
        let name = ServerName::try_from(host).map_err(|e| format!("server name: {e}"))?;
        let tls = self
            .tls
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
            return Err("the server did not agree on ALPN h2".into());
        }
        let (send, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .map_err(|e| format!("HTTP/2 setup: {e}"))?;
        tokio::spawn(conn);
        Ok(send)
    }

    /// One GET over the kept connection or a new one; `close`: closed after it.
    pub(super) async fn fetch(&mut self, uri: &Uri, close: bool) -> Result<Fetched, String> {
        let new_connection = self.send.is_none();
        if new_connection {
            self.send = Some(self.connect(uri).await?);
        }
        let send = self.send.as_mut().ok_or("no connection")?;
        let got = get_h2(send, uri).await;
        if close || got.is_err() {
            self.send = None;
        }
        let (status, body) = got?;
        Ok(Fetched {
            status,
            bytes: body.len(),
            h3: false,
            new_connection,
        })
    }
}

/// One HTTP/2 GET, the response read whole.
async fn get_h2(
    send: &mut http2::SendRequest<Empty<Bytes>>,
    uri: &Uri,
) -> Result<(u16, Bytes), String> {
    send.ready().await.map_err(|e| e.to_string())?;
    let req = Request::get(uri.clone())
        .body(Empty::new())
        .map_err(|e| e.to_string())?;
    let res = send.send_request(req).await.map_err(|e| e.to_string())?;
    let status = res.status().as_u16();
    let body = res.into_body().collect().await.map_err(|e| e.to_string())?;
    Ok((status, body.to_bytes()))
}
