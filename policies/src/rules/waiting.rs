//! Waiting (docs/governance.md#waiting), `[waiting]`: how long an agent's `wait` may be,
//! and whether the time a run spends waiting counts against its episodes' wall-time
//! budgets.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::locate::ptr;
use crate::validate::Checker;

/// The default `max_wait_ms`: 30 days.
pub const DEFAULT_MAX_WAIT_MS: u64 = 30 * 24 * 3_600_000;

/// `[waiting]`: the rules of agents' durable timers (docs/governance.md#waiting).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitingPolicy {
    /// The longest wait an agent may ask for, from the time its response was recorded
    /// (default 30 days). A longer one is refused and the agent told.
    #[serde(default = "default_max_wait_ms")]
    pub max_wait_ms: u64,
    /// Whether the time a run spends waiting on a timer counts against its episodes'
    /// `wall_time_ms` budgets. Default false: a job may wait for tomorrow's slot under the
    /// default one-hour budget; the time waited is recorded either way.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub counts_against_wall_time: bool,
}

impl Default for WaitingPolicy {
    fn default() -> Self {
        Self {
            max_wait_ms: DEFAULT_MAX_WAIT_MS,
            counts_against_wall_time: false,
        }
    }
}

impl WaitingPolicy {
    /// Nothing set: left out of the canonical form, so bundles without it keep their hash.
    #[must_use]
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

fn default_max_wait_ms() -> u64 {
    DEFAULT_MAX_WAIT_MS
}

/// A wait of 0 ms allows none.
pub(crate) fn check(c: &mut Checker<'_>) {
    if c.spec.waiting.max_wait_ms == 0 {
        c.push(
            ptr!["waiting", "max_wait_ms"],
            Code::InvalidValue,
            "max_wait_ms must be at least 1 (leave it out for the default of 30 days)",
        );
    }
}

impl PolicyBundle {
    /// `agent`'s `wait` of `wait_ms` (from its response to the time it is due): allowed up
    /// to `[waiting] max_wait_ms`. The times are the recorded ones, never a clock's.
    #[must_use]
    pub fn decide_wait(&self, agent: &str, wait_ms: i64) -> PolicyDecision {
        let k = DecisionKind::Wait;
        let max = self.spec.waiting.max_wait_ms;
        let rule = "waiting.max_wait_ms";
        if u64::try_from(wait_ms).is_ok_and(|ms| ms > max) {
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                rule,
                format!(
                    "{agent} asks to wait {} s, longer than the {} s the bundle allows",
                    wait_ms / 1000,
                    max / 1000
                ),
                Vec::new(),
            );
        }
        conclude(
            k,
            Verdict::Allow,
            self.hash,
            rule,
            format!(
                "{agent} waits {} s, within the {} s the bundle allows",
                wait_ms.max(0) / 1000,
                max / 1000
            ),
            Vec::new(),
        )
    }

    /// Whether time spent waiting on timers counts against wall-time budgets.
    #[must_use]
    pub fn waiting_counts_against_wall_time(&self) -> bool {
        self.spec.waiting.counts_against_wall_time
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(waiting: &str) -> PolicyBundle {
        PolicyBundle::from_toml_str(
            &format!("bundle = {{ id = \"w\" }}\nagents = [{{ id = \"a\" }}]\n{waiting}"),
            "w.toml",
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_wait_up_to_the_bundle_s_longest_is_allowed_and_a_longer_one_refused() {
        let b = bundle("");
        assert_eq!(b.decide_wait("a", 3_600_000).verdict, Verdict::Allow);
        assert_eq!(
            b.decide_wait("a", i64::try_from(DEFAULT_MAX_WAIT_MS).unwrap())
                .verdict,
            Verdict::Allow
        );
        let d = b.decide_wait("a", i64::try_from(DEFAULT_MAX_WAIT_MS).unwrap() + 1);
        assert_eq!(d.verdict, Verdict::Deny);
        assert_eq!(&*d.rule_id, "waiting.max_wait_ms");
        assert!(!b.waiting_counts_against_wall_time());
        let short = bundle("[waiting]\nmax_wait_ms = 60000\ncounts_against_wall_time = true\n");
        assert_eq!(short.decide_wait("a", 60_001).verdict, Verdict::Deny);
        assert!(short.waiting_counts_against_wall_time());
        // Left out of the canonical form at its default: the hash is a bundle's without it.
        assert_eq!(
            bundle("[waiting]\nmax_wait_ms = 2592000000\n").hash(),
            b.hash()
        );
    }

    #[test]
    fn a_longest_wait_of_zero_is_refused_naming_the_field() {
        let err = PolicyBundle::from_toml_str(
            "bundle = { id = \"w\" }\n[waiting]\nmax_wait_ms = 0\n",
            "w.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("max_wait_ms"), "{err}");
    }
}
