//! Properties from outside text: NEAT's JSON (value/precedence objects, the list form,
//! ranges, preference words) merged onto the defaults and onto the listener defaults, then
//! compiled; and the RFC 9622 words (preferences, protocols, capacity profiles). Bad input
//! must be an error, never a panic; what compiles must compile again from its builder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use taps_core::properties::{CapacityProfile, Preference, Protocol, TransportProperties};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Preference::parse(text);
    let _ = Protocol::parse(text);
    let _ = CapacityProfile::parse(text);
    if let Ok(props) = TransportProperties::from_neat_json(text) {
        if let Ok(compiled) = props.compile() {
            // What compiled once compiles again from its own builder, to the same entries.
            let again = compiled
                .to_builder()
                .compile()
                .expect("a compiled set compiles again");
            assert_eq!(again.entries(), compiled.entries());
        }
    }
    if let Ok(props) = TransportProperties::for_listener().merge_neat_json(text) {
        let _ = props.compile();
    }
});
