//! Side effects (docs/governance.md#side-effects), the `[[side_effects]]` section and each
//! agent's `side_effects`: kill switch first, then a policy for the effect's kind and lane (none
//! means deny), the agent's permission, the idempotency key, the attempt cap per key, the dry
//! run, and human approval; and the browser lane a policy may mark (sandbox first, drift
//! evidence, manual review on unstable selectors: docs/governance.md#browser-lane).

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::canonical::sort_dedup;
use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::locate::{Pointer, ptr};
use crate::model::BundleSpec;
use crate::validate::Checker;

/// What a side effect of one kind in one lane needs before it runs
/// (docs/governance.md#side-effects).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SideEffectPolicy {
    pub id: String,
    /// e.g. `publish`, `dm`, `like`, `comment`.
    pub kind: String,
    /// e.g. `api`, `browser`; `*` for every lane.
    #[serde(default = "star")]
    pub lane: String,
    #[serde(default = "yes")]
    pub dry_run_required: bool,
    #[serde(default)]
    pub human_approval_required: bool,
    #[serde(default = "yes")]
    pub idempotency_key_required: bool,
    /// Attempts allowed per idempotency key (by default one attempt unless a human overrides;
    /// docs/governance.md#side-effects).
    #[serde(default = "one")]
    pub retry_cap: u32,
    /// Kill switch that stops this effect; defaults to the lane's own switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_switch_lane: Option<String>,
    /// The agent that re-checks an applied effect whose verification failed or is unknown
    /// (the verifier re-checks it, never the agent that asked: docs/governance.md#side-effects);
    /// without one the effect goes to a human for review.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier: Option<String>,
    /// Marks this policy's lane as a browser lane: the executor drives a page, so every
    /// result must carry drift evidence, unstable selectors send the effect to a person,
    /// and (by default) it runs against a sandbox target before the real one
    /// (docs/governance.md#browser-lane). Absent: not a browser lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser: Option<BrowserLane>,
    /// A second look before it goes out (a message, a post): the asking episode must have
    /// a child of the critique class that finished ok before the effect is admitted,
    /// unless a person approves each execution (`human_approval_required`), which is the
    /// second look then (docs/governance.md#a-second-look-before-high-stakes-effects).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub critique_first: bool,
}

/// How effects on a browser lane run (docs/governance.md#browser-lane).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrowserLane {
    /// Run the effect against the executor's sandbox target first, and against the real
    /// target only after the sandbox run succeeded with drift evidence. Default true: a
    /// browser lane rehearses unless the bundle says the site has no sandbox.
    #[serde(default = "yes")]
    pub sandbox_first: bool,
}

impl Default for BrowserLane {
    fn default() -> Self {
        Self {
            sandbox_first: true,
        }
    }
}

fn star() -> String {
    "*".to_owned()
}

fn yes() -> bool {
    true
}

fn one() -> u32 {
    1
}

/// One policy per kind and lane, attempt caps of at least 1, verifiers that are agents,
/// and every kind an agent may request governed by a policy.
pub(crate) fn check(c: &mut Checker<'_>) {
    let spec = c.spec;
    let mut seen = BTreeSet::new();
    for (i, s) in spec.side_effects.iter().enumerate() {
        let p = ptr!["side_effects", i];
        if !seen.insert((s.kind.as_str(), s.lane.as_str())) {
            c.push(
                p.key("lane"),
                Code::Duplicate,
                format!(
                    "side effect `{}` in lane `{}` has two policies",
                    s.kind, s.lane
                ),
            );
        }
        if s.retry_cap == 0 {
            c.push(
                p.key("retry_cap"),
                Code::InvalidValue,
                "retry_cap counts attempts and must be at least 1",
            );
        }
        if s.browser.is_some() && s.lane == "*" {
            c.push(
                p.key("browser"),
                Code::InvalidValue,
                format!(
                    "a browser lane is one lane: side effect `{}` in lane `*` would make every lane of `{}` a browser lane; name the lane",
                    s.kind, s.kind
                ),
            );
        }
        if let Some(v) = &s.verifier
            && !c.agents.contains(v.as_str())
        {
            c.push(
                p.key("verifier"),
                Code::UnknownReference,
                format!("verifier `{v}` is not an agent of this bundle"),
            );
        }
    }
    let governed: BTreeSet<&str> = spec.side_effects.iter().map(|s| s.kind.as_str()).collect();
    for (i, a) in spec.agents.iter().enumerate() {
        for (j, k) in a.side_effects.iter().enumerate() {
            if !governed.contains(k.as_str()) {
                c.push(
                    ptr!["agents", i, "side_effects", j],
                    Code::UnknownReference,
                    format!("no side-effect policy governs kind `{k}`"),
                );
            }
        }
    }
}

/// The side-effect policies' rule ids.
pub(crate) fn rule_ids(spec: &BundleSpec, ids: &mut Vec<(String, Pointer)>) {
    ids.extend(
        spec.side_effects
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), ptr!["side_effects", i, "id"])),
    );
}

/// Normal form: policies sorted by id, each agent's permitted kinds sorted.
pub(crate) fn normalize(s: &mut BundleSpec) {
    s.side_effects.sort_by(|a, b| a.id.cmp(&b.id));
    for a in &mut s.agents {
        sort_dedup(&mut a.side_effects);
    }
}

/// The kill switch that stops every lane.
pub const GLOBAL_KILL_SWITCH: &str = "global";

/// A side effect an agent asks to execute, with what has happened so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideEffectRequest {
    pub agent: String,
    pub kind: String,
    pub lane: String,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// A dry run of this effect passed.
    #[serde(default)]
    pub dry_run_passed: bool,
    /// A human approved this execution (also overrides the attempt cap).
    #[serde(default)]
    pub human_approved: bool,
    /// A sandbox run of this effect succeeded with drift evidence (browser lanes with
    /// `sandbox_first`).
    #[serde(default)]
    pub sandbox_passed: bool,
    /// A child episode of the critique class finished ok in the asking episode before
    /// the effect was asked for (policies with `critique_first`).
    #[serde(default)]
    pub critiqued: bool,
    /// Which attempt this is for the idempotency key, from 1.
    pub attempt: u32,
    /// Kill switches engaged right now: `global` or lane names.
    #[serde(default)]
    pub engaged_kill_switches: Vec<String>,
}

impl PolicyBundle {
    /// May this side effect execute now?
    pub fn decide_side_effect(&self, req: &SideEffectRequest) -> PolicyDecision {
        self.side_effect_decision(req, false)
    }

    /// May this side effect go on to its dry run and execution gate? The same rules as
    /// [`PolicyBundle::decide_side_effect`] (policy for the kind and lane, the agent's
    /// permission, the idempotency key, the attempt cap per key), except the three that
    /// belong to the moment of execution: the kill switch, the dry run and human
    /// approval, which the chain names as still to come. The engine takes this decision
    /// when an agent asks, and the full one just before executing.
    pub fn decide_side_effect_admission(&self, req: &SideEffectRequest) -> PolicyDecision {
        self.side_effect_decision(req, true)
    }

    /// The browser lane settings of the policy for `kind` in `lane`, when that policy
    /// marks a browser lane (docs/governance.md#browser-lane).
    pub fn browser_lane(&self, kind: &str, lane: &str) -> Option<&BrowserLane> {
        self.side_effect_policy(kind, lane)
            .and_then(|p| p.browser.as_ref())
    }

    /// The side-effect policy for `kind` in `lane` (an exact lane first, then `*`).
    pub fn side_effect_policy(&self, kind: &str, lane: &str) -> Option<&SideEffectPolicy> {
        self.spec
            .side_effects
            .iter()
            .find(|p| p.kind == kind && p.lane == lane)
            .or_else(|| {
                self.spec
                    .side_effects
                    .iter()
                    .find(|p| p.kind == kind && p.lane == "*")
            })
    }

    fn side_effect_decision(&self, req: &SideEffectRequest, admission: bool) -> PolicyDecision {
        let k = DecisionKind::SideEffect;
        let deny = |rule: &str, reason: String, chain| {
            conclude(k, Verdict::Deny, self.hash, rule, reason, chain)
        };
        let mut chain = Vec::new();
        let policy = self.side_effect_policy(&req.kind, &req.lane);
        let switch = policy
            .and_then(|p| p.kill_switch_lane.clone())
            .unwrap_or_else(|| req.lane.clone());
        let checked_now: &[&str] = if admission {
            &[]
        } else {
            &[GLOBAL_KILL_SWITCH, switch.as_str()]
        };
        for &s in checked_now {
            if req.engaged_kill_switches.iter().any(|e| e == s) {
                let rule = format!("kill_switch.{s}");
                chain.push(RuleStep::new(
                    rule.as_str(),
                    StepOutcome::Applied,
                    "engaged",
                ));
                return deny(
                    &rule,
                    format!("kill switch `{s}` is engaged: every side effect in its lanes stops"),
                    chain,
                );
            }
        }
        let Some(p) = policy else {
            return deny(
                "deny_by_default",
                format!(
                    "no side-effect policy for `{}` in lane `{}`: no side effect without a policy decision",
                    req.kind, req.lane
                ),
                chain,
            );
        };
        let pid = p.id.as_str();
        let Some(agent) = self.agent(&req.agent).and_then(|i| self.spec.agents.get(i)) else {
            return deny(
                "agents.unknown",
                format!("unknown agent `{}`", req.agent),
                chain,
            );
        };
        if !agent.side_effects.contains(&req.kind) {
            let rule = side_effect_permission_rule(&req.agent);
            return deny(
                &rule,
                format!(
                    "`{}` has no permission for `{}` side effects (read-only by default; escalate to the parent)",
                    req.agent, req.kind
                ),
                chain,
            );
        }
        chain.push(RuleStep::new(
            pid,
            StepOutcome::Applied,
            format!("policy for {} in lane {}", p.kind, p.lane),
        ));
        if p.idempotency_key_required && req.idempotency_key.as_deref().is_none_or(str::is_empty) {
            return deny(pid, "an idempotency key is required".to_owned(), chain);
        }
        if p.critique_first && !p.human_approval_required && !req.critiqued {
            return deny(
                pid,
                format!(
                    "`{}` in lane `{}` needs a second look first: a critique child episode (trigger `high_stakes_review`) must finish ok in the asking episode before it is asked for",
                    p.kind, p.lane
                ),
                chain,
            );
        }
        if req.attempt > p.retry_cap {
            if !req.human_approved {
                let reason = format!(
                    "attempt {} exceeds retry_cap {} for this idempotency key; only a human may override",
                    req.attempt, p.retry_cap
                );
                return conclude(k, Verdict::NeedsApproval, self.hash, pid, reason, chain);
            }
            chain.push(RuleStep::new(
                pid,
                StepOutcome::Overridden,
                "retry cap overridden by a human",
            ));
        }
        let sandbox_first = p.browser.as_ref().is_some_and(|b| b.sandbox_first);
        if admission {
            let later = [
                (
                    sandbox_first,
                    pid.to_owned(),
                    "browser lane: a sandbox run with drift evidence comes before the real target",
                ),
                (
                    true,
                    format!("kill_switch.{switch}"),
                    "read immediately before execution",
                ),
                (
                    p.dry_run_required,
                    pid.to_owned(),
                    "a passing dry run is required before execution",
                ),
                (
                    p.human_approval_required,
                    pid.to_owned(),
                    "a human approves before execution",
                ),
            ];
            for (required, rule, note) in later {
                if required {
                    chain.push(RuleStep::new(rule, StepOutcome::NotApplicable, note));
                }
            }
            return conclude(
                k,
                Verdict::Allow,
                self.hash,
                pid,
                format!(
                    "`{}` may request `{}` in lane `{}`; execution is decided at its gate",
                    req.agent, p.kind, p.lane
                ),
                chain,
            );
        }
        if p.dry_run_required && !req.dry_run_passed {
            return deny(
                pid,
                "a passing dry run is required before execution".to_owned(),
                chain,
            );
        }
        if sandbox_first && !req.sandbox_passed {
            return deny(
                pid,
                "browser lane: a sandbox run with drift evidence must succeed before the real target"
                    .to_owned(),
                chain,
            );
        }
        if p.human_approval_required && !req.human_approved {
            return conclude(
                k,
                Verdict::NeedsApproval,
                self.hash,
                pid,
                format!("`{}` in lane `{}` needs human approval", p.kind, p.lane),
                chain,
            );
        }
        conclude(
            k,
            Verdict::Allow,
            self.hash,
            pid,
            format!(
                "`{}` may execute `{}` in lane `{}`",
                req.agent, p.kind, p.lane
            ),
            chain,
        )
    }
}

/// The rule that refuses `agent` a side effect it has no permission for (its registry
/// entry's `side_effects` list): in a child episode such a refusal escalates to the
/// parent (docs/governance.md#effects-escalate-to-the-parent).
#[must_use]
pub fn side_effect_permission_rule(agent: &str) -> String {
    format!("agents.{agent}.side_effects")
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUNDLE: &str = r#"
bundle = { id = "t" }
[[agents]]
id = "publisher"
side_effects = ["publish"]
[[side_effects]]
id = "publish-api"
kind = "publish"
lane = "api"
dry_run_required = true
human_approval_required = true
retry_cap = 1
"#;

    fn request() -> SideEffectRequest {
        SideEffectRequest {
            agent: "publisher".into(),
            kind: "publish".into(),
            lane: "api".into(),
            idempotency_key: Some("post-1".into()),
            dry_run_passed: false,
            human_approved: false,
            sandbox_passed: false,
            critiqued: false,
            attempt: 1,
            engaged_kill_switches: vec!["api".into()],
        }
    }

    /// `critique_first` refuses an effect until its episode had a critique pass, unless a
    /// person approves each execution; it adds nothing to a bundle's hash when unset.
    #[test]
    fn critique_first_needs_a_critique_unless_a_person_approves() {
        let critique_first = BUNDLE.replace(
            "human_approval_required = true\n",
            "critique_first = true\n",
        );
        let b = PolicyBundle::from_toml_str(&critique_first, "t.toml").expect("valid");
        let d = b.decide_side_effect_admission(&request());
        assert_eq!(d.verdict, Verdict::Deny, "{d:?}");
        assert_eq!(&*d.rule_id, "publish-api");
        assert!(
            d.reason.contains("needs a second look first"),
            "{}",
            d.reason
        );
        let critiqued = SideEffectRequest {
            critiqued: true,
            ..request()
        };
        assert_eq!(
            b.decide_side_effect_admission(&critiqued).verdict,
            Verdict::Allow
        );
        let approved = PolicyBundle::from_toml_str(
            &BUNDLE.replace("retry_cap = 1\n", "retry_cap = 1\ncritique_first = true\n"),
            "t.toml",
        )
        .expect("valid");
        assert_eq!(
            approved.decide_side_effect_admission(&request()).verdict,
            Verdict::Allow
        );
        let unset = PolicyBundle::from_toml_str(BUNDLE, "t.toml").expect("valid");
        let explicit = PolicyBundle::from_toml_str(
            &BUNDLE.replace("retry_cap = 1\n", "retry_cap = 1\ncritique_first = false\n"),
            "t.toml",
        )
        .expect("valid");
        assert_eq!(unset.hash(), explicit.hash());
    }

    /// Admission leaves the kill switch, the dry run and the approval to the execution
    /// gate (naming them in the chain), but still applies the other rules.
    #[test]
    fn admission_defers_execution_time_rules_and_keeps_the_others() {
        let b = PolicyBundle::from_toml_str(BUNDLE, "t.toml").expect("valid");
        let d = b.decide_side_effect_admission(&request());
        assert_eq!(d.verdict, Verdict::Allow, "{d:?}");
        let deferred: Vec<&str> = d
            .chain
            .iter()
            .filter(|s| s.outcome == StepOutcome::NotApplicable)
            .map(|s| &*s.rule_id)
            .collect();
        assert_eq!(deferred, ["kill_switch.api", "publish-api", "publish-api"]);
        // The full decision still stops at the kill switch.
        assert_eq!(
            &*b.decide_side_effect(&request()).rule_id,
            "kill_switch.api"
        );
        let mut r = request();
        r.attempt = 2;
        assert_eq!(
            b.decide_side_effect_admission(&r).verdict,
            Verdict::NeedsApproval
        );
        r.attempt = 1;
        r.idempotency_key = None;
        assert_eq!(b.decide_side_effect_admission(&r).verdict, Verdict::Deny);
        r.idempotency_key = Some("k".into());
        r.agent = "nobody".into();
        assert_eq!(b.decide_side_effect_admission(&r).verdict, Verdict::Deny);
        assert!(b.side_effect_policy("publish", "browser").is_none());
        assert_eq!(
            b.side_effect_policy("publish", "api")
                .map(|p| p.id.as_str()),
            Some("publish-api")
        );
    }

    const BROWSER: &str = r#"
bundle = { id = "t" }
[[agents]]
id = "engagement"
side_effects = ["comment"]
[[side_effects]]
id = "comment-browser"
kind = "comment"
lane = "browser"
dry_run_required = false
"#;

    fn comment(lane: &str) -> SideEffectRequest {
        SideEffectRequest {
            agent: "engagement".into(),
            kind: "comment".into(),
            lane: lane.into(),
            idempotency_key: Some("comment:1".into()),
            dry_run_passed: false,
            human_approved: false,
            sandbox_passed: false,
            critiqued: false,
            attempt: 1,
            engaged_kill_switches: Vec::new(),
        }
    }

    /// `browser = {}` marks a browser lane with `sandbox_first` at its default (true); a
    /// policy without it is no browser lane; `sandbox_first = false` is kept as written.
    #[test]
    fn a_browser_lane_is_marked_and_sandbox_first_defaults_to_true() {
        let plain = PolicyBundle::from_toml_str(BROWSER, "t.toml").expect("valid");
        assert_eq!(plain.browser_lane("comment", "browser"), None);
        let marked = PolicyBundle::from_toml_str(&format!("{BROWSER}browser = {{}}\n"), "t.toml")
            .expect("valid");
        assert_eq!(
            marked.browser_lane("comment", "browser"),
            Some(&BrowserLane {
                sandbox_first: true
            })
        );
        let no_sandbox = PolicyBundle::from_toml_str(
            &format!("{BROWSER}browser = {{ sandbox_first = false }}\n"),
            "t.toml",
        )
        .expect("valid");
        assert_eq!(
            no_sandbox.browser_lane("comment", "browser"),
            Some(&BrowserLane {
                sandbox_first: false
            })
        );
        assert_eq!(no_sandbox.browser_lane("comment", "api"), None);
    }

    /// Left out of the canonical form when absent, so bundles written before it keep their
    /// hashes; a marked lane, and each value of `sandbox_first`, is a different bundle.
    #[test]
    fn an_absent_browser_marker_keeps_the_hash() {
        let hash = |src: &str| {
            PolicyBundle::from_toml_str(src, "t.toml")
                .expect("valid")
                .hash()
        };
        let marked = format!("{BROWSER}browser = {{}}\n");
        let spelled = format!("{BROWSER}browser = {{ sandbox_first = true }}\n");
        let without = format!("{BROWSER}browser = {{ sandbox_first = false }}\n");
        assert_ne!(hash(BROWSER), hash(&marked));
        assert_eq!(hash(&marked), hash(&spelled));
        assert_ne!(hash(&marked), hash(&without));
        let canonical = PolicyBundle::from_toml_str(BROWSER, "t.toml")
            .expect("valid")
            .canonical_bytes();
        let canonical = String::from_utf8_lossy(&canonical);
        assert!(!canonical.contains("\"browser\":{"), "{canonical}");
    }

    /// A misspelt setting and a browser lane on every lane (`*`) are refused, each naming
    /// its field and line.
    #[test]
    fn browser_settings_are_checked_where_they_are_written() {
        let err = PolicyBundle::from_toml_str(
            &format!("{BROWSER}browser = {{ sandbox = true }}\n"),
            "t.toml",
        )
        .expect_err("unknown setting")
        .to_string();
        assert!(
            err.contains("`sandbox`") && err.contains("t.toml:"),
            "{err}"
        );
        let star = BROWSER.replace("lane = \"browser\"", "lane = \"*\"");
        let err = PolicyBundle::from_toml_str(&format!("{star}browser = {{}}\n"), "t.toml")
            .expect_err("a browser lane on every lane")
            .to_string();
        assert!(
            err.contains("a browser lane is one lane") && err.contains("/side_effects/0/browser"),
            "{err}"
        );
        assert!(err.contains("t.toml:11:1:"), "{err}");
    }

    /// With `sandbox_first`, admission names the sandbox run still to come, and the
    /// decision at the execution gate refuses the real target until a sandbox run passed.
    #[test]
    fn sandbox_first_holds_the_real_target_until_the_sandbox_run_passed() {
        let b = PolicyBundle::from_toml_str(&format!("{BROWSER}browser = {{}}\n"), "t.toml")
            .expect("valid");
        let admitted = b.decide_side_effect_admission(&comment("browser"));
        assert_eq!(admitted.verdict, Verdict::Allow, "{admitted:?}");
        assert!(
            admitted
                .chain
                .iter()
                .any(|s| s.outcome == StepOutcome::NotApplicable && s.note.contains("sandbox run")),
            "{admitted:?}"
        );
        let held = b.decide_side_effect(&comment("browser"));
        assert_eq!(held.verdict, Verdict::Deny);
        assert!(held.reason.contains("sandbox run"), "{held:?}");
        let mut rehearsed = comment("browser");
        rehearsed.sandbox_passed = true;
        assert_eq!(b.decide_side_effect(&rehearsed).verdict, Verdict::Allow);
        let without = PolicyBundle::from_toml_str(
            &format!("{BROWSER}browser = {{ sandbox_first = false }}\n"),
            "t.toml",
        )
        .expect("valid");
        assert_eq!(
            without.decide_side_effect(&comment("browser")).verdict,
            Verdict::Allow
        );
    }
}
