//! The handoff audit says what crossed (docs/governance.md#the-handoff-audit): for random
//! payloads, handoff rules and translations, every field of the audit equals what an
//! independent reading of the delivered context gives (`audit_reading.rs`, which shares
//! no code with the scoping).

use std::collections::BTreeSet;

use super::audit_reading::{leaf_paths, read, summarised, tokens};

use docket_policies::{
    DecisionKind, InputKind, PolicyBundle, PolicyDecision, RuleStep, ScopedContext, StepOutcome,
    Verdict,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Keys payloads are made of, so that rules often name fields a payload has.
const KEYS: [&str; 6] = ["a", "b", "c", "id", "notes", "x"];
const WORDS: [&str; 8] = [
    "claim", "fraud", "score", "low", "high", "the", "policy", "reviewed",
];

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(&KEYS[..]).prop_map(str::to_owned)
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-1000i64..100_000).prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        prop::collection::vec(prop::sample::select(&WORDS[..]), 0..40)
            .prop_map(|w| Value::from(w.join(" "))),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 40, 5, |inner| {
        prop_oneof![
            prop::collection::btree_map(key(), inner.clone(), 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            prop::collection::vec(inner, 0..4).prop_map(Value::Array),
        ]
    })
}

/// Mostly objects, as agents' outputs are; sometimes a bare value.
fn payload() -> impl Strategy<Value = Value> {
    prop_oneof![
        9 => prop::collection::btree_map(key(), value(), 0..6)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        1 => value(),
    ]
}

/// A dotted field path over [`KEYS`] (sometimes `*`).
fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(prop_oneof![4 => key(), 1 => Just("*".to_owned())], 1..3)
        .prop_map(|segs| segs.join("."))
}

#[derive(Debug, Clone)]
struct Translation {
    extract: Vec<String>,
    summarize: bool,
    max_tokens: u32,
    role: Option<&'static str>,
}

#[derive(Debug, Clone)]
struct Rules {
    mode: &'static str,
    allowed: Vec<String>,
    blocked: Vec<String>,
    translation: Option<Translation>,
    cap: Option<u32>,
    context_scope: Option<&'static str>,
}

fn rules() -> impl Strategy<Value = Rules> {
    let translation = (
        prop::collection::vec(path(), 0..3),
        any::<bool>(),
        1u32..160,
        prop::option::of(prop::sample::select(&["system", "user", "assistant"][..])),
    )
        .prop_map(|(extract, summarize, max_tokens, role)| Translation {
            extract,
            summarize,
            max_tokens,
            role,
        });
    (
        prop::sample::select(&["full", "scoped", "minimal"][..]),
        prop::collection::vec(path(), 0..4),
        prop::collection::vec(path(), 0..3),
        prop::option::of(translation),
        prop::option::of(1u32..300),
        prop::option::of(prop::sample::select(&["full", "scoped", "minimal"][..])),
    )
        .prop_map(
            |(mode, allowed, mut blocked, translation, cap, context_scope)| {
                blocked.retain(|b| !allowed.contains(b));
                Rules {
                    mode,
                    allowed,
                    blocked,
                    translation,
                    cap,
                    context_scope,
                }
            },
        )
}

fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("\"{i}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

fn bundle(r: &Rules) -> PolicyBundle {
    let mut receiver = String::new();
    if let Some(cap) = r.cap {
        receiver.push_str(&format!("max_context_tokens = {cap}\n"));
    }
    if let Some(scope) = r.context_scope {
        receiver.push_str(&format!("context_scope = \"{scope}\"\n"));
    }
    let receiver = if receiver.is_empty() {
        String::new()
    } else {
        format!("[agents.context_requirements]\n{receiver}")
    };
    let mut rule = format!(
        "[[multi_agent_handoffs.agent_handoff_rules]]\nid = \"pair\"\nfrom_agent_id = \"a\"\n\
         to_agent_id = \"b\"\nhandoff_mode = \"{}\"\nblocked_context_fields = {}\n",
        r.mode,
        list(&r.blocked)
    );
    if r.mode == "scoped" {
        rule.push_str(&format!("allowed_context_fields = {}\n", list(&r.allowed)));
    }
    if let Some(t) = &r.translation {
        let role = t
            .role
            .map_or(String::new(), |role| format!(", recast_role = \"{role}\""));
        rule.push_str(&format!(
            "conversation_translation = {{ extract_fields = {}, summarize = {}, max_tokens = {}{role} }}\n",
            list(&t.extract),
            t.summarize,
            t.max_tokens
        ));
    }
    let src = format!(
        "bundle = {{ id = \"t\" }}\n[[agents]]\nid = \"a\"\n[[agents]]\nid = \"b\"\n{receiver}\
         [interactions]\nallowed = [{{ from = \"a\", to = \"b\" }}]\n\
         [multi_agent_handoffs]\ndefault_handoff_mode = \"full\"\n{rule}"
    );
    PolicyBundle::from_toml_str(&src, "t.toml").unwrap_or_else(|e| panic!("{e}\n{src}"))
}

/// Checks `s`, the scoping of `payload` under `r`, against the independent reading.
fn check(r: &Rules, payload: &Value, s: &ScopedContext, prior: bool) -> Result<(), TestCaseError> {
    let audit = &s.audit;
    let delivered = &s.context;
    let before = &audit.context_before_scoping;
    let after = &audit.context_after_scoping;
    prop_assert_eq!(before.total_tokens, tokens(payload));
    prop_assert_eq!(after.total_tokens, tokens(delivered), "{}", delivered);

    let recast = r.translation.as_ref().is_some_and(|t| t.role.is_some());
    let reading = read(delivered, recast && !delivered.is_null());
    if recast && !delivered.is_null() {
        prop_assert_eq!(&delivered["source_agent_id"], "a");
    }
    let payload_leaves = leaf_paths(payload);
    let included: BTreeSet<String> = match (&reading.summary_lines, delivered) {
        (_, Value::Null) => BTreeSet::new(),
        (Some(lines), _) => summarised(lines, &payload_leaves),
        (None, _) => leaf_paths(&reading.content)
            .intersection(&payload_leaves)
            .cloned()
            .collect(),
    };
    let excluded: BTreeSet<String> = payload_leaves.difference(&included).cloned().collect();
    prop_assert_eq!(
        &after.fields_included,
        &included.iter().cloned().collect::<Vec<_>>()
    );
    prop_assert_eq!(
        &after.fields_excluded,
        &excluded.iter().cloned().collect::<Vec<_>>()
    );

    // A summary: asked for by the translation, or made to fit the receiver's budget.
    let asked = r.translation.as_ref().filter(|t| t.summarize);
    if asked.is_some() {
        prop_assert!(audit.summary.is_some(), "a summary was asked for");
    }
    match &audit.summary {
        Some(summary) => {
            prop_assert!(summary.max_tokens >= 1);
            prop_assert!(after.total_tokens <= summary.max_tokens);
            if let Some(t) = asked {
                prop_assert!(summary.max_tokens <= t.max_tokens as usize);
            }
            if let Some(cap) = r.cap {
                prop_assert!(summary.max_tokens <= cap as usize);
            }
            match &reading.summary_lines {
                Some(lines) => {
                    prop_assert_eq!(summary.lines_kept, lines.len());
                    prop_assert_eq!(Some(summary.lines_omitted as u64), reading.fields_omitted);
                }
                None => {
                    prop_assert!(delivered.is_null(), "no summary delivered: {}", delivered);
                    prop_assert_eq!(summary.lines_kept, 0);
                }
            }
            prop_assert_eq!(summary.empty, summary.lines_kept == 0);
            prop_assert!(audit.conversation_translation_applied);
        }
        None => prop_assert!(reading.summary_lines.is_none(), "{}", delivered),
    }
    if let Some(cap) = r.cap {
        prop_assert!(
            after.total_tokens <= cap as usize,
            "over the receiver's budget"
        );
    }

    // Prior outputs: one offered, one crossed when something of it did.
    let crossed = if !payload_leaves.is_empty() {
        !included.is_empty()
    } else if payload.is_object() {
        false
    } else {
        match &reading.summary_lines {
            Some(lines) => !lines.is_empty(),
            None => !delivered.is_null(),
        }
    };
    prop_assert_eq!(before.prior_outputs_count, usize::from(prior));
    prop_assert_eq!(after.prior_outputs_count, usize::from(prior && crossed));
    Ok(())
}

fn authority() -> PolicyDecision {
    PolicyDecision {
        kind: DecisionKind::ContextScope,
        verdict: Verdict::Allow,
        rule_id: "agents.b.context_requirements.requires_prior_outputs".into(),
        reason: "b requires a's latest outputs".into(),
        bundle_hash: PolicyBundle::from_toml_str("bundle = { id = \"t\" }", "t.toml")
            .unwrap()
            .hash(),
        chain: vec![RuleStep::new(
            "agents.b.context_requirements.requires_prior_outputs",
            StepOutcome::Applied,
            "required prior output",
        )],
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_audit_field_is_what_the_receiver_got(r in rules(), payload in payload()) {
        let b = bundle(&r);
        let handoff = b.scope_context("a", "b", InputKind::Decision, &payload);
        check(&r, &payload, &handoff, false)?;
        let prior = b.scope_prior_output("a", "b", &payload, &authority());
        check(&r, &payload, &prior, true)?;
    }
}

#[test]
fn a_summary_recast_as_a_message_stays_within_its_budget() {
    let r = Rules {
        mode: "full",
        allowed: Vec::new(),
        blocked: Vec::new(),
        translation: Some(Translation {
            extract: Vec::new(),
            summarize: true,
            max_tokens: 30,
            role: Some("system"),
        }),
        cap: None,
        context_scope: None,
    };
    let payload = json!({
        "fraud_score": 0.2,
        "risk_level": "low",
        "fraud_indicators": ["incident_within_90_days_of_policy_start", "prior_claims"],
        "notes": "the claimant reported the incident the day after it happened",
    });
    let s = bundle(&r).scope_context("a", "b", InputKind::Decision, &payload);
    let summary = s.audit.summary.clone().expect("summarised");
    assert_eq!(summary.max_tokens, 30);
    assert!(s.audit.context_after_scoping.total_tokens <= 30, "{s:?}");
    assert_eq!(
        s.audit.context_after_scoping.total_tokens,
        tokens(&s.context)
    );
    assert_eq!(s.context["role"], "system");

    // A budget nothing fits: nothing is delivered, and the audit says so.
    let tight = Rules {
        translation: Some(Translation {
            max_tokens: 5,
            ..r.translation.clone().unwrap()
        }),
        ..r
    };
    let s = bundle(&tight).scope_context("a", "b", InputKind::Decision, &payload);
    assert_eq!(s.context, Value::Null);
    let summary = s.audit.summary.clone().expect("summarised");
    assert!(summary.empty && summary.lines_kept == 0 && summary.lines_omitted == 4);
    assert!(s.audit.context_after_scoping.fields_included.is_empty());
    assert_eq!(s.audit.context_after_scoping.fields_excluded.len(), 4);
    assert!(
        s.decision.reason.contains("summarised to nothing"),
        "{}",
        s.decision.reason
    );
}

#[test]
fn fields_removed_by_extraction_are_not_counted_as_included() {
    let r = Rules {
        mode: "full",
        allowed: Vec::new(),
        blocked: Vec::new(),
        translation: Some(Translation {
            extract: vec!["a".to_owned()],
            summarize: false,
            max_tokens: 100,
            role: None,
        }),
        cap: None,
        context_scope: None,
    };
    let payload = json!({"a": 1, "b": {"c": 2}});
    let s = bundle(&r).scope_context("a", "b", InputKind::Decision, &payload);
    assert_eq!(s.context, json!({"a": 1}));
    assert_eq!(s.audit.context_after_scoping.fields_included, ["a"]);
    assert_eq!(s.audit.context_after_scoping.fields_excluded, ["b.c"]);
}
