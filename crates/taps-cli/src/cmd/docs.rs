//! `taps completions SHELL` and `taps man`: generated from the command's own definition,
//! so they never fall out of date. Neither starts a runtime.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Prints `shell`'s completion script for `command`.
pub(crate) fn completions(shell: clap_complete::Shell, mut command: clap::Command) -> ExitCode {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "taps", &mut out);
    write_out(&out)
}

/// Prints the roff man page of `command` (section 1), or with `dir` writes it and one
/// page per visible subcommand (`taps-connect.1`, ...) into that directory.
pub(crate) fn man(command: clap::Command, dir: Option<&Path>) -> ExitCode {
    let result = match dir {
        Some(dir) => clap_mangen::generate_to(command, dir).map(|()| Vec::new()),
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(command)
                .render(&mut out)
                .map(|()| out)
        }
    };
    match result {
        Ok(out) => write_out(&out),
        Err(e) => {
            let place = dir.map_or(String::new(), |d| format!(" in {}", d.display()));
            eprintln!("taps: error: cannot write the man pages{place}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Writes `bytes` to stdout; a write error is a failure, said once.
fn write_out(bytes: &[u8]) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("taps: error: cannot write: {e}");
            ExitCode::FAILURE
        }
    }
}
