//! `taps candidates`: the ranked list with the reasons, the way a user finds out why
//! SCTP was tried first.

use serde_json::{json, Value};
use taps::taps_core::candidates::Candidate;
use taps::taps_core::policy::History;
use taps::taps_core::Family;
use taps::taps_core::Security;
use taps::CandidateListing;
use taps::{Preconnection, RemoteEndpoint, TransportProperties};

use crate::common::{CliError, ContextArgs};

/// Arguments of `taps candidates`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Remote host name or address.
    host: String,
    /// Remote port.
    port: u16,
    #[command(flatten)]
    ctx: ContextArgs,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs the command.
pub(crate) async fn run(args: Args) -> Result<(), CliError> {
    let ctx = args.ctx.context()?;
    let props = args.ctx.properties(TransportProperties::new())?;
    let pre = Preconnection::new(&ctx, props).remote(RemoteEndpoint::new(&args.host, args.port));
    let listing = pre.candidates().await?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&to_json(&args, &listing)).expect("JSON")
        );
    } else {
        print_text(&args, &listing);
    }
    Ok(())
}

fn security(s: Security) -> &'static str {
    match s {
        Security::None => "none",
        Security::Tls => "TLS",
        Security::Dtls => "DTLS",
        Security::QuicTls => "QUIC-TLS",
    }
}

/// One candidate as JSON (also used by `connect --json`).
pub(crate) fn candidate_json(c: &Candidate) -> Value {
    json!({
        "stack": c.stack.to_string(),
        "protocol": c.stack.protocol.as_str(),
        "security": security(c.stack.security),
        "family": if c.family() == Family::V4 { "IPv4" } else { "IPv6" },
        "remote": c.remote.to_string(),
        "local": c.local.as_ref().map(|l| json!({"interface": &*l.interface, "address": l.addr.to_string()})),
        "score": c.score,
        "history": c.history.to_string(),
        "available": c.unavailable.is_none(),
        "unavailable_reason": c.unavailable,
        "reasons": c.reasons.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
    })
}

fn to_json(args: &Args, l: &CandidateListing) -> Value {
    json!({
        "host": args.host,
        "port": args.port,
        "dns": l.dns.iter().map(|(f, r)| match r {
            Ok(a) => json!({"family": f.to_string(), "addresses": a.iter().map(|a| a.to_string()).collect::<Vec<_>>()}),
            Err(e) => json!({"family": f.to_string(), "error": e.to_string()}),
        }).collect::<Vec<_>>(),
        "https": l.service.as_ref().map(|s| match s {
            Ok(info) => json!({"records": info.records.iter().map(|r| json!({
                "priority": r.priority,
                "target": r.target,
                "alpn": r.alpn,
                "no_default_alpn": r.no_default_alpn,
                "port": r.port,
                "hints": r.hints.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
                "ech": r.ech,
            })).collect::<Vec<_>>(), "quic": info.allows_quic()}),
            Err(e) => json!({"error": e.to_string()}),
        }),
        "candidates": l.gathered.candidates.iter().enumerate().map(|(i, c)| {
            let mut v = candidate_json(c);
            v["rank"] = json!(i + 1);
            v
        }).collect::<Vec<_>>(),
        "pruned": l.gathered.pruned.iter().map(|p| json!({
            "stack": p.stack.to_string(),
            "remote": p.remote.to_string(),
            "reasons": p.violations.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "pruned_stacks": l.plan.pruned().iter().map(|p| json!({
            "stack": p.stack.to_string(),
            "reasons": p.violations.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

fn print_text(args: &Args, l: &CandidateListing) {
    println!("Candidates for {}:{}", args.host, args.port);
    for (f, r) in &l.dns {
        match r {
            Ok(a) => println!(
                "  DNS {f}: {}",
                a.iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Err(e) => println!("  DNS {f}: {e}"),
        }
    }
    match &l.service {
        Some(Ok(info)) if info.records.is_empty() => println!("  HTTPS: no record"),
        Some(Ok(info)) => {
            for r in &info.records {
                println!("  HTTPS: {r}");
            }
            if !info.allows_quic() {
                println!("         (no h3: QUIC candidates left out)");
            }
        }
        Some(Err(e)) => println!("  HTTPS: {e}"),
        None => {}
    }
    println!();
    println!("Race order:");
    for (i, c) in l.gathered.candidates.iter().enumerate() {
        let mark = match c.unavailable {
            Some(why) => format!("  [skipped by the race: {why}]"),
            None => String::new(),
        };
        println!(
            "  {:>2}. {:<32} score {:+.1}{mark}",
            i + 1,
            c.to_string(),
            c.score
        );
        for r in c.reasons.iter() {
            println!("        {r}");
        }
        let via = match &c.local {
            Some(l) => format!(" over {}", l.interface),
            None => String::new(),
        };
        match &c.history {
            History::Unknown => {}
            History::Failed { .. } => println!(
                "        history{via}: {} (ranked after every candidate whose last attempt did not fail)",
                c.history
            ),
            History::Succeeded { .. } => println!(
                "        history{via}: {} (ranked first among candidates of equal score, stack and interface)",
                c.history
            ),
        }
    }
    if !l.gathered.pruned.is_empty() {
        println!();
        println!("Pruned candidates:");
        for p in &l.gathered.pruned {
            let why: Vec<String> = p.violations.iter().map(|v| v.to_string()).collect();
            println!("  {} {}: {}", p.stack, p.remote, why.join("; "));
        }
    }
    if !l.plan.pruned().is_empty() {
        println!();
        println!("Stacks ruled out by the properties:");
        for p in l.plan.pruned() {
            let why: Vec<String> = p.violations.iter().map(|v| v.to_string()).collect();
            println!("  {:<10} {}", p.stack.to_string(), why.join("; "));
        }
    }
}
