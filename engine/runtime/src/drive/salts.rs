//! The salts of payload encoding 3 (docs/events.md#values-committed-apart).
//!
//! A salt must be unguessable, or a digest in the log would let anyone test a guessed
//! value against it; so salts come from the operating system's random source, never from
//! the decider. Each run gets a 32-byte key drawn from it when this process first records
//! for the run, and a value's salt is the key's BLAKE3 keyed hash of the value (cut to
//! 16 bytes): the same value recorded again by the run in this process gets the same
//! disclosure, stored once, as encoding 2 stores content once. The key never leaves
//! memory; a run resumed by another process salts its new values with a new key.

use std::collections::HashMap;
use std::sync::Mutex;

use docket_decider::SALT_BYTES;

/// Each run's salt key, by run id.
#[derive(Default)]
pub(super) struct SaltKeys(Mutex<HashMap<String, [u8; 32]>>);

/// The salts of one append.
pub(super) struct RunSalts([u8; 32]);

impl SaltKeys {
    /// The salt source of `run` (its key drawn now if this process has none yet).
    /// A failing OS source is an error: a fixed key would make salts guessable.
    pub(super) fn for_run(&self, run: &str) -> Result<RunSalts, String> {
        let mut keys = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(key) = keys.get(run) {
            return Ok(RunSalts(*key));
        }
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| e.to_string())?;
        keys.insert(run.to_owned(), key);
        Ok(RunSalts(key))
    }
}

impl RunSalts {
    /// The salt of the value `material` stands for.
    pub(super) fn salt(&mut self, material: &[u8]) -> [u8; SALT_BYTES] {
        let hash = blake3::keyed_hash(&self.0, material);
        let mut salt = [0u8; SALT_BYTES];
        salt.copy_from_slice(&hash.as_bytes()[..SALT_BYTES]);
        salt
    }
}
