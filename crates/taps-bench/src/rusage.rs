//! The one call into libc that needs `unsafe`: `getrusage(RUSAGE_SELF)`. Everything else
//! in the crate forbids unsafe code.

#![allow(unsafe_code)]

/// This process's user and system CPU time so far (every thread), microseconds, from
/// `getrusage(RUSAGE_SELF)`; `None` if the call fails.
pub(crate) fn self_user_sys_us() -> Option<(u64, u64)> {
    // SAFETY: `usage` is a valid, writable rusage; getrusage only writes into it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: see above; RUSAGE_SELF is always valid.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return None;
    }
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Some((us(usage.ru_utime), us(usage.ru_stime)))
}
