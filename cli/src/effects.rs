//! Side effects in `docket status` (each effect of the run, where it stands, and its
//! receipt or the reason it did not run) and in `docket events` (one line per effect
//! event).

use std::fmt::Write as _;

use serde_json::{Value, json};

use docket_decider::{
    DriftEvidence, DryRunOutcome, EffectReceipt, RunEvent, RunState, SandboxOutcome,
};

use crate::words::{reason as said, word};

/// The effects section of `docket status` (nothing when the run asked for none).
pub(crate) fn list_text(out: &mut String, state: &RunState) {
    if state.effects().is_empty() {
        return;
    }
    let _ = writeln!(out, "effects:");
    for (id, rec) in state.effects() {
        let r = &rec.requested;
        let detail = match (&rec.receipt, &rec.outcome) {
            (Some(receipt), _) => format!(" receipt {}{}", receipt.result, drift_text(receipt)),
            (None, Some((rule, reason))) => format!(" [{rule}] {reason}"),
            (None, None) => String::new(),
        };
        let _ = writeln!(
            out,
            "  {id} {} in lane {} by {} ({}), key {}: {}{detail}",
            r.effect_kind,
            r.lane,
            r.agent,
            r.episode_id,
            rec.key(),
            rec.phase.as_str()
        );
        if let Some(sandbox) = &rec.sandbox {
            let _ = writeln!(
                out,
                "    sandbox run: receipt {}{}",
                sandbox.result,
                drift_text(sandbox)
            );
        }
    }
}

/// A receipt's drift evidence, for the text of `docket status` (browser lanes only).
fn drift_text(receipt: &EffectReceipt) -> String {
    receipt
        .drift
        .as_ref()
        .map(|d| {
            format!(
                ", drift evidence screenshot sha256 {} dom sha256 {}",
                d.screenshot_sha256, d.dom_sha256
            )
        })
        .unwrap_or_default()
}

fn drift_json(drift: Option<&DriftEvidence>) -> Value {
    drift.map_or(
        Value::Null,
        |d| json!({"screenshot_sha256": d.screenshot_sha256, "dom_sha256": d.dom_sha256}),
    )
}

/// The effects of `docket status --json`.
pub(crate) fn list_json(state: &RunState) -> Value {
    Value::Array(
        state
            .effects()
            .iter()
            .map(|(id, rec)| {
                let r = &rec.requested;
                json!({
                    "effect_id": id,
                    "kind": r.effect_kind,
                    "lane": r.lane,
                    "agent": r.agent,
                    "episode_id": r.episode_id,
                    "idempotency_key": rec.key(),
                    "phase": rec.phase.as_str(),
                    "receipt": rec.receipt.as_ref().map(|x| x.result.clone()),
                    "drift": drift_json(rec.receipt.as_ref().and_then(|x| x.drift.as_ref())),
                    "sandbox": rec.sandbox.as_ref().map(|x| json!({
                        "receipt": x.result,
                        "drift": drift_json(x.drift.as_ref()),
                    })),
                    "outcome": rec.outcome.as_ref().map(|(rule, reason)| json!({"rule": rule, "reason": reason})),
                })
            })
            .collect(),
    )
}

/// One line about an effect event, for `docket events` (`None` for other kinds).
pub(crate) fn describe(event: &RunEvent) -> Option<String> {
    Some(match event {
        RunEvent::EffectRequested(e) => format!(
            "{} {} asks for {} in lane {} (key {}, attempt {})",
            e.effect_id,
            e.agent,
            e.effect_kind,
            e.lane,
            e.idempotency_key.as_deref().unwrap_or("none"),
            e.attempt
        ),
        RunEvent::EffectDeduplicated(e) => format!(
            "{} key {} already applied by {}: its receipt is returned",
            e.effect_id, e.idempotency_key, e.of
        ),
        RunEvent::EffectAdmitted(e) => format!(
            "{} admitted{}",
            e.effect_id,
            if e.dry_run { ", dry run next" } else { "" }
        ),
        RunEvent::EffectRefused(e) => {
            let escalated = e
                .escalated_to
                .as_ref()
                .map(|to| format!("; escalated to its parent episode {to}"))
                .unwrap_or_default();
            format!(
                "{} refused: {} [{}]{escalated}",
                e.effect_id,
                said(&e.reason),
                e.rule_id
            )
        }
        RunEvent::EffectReady(e) => {
            format!("{} ready to execute ({})", e.effect_id, word(&e.because))
        }
        RunEvent::EffectStarted(e) => format!(
            "{} started: {} in lane {} key {} attempt {}",
            e.effect_id,
            e.request.kind,
            e.request.lane,
            e.request.idempotency_key,
            e.request.attempt
        ),
        RunEvent::EffectVerifierCalled(e) => {
            format!(
                "{} re-checked by {} ({})",
                e.effect_id, e.verifier, e.request_id
            )
        }
        RunEvent::EffectSettled(e) => {
            format!(
                "{} {} by {}: {}",
                e.effect_id,
                word(&e.status),
                word(&e.by),
                said(&e.reason)
            )
        }
        RunEvent::EffectDryRun(e) => match &e.outcome {
            DryRunOutcome::Report { report } => format!(
                "{} dry run {}{}",
                e.effect_id,
                if report.ok { "passed" } else { "failed" },
                report
                    .message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ),
            DryRunOutcome::Unsupported => {
                format!("{} dry run unsupported by the executor", e.effect_id)
            }
            DryRunOutcome::Error { code, message } => {
                format!("{} dry run {code}: {message}", e.effect_id)
            }
        },
        RunEvent::EffectKillSwitchChecked(e) => format!(
            "{} kill switches: {}{}",
            e.effect_id,
            if e.engaged.is_empty() {
                "none engaged".to_owned()
            } else {
                format!("{} engaged", e.engaged.join(", "))
            },
            e.error
                .as_deref()
                .map(|m| format!(" (unreadable: {m})"))
                .unwrap_or_default()
        ),
        RunEvent::EffectApplied(e) => format!(
            "{} applied: {}{}{}",
            e.effect_id,
            e.receipt.result,
            drift_text(&e.receipt),
            e.reused_from
                .as_ref()
                .map(|of| format!(" (the receipt of {of}, not executed again)"))
                .unwrap_or_default()
        ),
        RunEvent::EffectFailed(e) => format!("{} failed {}: {}", e.effect_id, e.code, e.message),
        RunEvent::EffectSandboxStarted(e) => format!(
            "{} sandbox run first: {} in lane {} key {}",
            e.effect_id, e.request.kind, e.request.lane, e.request.idempotency_key
        ),
        RunEvent::EffectSandboxRan(e) => match &e.outcome {
            SandboxOutcome::Receipt { receipt } => format!(
                "{} sandbox run: {}{}",
                e.effect_id,
                receipt.result,
                if receipt.drift.is_some() {
                    drift_text(receipt)
                } else {
                    ", no drift evidence".to_owned()
                }
            ),
            SandboxOutcome::Error { code, message } => {
                format!("{} sandbox run {code}: {message}", e.effect_id)
            }
        },
        RunEvent::EffectVerified(e) | RunEvent::EffectRecovered(e) => format!(
            "{} verification: {}{}",
            e.effect_id,
            serde_json::to_string(&e.verification).unwrap_or_default(),
            e.cause
                .as_deref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default()
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effect_events_get_a_line_and_other_events_none() {
        let failed = RunEvent::decode(
            "effect.failed",
            br#"{"kind":"effect.failed","effect_id":"r/effect-1","code":"X","message":"m","at_ms":1}"#,
        )
        .expect("an effect.failed event");
        assert_eq!(describe(&failed).as_deref(), Some("r/effect-1 failed X: m"));
        let completed =
            RunEvent::decode("run.completed", br#"{"kind":"run.completed","output":{}}"#)
                .expect("a run.completed event");
        assert_eq!(describe(&completed), None);
    }
}
