//! The `docket` commands through the binary and the public API, one module per
//! capability: policies, replay, what-if, fork, inspect, exports, proofs, verification,
//! listings, snapshots, telemetry, https endpoints, a PostgreSQL store, the words commands print, the format pages' snippets.

mod canned;
mod cli_policy;
mod cli_words;
mod demo;
mod doc_snippets;
mod domain_writes;
mod effects_cli;
mod event_words;
mod exports;
mod fork;
mod https;
mod inspect;
mod otlp;
mod pause;
mod policies;
mod postgres;
mod prove;
mod redaction;
mod replay;
mod run_list;
mod run_listing;
mod schedules;
mod shared_data_dir;
mod signals;
mod signing;
mod snapshots;
mod timers;
mod verify;
mod what_if;
mod workflow_load;
