//! Crashes and damage: writers and runs killed with SIGKILL at random moments, and
//! damaged logs that must never be taken for a torn write.

mod effect_crash;
mod engine_crash;
mod store_crash;
mod store_damage;
mod worker_crash;
