//! Benchmarks of taps against a raw tokio baseline measured in the same run. (Work in progress.)
