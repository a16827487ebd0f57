//! The bytes `--send-bytes` sends: a pattern a receiver can check for order.

/// Period of the bytes `--send-bytes` sends: the byte at stream offset `i` is `i % 251`
/// (a prime: data put back out of place, lost or repeated shifts the pattern, so a
/// receiver that checks it sees reordering too; netlab's sinks do).
pub(super) const PATTERN_PERIOD: usize = 251;
/// The largest write of `--send-bytes`: a whole number of periods under 256 KiB, so every
/// write starts at phase 0 and one buffer serves them all. Over SCTP a write longer than
/// 64 KiB becomes messages of whole fragments (each fills its packets); only a write's
/// end leaves a short packet, once per 256 KiB rather than once per 64 KiB.
pub(super) const PATTERN_CHUNK: usize = PATTERN_PERIOD * (256 * 1024 / PATTERN_PERIOD);

/// The first `len` bytes of the `--send-bytes` pattern.
pub(super) fn send_pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % PATTERN_PERIOD) as u8).collect()
}
