//! An echo client on taps: races a connection to the server (Happy Eyeballs over every
//! protocol and address the default properties allow), sends each argument as a message
//! and prints what comes back.
//!
//! Run the server first, then the client:
//!
//! ```sh
//! cargo run -p taps --example echo_server -- 7400
//! cargo run -p taps --example echo_client -- localhost 7400 hello world
//! ```

use std::error::Error;

use taps::{Context, Preconnection, RemoteEndpoint, TransportProperties};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let mut args = std::env::args().skip(1);
    let host = args.next().unwrap_or_else(|| "localhost".to_string());
    let port: u16 = match args.next() {
        Some(port) => port.parse()?,
        None => 7400,
    };
    let mut messages: Vec<String> = args.collect();
    if messages.is_empty() {
        messages.push("hello".to_string());
    }
    let ctx = Context::builder().build()?;
    let props = TransportProperties::new().compile()?;
    let pre = Preconnection::new(&ctx, props).remote(RemoteEndpoint::new(host, port));
    for reply in echo(&pre, &messages).await? {
        println!("{reply}");
    }
    Ok(())
}

/// Initiates a connection (raced), sends each message and waits for its echo, then
/// closes. Returns the replies, in order.
pub async fn echo(
    pre: &Preconnection,
    messages: &[String],
) -> Result<Vec<String>, Box<dyn Error + Send + Sync>> {
    let mut conn = pre.initiate().await?;
    let info = conn.info();
    println!(
        "connected: {} {} -> {}",
        info.stack, info.local, info.remote
    );
    let mut replies = Vec::with_capacity(messages.len());
    for message in messages {
        conn.send(message.as_bytes()).await?;
        let reply = conn
            .receive()
            .await?
            .ok_or("the server closed before echoing")?;
        replies.push(String::from_utf8_lossy(&reply).into_owned());
    }
    conn.close().await?;
    Ok(replies)
}
