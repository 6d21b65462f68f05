//! Episodes in `docket events` and `docket status` (docs/governance.md#episodes): one line per episode
//! event, and the episode tree with each episode's usage against its budget.

use std::fmt::Write as _;

use docket_decider::{EpisodeId, EpisodeTree, RunEvent, condition_name};
use docket_policies::Meter;
use serde_json::{Value, json};

use crate::words::reason as said;

/// One line about an episode or domain event; `None` for other events.
pub(crate) fn describe(event: &RunEvent) -> Option<String> {
    Some(match event {
        RunEvent::EpisodeStarted {
            episode_id,
            parent,
            depth,
            episode_type,
            agent,
            goal,
            ..
        } => format!(
            "{episode_id} ({episode_type}, {agent}) under {parent} at depth {depth}: {goal}"
        ),
        RunEvent::EpisodeActionDenied {
            episode_id,
            agent,
            action,
            decision,
            condition,
            ..
        } => format!(
            "{episode_id} {agent}'s {action} refused ({}): {} [{}]",
            condition_name(*condition),
            said(&decision.reason),
            decision.rule_id
        ),
        RunEvent::EpisodeFinished {
            episode_id, result, ..
        } => format!(
            "{episode_id} {}: {}",
            result.status.as_str(),
            result.summary
        ),
        RunEvent::EpisodeStopped {
            episode_id,
            condition,
            reason,
            rule_id,
            ..
        } => format!(
            "{episode_id} {}: {} [{rule_id}]",
            condition_name(*condition),
            said(reason)
        ),
        RunEvent::DomainWritten {
            domain,
            version,
            agent,
            episode_id,
            by: None,
            ..
        } => format!("{domain} v{version} by {agent} in {episode_id}"),
        RunEvent::DomainWritten {
            domain,
            version,
            agent,
            by: Some(by),
            ..
        } => format!("{domain} v{version} by {by} as {agent}"),
        RunEvent::DomainWriteDenied {
            domain,
            agent,
            decision,
            ..
        } => format!(
            "{agent} may not write {domain}: {} [{}]",
            said(&decision.reason),
            decision.rule_id
        ),
        _ => return None,
    })
}

fn usage(budget: &std::collections::BTreeMap<String, Meter>) -> String {
    budget
        .iter()
        .map(|(k, m)| format!("{k} {}/{}", m.used, m.limit))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tree, indented by depth, for `docket status`.
pub(crate) fn tree_text(out: &mut String, tree: &EpisodeTree) {
    let _ = writeln!(out, "episodes:");
    let mut stack: Vec<&EpisodeId> = tree
        .in_order()
        .into_iter()
        .filter(|e| e.parent.is_none())
        .map(|e| &e.id)
        .collect();
    stack.reverse();
    while let Some(id) = stack.pop() {
        let Some(e) = tree.get(id) else { continue };
        let mut status = e.phase.as_str().to_owned();
        if let Some(c) = e.stop_condition {
            status = format!("{status} ({})", condition_name(c));
        } else if let Some(r) = &e.result {
            status = format!("{status} ({})", r.status.as_str());
        }
        let _ = writeln!(
            out,
            "  {}{} {} by {}: {status}; {}",
            "  ".repeat(e.depth as usize),
            e.id,
            e.episode_type,
            e.agent,
            usage(&e.budget)
        );
        for c in e.children.iter().rev() {
            stack.push(c);
        }
    }
}

/// The tree as JSON, for `docket status --json`.
pub(crate) fn tree_json(tree: &EpisodeTree) -> Value {
    Value::Array(
        tree.in_order()
            .into_iter()
            .map(|e| {
                json!({
                    "id": e.id,
                    "parent": e.parent,
                    "depth": e.depth,
                    "type": e.episode_type,
                    "agent": e.agent,
                    "goal": e.goal,
                    "status": e.phase,
                    "stop_condition": e.stop_condition,
                    "result": e.result,
                    "budget": e.budget,
                    "children": e.children,
                })
            })
            .collect(),
    )
}
