//! `taps-bench-worker server|client <json spec>`: the worker processes of the benchmarks
//! (the `taps` CLI runs the same code as `taps bench worker`).

#![forbid(unsafe_code)]

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(taps_bench::worker_main(&args));
}
