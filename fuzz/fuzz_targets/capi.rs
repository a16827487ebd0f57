//! The C API's argument handling (libneat on taps): a context and a few flows driven by
//! arbitrary calls with odd arguments: `neat_set_property` with arbitrary text (what a
//! NEAT program passes through from a file or user), NULL contexts, flows and buffers,
//! reads and writes on flows that never opened, zero and large lengths, unknown optional
//! argument tags, close and abort twice, the loop run in between. Every export catches
//! panics and answers NEAT_ERROR_INTERNAL: that answer is a failure here. Nothing touches
//! the network (no open, no accept).
#![no_main]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::ptr::null_mut;

use libfuzzer_sys::fuzz_target;
use neat::context::*;
use neat::flows::*;
use neat::io::*;
use neat::stats::*;
use neat::stubs::*;
use neat::{NeatCtx, NeatFlow};

/// NEAT_ERROR_INTERNAL: a panic caught at the C boundary.
const INTERNAL: u64 = 5;
/// uv_run mode NOWAIT.
const RUN_NOWAIT: c_int = 2;

/// `struct neat_tlv`: tag, type, an 8-byte union.
#[repr(C)]
#[derive(Clone, Copy)]
struct Tlv {
    tag: c_int,
    kind: c_int,
    value: u64,
}

/// `struct neat_flow_operations` (176 bytes, every callback NULL).
#[repr(C, align(8))]
struct Ops([u8; 176]);

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }
    /// Up to `max` bytes of the input.
    fn take(&mut self, max: usize) -> &[u8] {
        let n = usize::from(self.byte()) * 4 % (max + 1);
        let n = n.min(self.0.len());
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        head
    }
}

fn ok(code: u64, call: &str) {
    assert_ne!(
        code, INTERNAL,
        "{call} answered NEAT_ERROR_INTERNAL (a panic)"
    );
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    // SAFETY (all calls below): the C API's contracts are kept: pointers are NULL or
    // live (closed flows are used only until the next loop run), buffers hold the
    // lengths passed, TLV arrays the counts passed, strings are NUL-terminated.
    unsafe {
        let ctx = neat_init_ctx();
        assert!(!ctx.is_null(), "neat_init_ctx");
        neat_log_level(ctx, 0);
        let mut flows: Vec<(*mut NeatFlow, bool)> = Vec::new();
        let mut steps = 0;
        while !b.0.is_empty() && steps < 256 {
            steps += 1;
            let op = b.byte();
            let c: *mut NeatCtx = if op & 0x80 != 0 && op & 0x40 != 0 {
                null_mut()
            } else {
                ctx
            };
            let which = usize::from(b.byte());
            let f: *mut NeatFlow = if flows.is_empty() || which % 9 == 8 {
                null_mut()
            } else {
                flows[which % flows.len()].0
            };
            match op % 12 {
                0 if flows.len() < 8 => {
                    let nf = neat_new_flow(c);
                    assert_eq!(nf.is_null(), c.is_null(), "neat_new_flow");
                    if !nf.is_null() {
                        flows.push((nf, false));
                    }
                }
                0 | 1 | 2 => {
                    let mut text = b.take(600).to_vec();
                    text.retain(|&x| x != 0);
                    text.push(0);
                    let p = if op & 0x20 != 0 && text.len() == 1 {
                        std::ptr::null()
                    } else {
                        text.as_ptr() as *const c_char
                    };
                    ok(neat_set_property(c, f, p), "neat_set_property");
                }
                3 => {
                    let mut ops = Ops([0; 176]);
                    let p = if op & 0x20 != 0 {
                        null_mut()
                    } else {
                        &mut ops as *mut Ops as *mut c_void
                    };
                    ok(neat_set_operations(c, f, p), "neat_set_operations");
                }
                4 => {
                    let amt = b.u32() % 70_000;
                    let mut buf = vec![0u8; amt as usize];
                    let mut actual = 0u32;
                    let mut tlv = [Tlv {
                        tag: b.byte().into(),
                        kind: 0,
                        value: 0,
                    }; 2];
                    let buf_p = if op & 0x20 != 0 {
                        null_mut()
                    } else {
                        buf.as_mut_ptr()
                    };
                    let act_p = if op & 0x10 != 0 {
                        null_mut()
                    } else {
                        &mut actual as *mut u32
                    };
                    let n = c_uint::from(b.byte() % 3);
                    let r = neat_read(c, f, buf_p, amt, act_p, tlv.as_mut_ptr().cast(), n);
                    ok(r, "neat_read");
                    assert!(actual <= amt, "neat_read: {actual} of {amt}");
                }
                5 => {
                    let bytes = b.take(2000).to_vec();
                    let amt = if op & 0x10 != 0 {
                        0
                    } else {
                        bytes.len() as u32
                    };
                    let p = if op & 0x20 != 0 {
                        std::ptr::null()
                    } else {
                        bytes.as_ptr()
                    };
                    let mut tlv = [Tlv {
                        tag: b.byte().into(),
                        kind: 0,
                        value: 0,
                    }; 2];
                    let n = c_uint::from(b.byte() % 3);
                    ok(
                        neat_write(c, f, p, amt, tlv.as_mut_ptr().cast(), n),
                        "neat_write",
                    );
                }
                6 => ok(neat_shutdown(c, f), "neat_shutdown"),
                7 => {
                    let r = if op & 0x20 != 0 {
                        neat_abort(c, f)
                    } else {
                        neat_close(c, f)
                    };
                    ok(r, "neat_close");
                    if let Some(e) = flows.iter_mut().find(|(p, _)| *p == f) {
                        e.1 = true;
                    }
                }
                8 => {
                    let mut out: *mut c_char = null_mut();
                    let p = if op & 0x20 != 0 {
                        null_mut()
                    } else {
                        &mut out as *mut *mut c_char
                    };
                    ok(neat_get_stats(c, p), "neat_get_stats");
                    if !out.is_null() {
                        libc_free(out.cast());
                    }
                }
                9 => {
                    let v = b.u32();
                    ok(neat_change_timeout(c, f, v), "neat_change_timeout");
                    ok(
                        neat_set_checksum_coverage(c, f, v, v >> 3),
                        "neat_set_checksum_coverage",
                    );
                    ok(neat_set_qos(c, f, v as u8), "neat_set_qos");
                    ok(neat_set_ecn(c, f, v as u8), "neat_set_ecn");
                    ok(neat_set_low_watermark(c, f, v), "neat_set_low_watermark");
                    let _ = neat_get_qos(c, f);
                    let mut size = 0usize;
                    ok(
                        neat_get_property(c, f, std::ptr::null(), null_mut(), &mut size),
                        "neat_get_property",
                    );
                }
                _ => {
                    // Run the loop once: closed flows are freed now.
                    ok(
                        neat_start_event_loop(ctx, RUN_NOWAIT),
                        "neat_start_event_loop",
                    );
                    flows.retain(|(_, closed)| !closed);
                }
            }
        }
        for (f, closed) in &flows {
            if !closed {
                ok(neat_close(ctx, *f), "neat_close");
            }
        }
        ok(
            neat_start_event_loop(ctx, RUN_NOWAIT),
            "neat_start_event_loop",
        );
        neat_free_ctx(ctx);
    }
});

extern "C" {
    #[link_name = "free"]
    fn libc_free(p: *mut c_void);
}
