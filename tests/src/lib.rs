//! Shared support for docket's integration tests.
//!
//! The tests themselves live in `tests/tests/*.rs`, one file per capability, and use
//! only the public API of the docket crates and the `docket` binary.
