//! Typed ids. Each is recorded as the text it always was (`run-1/call-10`, `ticket-3`,
//! `run-1/effect-2`), so no recorded byte changes; in memory the type says which
//! kind of id a value is, and numbered ids order by their number (`call-10` after
//! `call-9`), so maps keyed by them list calls, tickets and effects in the
//! order they were made without parsing numbers back out of text. Episode, run and
//! agent ids are still plain strings.

use std::cmp::Ordering;
use std::fmt;
use std::ops::Deref;

use schemars::JsonSchema;
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

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The id as recorded.
            #[must_use]
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

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
    fn ids_of_other_runs_or_without_numbers_order_by_text_first() {
        let mut ids: Vec<TicketId> = ["ticket-2", "review", "ticket-10", "other-1"]
            .into_iter()
            .map(TicketId::from)
            .collect();
        ids.sort();
        assert_eq!(ids, ["other-1", "review", "ticket-2", "ticket-10"]);
    }
}
