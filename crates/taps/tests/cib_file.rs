//! The CIB file: written atomically and owner-only, bounded in entries, and a corrupt,
//! truncated, huge or foreign file ignored with the reason (one test per case).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use taps::pm::{load_cib_file, save_cib_file, CibFileError, PolicyManager};
use taps::taps_core::policy::MAX_FILE_BYTES;
use taps::taps_core::policy::{Cib, CibConfig, OutcomeKey};
use taps::taps_core::properties::Protocol;
use taps::taps_core::{Security, Stack};
use taps::Context;

fn key(i: u16) -> OutcomeKey {
    OutcomeKey {
        interface: None,
        endpoint: Arc::from(format!("host{i}.test:443")),
        stack: Stack::new(Protocol::Tcp, Security::None),
        remote: format!("192.0.2.1:{i}").parse().unwrap(),
    }
}

/// A CIB with `n` successes, the i-th `n - i` seconds old.
fn cib_with(n: u16, config: CibConfig) -> Cib {
    let now = Instant::now();
    let mut cib = Cib::new(config);
    for i in 0..n {
        let at = now - Duration::from_secs(u64::from(n - i));
        cib.record_success(key(i), Duration::from_millis(10), at);
    }
    cib
}

/// A context on `file` that never reaches a policy manager.
fn context_on(file: &Path) -> Context {
    Context::builder()
        .cib_file(file)
        .policy_manager(PolicyManager::Off)
        .watch_interfaces(false)
        .build()
        .expect("a bad CIB file never fails the build")
}

#[test]
fn saved_atomically_owner_only_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cib.json");
    // A file left world-readable by something else is replaced by an owner-only one.
    std::fs::write(&file, "{}").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    save_cib_file(&cib_with(5, CibConfig::default()), &file).unwrap();
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // No temporary file is left next to it.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["cib.json"], "{names:?}");
    let mut back = Cib::default();
    assert_eq!(load_cib_file(&mut back, &file).unwrap(), 5);
    // A context saves the same way.
    let ctx = context_on(&file);
    assert_eq!(ctx.cib_len(), 5);
    ctx.save_cib().unwrap();
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn readers_never_see_a_partial_file_while_writers_replace_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cib.json");
    save_cib_file(&cib_with(200, CibConfig::default()), &file).unwrap();
    std::thread::scope(|s| {
        for n in [100u16, 300] {
            let file = &file;
            s.spawn(move || {
                let cib = cib_with(n, CibConfig::default());
                for _ in 0..30 {
                    save_cib_file(&cib, file).unwrap();
                }
            });
        }
        for _ in 0..100 {
            let mut cib = Cib::default();
            let n = load_cib_file(&mut cib, &file).expect("always a whole file");
            assert!([100, 200, 300].contains(&n), "{n}");
        }
    });
}

#[test]
fn bounded_in_entries_oldest_dropped() {
    let config = CibConfig {
        max_entries: 10,
        ..CibConfig::default()
    };
    // Learning past the bound drops the oldest.
    let cib = cib_with(50, config);
    assert_eq!(cib.len(), 10);
    let kept: Vec<u16> = {
        let mut k: Vec<u16> = cib.outcomes().map(|(k, _)| k.remote.port()).collect();
        k.sort_unstable();
        k
    };
    assert_eq!(kept, (40..50).collect::<Vec<_>>());
    // Loading a bigger file into a bounded CIB keeps the newest.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cib.json");
    save_cib_file(&cib_with(50, CibConfig::default()), &file).unwrap();
    let mut small = Cib::new(config);
    load_cib_file(&mut small, &file).unwrap();
    assert_eq!(small.len(), 10);
    assert!(small.outcomes().all(|(k, _)| k.remote.port() >= 40));
    // The default bound is a safe one.
    assert_eq!(CibConfig::default().max_entries, 4096);
}

/// `text` as a CIB file must be refused with a `NotACib` error naming `why`, and a
/// context on it starts empty.
fn refused(bytes: &[u8], why: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cib.json");
    std::fs::write(&file, bytes).unwrap();
    let err = load_cib_file(&mut Cib::default(), &file).unwrap_err();
    assert!(matches!(err, CibFileError::NotACib { .. }), "{err:?}");
    assert!(err.to_string().contains(why), "{err}");
    assert_eq!(context_on(&file).cib_len(), 0);
}

#[test]
fn corrupt_file_is_ignored() {
    refused(&[0xff, 0xfe, 0x00, 0x13, 0x37, 0x80], "not UTF-8");
    refused(b"\x7bformat: taps-cib, entries: ]]]", "not a taps CIB file");
}

#[test]
fn truncated_file_is_ignored() {
    let text = cib_with(20, CibConfig::default()).to_json(Instant::now(), SystemTime::now());
    refused(&text.as_bytes()[..text.len() / 2], "EOF");
}

#[test]
fn foreign_file_is_ignored() {
    // Another program's JSON, a taps file of another version, a JSON array.
    refused(
        br#"{"name": "my-app", "version": "1.0.2"}"#,
        "not a taps CIB file",
    );
    refused(
        br#"{"format": "taps-cib", "version": 2, "entries": []}"#,
        "version 2",
    );
    refused(
        br#"{"format": "other", "version": 1, "entries": []}"#,
        "format 'other'",
    );
    refused(b"[1, 2, 3]", "not a taps CIB file");
}

#[test]
fn huge_file_is_ignored_unread() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cib.json");
    // A sparse file past the cap: refused from its size, not read.
    let f = std::fs::File::create(&file).unwrap();
    f.set_len(MAX_FILE_BYTES + 1).unwrap();
    drop(f);
    let err = load_cib_file(&mut Cib::default(), &file).unwrap_err();
    assert!(matches!(err, CibFileError::TooLarge { .. }), "{err:?}");
    assert_eq!(context_on(&file).cib_len(), 0);
}

#[test]
fn missing_file_is_an_empty_cib_and_unreadable_one_an_error() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        load_cib_file(&mut Cib::default(), &dir.path().join("none.json")).unwrap(),
        0
    );
    // A directory where the file should be cannot be read as one.
    let err = load_cib_file(&mut Cib::default(), dir.path()).unwrap_err();
    assert!(matches!(err, CibFileError::Read { .. }), "{err:?}");
}
