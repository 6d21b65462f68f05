//! docket's event log: append-only, hash-chained, durable by default, crash-safe.
//!
//! Every handoff, policy decision and side effect of a run is an [`Event`] in a stream. The
//! [`EventStore`] trait is what the engine sees; [`EmbeddedStore`] implements it with segment
//! files written by one group-commit writer (one `fdatasync` per batch) and a sled index that
//! can always be rebuilt from the log. The byte format and hash inputs are in `FORMAT.md`.
//!
//! The store knows nothing of policies, agents or workflows: it stores opaque payloads.

// A library reports every failure as an error value naming what and where; it never
// aborts its caller. (Tests are exempt: see clippy.toml.)
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod api;
mod chain;
mod codec;
mod config;
mod embedded;
mod error;
mod event;
#[cfg(any(test, feature = "fault-injection"))]
mod fault;
mod index;
pub mod merkle;
mod reader;
mod recovery;
mod segment;
mod shared;
mod tree;
mod verify;
mod writer;

pub use api::{
    Appended, ConsistencyProof, EventStore, InclusionProof, Snapshot, StreamHead, TreeHead,
    VerifyReport,
};
pub use chain::{EVENT_CONTEXT, GENESIS_CONTEXT, blob_hash, event_hash, genesis};
pub use codec::FORMAT_VERSION;
pub use config::{Durability, StoreConfig};
pub use embedded::{EmbeddedStore, MAX_PAYLOAD, WriterStats};
pub use error::{ChainBreak, Damage, OutsideTree, StoreError};
pub use event::{BlobRef, Event, Hash, NewEvent, Payload, StreamId, WallTime};
#[cfg(any(test, feature = "fault-injection"))]
pub use fault::FaultPlan;
pub use recovery::RecoveryReport;
pub use segment::FileOp;

/// The canonical body encoding of an event: the bytes its hash covers after `prev`.
pub fn canonical_body(event: &Event) -> Vec<u8> {
    codec::body_of(event)
}

#[cfg(test)]
mod tests;
