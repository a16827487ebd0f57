//! An ALPN refusal by an independent peer is one typed cause whichever secure stack met
//! it: OpenSSL's `s_server` over TLS/TCP sends alert 120 (no_application_protocol);
//! ngtcp2's `gtlsserver` over QUIC closes with the crypto error 0x178 (RFC 9001 4.8: the
//! same alert). Both are `AttemptCause::Handshake` holding rustls'
//! `AlertReceived(NoApplicationProtocol)`, with the same words (issue 37, 4).

use taps::taps_core::properties::{Name, Protocol};
use taps::{AttemptCause, Context, Preconnection, RemoteEndpoint, SecurityParameters};
use taps::{Preference, TransportProperties};
use taps_testkit::ngtcp2::{gtlsserver, have_gtlsserver};
use taps_testkit::openssl::s_server_rev;
use taps_testkit::TestPki;

/// The one cause of a race over `protocol` alone to 127.0.0.1:`port`, offering ALPN
/// `foo` and trusting `pki`'s CA for localhost.
async fn refused(ctx: &Context, pki: &TestPki, protocol: Protocol, port: u16) -> AttemptCause {
    let props = TransportProperties::new()
        .require(Name::Security)
        .protocols(Preference::Require, [protocol])
        .compile()
        .unwrap();
    let params = SecurityParameters::new()
        .ca_file(&pki.ca)
        .server_name("localhost")
        .alpn(["foo"]);
    let Err(e) = Preconnection::new(ctx, props)
        .remote(RemoteEndpoint::new("127.0.0.1", port))
        .security(params)
        .initiate()
        .await
    else {
        panic!("connected, but the peer speaks no ALPN foo");
    };
    let causes = e.attempt_causes();
    assert_eq!(causes.len(), 1, "{e}");
    causes.into_iter().next().unwrap()
}

#[tokio::test]
async fn alpn_refusals_are_one_typed_cause_over_tls_and_quic() {
    let test = "alpn_refusals_are_one_typed_cause_over_tls_and_quic";
    if std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_err()
        || !have_gtlsserver()
    {
        taps_testkit::skip(
            test,
            "openssl or ngtcp2's gtlsserver is not installed (scripts/deps.sh installs them)",
        );
        return;
    }
    let pki = TestPki::new(&["localhost"]).unwrap();
    let ctx = Context::builder().build().unwrap();
    let (_tls, tls_port) = s_server_rev(&pki, &["-alpn", "h2"]);
    let (_quic, quic_port) = gtlsserver(&pki.cert, &pki.key, &[]);
    let tls = refused(&ctx, &pki, Protocol::Tcp, tls_port).await;
    let quic = refused(&ctx, &pki, Protocol::Quic, quic_port).await;
    let expected = rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol);
    for cause in [&tls, &quic] {
        let AttemptCause::Handshake(kept) = cause else {
            panic!("not a handshake failure: {cause}");
        };
        assert_eq!(kept.find::<rustls::Error>(), Some(&expected), "{cause}");
    }
    assert_eq!(tls.to_string(), quic.to_string());
    assert!(
        tls.to_string()
            .contains("no application protocol in common"),
        "{tls}"
    );
}
