//! The CIB file (`Cib::load_json`): whatever is on disk, corrupt or foreign, is loaded or
//! rejected with a reason, never a panic; what loads is saved and loads again whole.
#![no_main]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use taps_core::policy::{Cib, CibConfig};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let now = Instant::now();
    // A fixed wall clock, so a reproducer stays one.
    let wall = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut cib = Cib::new(CibConfig::default());
    let Ok(loaded) = cib.load_json(text, now, wall) else {
        return;
    };
    assert!(
        cib.len() <= loaded,
        "{} outcomes from {loaded} entries",
        cib.len()
    );
    for (key, _) in cib.outcomes() {
        let _ = cib.history(key, now);
        let _ = cib.best_rtt(&key.endpoint, now);
        let _ = cib.best_family(&key.endpoint, now);
    }
    let saved = cib.to_json(now, wall);
    let mut again = Cib::new(CibConfig::default());
    again
        .load_json(&saved, now, wall)
        .expect("what the CIB saves loads again");
    cib.prune(now + Duration::from_secs(3600));
    let _ = SystemTime::now();
});
