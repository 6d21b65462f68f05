//! How many live event streams (`GET /api/runs/{run}/events/stream`) may be open: in all,
//! and per token (docs/api.md#live-events). A stream holds a [`StreamSlot`] for as long
//! as its connection lasts; one over a limit is refused before it is opened, with the
//! status that says whose limit it is and when to try again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::ApiError;

/// The limits on open event streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// Streams open at once, every token's together.
    pub total: usize,
    /// Streams open at once under one token (a browser session counts as its token).
    pub per_token: usize,
}

impl StreamLimits {
    /// `docket serve --max-streams`'s default.
    pub const DEFAULT_TOTAL: usize = 1000;
    /// `docket serve --max-streams-per-token`'s default.
    pub const DEFAULT_PER_TOKEN: usize = 100;
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self {
            total: Self::DEFAULT_TOTAL,
            per_token: Self::DEFAULT_PER_TOKEN,
        }
    }
}

/// Seconds a refused subscriber is told to wait (`Retry-After`).
const RETRY_AFTER_S: u64 = 5;

#[derive(Default)]
struct Open {
    total: usize,
    /// By token name.
    per_token: HashMap<String, usize>,
}

/// The streams open now, counted against [`StreamLimits`].
pub(crate) struct Streams {
    limits: StreamLimits,
    open: Arc<Mutex<Open>>,
}

impl Streams {
    pub(crate) fn new(limits: StreamLimits) -> Self {
        Self {
            limits,
            open: Arc::default(),
        }
    }

    /// A slot for one more stream of `token`, or the refusal: 429 when the token holds
    /// its limit, 503 when the server holds its own.
    pub(crate) fn open(&self, token: &str) -> Result<StreamSlot, ApiError> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let held = open.per_token.get(token).copied().unwrap_or(0);
        if held >= self.limits.per_token {
            return Err(ApiError::too_many_streams(format!(
                "token `{token}` has {held} event streams open, its limit (docket serve --max-streams-per-token): close one, or retry later"
            ))
            .retry_after(RETRY_AFTER_S));
        }
        if open.total >= self.limits.total {
            return Err(ApiError::busy(format!(
                "the server has {} event streams open, its limit (docket serve --max-streams): retry later",
                open.total
            ))
            .retry_after(RETRY_AFTER_S));
        }
        open.total += 1;
        *open.per_token.entry(token.to_owned()).or_default() += 1;
        Ok(StreamSlot {
            open: self.open.clone(),
            token: token.to_owned(),
        })
    }
}

/// One open stream, counted until dropped (when its connection ends).
pub(crate) struct StreamSlot {
    open: Arc<Mutex<Open>>,
    token: String,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.per_token.get_mut(&self.token) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.per_token.remove(&self.token);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{StreamLimits, Streams};

    #[test]
    fn a_token_and_the_server_each_hold_their_limit_and_a_closed_stream_frees_its_slot() {
        let streams = Streams::new(StreamLimits {
            total: 3,
            per_token: 2,
        });
        let a1 = streams.open("a").expect("a's first");
        let _a2 = streams.open("a").expect("a's second");
        let refused = streams.open("a").err().expect("a's third is refused");
        assert_eq!(refused.status.as_u16(), 429);
        let _b1 = streams.open("b").expect("b's first");
        let refused = streams
            .open("b")
            .err()
            .expect("the server's fourth is refused");
        assert_eq!(refused.status.as_u16(), 503);
        drop(a1);
        let _b2 = streams.open("b").expect("a slot freed");
    }
}
