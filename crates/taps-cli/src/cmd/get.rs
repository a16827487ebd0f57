//! `taps get URL`: an HTTP request through `taps::http::Client`, printing what curl's `-w`
//! would (status, protocol, timing) and the race that chose the protocol.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use taps::http::{Client, ClientError, Exchange, Protocols};
use taps::{Context, SecurityParameters};

use crate::common::CliError;

/// Arguments of `taps get`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The URL (https:// races HTTP/3 against HTTP/2 and HTTP/1.1; http:// uses TCP).
    url: String,
    /// Also trust the certificate authorities (or the pinned certificate) in this PEM
    /// file (repeatable).
    #[arg(long, value_name = "FILE")]
    ca: Vec<PathBuf>,
    /// HTTP/3 only: no TLS/TCP leg.
    #[arg(long, conflicts_with = "http2_only")]
    http3_only: bool,
    /// HTTP/2 or HTTP/1.1 only: no QUIC leg.
    #[arg(long)]
    http2_only: bool,
    /// Send the request N times on the same client (pooled connections, Alt-Svc learned
    /// from one response used by the next).
    #[arg(short = 'n', long, value_name = "N", default_value_t = 1)]
    count: u32,
    /// QUIC's head start in ms, instead of 2 x its known connect time + 10 ms, or 100 ms.
    #[arg(long, value_name = "MS")]
    quic_head_start: Option<u64>,
    /// Print the winning leg's address race (DNS answers, attempts, ms since its start).
    #[arg(long)]
    trace: bool,
    /// Print the response body after the report.
    #[arg(long)]
    body: bool,
    /// Keep the CIB (QUIC marked broken, connect times) in this file across runs.
    #[arg(long, value_name = "FILE")]
    cib: Option<PathBuf>,
    /// DNS server to use instead of the system's (repeatable), e.g. 127.0.0.1:5353.
    #[arg(long = "name-server", value_name = "ADDR")]
    name_servers: Vec<SocketAddr>,
}

/// Runs the command.
pub(crate) async fn run(args: Args) -> Result<(), CliError> {
    let uri: http::Uri = args
        .url
        .parse()
        .map_err(|e| CliError::usage(format!("{}: not a URL: {e}", args.url)))?;
    let mut ctx = Context::builder();
    if let Some(file) = &args.cib {
        ctx = ctx.cib_file(file);
    }
    if !args.name_servers.is_empty() {
        ctx = ctx.name_servers(args.name_servers.clone());
    }
    let ctx = ctx.build()?;
    let mut security = SecurityParameters::new();
    for ca in &args.ca {
        security = security.ca_file(ca);
    }
    let protocols = match (args.http3_only, args.http2_only) {
        (true, _) => Protocols::Http3,
        (_, true) => Protocols::Http2,
        _ => Protocols::Any,
    };
    let mut builder = Client::builder(&ctx)
        .security(security)
        .protocols(protocols)
        .race_timeline(args.trace);
    if let Some(ms) = args.quic_head_start {
        builder = builder.quic_head_start(Duration::from_millis(ms));
    }
    let client = builder.build()?;
    let mut result = Ok(());
    for i in 1..=args.count.max(1) {
        let got = client.get(uri.clone()).await;
        // Locked only between awaits (the lock is not Send).
        let mut out = std::io::stdout().lock();
        if args.count > 1 {
            let _ = writeln!(out, "request {i}:");
        }
        match got {
            Ok(res) => {
                let _ = print_response(&mut out, &res, args.trace, args.body);
            }
            Err(ClientError::Setup(e)) => return Err(e.into()),
            Err(e) => {
                let _ = writeln!(out, "failed: {e}");
                result = Err(CliError::failure(e.to_string()));
                break;
            }
        }
    }
    if args.cib.is_some() {
        ctx.save_cib()
            .map_err(|e| CliError::failure(format!("cannot save the CIB: {e}")))?;
    }
    result
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The report of one response (and its body with `--body`).
fn print_response(
    out: &mut impl Write,
    res: &http::Response<bytes::Bytes>,
    trace: bool,
    body: bool,
) -> std::io::Result<()> {
    writeln!(out, "status: {}", res.status().as_u16())?;
    let Some(x) = res.extensions().get::<Exchange>() else {
        return Ok(());
    };
    let c = &x.connection;
    writeln!(out, "protocol: {:?}", c.version)?;
    let how = if x.reused { "reused" } else { "new" };
    let d = &c.details;
    writeln!(
        out,
        "connection: {} {} -> {} ({how})",
        d.stack, d.local, d.remote
    )?;
    writeln!(out, "race: {}", c.race)?;
    match x.connect {
        Some(t) => write!(out, "time: connect {:.1} ms, ", ms(t))?,
        None => write!(out, "time: ")?,
    }
    writeln!(
        out,
        "first byte {:.1} ms, total {:.1} ms",
        ms(x.first_byte),
        ms(x.total)
    )?;
    writeln!(out, "size: {} bytes", res.body().len())?;
    if let Some(v) = res.headers().get(http::header::ALT_SVC) {
        writeln!(out, "alt-svc: {}", v.to_str().unwrap_or("(not text)"))?;
    }
    if trace {
        if let Some(rep) = &d.race {
            writeln!(out, "address race of the winning leg (ms since its start):")?;
            for (at, text) in rep.timeline_text() {
                writeln!(out, "  {:>9.3}  {text}", ms(at))?;
            }
        }
    }
    if body {
        out.write_all(res.body())?;
        writeln!(out)?;
    }
    Ok(())
}
