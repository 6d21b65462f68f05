//! Context scoping (docs/governance.md#handoff-modes,
//! docs/governance.md#handoff-rules-and-blocked-fields): which fields of a payload cross a handoff,
//! and in what form.
//!
//! Resolution, highest precedence first: the rule for the exact pair, `FROM → *`,
//! `* → TO`, `* → *`, the receiving agent's `context_requirements`, the system default.
//! The mode, the allow-list and the translation each come from the first level that sets
//! them. Blocked fields are the union over every level that matches: a blocked field is
//! never passed, whatever else allows it. Then: select (full / scoped / minimal), remove
//! blocked fields, translate (extract, summarise to a token budget, recast role), and cap
//! at the receiver's `max_context_tokens`.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::fieldpath::{leaves, remove, select};
use crate::model::{ConversationTranslation, HandoffMode, MessageRole};
use crate::rules::handoff::InputKind;
use crate::{tokens, translate};

/// The context before scoping, as the handoff audit records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextBefore {
    pub prior_outputs_count: usize,
    pub total_tokens: usize,
}

/// The context after scoping, as the handoff audit records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextAfter {
    pub prior_outputs_count: usize,
    pub total_tokens: usize,
    /// Leaf field paths that crossed the handoff (before any summarising).
    pub fields_included: Vec<String>,
    /// Leaf field paths of the payload that did not.
    pub fields_excluded: Vec<String>,
}

/// The audit record of one scoping decision (the `audit` of `handoff.allowed`,
/// docs/events.md; the engine adds session id and timestamp when it records it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffAudit {
    pub from_agent_id: String,
    pub to_agent_id: String,
    pub handoff_mode: HandoffMode,
    pub context_before_scoping: ContextBefore,
    pub context_after_scoping: ContextAfter,
    pub conversation_translation_applied: bool,
    pub governance_rule_id: Arc<str>,
    pub audit_enabled: bool,
}

/// What crosses a handoff, why, and the audit record of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScopedContext {
    pub decision: PolicyDecision,
    /// The context the receiving agent gets (`null` when the handoff is denied).
    pub context: Value,
    pub audit: HandoffAudit,
}

/// One precedence level that matched the pair.
struct Level<'a> {
    rule_id: String,
    mode: Option<HandoffMode>,
    allowed: Option<&'a [String]>,
    blocked: &'a [String],
    translation: Option<&'a ConversationTranslation>,
    audit_enabled: bool,
}

impl PolicyBundle {
    /// Scopes `payload` for the handoff `from → to`. Denied handoffs pass nothing.
    pub fn scope_context(
        &self,
        from: &str,
        to: &str,
        input: InputKind,
        payload: &Value,
    ) -> ScopedContext {
        let handoff = self.decide_handoff(from, to, input);
        let h = &self.spec.multi_agent_handoffs;
        // BPE counting dominates scoping: count each distinct text once (the context
        // handed on is often the payload itself, byte for byte).
        let before_text = tokens::render(payload);
        let before = ContextBefore {
            prior_outputs_count: prior_outputs(payload),
            total_tokens: tokens::count_text(&before_text),
        };
        let before_tokens = before.total_tokens;
        let count = |context: &Value| {
            if context == payload {
                before_tokens
            } else {
                tokens::count_text(&tokens::render(context))
            }
        };
        let all_leaves = leaves(payload);
        let levels = self.levels(from, to);
        let mut chain = handoff.decision.chain.clone();
        if handoff.decision.verdict != Verdict::Allow {
            let audit = HandoffAudit {
                from_agent_id: from.to_owned(),
                to_agent_id: to.to_owned(),
                handoff_mode: HandoffMode::Minimal,
                context_before_scoping: before,
                context_after_scoping: ContextAfter {
                    prior_outputs_count: 0,
                    total_tokens: 0,
                    fields_included: Vec::new(),
                    fields_excluded: all_leaves,
                },
                conversation_translation_applied: false,
                governance_rule_id: handoff.decision.rule_id.clone(),
                audit_enabled: true,
            };
            let decision = PolicyDecision {
                kind: DecisionKind::ContextScope,
                ..handoff.decision
            };
            return ScopedContext {
                decision,
                context: Value::Null,
                audit,
            };
        }

        // Mode, allow-list and translation: first level that sets each.
        let mode_level = levels.iter().find(|l| l.mode.is_some());
        let mode = mode_level
            .and_then(|l| l.mode)
            .unwrap_or(h.default_handoff_mode);
        let governing = mode_level.map_or_else(
            || "multi_agent_handoffs.default_handoff_mode".to_owned(),
            |l| l.rule_id.clone(),
        );
        for l in &levels {
            let outcome = if l.rule_id == governing {
                StepOutcome::Applied
            } else {
                StepOutcome::Overridden
            };
            chain.push(RuleStep::new(l.rule_id.as_str(), outcome, level_note(l)));
        }
        if mode_level.is_none() {
            chain.push(RuleStep::new(
                governing.as_str(),
                StepOutcome::Applied,
                format!("system default mode {mode:?}"),
            ));
        }
        let allowed: &[String] = levels.iter().find_map(|l| l.allowed).unwrap_or_default();
        let mut blocked: Vec<&str> = levels
            .iter()
            .flat_map(|l| l.blocked.iter().map(String::as_str))
            .collect();
        blocked.extend(h.blocked_context_fields.iter().map(String::as_str));
        blocked.sort_unstable();
        blocked.dedup();
        if !h.blocked_context_fields.is_empty() {
            chain.push(RuleStep::new(
                "multi_agent_handoffs.blocked_context_fields",
                StepOutcome::Applied,
                "fields blocked on every handoff",
            ));
        }

        let selected = match mode {
            HandoffMode::Full => payload.clone(),
            HandoffMode::Scoped => select(payload, allowed),
            HandoffMode::Minimal => select(payload, &h.minimal_context_fields),
        };
        let filtered = remove(selected, &blocked);
        // Most handoffs pass the payload whole: then nothing is excluded.
        let (included, excluded) = if filtered == *payload {
            (all_leaves.clone(), Vec::new())
        } else {
            let included = leaves(&filtered);
            let kept: BTreeSet<&String> = included.iter().collect();
            let excluded: Vec<String> = all_leaves
                .iter()
                .filter(|p| !kept.contains(p))
                .cloned()
                .collect();
            (included, excluded)
        };

        // Translation: the first level that configures one, if translation is enabled.
        let translation = if h.enable_conversation_translation {
            levels
                .iter()
                .find_map(|l| l.translation.map(|t| (l.rule_id.clone(), t)))
        } else {
            None
        };
        let receiver_budget = self
            .agent(to)
            .and_then(|i| self.spec.agents.get(i))
            .and_then(|a| a.context_requirements.as_ref())
            .and_then(|c| c.max_context_tokens);
        let mut context = filtered;
        let mut translated = false;
        if let Some((rule, t)) = translation.filter(|(_, t)| t.enabled) {
            if !t.extract_fields.is_empty() {
                context = remove(select(&context, &t.extract_fields), &blocked);
            }
            if t.summarize {
                let budget = t.max_tokens.or(receiver_budget).unwrap_or(u32::MAX) as usize;
                context = translate::summarize(&context, budget);
            }
            let role = t
                .recast_role
                .or(t.recast_agent_outputs.then_some(MessageRole::System));
            if let Some(role) = role {
                context = translate::recast(context, role, from);
            }
            translated = true;
            chain.push(RuleStep::new(
                rule.as_str(),
                StepOutcome::Applied,
                "conversation translation",
            ));
        }
        let mut context_tokens = count(&context);
        if let Some(max) = receiver_budget {
            if context_tokens > max as usize {
                context = translate::summarize(&context, max as usize);
                context_tokens = count(&context);
                translated = true;
                chain.push(RuleStep::new(
                    format!("agents.{to}.context_requirements.max_context_tokens"),
                    StepOutcome::Applied,
                    format!("summarised to {max} tokens"),
                ));
            }
        }

        let after = ContextAfter {
            prior_outputs_count: prior_outputs(&context),
            total_tokens: context_tokens,
            fields_included: included,
            fields_excluded: excluded,
        };
        let audit_enabled = h.audit_all_handoffs || levels.iter().all(|l| l.audit_enabled);
        let reason = format!(
            "{from} → {to} in {} mode: {} field(s) passed, {} excluded, {} → {} tokens",
            mode_name(mode),
            after.fields_included.len(),
            after.fields_excluded.len(),
            before.total_tokens,
            after.total_tokens
        );
        let rule_id: Arc<str> = Arc::from(governing.as_str());
        let audit = HandoffAudit {
            from_agent_id: from.to_owned(),
            to_agent_id: to.to_owned(),
            handoff_mode: mode,
            context_before_scoping: before,
            context_after_scoping: after,
            conversation_translation_applied: translated,
            governance_rule_id: rule_id.clone(),
            audit_enabled,
        };
        let decision = conclude(
            DecisionKind::ContextScope,
            Verdict::Allow,
            self.hash,
            rule_id,
            reason,
            chain,
        );
        ScopedContext {
            decision,
            context,
            audit,
        }
    }

    fn levels(&self, from: &str, to: &str) -> Vec<Level<'_>> {
        let rules = &self.spec.multi_agent_handoffs.agent_handoff_rules;
        let mut out = Vec::new();
        for key in [(from, to), (from, "*"), ("*", to), ("*", "*")] {
            let idx = self
                .handoff_rules
                .get(&(key.0.to_owned(), key.1.to_owned()));
            if let Some(r) = idx.and_then(|i| rules.get(*i)) {
                out.push(Level {
                    rule_id: r.id.clone(),
                    mode: r.handoff_mode,
                    allowed: r.allowed_context_fields.as_deref(),
                    blocked: &r.blocked_context_fields,
                    translation: r.conversation_translation.as_ref(),
                    audit_enabled: r.audit_enabled,
                });
            }
        }
        let receiver = self.agent(to).and_then(|i| self.spec.agents.get(i));
        if let Some(c) = receiver.and_then(|a| a.context_requirements.as_ref()) {
            out.push(Level {
                rule_id: format!("agents.{to}.context_requirements"),
                mode: c.handoff_mode,
                allowed: c.allowed_context_fields.as_deref(),
                blocked: &c.blocked_context_fields,
                translation: c.conversation_translation.as_ref(),
                audit_enabled: true,
            });
        }
        out
    }
}

fn level_note(l: &Level<'_>) -> String {
    let mut parts = Vec::new();
    if let Some(m) = l.mode {
        parts.push(format!("mode {}", mode_name(m)));
    }
    if let Some(a) = l.allowed {
        parts.push(format!("allows [{}]", a.join(", ")));
    }
    if !l.blocked.is_empty() {
        parts.push(format!(
            "blocks [{}] (blocked fields apply at every level)",
            l.blocked.join(", ")
        ));
    }
    if l.translation.is_some() {
        parts.push("translation".to_owned());
    }
    if parts.is_empty() {
        "matches, sets nothing".to_owned()
    } else {
        parts.join("; ")
    }
}

fn mode_name(m: HandoffMode) -> &'static str {
    match m {
        HandoffMode::Full => "full",
        HandoffMode::Scoped => "scoped",
        HandoffMode::Minimal => "minimal",
    }
}

fn prior_outputs(v: &Value) -> usize {
    match v.get("prior_outputs") {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}
