//! Logs on stderr: a `tracing` subscriber honouring `RUST_LOG` and `-v`/`-vv`/`-vvv`.
//!
//! Without either, only warnings are shown, so stdout (tables, `--json`) and stderr stay
//! as they were. Events are filtered where they are made: a disabled span or event costs
//! the library a relaxed atomic load, and nothing is formatted.

use std::io::IsTerminal;

use tracing_subscriber::filter::{EnvFilter, LevelFilter};

use crate::common::CliError;

/// The crates whose level `-v` sets (`taps` also covers `taps_core` and `taps_cli`: a
/// target directive matches by prefix).
const OWN_CRATES: [&str; 2] = ["taps", "usrsctp"];

/// Installs the subscriber: warnings by default, `-v` info for the taps crates, `-vv`
/// debug, `-vvv` trace; `RUST_LOG` directives come after and win for the targets they
/// name. A `RUST_LOG` that does not parse is a usage error. Call once, before any thread.
pub(crate) fn init(verbose: u8) -> Result<(), CliError> {
    let filter = filter(verbose, std::env::var("RUST_LOG").ok().as_deref())?;
    let stderr = std::io::stderr();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(stderr.is_terminal())
        .with_timer(tracing_subscriber::fmt::time::uptime())
        .try_init()
        .map_err(|e| CliError::failure(format!("cannot install the log subscriber: {e}")))
}

/// The filter for `verbose` (the count of `-v`) and `RUST_LOG`.
fn filter(verbose: u8, rust_log: Option<&str>) -> Result<EnvFilter, CliError> {
    let level = match verbose {
        0 => None,
        1 => Some(LevelFilter::INFO),
        2 => Some(LevelFilter::DEBUG),
        _ => Some(LevelFilter::TRACE),
    };
    let mut directives = String::from("warn");
    if let Some(level) = level {
        for target in OWN_CRATES {
            directives.push_str(&format!(",{target}={level}"));
        }
    }
    if let Some(env) = rust_log.filter(|s| !s.trim().is_empty()) {
        directives.push(',');
        directives.push_str(env);
    }
    EnvFilter::builder()
        .with_default_directive(LevelFilter::WARN.into())
        .parse(&directives)
        .map_err(|e| CliError::usage(format!("RUST_LOG: {e} (in {directives:?})")))
}

#[cfg(test)]
mod tests {
    use super::filter;

    #[test]
    fn verbosity_and_rust_log_make_one_filter() {
        assert_eq!(
            filter(0, None).ok().map(|f| f.to_string()).as_deref(),
            Some("warn")
        );
        let f = filter(2, Some("quinn=trace")).ok().map(|f| f.to_string());
        let f = f.unwrap_or_default();
        assert!(f.contains("taps=debug") && f.contains("quinn=trace"), "{f}");
        assert!(filter(1, Some("taps=notalevel")).is_err());
    }
}
