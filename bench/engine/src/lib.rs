//! Benchmarks live in `benches/`; run them with `cargo bench -p docket-bench-engine --bench NAME`.
//! What several of them share: timing a closure and reading the sizes to measure.

use std::time::{Duration, Instant};

/// The fastest of `times` runs of `f`: the least disturbed by the rest of the machine.
pub fn best_of(times: usize, mut f: impl FnMut()) -> Duration {
    (0..times)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// Milliseconds with one decimal.
pub fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// The event counts to measure: `DOCKET_BENCH_EVENTS` (comma-separated), else `default`.
pub fn sizes(default: &[usize]) -> Vec<usize> {
    std::env::var("DOCKET_BENCH_EVENTS")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}
