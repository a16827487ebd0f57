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

/// This process's CPU time (every thread), from `getrusage(RUSAGE_SELF)` (one system
/// call); an error, never a zero, when the call fails.
pub(crate) fn process_cpu() -> Result<Cpu, String> {
    crate::rusage::self_user_sys_us()
        .map(|(user_us, sys_us)| Cpu { user_us, sys_us })
        .ok_or_else(|| format!("getrusage: {}", std::io::Error::last_os_error()))
}

/// This process's resident set size in KiB (`VmRSS` of `/proc/self/status`: one file
/// read); an error when it cannot be read.
pub(crate) fn rss_kib() -> Result<u64, String> {
    status_field("/proc/self/status", "VmRSS:")
}

/// The anonymous part of this process's RSS in KiB (`RssAnon`: heap and stacks, without
/// the code and files mapped in); an error when it cannot be read.
pub(crate) fn anon_kib() -> Result<u64, String> {
    status_field("/proc/self/status", "RssAnon:")
}

/// A `kB` field of a `/proc/*/status` file.
fn status_field(path: &str, field: &str) -> Result<u64, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {path}: {e}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("{path}: no readable {field} line"))
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

/// `a / b`; NaN (never 0 or infinity) when the baseline `b` is not a positive number or
/// `a` is not a finite one, so that a missing baseline cannot pass for a good ratio.
pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 && b.is_finite() && a.is_finite() {
        a / b
    } else {
        f64::NAN
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
        assert!(rss_kib().unwrap() > 0);
        assert!(anon_kib().unwrap() > 0);
        let a = process_cpu().unwrap();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        assert!(process_cpu().unwrap().total_us() >= a.total_us());
    }

    #[test]
    fn unreadable_figures_are_errors_not_zeros() {
        assert!(status_field("/proc/self/status", "NoSuchField:").is_err());
        assert!(status_field("/nonexistent/status", "VmRSS:").is_err());
    }

    #[test]
    fn a_zero_baseline_gives_no_ratio() {
        assert_eq!(ratio(3.0, 2.0), 1.5);
        assert!(ratio(3.0, 0.0).is_nan());
        assert!(ratio(0.0, 0.0).is_nan());
        assert!(ratio(3.0, -1.0).is_nan());
        assert!(ratio(f64::NAN, 1.0).is_nan());
    }
}
