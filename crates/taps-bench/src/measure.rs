//! Process measurements: CPU time from `getrusage(RUSAGE_SELF)` (microseconds, user and
//! system separately; the call itself is in [`crate::rusage`]), resident set size from
//! `/proc/self/status`, and small statistics.

#![forbid(unsafe_code)]

use serde::{Deserialize, Serialize};

/// CPU time used by this process so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Cpu {
    /// User time, microseconds.
    pub(crate) user_us: u64,
    /// System time, microseconds.
    pub(crate) sys_us: u64,
}

impl Cpu {
    /// User plus system, microseconds.
    pub(crate) fn total_us(&self) -> u64 {
        self.user_us + self.sys_us
    }

    /// The CPU used between `earlier` and `self`.
    pub(crate) fn since(&self, earlier: &Cpu) -> Cpu {
        Cpu {
            user_us: self.user_us.saturating_sub(earlier.user_us),
            sys_us: self.sys_us.saturating_sub(earlier.sys_us),
        }
    }
}

/// This process's CPU time (every thread), from `getrusage(RUSAGE_SELF)`.
pub(crate) fn process_cpu() -> Cpu {
    match crate::rusage::self_user_sys_us() {
        Some((user_us, sys_us)) => Cpu { user_us, sys_us },
        None => Cpu::default(),
    }
}

/// This process's resident set size in KiB (`VmRSS` of `/proc/self/status`), 0 if
/// unreadable.
pub(crate) fn rss_kib() -> u64 {
    status_field("/proc/self/status", "VmRSS:").unwrap_or(0)
}

/// The anonymous part of this process's RSS in KiB (`RssAnon`: heap and stacks, without
/// the code and files mapped in), 0 if unreadable.
pub(crate) fn anon_kib() -> u64 {
    status_field("/proc/self/status", "RssAnon:").unwrap_or(0)
}

fn status_field(path: &str, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}

/// Median of `values` (mean of the middle two for an even count); 0 when empty.
pub(crate) fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Largest of `values`; 0 when empty.
pub(crate) fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(0.0, f64::max)
}

/// `a / b`, or NaN-free 0 when `b` is 0.
pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// A small deterministic PRNG (xorshift64*) for exponential inter-arrival times and
/// cache-hit patterns; no dependency, reproducible runs.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// Seeded generator (a zero seed is replaced).
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// Uniform in (0, 1].
    pub(crate) fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        ((x >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }

    /// Exponentially distributed with the given mean.
    pub(crate) fn exponential(&mut self, mean: f64) -> f64 {
        -mean * self.uniform().ln()
    }
}

/// Whether request `i` (0-based) of a sequence is a cache hit when the hit ratio is
/// `percent`: hits are spread evenly (Bresenham), so every prefix has the ratio.
pub(crate) fn is_hit(i: usize, percent: u32) -> bool {
    let p = percent.min(100) as usize;
    (i + 1) * p / 100 > i * p / 100
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_pattern_has_the_ratio() {
        for p in [0, 20, 40, 60, 80, 100] {
            let hits = (0..100).filter(|i| is_hit(*i, p)).count();
            assert_eq!(hits, p as usize);
        }
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn exponential_mean_is_close() {
        let mut r = Rng::new(7);
        let n = 20_000;
        let mean = (0..n).map(|_| r.exponential(2.0)).sum::<f64>() / n as f64;
        assert!((mean - 2.0).abs() < 0.1, "{mean}");
    }

    #[test]
    fn process_measurements_are_readable() {
        assert!(rss_kib() > 0);
        let a = process_cpu();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        assert!(process_cpu().total_us() >= a.total_us());
    }
}
