//! The `netlab` command: run a scenario, bring a lab up by hand, list scenarios, clean up.

#![forbid(unsafe_code)]

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgAction, Parser, Subcommand};
use netlab::lab::{self, Lab, LabOptions};
use netlab::rules::parse_duration;
use netlab::scenario::{self, RunOptions};
use netlab::{RecordType, Rule};

/// netlab: emulated networks (delay, loss, dead paths) to test Happy Eyeballs.
#[derive(Parser)]
#[command(name = "netlab", version, about)]
struct Cli {
    /// Log on stderr: -v info, -vv debug, -vvv trace for netlab and the taps crates
    /// (default: warnings; RUST_LOG adds directives and wins for the targets it names).
    #[arg(short, long, action = ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run scenarios (or `all`) in fresh labs; print time to connect, winner, attempts.
    Run {
        /// Scenario names (see `netlab list`), or `all`.
        #[arg(required = true)]
        scenarios: Vec<String>,
        /// Keep taps' CIB in this file, so a later run reuses what this one learned.
        #[arg(long, value_name = "FILE")]
        cib: Option<PathBuf>,
        /// Seed for the bridge's loss and jitter.
        #[arg(long)]
        seed: Option<u64>,
    },
    /// List the scenarios.
    List,
    /// Build a lab and keep it until Ctrl-C, to run things in it by hand.
    Up {
        /// A bridge rule (repeatable), e.g. `host=192.0.2.11,rtt=50ms,loss=2%`.
        #[arg(long = "rule", value_name = "SPEC")]
        rules: Vec<String>,
        /// Delay DNS answers of one record type (repeatable), e.g. `AAAA=300ms`.
        #[arg(long = "dns-delay", value_name = "TYPE=DURATION")]
        dns_delays: Vec<String>,
        /// Seed for the bridge's loss and jitter.
        #[arg(long)]
        seed: Option<u64>,
        /// How many links between client and server (1..=3; links 1 and 2 are
        /// nltun1/nltun2, 198.51.100.66/.130; see docs/netlab.md).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=3))]
        links: u8,
        /// A rule for one extra link (repeatable), `N:SPEC`, e.g. `1:rate=10mbit,delay=10ms`
        /// (`--rule` sets link 0's).
        #[arg(long = "link-rule", value_name = "N:SPEC")]
        link_rules: Vec<String>,
        /// The MPTCP path manager for a multipath policy: handover, interactive or
        /// aggregate (endpoints for the extra links, limits in both namespaces).
        #[arg(long, value_name = "POLICY")]
        mptcp: Option<String>,
    },
    /// Remove namespaces left by netlab processes that were killed (SIGKILL).
    Cleanup,
    /// The lab's SCTP server (run by the lab inside its server namespace; not for direct
    /// use): prints `ready`, then one JSON line per finished connection; exits when
    /// standard input closes.
    #[command(name = "serve-sctp", hide = true)]
    ServeSctp {
        /// Address to listen on (UDP encapsulation socket).
        #[arg(long)]
        addr: IpAddr,
        /// SCTP port.
        #[arg(long)]
        port: u16,
        /// UDP encapsulation port.
        #[arg(long)]
        udp_port: u16,
        /// Name server for the taps context (never queried by a listener).
        #[arg(long)]
        name_server: SocketAddr,
        /// More addresses of this host to listen on: the listener asks for `multihoming`
        /// with `--addr` and these as `local_ips` (one SCTP association over each).
        #[arg(long)]
        also: Vec<IpAddr>,
    },
    /// A multihomed usrsctp peer (run by the SCTP multipath scenarios inside a namespace;
    /// not for direct use): see netlab::sctp_mp.
    #[command(name = "sctp-mp-peer", hide = true)]
    SctpMpPeer {
        /// server or client.
        #[arg(long)]
        role: String,
        /// The JSON configuration (both sides get the same).
        #[arg(long)]
        config: String,
    },
}

/// Installs the stderr log subscriber for `verbose` (the count of `-v`) and `RUST_LOG`.
fn init_logs(verbose: u8) -> Result<(), String> {
    use tracing_subscriber::filter::{EnvFilter, LevelFilter};
    let level = match verbose {
        0 => None,
        1 => Some(LevelFilter::INFO),
        2 => Some(LevelFilter::DEBUG),
        _ => Some(LevelFilter::TRACE),
    };
    let mut directives = String::from("warn");
    if let Some(level) = level {
        // `taps` also covers taps_core, taps_bench, ... (targets match by prefix).
        directives.push_str(&format!(",netlab={level},taps={level},usrsctp={level}"));
    }
    if let Ok(env) = std::env::var("RUST_LOG") {
        if !env.trim().is_empty() {
            directives.push(',');
            directives.push_str(&env);
        }
    }
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::WARN.into())
        .parse(&directives)
        .map_err(|e| format!("RUST_LOG: {e} (in {directives:?})"))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_timer(tracing_subscriber::fmt::time::uptime())
        .try_init()
        .map_err(|e| format!("cannot install the log subscriber: {e}"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = init_logs(cli.verbose) {
        eprintln!("netlab: {e}");
        return ExitCode::from(2);
    }
    if let Command::ServeSctp {
        addr,
        port,
        udp_port,
        name_server,
        also,
    } = cli.command
    {
        // A child of a lab: no labs of its own, so no signal handling either.
        return match netlab::sctp_server::serve(addr, &also, port, udp_port, name_server) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("netlab {}: {e}", netlab::sctp_server::SUBCOMMAND);
                ExitCode::FAILURE
            }
        };
    }
    if let Command::SctpMpPeer { role, config } = &cli.command {
        return match netlab::sctp_mp::run(role, config) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("netlab {} {role}: {e}", netlab::sctp_mp::SUBCOMMAND);
                ExitCode::FAILURE
            }
        };
    }
    if let Err(e) = watch_signals() {
        eprintln!("netlab: cannot watch signals: {e}");
        return ExitCode::FAILURE;
    }
    match cli.command {
        Command::List => {
            // `netlab list | head` closes the pipe early: stop quietly, do not panic.
            let mut out = std::io::stdout().lock();
            for s in scenario::all() {
                if writeln!(out, "{:<12} {}", s.name, s.summary).is_err() {
                    break;
                }
            }
            ExitCode::SUCCESS
        }
        Command::Cleanup => {
            let done = netlab::cleanup_stale();
            if done.is_empty() {
                println!("nothing to clean up");
            }
            for line in done {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Command::Run {
            scenarios,
            cib,
            seed,
        } => run(scenarios, cib, seed),
        Command::Up {
            rules,
            dns_delays,
            seed,
            links,
            link_rules,
            mptcp,
        } => match up(&rules, &dns_delays, seed)
            .and_then(|lab| {
                extra_links(&lab, links.into(), &link_rules, mptcp.as_deref()).map(|_| lab)
            })
            .and_then(wait_for_signal)
        {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("netlab: {e}");
                ExitCode::from(2)
            }
        },
        Command::ServeSctp { .. } | Command::SctpMpPeer { .. } => unreachable!("handled above"),
    }
}

fn need_support() -> Result<(), String> {
    match netlab::unsupported_reason() {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

fn run(names: Vec<String>, cib: Option<PathBuf>, seed: Option<u64>) -> ExitCode {
    if let Err(why) = need_support() {
        eprintln!("netlab: {why}");
        return ExitCode::from(2);
    }
    let names: Vec<String> = if names.iter().any(|n| n == "all") {
        scenario::all().iter().map(|s| s.name.to_string()).collect()
    } else {
        names
    };
    let opts = RunOptions {
        cib,
        seed,
        echo: true,
        ..RunOptions::default()
    };
    let mut failed = Vec::new();
    for name in &names {
        match scenario::run(name, &opts) {
            Ok(out) if out.passed() => {}
            Ok(_) => failed.push(name.clone()),
            Err(e) => {
                eprintln!("netlab: {name}: {e}");
                failed.push(name.clone());
            }
        }
        println!();
    }
    if failed.is_empty() {
        println!("netlab: {} scenario(s) passed", names.len());
        ExitCode::SUCCESS
    } else {
        println!("netlab: failed: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}

fn up(rule_specs: &[String], dns_delays: &[String], seed: Option<u64>) -> Result<Lab, String> {
    need_support()?;
    let rules = rule_specs
        .iter()
        .map(|s| s.parse::<Rule>().map_err(|e| format!("--rule {s:?}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let delays = dns_delays
        .iter()
        .map(|s| {
            let (t, d) = s
                .split_once('=')
                .ok_or_else(|| format!("--dns-delay {s:?}: expected TYPE=DURATION"))?;
            let rtype: RecordType = t
                .to_ascii_uppercase()
                .parse()
                .map_err(|_| format!("--dns-delay {s:?}: unknown record type {t:?}"))?;
            Ok((rtype, parse_duration(d)?))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut opts = LabOptions::default();
    if let Some(seed) = seed {
        opts.seed = seed;
    }
    let lab = Lab::start(opts).map_err(|e| format!("cannot build the lab: {e}"))?;
    lab.set_rules(rules.clone());
    for (t, d) in &delays {
        lab.dns().set_delay(*t, *d);
    }
    let (c, s) = (lab.client().name(), lab.server().name());
    println!(
        "client namespace {c}: {} and {}",
        lab::CLIENT_V4,
        lab::CLIENT_V6
    );
    println!(
        "server namespace {s}: DNS {} (zone {}), TCP sink on port {} of every zone address and on [{}]:{} (TCP accepted, TLS never answered)",
        lab.dns_addr(),
        lab::ZONE,
        lab::SERVICE_PORT,
        lab::tls_stuck_addr(),
        lab::TLS_PORT
    );
    let sctp = lab.sctp_server();
    println!(
        "  SCTP server on SCTP port {} inside UDP port {} of {} ({} only)",
        sctp.endpoint().port(),
        sctp.udp_port(),
        sctp.endpoint().ip(),
        lab::fqdn(lab::SCTP_HOST)
    );
    println!("zone:");
    for r in lab::ZONE_RECORDS {
        println!(
            "  {:<22} {:<5} {:<18} {}",
            lab::fqdn(r.name),
            if r.addr.is_ipv4() { "A" } else { "AAAA" },
            r.addr,
            if r.live { "live" } else { "dead (blackholed)" }
        );
    }
    for r in &rules {
        println!("rule: {r:?}");
    }
    for (t, d) in &delays {
        println!("DNS {t} answers delayed {d:?}");
    }
    let taps = netlab::taps::taps_binary().unwrap_or_else(|_| PathBuf::from("taps"));
    println!();
    println!("try:");
    println!(
        "  ip netns exec {c} {} connect {} {} --name-server {} --trace",
        taps.display(),
        lab::fqdn("rx"),
        lab::SERVICE_PORT,
        lab.dns_addr()
    );
    println!(
        "  ip netns exec {c} {} connect {} {} --name-server {} --sctp-udp-port {} --trace \\\n      --props '{{\"transport\":{{\"value\":[\"SCTP\",\"TCP\"],\"precedence\":2}}}}'",
        taps.display(),
        lab::fqdn(lab::SCTP_HOST),
        lab::SERVICE_PORT,
        lab.dns_addr(),
        lab::SCTP_UDP_PORT
    );
    Ok(lab)
}

/// Adds links 1.. up to `links`, sets their rules (`N:SPEC`) and the MPTCP path
/// manager for `mptcp` (a policy word), and says what it did.
fn extra_links(
    lab: &Lab,
    links: usize,
    link_rules: &[String],
    mptcp: Option<&str>,
) -> Result<(), String> {
    let mut per_link: Vec<Vec<Rule>> = vec![Vec::new(); links];
    for spec in link_rules {
        let (n, rule) = spec
            .split_once(':')
            .ok_or_else(|| format!("--link-rule {spec:?}: expected N:SPEC"))?;
        let n: usize = match n.parse() {
            Ok(n) if (1..links).contains(&n) => n,
            _ => {
                return Err(format!(
                    "--link-rule {spec:?}: no link {n:?} (--links {links})"
                ))
            }
        };
        per_link[n].push(
            rule.parse()
                .map_err(|e| format!("--link-rule {spec:?}: {e}"))?,
        );
    }
    for (n, rules) in per_link.into_iter().enumerate().skip(1) {
        lab.add_link()
            .map_err(|e| format!("cannot add link {n}: {e}"))?;
        let shown = format!("{rules:?}");
        lab.set_link_rules(n, rules);
        println!(
            "link {n}: client {} {} and {}, server's own address {} (rules: {shown})",
            netlab::links::device(n),
            netlab::links::client_v4(n),
            netlab::links::client_v6(n),
            netlab::links::server_addr_v4(n),
        );
    }
    if let Some(word) = mptcp {
        let policy = netlab::mptcp::Policy::parse(word).ok_or_else(|| {
            format!("--mptcp {word:?}: expected handover, interactive or aggregate")
        })?;
        netlab::mptcp::configure(lab.client(), lab.server(), policy, links)
            .map_err(|e| format!("cannot set the MPTCP path manager: {e}"))?;
        println!(
            "MPTCP path manager ({}): {}; MPTCP sink on port {} of every server IPv4 address",
            policy.as_str(),
            netlab::mptcp::client_script(policy, links)
                .trim()
                .replace('\n', "; "),
            lab::MPTCP_PORT
        );
    }
    Ok(())
}

/// Keeps the lab until a signal tears everything down.
fn wait_for_signal(_lab: Lab) -> Result<(), String> {
    println!("Ctrl-C tears everything down.");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// On SIGINT, SIGTERM or SIGHUP: tear down every lab of this process, then exit 130.
fn watch_signals() -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    // Register the handlers before returning, so no signal slips through unhandled.
    let (mut int, mut term, mut hup) = {
        let _enter = rt.enter();
        (
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
            signal(SignalKind::hangup())?,
        )
    };
    std::thread::Builder::new()
        .name("netlab-signals".into())
        .spawn(move || {
            rt.block_on(async {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                    _ = hup.recv() => {}
                }
            });
            eprintln!("netlab: signal received, tearing down");
            for p in netlab::teardown_all() {
                eprintln!("netlab: teardown: {p}");
            }
            std::process::exit(130);
        })?;
    Ok(())
}
