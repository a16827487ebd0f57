//! `taps::http::Connector` under hyper-util's legacy client against a real hyper server
//! on loopback (hyper-util's auto server: HTTP/1.1 and HTTP/2): plain TCP, TLS with a
//! certificate made at run time (HTTP/2 when the server offers `h2`, HTTP/1.1 when the
//! client offers only that), a certificate the client does not trust (an error, never a
//! plain-text request), and properties hyper cannot speak over (an error at build time).

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, Version};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use taps::http::{ConnectionDetails, Connector};
use taps::taps_core::properties::{Name, Protocol};
use taps::taps_core::VerifyFailure;
use taps::{AttemptCause, Context, Preference, SecurityParameters, TransportProperties};
use taps_testkit::TestPki;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// A hyper server on 127.0.0.1 (ephemeral port), optionally behind TLS; answers every
/// request with `hello <version> <path>`. Counts the requests it served.
struct Server {
    port: u16,
    requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn hello(
    req: Request<Incoming>,
    requests: Arc<AtomicUsize>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    requests.fetch_add(1, Ordering::SeqCst);
    let body = format!("hello {:?} {}", req.version(), req.uri().path());
    Ok(Response::new(Full::new(Bytes::from(body))))
}

async fn server(tls: Option<TlsAcceptor>) -> Server {
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicUsize::new(0));
    let count = requests.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let (tls, count) = (tls.clone(), count.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| hello(req, count.clone()));
                let builder = auto::Builder::new(TokioExecutor::new());
                match tls {
                    // A failed handshake (an untrusted certificate) serves nothing.
                    Some(acceptor) => {
                        if let Ok(stream) = acceptor.accept(tcp).await {
                            let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                        }
                    }
                    None => {
                        let _ = builder.serve_connection(TokioIo::new(tcp), svc).await;
                    }
                }
            });
        }
    });
    Server {
        port,
        requests,
        task,
    }
}

/// A TLS acceptor presenting the test PKI's leaf, offering `h2` and `http/1.1`.
fn acceptor(pki: &TestPki) -> TlsAcceptor {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(&pki.cert)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(&pki.key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    TlsAcceptor::from(Arc::new(config))
}

/// A GET through `connector`: status, HTTP version, body, and what taps established.
async fn get(
    connector: Connector,
    url: &str,
) -> Result<(u16, Version, String, ConnectionDetails), hyper_util::client::legacy::Error> {
    let client: Client<Connector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build(connector);
    let res = client.get(url.parse().unwrap()).await?;
    let details = res
        .extensions()
        .get::<ConnectionDetails>()
        .expect("the connector's details on the response")
        .clone();
    let (status, version) = (res.status().as_u16(), res.version());
    let body = res.into_body().collect().await.unwrap().to_bytes();
    Ok((
        status,
        version,
        String::from_utf8(body.to_vec()).unwrap(),
        details,
    ))
}

#[tokio::test]
async fn get_over_plain_tcp() {
    let srv = server(None).await;
    let ctx = Context::new().unwrap();
    let connector = Connector::new(&ctx).unwrap();
    let url = format!("http://127.0.0.1:{}/plain", srv.port);
    let (status, version, body, details) = get(connector.clone(), &url).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(version, Version::HTTP_11);
    assert_eq!(body, "hello HTTP/1.1 /plain");
    assert!(
        matches!(details.stack.protocol, Protocol::Tcp | Protocol::Mptcp),
        "{}",
        details.stack
    );
    assert!(details.security.is_none());
    assert_eq!(details.remote.port(), srv.port);
    let race = details.race.as_ref().expect("the race report");
    assert!(!race.attempts.is_empty());
    // A second client with the same connector and context: a new connection, same origin.
    let (status, ..) = get(connector, &url).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(srv.requests.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn get_over_tls_speaks_http2_when_offered() {
    let pki = TestPki::new(&["localhost"]).unwrap();
    let srv = server(Some(acceptor(&pki))).await;
    let ctx = Context::new().unwrap();
    let connector = Connector::builder(&ctx)
        .security(SecurityParameters::new().ca_file(&pki.ca))
        .build()
        .unwrap();
    let url = format!("https://localhost:{}/secure", srv.port);
    let (status, version, body, details) = get(connector, &url).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(version, Version::HTTP_2);
    assert_eq!(body, "hello HTTP/2.0 /secure");
    let sec = details.security.as_ref().expect("TLS details");
    assert_eq!(sec.alpn.as_deref(), Some(&b"h2"[..]));
    assert_eq!(details.stack.to_string(), "TLS/TCP");
}

#[tokio::test]
async fn get_over_tls_with_http1_only() {
    let pki = TestPki::new(&["localhost"]).unwrap();
    let srv = server(Some(acceptor(&pki))).await;
    let ctx = Context::new().unwrap();
    let connector = Connector::builder(&ctx)
        .security(
            SecurityParameters::new()
                .ca_file(&pki.ca)
                .alpn(["http/1.1"]),
        )
        .build()
        .unwrap();
    let url = format!("https://localhost:{}/one", srv.port);
    let (status, version, body, details) = get(connector, &url).await.unwrap();
    assert_eq!((status, version), (200, Version::HTTP_11));
    assert_eq!(body, "hello HTTP/1.1 /one");
    let sec = details.security.as_ref().expect("TLS details");
    assert_eq!(sec.alpn.as_deref(), Some(&b"http/1.1"[..]));
}

/// The taps error inside hyper-util's error, if there is one.
fn taps_error<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a taps::Error> {
    let mut e = Some(err);
    while let Some(cur) = e {
        if let Some(t) = cur.downcast_ref::<taps::Error>() {
            return Some(t);
        }
        e = cur.source();
    }
    None
}

#[tokio::test]
async fn untrusted_certificate_is_an_error_never_plain_text() {
    let pki = TestPki::new(&["localhost"]).unwrap();
    let srv = server(Some(acceptor(&pki))).await;
    let ctx = Context::new().unwrap();
    // No CA: the test CA is in neither the system's store nor the Mozilla roots.
    let connector = Connector::new(&ctx).unwrap();
    let url = format!("https://localhost:{}/", srv.port);
    let err = get(connector, &url).await.unwrap_err();
    assert!(err.is_connect(), "{err:?}");
    let taps_err = taps_error(&err).expect("a taps error as the source");
    let causes = taps_err.attempt_causes();
    assert!(
        causes.contains(&AttemptCause::Verification {
            server_name: "localhost".into(),
            reason: VerifyFailure::UnknownIssuer,
        }),
        "{taps_err}"
    );
    // Every attempt was TLS, none connected: no request reached the server.
    let race = taps_err.race().unwrap();
    assert!(race
        .attempts()
        .all(|a| a.candidate.stack.security != taps::taps_core::Security::None));
    assert_eq!(srv.requests.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn bad_input_is_a_clear_error() {
    let ctx = Context::new().unwrap();
    // Properties that allow only SCTP: hyper cannot speak over it.
    let props = TransportProperties::new().protocols(Preference::Require, [Protocol::Sctp]);
    let err = Connector::builder(&ctx)
        .properties(props)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("allow SCTP"), "{err}");
    // QUIC, even with security required, is not raced for HTTP.
    let props = TransportProperties::new()
        .require(Name::Security)
        .protocols(Preference::Require, [Protocol::Quic, Protocol::Tcp]);
    let err = Connector::builder(&ctx)
        .properties(props)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("QUIC"), "{err}");
    // A scheme the connector does not speak, a URI without a host.
    let connector = Connector::new(&ctx).unwrap();
    for (uri, want) in [
        ("ftp://localhost/", "not http or https"),
        ("/relative", "not http or https"),
    ] {
        let err = connector.connect(&uri.parse().unwrap()).await.unwrap_err();
        assert!(err.to_string().contains(want), "{uri}: {err}");
    }
    // A CA file that does not exist: an error naming it, on the first connection.
    let connector = Connector::builder(&ctx)
        .security(SecurityParameters::new().ca_file("/nonexistent/ca.pem"))
        .build()
        .unwrap();
    let err = connector
        .connect(&"https://localhost:1/".parse().unwrap())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
}
