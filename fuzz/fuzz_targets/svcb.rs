//! SVCB/HTTPS record handling: a DNS answer from the wire (hickory's decoder, as the
//! resolver receives it) turned into taps' `ServiceRecord`s by the resolver's conversion
//! (`taps::fuzzing::service_record`), then read as the race reads them (`ServiceInfo`:
//! QUIC allowed, port, hints per family, Display). With the first byte even the rest is
//! one record's RDATA, wrapped into an answer here, so the fuzzer works on SvcParams and
//! not on the message header.
#![no_main]

use hickory_resolver::proto::op::Message;
use hickory_resolver::proto::rr::RData;
use libfuzzer_sys::fuzz_target;
use taps_core::{Family, ServiceInfo};

/// A response with one answer: root name, `rtype`, class IN, TTL 0, `rdata`.
fn wrap(rtype: u16, rdata: &[u8]) -> Vec<u8> {
    let mut m = vec![0, 0, 0x81, 0x80, 0, 0, 0, 1, 0, 0, 0, 0, 0];
    m.extend_from_slice(&rtype.to_be_bytes());
    m.extend_from_slice(&[0, 1, 0, 0, 0, 0]);
    m.extend_from_slice(&(rdata.len().min(0xffff) as u16).to_be_bytes());
    m.extend_from_slice(&rdata[..rdata.len().min(0xffff)]);
    m
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let wire = match first % 4 {
        0 => wrap(65, rest),
        1 => wrap(64, rest),
        _ => rest.to_vec(),
    };
    let Ok(message) = Message::from_vec(&wire) else {
        return;
    };
    let mut records = Vec::new();
    for record in &message.answers {
        let svcb = match &record.data {
            RData::HTTPS(h) => &h.0,
            RData::SVCB(s) => s,
            _ => continue,
        };
        if svcb.svc_priority == 0 {
            continue; // AliasMode: the resolver follows it instead
        }
        let r = taps::fuzzing::service_record(svcb);
        assert_eq!(r.priority, svcb.svc_priority);
        let _ = r.to_string();
        records.push(r);
    }
    let info = ServiceInfo::new(records);
    assert!(info
        .records
        .windows(2)
        .all(|w| w[0].priority <= w[1].priority));
    let _ = info.allows_quic();
    let _ = info.port();
    for family in [Family::V4, Family::V6] {
        let hints = info.hints(family);
        assert!(hints.iter().all(|ip| Family::of(ip) == family));
    }
});
