//! The agents of docket's social example (seed 004, agent recursion contracts for a social
//! media automation platform) and its outbox, the local "platform" the side effects reach.
//!
//! The orchestrator never posts: it decomposes a campaign into one child episode per role
//! (plan, create, publish, engage) under the bundle's recursion policies and budgets. Each
//! role writes only its own domain; the publisher and the engagement agent ask docket for
//! side effects (a post, a reply, a DM), which the outbox executor carries out once per
//! idempotency key (replies on the browser lane, through the static pages of
//! `examples/social/pages/`: sandbox first, with drift evidence); the verifier proves a
//! post is visible by looking it up in the outbox.
//! A campaign's `trouble` field makes one of the document's stop conditions happen
//! (examples/social/README.md lists them). Every agent is a pure function of its request,
//! so a run replays and a restarted process answers as before.

mod agents;
mod browser;
mod outbox;

pub use agents::{AGENTS, agent};
pub use browser::{drift_evidence, serve_browser, unstable_selectors, visible_text};
pub use outbox::{Outbox, OutboxError, OutboxRecord, serve_effects, serve_lookup};
