//! Benchmarks live in `benches/`; run them with `cargo bench -p docket-bench-engine --bench NAME`.
