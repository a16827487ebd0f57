//! `taps completions` and `taps man` with the real binary: the scripts are syntactically
//! valid (bash checks its own), the man page is roff that `man` can render.

use std::process::{Command, Output};

fn taps(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_taps"))
        .args(args)
        .output()
        .expect("run taps");
    assert!(
        out.status.success(),
        "taps {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn bash_completion_is_valid_bash_and_completes_subcommands() {
    let script = taps(&["completions", "bash"]).stdout;
    let text = String::from_utf8_lossy(&script);
    assert!(
        text.contains("connect") && text.contains("candidates"),
        "{text}"
    );
    assert!(text.contains("complete -F"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("taps.bash");
    std::fs::write(&file, &script).unwrap();
    let check = Command::new("bash").arg("-n").arg(&file).output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn zsh_fish_and_others_get_scripts_too() {
    for (shell, marker) in [
        ("zsh", "#compdef taps"),
        ("fish", "complete -c taps"),
        ("elvish", "taps"),
        ("powershell", "taps"),
    ] {
        let text = String::from_utf8(taps(&["completions", shell]).stdout).unwrap();
        assert!(
            text.contains(marker) && text.contains("connect"),
            "{shell}: {text}"
        );
    }
    let bad = Command::new(env!("CARGO_BIN_EXE_taps"))
        .args(["completions", "cmd.exe"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn man_page_is_roff_that_man_renders() {
    let page = taps(&["man"]).stdout;
    let text = String::from_utf8_lossy(&page);
    assert!(
        text.starts_with(".ie \\n(.g .ds Aq") || text.starts_with(".TH"),
        "{text}"
    );
    assert!(text.contains(".TH taps 1"), "{text}");
    assert!(
        text.contains("connect") && text.contains("completions"),
        "{text}"
    );
    // Rendered by the real formatter (what `man` shows), when the machine has one.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("taps.1");
    std::fs::write(&file, &page).unwrap();
    if let Ok(out) = Command::new("man")
        .arg("-l")
        .arg(&file)
        .env("MANPAGER", "cat")
        .output()
    {
        if out.status.success() {
            let shown = String::from_utf8_lossy(&out.stdout);
            assert!(
                shown.contains("SYNOPSIS") && shown.contains("connect"),
                "{shown}"
            );
        }
    }
}

#[test]
fn man_dir_writes_a_page_per_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = taps(&["man", "--dir", d]);
    assert!(out.stdout.is_empty());
    for page in [
        "taps.1",
        "taps-connect.1",
        "taps-listen.1",
        "taps-completions.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(text.contains(".TH"), "{page}: {text}");
    }
    let missing = Command::new(env!("CARGO_BIN_EXE_taps"))
        .args(["man", "--dir", "/nonexistent/taps-man"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/taps-man"));
}
