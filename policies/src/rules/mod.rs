//! The governance rules (docs/governance.md), one file each. A rule's file holds its
//! section of the bundle (spec types and their serde defaults), its checks, its step of
//! the normal form, its decision functions and their tests.
//!
//! - `authority.rs`: who may override whom (`agents.authority`).
//! - `handoff.rs`: who may hand off to whom (`[interactions]`), with `flow.rs` for what
//!   the declared flow order forbids.

pub(crate) mod authority;
pub(crate) mod flow;
pub(crate) mod handoff;
