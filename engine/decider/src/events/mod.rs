//! The events layer: the vocabulary of a run's log and its encodings. Every payload type
//! is here, so the state (which folds events) and `decide` (which makes them) import it
//! and it imports neither.
//!
//! - `event.rs`: `RunEvent`, its canonical JSON encoding, `RunRequested` with the
//!   `DECIDER_VERSION` that recorded the run, the versioned behaviours (`docs/events.md`);
//! - `effect.rs`, `tool.rs`, `timer.rs`, `signal.rs`, `overrides.rs`: the payloads of the
//!   `effect.*`, `tool.*`, `timer.*` and `signal.*` events and what a block stopped;
//! - `workflow.rs`: the workflow spec recorded in `run.requested`, and its parsing from
//!   text (`docs/workflow.md`);
//! - `batches.rs`: a log split into its batches, each opened by a recorded input;
//! - `wording.rs`: where events hold words for people, which replay sets aside;
//! - `content.rs` (payload encoding 2: content stored once) and `commit.rs` (payload
//!   encoding 3: values committed apart), rebuilt to the plain payload on read.

mod batches;
// Payload encoding 3: values committed apart (docs/events.md#values-committed-apart).
pub(crate) mod commit;
// Payload encoding 2: content recorded once (docs/events.md#content-stored-once).
pub(crate) mod content;
pub(crate) mod effect;
mod event;
// The recorded inputs' payloads, shared by their events and `decide`.
mod inputs;
pub(crate) mod overrides;
pub(crate) mod signal;
pub(crate) mod timer;
pub(crate) mod tool;
pub(crate) mod workflow;
// Words for people inside events, set aside when replay compares decisions.
mod wording;

pub use batches::{Batches, batches};
pub use event::*;
pub use inputs::{
    AgentCallFailed, AgentResponded, CircuitReading, CircuitWindow, HumanDecided, HumanOverrode,
    HumanWroteDomain, RunCancelled, RunPause,
};
pub use wording::{WORDING, is_wording, same_decisions};
