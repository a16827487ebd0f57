//! An echo server on taps: listens with the default properties (every protocol and family
//! they allow on one port: TCP and SCTP, IPv6 and IPv4) and sends each message back.
//!
//! Run it, then the client in another shell:
//!
//! ```sh
//! cargo run -p taps --example echo_server -- 7400
//! cargo run -p taps --example echo_client -- localhost 7400 hello world
//! ```

use std::error::Error;
use std::net::{Ipv6Addr, SocketAddr};

use taps::{Context, Listener, Preconnection, TransportProperties};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let port: u16 = match std::env::args().nth(1) {
        Some(port) => port.parse()?,
        None => 7400,
    };
    // One context per application: resolver, policy (PIB) and cache (CIB).
    let ctx = Context::builder().build()?;
    let props = TransportProperties::new().compile()?;
    let listener = Preconnection::new(&ctx, props)
        .local(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)))
        .listen()
        .await?;
    for (stack, addr) in listener.local_addrs() {
        println!("listening: {stack} on {addr}");
    }
    serve(listener).await;
    Ok(())
}

/// Accepts connections until the listener stops; each is served in a task of its own,
/// which sends every message back until the peer closes.
pub async fn serve(mut listener: Listener) {
    while let Some(accepted) = listener.accept().await {
        let mut conn = match accepted {
            Ok(conn) => conn,
            Err(e) => {
                eprintln!("accept failed: {e}");
                continue;
            }
        };
        tokio::spawn(async move {
            while let Ok(Some(message)) = conn.receive().await {
                if conn.send(&message).await.is_err() {
                    break;
                }
            }
            let _ = conn.close().await;
        });
    }
}
