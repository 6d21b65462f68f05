//! Typed ids. Each is recorded as the text it always was (`run-1/call-10`, `ticket-3`,
//! `run-1/effect-2`), so no recorded byte changes; in memory the type says which
//! kind of id a value is, and numbered ids order by their number (`call-10` after
//! `call-9`), so maps keyed by them list calls, tickets and effects in the
//! order they were made without parsing numbers back out of text.

use std::cmp::Ordering;
use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

/// The text before an id's trailing number, and the number (`run-1/call-10` →
/// (`run-1/call-`, 10)); ids without one order as text, before numbered ones.
fn split_number(id: &str) -> (&str, Option<u64>) {
    let digits = id.len() - id.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 19 {
        return (id, None);
    }
    let (prefix, number) = id.split_at(id.len() - digits);
    (prefix, number.parse().ok())
}

/// Orders an id type by its trailing number (`call-9` before `call-10`).
macro_rules! ordered_by_number {
    ($($name:ident),*) => {$(
        impl Ord for $name {
            fn cmp(&self, other: &Self) -> Ordering {
                let (a, n) = split_number(&self.0);
                let (b, m) = split_number(&other.0);
                a.cmp(b).then(n.cmp(&m)).then_with(|| self.0.cmp(&other.0))
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                Some(self.cmp(other))
            }
        }
    )*};
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The id as recorded.
            #[must_use]
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> Self {
                Self(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                Self(id.to_owned())
            }
        }

        impl From<&String> for $name {
            fn from(id: &String) -> Self {
                Self(id.clone())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }
    };
}

id_type!(
    /// One agent call: `{run}/call-N`, numbered in the order calls were scheduled. Agents
    /// see it as `request_id` and treat it as an idempotency key.
    CallId
);
id_type!(
    /// A human ticket: `ticket-N`, numbered in the order tickets were opened.
    TicketId
);
id_type!(
    /// A side effect: `{run}/effect-N`, numbered in the order effects were requested.
    EffectId
);
id_type!(
    /// A governed tool call: `{run}/tool-N`, numbered in the order `call_tool` actions
    /// were decided.
    ToolCallId
);
id_type!(
    /// A durable timer: `{run}/timer-N`, numbered in the order `wait` actions were
    /// decided.
    TimerId
);
id_type!(
    /// An outside event received by a run: `{run}/signal-N`, numbered in the order
    /// `signal.received` events were recorded.
    SignalId
);
id_type!(
    /// A run: chosen by the runtime (or the user) and recorded in `run.requested`.
    RunId
);
id_type!(
    /// An episode of the run's tree: `ep-1` is the root, children are numbered in the
    /// order they were spawned.
    EpisodeId
);
// Agent names order as text, as the bundle's and the state's maps always listed them.
id_type!(
    /// An agent, by the name the policy bundle gives it.
    #[derive(PartialOrd, Ord)]
    AgentId
);

ordered_by_number!(
    CallId, TicketId, EffectId, ToolCallId, TimerId, SignalId, RunId, EpisodeId
);

// Agent ids order, compare and hash exactly as their text, so maps keyed by them can be
// looked up by a name from the bundle.
impl std::borrow::Borrow<str> for AgentId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl EpisodeId {
    /// The root episode, `ep-1`: the run's own.
    #[must_use]
    pub fn root() -> Self {
        Self(ROOT_EPISODE.to_owned())
    }

    /// The `n`th episode of a run, `ep-n` (the root is the first).
    #[must_use]
    pub fn numbered(n: usize) -> Self {
        Self(format!("ep-{n}"))
    }
}

/// Why a new run id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "run id {id:?} {why}; use letters, digits, '.', '_' or '-' (at most 128, starting with a letter or digit)"
)]
pub struct InvalidRunId {
    /// The id as given.
    pub id: String,
    /// What is wrong with it.
    pub why: String,
}

impl RunId {
    /// Longest run id accepted for a new run.
    pub const MAX_LEN: usize = 128;

    /// A run id for a new run, checked: 1 to 128 ASCII letters, digits, `.`, `_` or `-`,
    /// starting with a letter or digit. Call ids are `{run}/call-N` and the id names the
    /// run in paths and URLs, so spaces, slashes and other punctuation are refused. (Ids
    /// of runs already recorded are read as they are.)
    ///
    /// # Errors
    /// [`InvalidRunId`] saying what is wrong.
    pub fn parse(id: &str) -> Result<Self, InvalidRunId> {
        let other = id
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')));
        let why = if id.is_empty() {
            Some("is empty".to_owned())
        } else if id.len() > Self::MAX_LEN {
            Some("is longer than 128 characters".to_owned())
        } else if let Some(c) = other {
            Some(format!("has {c:?}"))
        } else if !id.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            Some("does not start with a letter or digit".to_owned())
        } else {
            None
        };
        match why {
            Some(why) => Err(InvalidRunId {
                id: id.to_owned(),
                why,
            }),
            None => Ok(Self(id.to_owned())),
        }
    }
}

/// The root episode's id as recorded.
pub const ROOT_EPISODE: &str = "ep-1";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_ids_order_by_number_and_keep_their_text() {
        let mut calls: Vec<CallId> = ["run-1/call-10", "run-1/call-9", "run-1/call-1"]
            .into_iter()
            .map(CallId::from)
            .collect();
        calls.sort();
        assert_eq!(calls, ["run-1/call-1", "run-1/call-9", "run-1/call-10"]);
        assert_eq!(
            serde_json::to_string(&calls[2]).expect("encodes"),
            "\"run-1/call-10\""
        );
        let back: CallId = serde_json::from_str("\"run-1/call-10\"").expect("decodes");
        assert_eq!(back, calls[2]);
    }

    #[test]
    fn new_run_ids_are_checked() {
        assert_eq!(RunId::parse("geo-1.b_2").expect("fine"), "geo-1.b_2");
        for (bad, why) in [
            ("", "empty"),
            ("a b", "has ' '"),
            ("x/y", "has '/'"),
            ("-x", "start with"),
            (&"r".repeat(129), "longer"),
        ] {
            let err = RunId::parse(bad).expect_err(bad);
            assert!(err.to_string().contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn ids_of_other_runs_or_without_numbers_order_by_text_first() {
        let mut ids: Vec<TicketId> = ["ticket-2", "review", "ticket-10", "other-1"]
            .into_iter()
            .map(TicketId::from)
            .collect();
        ids.sort();
        assert_eq!(ids, ["other-1", "review", "ticket-2", "ticket-10"]);
    }
}
