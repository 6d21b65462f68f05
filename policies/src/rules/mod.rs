//! The governance rules (docs/governance.md), one file each. A rule's file holds its
//! section of the bundle (spec types and their serde defaults), its checks, its step of
//! the normal form, its decision functions and their tests.
//!
//! - `authority.rs`: who may override whom (`agents.authority`).

pub(crate) mod authority;
