//! The transition table of `decide`, as code: for each recorded input in each state, the
//! state it leads to, the events it records, the decide file that takes the decision, and
//! the tests that cover it. The tests below run each covering test and check that it
//! records every event its row lists, that every event kind is listed by some row, and
//! that every covering test exists (a renamed test does not compile). The covering tests
//! are canned histories under `tests/`, each in the file of the concern it tests.

use std::cell::RefCell;
use std::collections::BTreeSet;

use crate::RunEvent;
use crate::tests;
use crate::tests::{
    authority, browser, cancel, capability, circuit, classification, context, domain, effect,
    episode, failure, fan_out, handoff, intent, overrides, pause, reassign, response, signal,
    ticket, timer, tool,
};

thread_local! {
    /// The kinds `decide` recorded on this thread while a covering test ran.
    static OBSERVED: RefCell<Option<BTreeSet<&'static str>>> = const { RefCell::new(None) };
}

/// Called by `decide` (in tests only) with every batch it makes.
pub(crate) fn observe(events: &[RunEvent]) {
    OBSERVED.with(|observed| {
        if let Some(kinds) = observed.borrow_mut().as_mut() {
            kinds.extend(events.iter().map(RunEvent::kind));
        }
    });
}

/// The event kinds `decide` records while `test` runs.
fn recorded_by(test: fn()) -> BTreeSet<&'static str> {
    OBSERVED.with(|observed| *observed.borrow_mut() = Some(BTreeSet::new()));
    test();
    OBSERVED.with(|observed| observed.borrow_mut().take().unwrap_or_default())
}

/// A test that covers a transition: a plain test is run again by the table's check; a
/// property test is named only (it runs with its own random inputs).
enum Cover {
    Test(fn()),
    Property(&'static str),
}

/// One row of the table.
struct Transition {
    /// The file under `decide/` that takes the decision.
    concern: &'static str,
    from: &'static str,
    input: &'static str,
    to: &'static str,
    /// Event kinds the transition records (after its input's own event).
    records: &'static [&'static str],
    covered_by: &'static [Cover],
}

use Cover::{Property, Test};

const TRANSITIONS: &[Transition] = &[
    Transition {
        concern: "cancel",
        from: "Running or WaitingForHuman (decider 10)",
        input: "Cancel by a person, with a reason",
        to: "Cancelled (final: open episodes ended, later inputs refused)",
        records: &[],
        covered_by: &[
            Test(cancel::a_running_run_is_cancelled_and_takes_no_later_input),
            Test(cancel::a_run_waiting_for_a_human_is_cancelled),
        ],
    },
    Transition {
        concern: "cancel",
        from: "finished, or recorded by decider 1-9",
        input: "Cancel, or a Cancel naming nobody or giving no reason",
        to: "unchanged: Rejection, nothing recorded",
        records: &[],
        covered_by: &[Test(cancel::cancellations_that_do_not_apply_are_refused)],
    },
    Transition {
        concern: "pause",
        from: "Running or WaitingForHuman, not paused (decider 13)",
        input: "Pause by a person, with a reason; then Unpause",
        to: "the same status, paused: nothing new starts (answers in flight and timers are still recorded); unpaused, it goes on",
        records: &[],
        covered_by: &[Test(
            pause::a_paused_run_starts_nothing_new_records_what_settles_and_goes_on_when_unpaused,
        )],
    },
    Transition {
        concern: "pause",
        from: "paused (for Pause), not paused (for Unpause), finished, or recorded by decider 12",
        input: "Pause or Unpause, or one naming nobody or giving no reason",
        to: "unchanged: Rejection, nothing recorded",
        records: &[],
        covered_by: &[Test(pause::pauses_that_do_not_apply_are_refused)],
    },
    Transition {
        concern: "overrides",
        from: "Blocked (a handoff a policy denied; decider 6)",
        input: "RecordOverride by a role above global_rules",
        to: "Running (the handoff crosses, scoped, rule human.override; the agent's other actions follow)",
        records: &["policy.decided", "handoff.allowed", "agent.call_scheduled"],
        covered_by: &[
            Test(overrides::an_override_lets_a_denied_handoff_cross_scoped_and_the_run_completes),
            Test(overrides::an_override_lets_the_runs_input_past_the_entry_checkpoint),
        ],
    },
    Transition {
        concern: "overrides",
        from: "Blocked (a DANGEROUS verdict; decider 6)",
        input: "RecordOverride by a role above safety_skill",
        to: "Running (the held actions are carried out)",
        records: &["policy.decided", "handoff.allowed", "agent.call_scheduled"],
        covered_by: &[Test(
            overrides::an_override_of_a_dangerous_verdict_carries_out_the_held_actions,
        )],
    },
    Transition {
        concern: "overrides",
        from: "Blocked (a forbidden child type in the root episode; decider 6)",
        input: "RecordOverride by a role above global_rules",
        to: "Running (the root episode reopened, the child episode started, human-authorised)",
        records: &[
            "policy.decided",
            "episode.started",
            "handoff.allowed",
            "agent.call_scheduled",
        ],
        covered_by: &[Test(overrides::an_override_authorises_a_forbidden_child_type)],
    },
    Transition {
        concern: "overrides",
        from: "Blocked (the failure ladder's hard stop; decider 6)",
        input: "RecordOverride by a role above global_rules",
        to: "Running (the call retried, the override in previous_attempt)",
        records: &["policy.decided", "handoff.allowed", "agent.call_scheduled"],
        covered_by: &[Test(overrides::an_override_of_the_hard_stop_retries_the_call)],
    },
    Transition {
        concern: "overrides",
        from: "Blocked, or Running",
        input: "RecordOverride: role not above the rule, unknown role, absolute rule (deny pattern, [overrides] absolute), no --by or --reason, another rule, nothing overridable",
        to: "unchanged: Rejection, nothing recorded",
        records: &[],
        covered_by: &[
            Test(
                overrides::overrides_the_authority_order_does_not_allow_are_refused_and_record_nothing,
            ),
            Test(overrides::a_bundle_may_mark_a_rule_absolute),
        ],
    },
    Transition {
        concern: "mod",
        from: "NotStarted",
        input: "Start",
        to: "Running (entry call scheduled) or Blocked (entry handoff denied)",
        records: &[
            "agent.call_scheduled",
            "handoff.allowed",
            "handoff.denied",
            "run.blocked",
        ],
        covered_by: &[
            Test(tests::start_schedules_the_entry_call),
            Test(handoff::forbidden_handoffs_block_with_the_seed_reason),
        ],
    },
    Transition {
        concern: "handoff",
        from: "Running",
        input: "RecordResponse, handoff allowed",
        to: "Running (next call scheduled, context inputs attached)",
        records: &["handoff.allowed", "agent.call_scheduled"],
        covered_by: &[
            Test(handoff::a_pipeline_runs_to_completion),
            Test(handoff::context_edges_arrive_as_context_inputs),
        ],
    },
    Transition {
        concern: "handoff",
        from: "Running",
        input: "RecordResponse, handoff denied / contract mismatch",
        to: "Blocked",
        records: &["handoff.denied", "run.blocked"],
        covered_by: &[
            Test(handoff::forbidden_handoffs_block_with_the_seed_reason),
            Test(handoff::contract_mismatch_stops_the_flow),
        ],
    },
    Transition {
        concern: "handoff",
        from: "Running",
        input: "RecordResponse, provenance rule: every item cites an id the producer delivered",
        to: "Running (next call scheduled, decisions recorded on handoff.allowed)",
        records: &["handoff.allowed", "agent.call_scheduled"],
        covered_by: &[Test(handoff::provenance_allows_citations_of_delivered_ids)],
    },
    Transition {
        concern: "handoff",
        from: "Running",
        input: "RecordResponse, provenance rule: an unproduced id, or the producer never delivered",
        to: "Blocked (handoff.denied naming the rule, the item and the id)",
        records: &["handoff.denied", "run.blocked"],
        covered_by: &[
            Test(handoff::provenance_denies_an_unproduced_id_naming_the_item),
            Test(handoff::provenance_denies_when_the_producer_never_delivered),
        ],
    },
    Transition {
        concern: "response",
        from: "Running",
        input: "RecordResponse, finish (exit)",
        to: "Completed",
        records: &["handoff.allowed", "run.completed"],
        covered_by: &[Test(handoff::a_pipeline_runs_to_completion)],
    },
    Transition {
        concern: "response",
        from: "Running",
        input: "RecordResponse, escalate",
        to: "WaitingForHuman",
        records: &["human.escalated"],
        covered_by: &[Test(response::escalate_action_waits_and_approval_proceeds)],
    },
    Transition {
        concern: "response",
        from: "Running",
        input: "RecordResponse, denied tool call",
        to: "the failure ladder (retry)",
        records: &["policy.decided", "agent.call_scheduled"],
        covered_by: &[Test(response::denied_tool_call_is_a_boundary_violation)],
    },
    Transition {
        concern: "response",
        from: "Running",
        input: "RecordResponse PARTIAL (or TIMEOUT with actions) whose handoff or exit finish crosses an edge refusing partial outputs",
        to: "the failure ladder (PARTIAL_OUTPUT_REFUSED, class partial_output)",
        records: &["policy.decided", "agent.call_scheduled", "handoff.allowed"],
        covered_by: &[
            Test(response::a_partial_answer_across_a_refusing_edge_fails_the_agent),
            Test(response::a_partial_answer_goes_on_where_the_edge_accepts_it),
            Test(response::a_bundle_refusing_partial_outputs_refuses_a_partial_finish_at_the_exit),
        ],
    },
    Transition {
        concern: "intent",
        from: "Running, the classifying agent's call with the run's input (decider 14, [intent_classification])",
        input: "RecordResponse whose classification allows its routing: at or above the threshold to the targets named, or below it a clarifying question",
        to: "Running, or WaitingForHuman (the question)",
        records: &["policy.decided", "handoff.allowed", "agent.call_scheduled", "human.escalated"],
        covered_by: &[
            Test(intent::a_routing_at_or_above_the_threshold_is_allowed),
            Test(intent::a_clarifying_question_below_the_threshold_is_allowed_and_the_answer_routed),
            Test(intent::the_classifying_call_is_told_its_contract_and_other_calls_are_not),
            Test(intent::runs_of_version_13_are_not_held_to_a_classification),
        ],
    },
    Transition {
        concern: "intent",
        from: "Running, the classifying agent's call with the run's input (decider 14, [intent_classification])",
        input: "RecordResponse routing below the threshold, without a classification, or elsewhere than it names",
        to: "the failure ladder (INTENT_POLICY_VIOLATION, class boundary_violation)",
        records: &["policy.decided", "agent.call_scheduled"],
        covered_by: &[
            Test(intent::a_routing_below_the_threshold_is_refused_and_the_agent_retried),
            Test(intent::an_answer_without_a_classification_or_routing_elsewhere_is_refused),
        ],
    },
    Transition {
        concern: "handoff",
        from: "Running",
        input: "RecordResponse, a handoff that is not the next step of a sequential flow",
        to: "Blocked",
        records: &["handoff.denied", "run.blocked"],
        covered_by: &[
            Test(handoff::a_sequential_flow_allows_only_the_next_step_from_where_the_run_is),
            Test(handoff::one_output_path_per_position_in_a_sequential_flow),
        ],
    },
    Transition {
        concern: "capability",
        from: "Running",
        input: "RecordResponse, capability locked",
        to: "Blocked",
        records: &["policy.decided", "run.blocked"],
        covered_by: &[Test(capability::guardrail_3_lock_blocks_capability_requests)],
    },
    Transition {
        concern: "capability",
        from: "Running",
        input: "RecordResponse, capability request without a matrix edge",
        to: "Blocked",
        records: &["policy.decided", "handoff.denied", "run.blocked"],
        covered_by: &[Test(
            capability::capability_request_without_an_edge_is_a_denied_handoff,
        )],
    },
    Transition {
        concern: "capability",
        from: "Running",
        input: "RecordResponse, capability allowed",
        to: "Running (the asked agent's call scheduled with scoped inputs; its answer returns to the asker)",
        records: &["policy.decided", "handoff.allowed", "agent.call_scheduled"],
        covered_by: &[
            Test(capability::capability_inputs_are_scoped_and_audited),
            Test(capability::allowed_capability_answer_returns_to_the_asker),
            Property("no_blocked_field_reaches_any_agent_and_no_handoff_crosses_a_forbidden_pair"),
        ],
    },
    Transition {
        concern: "classification",
        from: "Running",
        input: "RecordResponse of a classified agent; then the classifier's SAFE / REVIEW_REQUIRED / DANGEROUS",
        to: "Running (classifier call scheduled); then actions proceed / WaitingForHuman / Blocked",
        records: &[
            "agent.call_scheduled",
            "risk.classified",
            "human.escalated",
            "run.blocked",
        ],
        covered_by: &[Test(classification::risk_classifier_verdicts)],
    },
    Transition {
        concern: "failure",
        from: "Running",
        input: "RecordFailure",
        to: "Running (retry) / WaitingForHuman (escalate) / Blocked (hard stop)",
        records: &[
            "policy.decided",
            "agent.call_scheduled",
            "human.escalated",
            "run.blocked",
        ],
        covered_by: &[
            Test(failure::failures_go_retry_escalate_block),
            Test(failure::error_codes_are_classed_for_the_ladder),
            Test(failure::retries_after_timeouts_wait_longer),
        ],
    },
    Transition {
        concern: "failure",
        from: "Running",
        input: "RecordFailure or ERROR answer whose error class the bundle stops on",
        to: "Blocked (the error returned as its class)",
        records: &["policy.decided", "run.blocked"],
        covered_by: &[Test(failure::a_class_that_stops_the_flow_blocks_at_once)],
    },
    Transition {
        concern: "failure",
        from: "Running",
        input: "RecordFailure of a capability call the ladder would escalate or stop",
        to: "Running (the asker called again with capability_failed, which crossed the gate)",
        records: &["policy.decided", "handoff.allowed", "agent.call_scheduled"],
        covered_by: &[Test(capability::a_failed_capability_returns_to_the_asker)],
    },
    Transition {
        concern: "fan_out",
        from: "Running (fan-out)",
        input: "RecordFailure of a branch the ladder would escalate or stop, with fan_out_partial (v7), another branch running or an output held",
        to: "Running (gap recorded; joined once the other branches answer, each receiver told by a gated branch_failed input) / the ladder (no setting, or nothing to go on with)",
        records: &[
            "policy.decided",
            "fanout.branch_failed",
            "fanout.joined",
            "handoff.allowed",
            "agent.call_scheduled",
            "human.escalated",
        ],
        covered_by: &[
            Test(fan_out::a_failed_branch_is_a_gap_the_join_goes_on_without),
            Test(fan_out::a_branch_that_fails_first_waits_for_the_others_then_the_join_tells_the_gap),
            Test(fan_out::without_fan_out_partial_a_failed_branch_goes_up_the_ladder),
            Test(fan_out::when_no_branch_is_left_to_go_on_with_the_ladder_decides),
        ],
    },
    Transition {
        concern: "circuit",
        from: "Running (a call pending)",
        input: "RecordCircuit (v6), the cool-down passed: half-open",
        to: "Running (the call is made, as the one probe)",
        records: &["policy.decided"],
        covered_by: &[Test(
            circuit::a_half_open_probe_goes_through_and_its_success_goes_on,
        )],
    },
    Transition {
        concern: "circuit",
        from: "Running (a capability call pending)",
        input: "RecordCircuit (v6), open",
        to: "Running (the call degraded; the asker called again with capability_failed, class circuit_open) or, when the asker keeps asking, its episode stopped on failure_repeats",
        records: &[
            "policy.decided",
            "agent.call_degraded",
            "handoff.allowed",
            "agent.call_scheduled",
            "episode.stopped",
        ],
        covered_by: &[
            Test(circuit::an_open_circuit_answers_a_capability_asker_with_capability_failed),
            Test(circuit::an_asker_that_keeps_asking_an_open_circuit_stops),
        ],
    },
    Transition {
        concern: "circuit",
        from: "Running (a handoff's call pending)",
        input: "RecordCircuit (v6), open",
        to: "WaitingForHuman (the call degraded; approving tries again), or Blocked with on_open = block",
        records: &[
            "policy.decided",
            "agent.call_degraded",
            "human.escalated",
            "run.blocked",
        ],
        covered_by: &[
            Test(circuit::an_open_circuit_at_a_handoff_waits_for_a_human),
            Test(circuit::on_open_block_blocks_the_run),
        ],
    },
    Transition {
        concern: "fan_out",
        from: "Running",
        input: "RecordResponse with handoffs to several agents; the last branch answers: outputs agree / conflict by confidence / conflict for a human",
        to: "Running (parallel branches); Running (joined) / Running (loser archived) / WaitingForHuman",
        records: &[
            "output.held",
            "fanout.joined",
            "output.conflict_detected",
            "output.archived",
            "human.escalated",
        ],
        covered_by: &[
            Test(fan_out::fan_out_with_agreeing_outputs_delivers_once),
            Test(fan_out::fan_out_conflicts_prefer_higher_confidence_and_archive_the_loser),
            Test(fan_out::fan_out_conflicts_go_to_a_human_who_picks_the_output),
        ],
    },
    Transition {
        concern: "fan_out",
        from: "Running (a fan-out's last branch pending)",
        input: "RecordResponse of the last branch, its output conflicting with one of an agent of other authority, authority_settles_conflicts (v15)",
        to: "Running (the highest authority's output kept, the lower ones decided and archived)",
        records: &[
            "output.conflict_detected",
            "policy.decided",
            "output.archived",
            "fanout.joined",
            "agent.call_scheduled",
        ],
        covered_by: &[
            Test(authority::a_higher_authority_overrides_a_lower_ones_output_whatever_its_confidence),
            Test(authority::peers_do_not_override_each_other_confidence_then_a_person_decides),
        ],
    },
    Transition {
        concern: "reassign",
        from: "Running",
        input: "RecordResponse or RecordFailure of a boundary violation by an agent naming reassign_to (v15)",
        to: "Running (the output archived, the task sent to the new agent with the same input)",
        records: &[
            "policy.decided",
            "task.reassigned",
            "handoff.allowed",
            "agent.call_scheduled",
        ],
        covered_by: &[
            Test(reassign::a_boundary_violation_reassigns_the_task_with_the_same_input),
            Test(reassign::a_reassigned_task_is_not_reassigned_again_its_violations_climb_the_ladder),
            Test(reassign::an_agents_own_boundary_code_reassigns_other_failures_retry),
        ],
    },
    Transition {
        concern: "ticket",
        from: "WaitingForHuman",
        input: "RecordHumanDecision approve",
        to: "Running (retry or held actions)",
        records: &["human.decided", "agent.call_scheduled"],
        covered_by: &[
            Test(failure::failures_go_retry_escalate_block),
            Test(response::escalate_action_waits_and_approval_proceeds),
        ],
    },
    Transition {
        concern: "context",
        from: "Running",
        input: "any input that schedules a call to an agent not yet told the original request, or after a new human decision",
        to: "Running (the call carries context.handoff; its content parts crossed the gate)",
        records: &["handoff.allowed", "agent.call_scheduled"],
        covered_by: &[
            Test(context::every_request_carries_the_handoff_context),
            Test(context::the_original_request_and_decisions_are_scoped_for_the_receiver),
        ],
    },
    Transition {
        concern: "context",
        from: "Running (a bundle setting context parts)",
        input: "any input that schedules a call whose pair's context parts depart from the defaults",
        to: "Running (the parts recorded; the call carries what they let cross)",
        records: &["policy.decided", "handoff.allowed", "agent.call_scheduled"],
        covered_by: &[
            Test(context::context_parts_hide_or_widen_what_reaches_the_receiver),
            Test(context::a_full_original_input_still_drops_blocked_fields),
            Test(tool::observations_none_tells_the_outcome_without_the_result),
        ],
    },
    Transition {
        concern: "ticket",
        from: "WaitingForHuman (a question: the agent's last action was escalate)",
        input: "RecordHumanDecision approve, with a choice or an answer",
        to: "Running (the agent called again with the answer, which crossed the gate)",
        records: &["human.decided", "handoff.allowed", "agent.call_scheduled"],
        covered_by: &[
            Test(ticket::a_question_is_answered_and_the_agent_asked_again),
            Test(ticket::an_approved_escalation_calls_the_agent_again),
            Test(ticket::human_decisions_must_fit_the_ticket),
        ],
    },
    Transition {
        concern: "ticket",
        from: "WaitingForHuman",
        input: "RecordHumanDecision deny",
        to: "Blocked",
        records: &["human.decided", "run.blocked"],
        covered_by: &[Test(ticket::human_denial_blocks)],
    },
    Transition {
        concern: "ticket",
        from: "WaitingForHuman (2 tickets)",
        input: "approve one",
        to: "WaitingForHuman, its effect decided (calls wait)",
        records: &["human.decided", "human.escalated"],
        covered_by: &[Test(ticket::approving_one_of_two_open_tickets_is_not_lost)],
    },
    Transition {
        concern: "mod",
        from: "Completed / Blocked / Failed; any",
        input: "any; an unknown call or ticket, a bundle of another hash",
        to: "rejected (nothing recorded)",
        records: &[],
        covered_by: &[
            Test(tests::final_runs_reject_commands),
            Test(tests::rejections_are_typed),
        ],
    },
    Transition {
        concern: "episode",
        from: "Running",
        input: "RecordResponse, spawn allowed",
        to: "Running (the child's call scheduled in ep-N, its inputs and later its result scoped)",
        records: &[
            "episode.started",
            "handoff.allowed",
            "agent.call_scheduled",
            "episode.finished",
        ],
        covered_by: &[Test(
            episode::an_allowed_spawn_starts_a_child_whose_result_returns_to_the_parent,
        )],
    },
    Transition {
        concern: "episode",
        from: "Running",
        input: "RecordResponse, spawn refused (depth, children, total, child type, 50%, 70%)",
        to: "Running (spawner stopped, failed result to its parent), Blocked (root stopped) or Running (agent told, condition not listed)",
        records: &["episode.action_denied", "episode.stopped", "run.blocked"],
        covered_by: &[
            Test(episode::a_spawn_beyond_max_depth_stops_the_spawner_depth_exceeded),
            Test(episode::max_children_and_max_total_episodes_are_enforced),
            Test(episode::forbidden_and_unlisted_child_types_are_refused),
            Test(episode::a_child_gets_at_most_half_of_the_parents_remaining_budget),
            Test(episode::past_70_percent_a_spawn_is_refused_finalize_or_escalate),
            Test(episode::a_refusal_whose_condition_is_not_listed_tells_the_agent_instead_of_stopping),
        ],
    },
    Transition {
        concern: "episode",
        from: "Running",
        input: "RecordResponse, usage exhausts a budget",
        to: "Running (episode stopped, budget_exhausted) or Blocked (root)",
        records: &["episode.stopped", "run.blocked"],
        covered_by: &[Test(
            episode::an_exhausted_budget_stops_the_episode_and_its_actions_are_not_carried_out,
        )],
    },
    Transition {
        concern: "episode",
        from: "Running",
        input: "RecordResponse, finish_episode ok / failed in a child",
        to: "Running (result to the parent's agent; the parent may stop: no_new_information, failure_repeats)",
        records: &["episode.finished", "episode.stopped", "run.failed"],
        covered_by: &[
            Test(episode::two_children_without_delta_stop_the_parent_no_new_information),
            Test(episode::the_same_error_class_n_times_stops_failure_repeats),
        ],
    },
    Transition {
        concern: "episode",
        from: "Running",
        input: "RecordResponse, root finish_episode ok (verified when asked)",
        to: "Completed (success_achieved)",
        records: &["episode.finished", "episode.stopped", "run.completed"],
        covered_by: &[Test(
            episode::success_needs_a_passing_verifier_when_verification_is_needed,
        )],
    },
    Transition {
        concern: "episode",
        from: "Running",
        input: "RecordResponse, finish_episode with a summary over 8 lines (version 16)",
        to: "Running (agent told), or episode stopped (failure_repeats)",
        records: &["episode.action_denied", "episode.stopped"],
        covered_by: &[
            Test(episode::a_summary_over_eight_lines_is_refused_and_the_agent_told_to_shorten_it),
            Test(episode::a_long_summary_refused_again_and_again_stops_on_failure_repeats),
            Test(episode::a_run_of_version_15_takes_a_summary_of_any_length),
        ],
    },
    Transition {
        concern: "episode",
        from: "Running",
        input: "RecordResponse, finish_episode needs_review",
        to: "WaitingForHuman (episode_review ticket); approve: as ok, deny: Blocked",
        records: &[
            "episode.finished",
            "human.escalated",
            "human.decided",
            "run.completed",
            "run.blocked",
        ],
        covered_by: &[Test(
            episode::needs_review_opens_a_handoff_ticket_approval_completes_denial_blocks,
        )],
    },
    Transition {
        concern: "episode",
        from: "Running",
        input: "RecordResponse, write_domain",
        to: "Running (domain.written vN+1) or episode stopped (domain.write_denied)",
        records: &["domain.written", "domain.write_denied"],
        covered_by: &[Test(
            episode::only_the_owner_writes_a_domain_each_write_a_new_version_read_by_others,
        )],
    },
    Transition {
        concern: "domain",
        from: "Running (any status but final)",
        input: "WriteDomain: a person writes a domain in a role of the registry (version 15)",
        to: "unchanged (domain.written by the role, `by` the person, redacted as the domain says);              refused before anything is recorded when the bundle does not allow it",
        records: &["human.wrote_domain", "domain.written"],
        covered_by: &[
            Test(domain::a_person_writes_a_domain_in_their_role_redacted_as_the_domain_says),
            Test(domain::a_persons_write_the_bundle_does_not_allow_records_nothing),
        ],
    },
    Transition {
        concern: "episode",
        from: "Running",
        input: "RecordResponse, write_domain to a domain with content rules (version 14)",
        to: "Running (domain.written, each rule met in its chain) or episode stopped \
             (domain.write_denied naming the rule and the place in the content)",
        records: &["domain.written", "domain.write_denied"],
        covered_by: &[
            Test(episode::a_domain_write_that_breaks_its_content_rules_is_refused_naming_the_place),
            Test(episode::a_domain_write_that_meets_its_content_rules_records_each_rule_met),
            Test(episode::a_domain_keeps_its_versions_with_raw_pointers_redacted),
            Test(domain::an_attacher_sets_its_fields_on_the_latest_version_and_nothing_else),
            Test(domain::an_attacher_changing_anything_else_or_with_nothing_to_attach_to_is_refused),
            Test(episode::a_run_of_decider_13_writes_content_its_domain_rules_would_refuse),
            Test(signal::an_event_whose_content_breaks_its_domains_rules_is_kept_but_not_written),
        ],
    },
    Transition {
        concern: "episode",
        from: "Running",
        input: "RecordFailure in a child episode, the ladder's hard stop",
        to: "Running (child stopped, failure_repeats; failed result to the parent)",
        records: &["agent.call_failed", "policy.decided", "episode.stopped"],
        covered_by: &[Test(
            episode::a_child_agent_failing_past_the_ladder_stops_its_episode_not_the_run,
        )],
    },
    Transition {
        concern: "episode",
        from: "Running",
        input: "any input that ends the run with episodes still open",
        to: "Completed / Blocked / Failed, each open episode's end recorded first",
        records: &[
            "episode.finished",
            "episode.stopped",
            "run.completed",
            "run.blocked",
            "run.failed",
        ],
        covered_by: &[
            Test(episode::a_run_completed_by_a_plain_handoff_records_the_root_episodes_success),
            Test(episode::a_blocked_or_failed_run_records_the_end_of_every_open_episode),
            Property("random_agents_never_exceed_a_limit"),
        ],
    },
    Transition {
        concern: "episode",
        from: "Running",
        input: "RecordResponse, a spawn / write / effect refused for the failure_repeat_limit-th time",
        to: "Running (episode stopped failure_repeats, failed result to its parent) or Failed (root)",
        records: &[
            "episode.action_denied",
            "domain.write_denied",
            "effect.refused",
            "episode.stopped",
            "run.failed",
        ],
        covered_by: &[
            Test(episode::repeated_refusals_stop_the_episode_failure_repeats),
            Test(episode::repeated_effect_refusals_stop_the_episode_failure_repeats),
        ],
    },
    Transition {
        concern: "episode",
        from: "Running",
        input: "RecordResponse of a call whose episode stopped",
        to: "Running (recorded, not charged, not acted on)",
        records: &["agent.responded"],
        covered_by: &[Test(
            episode::answers_from_a_stopped_episode_are_recorded_but_not_acted_on,
        )],
    },
    Transition {
        concern: "effect",
        from: "Running",
        input: "RecordResponse, request_effect not admitted (no permission, no policy, no key)",
        to: "Running (the agent is told)",
        records: &["effect.requested", "policy.decided", "effect.refused"],
        covered_by: &[Test(effect::denied_by_policy_without_permission_kind_or_key)],
    },
    Transition {
        concern: "effect",
        from: "Running",
        input: "RecordResponse, request_effect without permission in a child episode (decider version 15)",
        to: "Running (refused, escalated to the parent: the child is told, its result carries the effect up)",
        records: &["effect.requested", "policy.decided", "effect.refused"],
        covered_by: &[
            Test(episode::a_childs_effect_without_permission_escalates_to_its_parent),
            Test(episode::a_run_of_version_14_refuses_a_childs_effect_to_the_child_alone),
        ],
    },
    Transition {
        concern: "effect",
        from: "Running",
        input: "request_effect admitted; dry run passed; kill switches read; executed; verified",
        to: "Running (the result goes back to the asking agent)",
        records: &[
            "effect.requested",
            "effect.admitted",
            "effect.dry_run",
            "effect.ready",
            "effect.kill_switch_checked",
            "effect.started",
            "effect.applied",
            "effect.verified",
            "effect.settled",
        ],
        covered_by: &[Test(effect::dry_run_then_execute_then_verify)],
    },
    Transition {
        concern: "effect",
        from: "Running",
        input: "a failed dry run; a dry run the executor does not support",
        to: "Running (refused); WaitingForHuman (waived on approval)",
        records: &[
            "effect.dry_run",
            "effect.refused",
            "human.escalated",
            "human.decided",
            "effect.ready",
        ],
        covered_by: &[Test(
            effect::a_failed_dry_run_refuses_and_an_unsupported_one_waits_for_a_human,
        )],
    },
    Transition {
        concern: "effect",
        from: "Running",
        input: "execution gate: approval needed, then approved / denied",
        to: "WaitingForHuman, then executed / refused",
        records: &[
            "effect.kill_switch_checked",
            "human.escalated",
            "human.decided",
            "effect.started",
            "effect.refused",
        ],
        covered_by: &[
            Test(effect::approval_needed_then_approved),
            Test(effect::approval_needed_then_denied),
        ],
    },
    Transition {
        concern: "effect",
        from: "Running",
        input: "execution gate: a kill switch engaged (lane, global)",
        to: "Running (refused)",
        records: &[
            "effect.kill_switch_checked",
            "policy.decided",
            "effect.refused",
        ],
        covered_by: &[Test(
            effect::kill_switch_engaged_at_check_time_refuses_the_effect,
        )],
    },
    Transition {
        concern: "effect",
        from: "Running",
        input: "request_effect with a key already applied / in flight",
        to: "Running (deduplicated with the recorded receipt / refused)",
        records: &["effect.deduplicated", "effect.refused"],
        covered_by: &[Test(effect::dedup_by_key_returns_the_recorded_receipt)],
    },
    Transition {
        concern: "effect",
        from: "Running",
        input: "effect failed, the next attempt over the cap",
        to: "WaitingForHuman (approval to try again)",
        records: &["effect.failed", "human.escalated"],
        covered_by: &[Test(effect::failure_with_retry_cap_needs_a_human_to_try_again)],
    },
    Transition {
        concern: "effect",
        from: "Running (resumed)",
        input: "an effect started without a result, recovered: applied / not applied / unknown; not applied twice",
        to: "Running (settled / executed once more / review ticket / given up)",
        records: &[
            "effect.recovered",
            "effect.settled",
            "effect.ready",
            "human.escalated",
            "effect.refused",
        ],
        covered_by: &[
            Test(effect::resume_with_a_started_effect_applied_is_recovered_without_executing),
            Test(effect::resume_with_a_started_effect_not_applied_executes_it_once_more),
            Test(effect::resume_with_a_started_effect_unknown_needs_review),
            Test(effect::an_execution_unanswered_twice_is_given_up_and_counts_as_an_attempt),
        ],
    },
    Transition {
        concern: "effect",
        from: "Running",
        input: "verification: not applied, then the verifier confirms / fails or doubts; no verifier",
        to: "Running (settled) / WaitingForHuman (review)",
        records: &[
            "effect.verified",
            "effect.verifier_called",
            "effect.settled",
            "human.escalated",
        ],
        covered_by: &[
            Test(effect::failed_verification_calls_the_verifier_not_the_publisher),
            Test(effect::a_verifier_that_fails_or_cannot_confirm_sends_the_effect_to_review),
            Test(effect::failed_verification_without_a_verifier_needs_review),
        ],
    },
    Transition {
        concern: "effect",
        from: "Running (fan-out)",
        input: "a branch waiting for its effect",
        to: "Running (the group is not joined until the effect settles)",
        records: &["effect.started", "effect.applied", "effect.settled"],
        covered_by: &[
            Test(effect::a_fan_out_branch_with_an_effect_in_flight_is_not_joined_early),
            Property("effects_apply_each_key_at_most_once_and_only_past_the_kill_switch"),
        ],
    },
    // Side effects on a browser lane
    Transition {
        concern: "browser",
        from: "Running (decider 14), a browser lane with sandbox_first",
        input: "dry run passed; the sandbox run answers a receipt with drift evidence; the real target executed and verified",
        to: "Running (the result, with its evidence, goes back to the asking agent)",
        records: &[
            "effect.ready",
            "effect.sandbox_started",
            "effect.sandbox_ran",
            "effect.kill_switch_checked",
            "effect.started",
            "effect.applied",
            "effect.verified",
            "effect.settled",
        ],
        covered_by: &[Test(browser::sandbox_first_then_the_real_target)],
    },
    Transition {
        concern: "browser",
        from: "Running (decider 14), a browser lane",
        input: "a receipt without drift evidence: from the sandbox run / verified on the real target",
        to: "Running (refused [browser.drift_evidence]) / WaitingForHuman (needs_review)",
        records: &[
            "effect.sandbox_ran",
            "effect.refused",
            "effect.verified",
            "human.escalated",
            "human.decided",
            "effect.settled",
        ],
        covered_by: &[Test(browser::a_result_without_drift_evidence_is_refused)],
    },
    Transition {
        concern: "browser",
        from: "Running (decider 14), a browser lane",
        input: "the executor reports UNSTABLE_SELECTORS (sandbox or real target), then a person decides",
        to: "WaitingForHuman (manual review, no retry), then settled by the person / refused",
        records: &[
            "effect.sandbox_ran",
            "effect.failed",
            "human.escalated",
            "human.decided",
            "effect.settled",
            "effect.refused",
        ],
        covered_by: &[Test(browser::unstable_selectors_open_a_manual_review_ticket)],
    },
    Transition {
        concern: "browser",
        from: "Running (decider 13), a browser lane",
        input: "dry run passed",
        to: "Running (no sandbox run: the lane is decided as any other)",
        records: &["effect.dry_run", "effect.ready"],
        covered_by: &[Test(browser::before_version_14_no_sandbox_run_is_recorded)],
    },
    // Governed tools
    Transition {
        concern: "tool",
        from: "Running",
        input: "RecordResponse, call_tool allowed and served by a [tools] section",
        to: "Running (the tool call scheduled; no agent call until its outcome)",
        records: &["policy.decided", "tool.call_scheduled"],
        covered_by: &[Test(
            tool::an_allowed_call_is_scheduled_then_its_result_reaches_the_agent,
        )],
    },
    Transition {
        concern: "tool",
        from: "Running",
        input: "RecordTool: tool.returned / tool.failed",
        to: "Running (the asking agent called again with a gated tool_result)",
        records: &["handoff.allowed", "agent.call_scheduled"],
        covered_by: &[
            Test(tool::an_allowed_call_is_scheduled_then_its_result_reaches_the_agent),
            Test(tool::a_tool_not_among_the_allowed_ones_or_without_executor_is_refused),
        ],
    },
    Transition {
        concern: "tool",
        from: "Running",
        input: "RecordResponse, call_tool denied (deny pattern, MUST NOT, not allowed, review pattern, no executor, budget)",
        to: "Running (the agent told; nothing runs) / the episode stopped on failure_repeats",
        records: &[
            "policy.decided",
            "tool.denied",
            "handoff.allowed",
            "agent.call_scheduled",
            "episode.stopped",
        ],
        covered_by: &[
            Test(tool::a_call_matching_a_deny_pattern_is_refused_before_it_runs),
            Test(tool::a_tool_not_among_the_allowed_ones_or_without_executor_is_refused),
            Test(tool::refused_calls_that_repeat_stop_the_episode),
        ],
    },
    Transition {
        concern: "tool",
        from: "Running",
        input: "RecordResponse, call_tool matching a review pattern",
        to: "WaitingForHuman (a tool ticket naming the tool, argument and pattern)",
        records: &["policy.decided", "human.escalated"],
        covered_by: &[Test(
            tool::a_call_matching_a_review_pattern_waits_for_a_human_who_approves_it,
        )],
    },
    Transition {
        concern: "tool",
        from: "WaitingForHuman (tool ticket)",
        input: "RecordHumanDecision: approved / denied",
        to: "Running (the tool scheduled / the agent told it was denied)",
        records: &[
            "tool.call_scheduled",
            "tool.denied",
            "handoff.allowed",
            "agent.call_scheduled",
        ],
        covered_by: &[
            Test(tool::a_call_matching_a_review_pattern_waits_for_a_human_who_approves_it),
            Test(tool::a_reviewed_call_the_human_denies_is_told_to_the_agent_and_the_run_goes_on),
        ],
    },
    Transition {
        concern: "tool",
        from: "Running (a call given a task by its handoff)",
        input: "RecordResponse, call_tool or a reported tool call the task forbids",
        to: "Running (the call refused, rule `task`; a reported call rejects the output)",
        records: &["policy.decided", "tool.denied", "agent.call_scheduled"],
        covered_by: &[
            Test(tool::a_task_restriction_denies_a_call_tool_the_agent_is_allowed),
            Test(tool::a_task_restriction_rejects_a_reported_tool_call),
        ],
    },
    Transition {
        concern: "fan_out",
        from: "Running (fan-out)",
        input: "a branch waiting for its tool call",
        to: "Running (the group is not joined until the tool's outcome came back)",
        records: &["tool.call_scheduled", "output.held", "fanout.joined"],
        covered_by: &[Test(tool::a_fan_out_branch_waiting_for_a_tool_is_not_joined_early)],
    },
    // Durable timers
    Transition {
        concern: "timer",
        from: "Running",
        input: "RecordResponse, wait allowed (within [waiting] max_wait_ms)",
        to: "Running (the timer set; nothing called until it fires)",
        records: &["policy.decided", "timer.set"],
        covered_by: &[
            Test(timer::a_wait_sets_a_timer_and_its_firing_calls_the_agent_again),
            Test(timer::time_on_a_timer_is_left_out_of_wall_time_unless_the_bundle_counts_it),
        ],
    },
    Transition {
        concern: "timer",
        from: "Running (a timer set)",
        input: "FireTimer at or after it is due",
        to: "Running (the waiting agent called again with a timer_fired input)",
        records: &["agent.call_scheduled"],
        covered_by: &[Test(
            timer::a_wait_sets_a_timer_and_its_firing_calls_the_agent_again,
        )],
    },
    Transition {
        concern: "timer",
        from: "Running",
        input: "RecordResponse, wait refused (longer than max_wait_ms, the episode's budget gate, a run of decider 12)",
        to: "Running (the agent told; no timer set)",
        records: &["policy.decided", "episode.action_denied", "agent.call_scheduled"],
        covered_by: &[
            Test(timer::a_wait_longer_than_the_bundle_allows_is_refused_and_the_agent_told),
            Test(timer::a_run_of_decider_12_is_told_it_cannot_wait),
        ],
    },
    Transition {
        concern: "effect",
        from: "Running (an effect requested with not_before; decider 13)",
        input: "RecordEffect: its dry run passed (or approved, or admitted without one) before not_before",
        to: "Running (the effect scheduled: held by a timer naming it; nothing executed)",
        records: &["effect.ready", "timer.set"],
        covered_by: &[
            Test(effect::a_scheduled_effect_is_dry_run_at_once_then_held_until_due_and_gated_then),
            Test(effect::a_scheduled_effect_already_due_goes_to_its_gate_without_a_timer),
        ],
    },
    Transition {
        concern: "effect",
        from: "Running (a scheduled effect's timer set); or a run of decider 12",
        input: "FireTimer at or after not_before; a request with not_before in a run of decider 12",
        to: "Running (the effect at its execution gate: the kill switch and the policy read then; refused under decider 12)",
        records: &["effect.ready", "effect.refused", "agent.call_scheduled"],
        covered_by: &[
            Test(effect::a_scheduled_effect_is_dry_run_at_once_then_held_until_due_and_gated_then),
            Test(effect::a_run_of_decider_12_refuses_a_scheduled_effect),
        ],
    },
    Transition {
        concern: "signal",
        from: "Running, WaitingForHuman or paused (decider 13)",
        input: "ReceiveSignal from a sender the signal lists, within its size",
        to: "the same status (the event kept; written to its domain when it names one; delivered to the first agent waiting for it, scoped as content from events, and that agent called again)",
        records: &[
            "policy.decided",
            "signal.kept",
            "domain.written",
            "signal.delivered",
            "handoff.allowed",
            "agent.call_scheduled",
        ],
        covered_by: &[
            Test(signal::an_event_sent_after_the_wait_is_delivered_and_its_timeout_never_fires),
            Test(signal::a_wait_for_an_event_alone_holds_the_run_running_until_it_comes),
        ],
    },
    Transition {
        concern: "signal",
        from: "Running",
        input: "ReceiveSignal of an undeclared name, from a sender not listed, or over max_payload_bytes",
        to: "Running (the event refused; it reaches no agent and no domain)",
        records: &["policy.decided", "signal.refused"],
        covered_by: &[Test(
            signal::events_the_bundle_does_not_admit_are_refused_and_reach_nobody,
        )],
    },
    Transition {
        concern: "signal",
        from: "any status, a key that recorded an event; Running, recorded by decider 12",
        input: "ReceiveSignal again with that key; unnamed, unsigned, with an empty key; to a run of decider 12",
        to: "unchanged: Rejection (SignalRecorded names the event the key recorded), nothing recorded",
        records: &[],
        covered_by: &[
            Test(signal::the_same_key_records_an_event_once_and_unsigned_events_are_refused),
            Test(signal::a_run_of_decider_12_refuses_events),
        ],
    },
    Transition {
        concern: "signal",
        from: "Running",
        input: "RecordResponse with a wait for an event the agent may receive",
        to: "Running (a kept event delivered at once; else the wait recorded, with its timeout timer)",
        records: &[
            "policy.decided",
            "signal.delivered",
            "handoff.allowed",
            "agent.call_scheduled",
            "timer.set",
            "signal.awaited",
        ],
        covered_by: &[
            Test(signal::an_event_sent_before_the_wait_is_kept_then_delivered_scoped_when_the_agent_waits),
            Test(signal::an_event_sent_after_the_wait_is_delivered_and_its_timeout_never_fires),
        ],
    },
    Transition {
        concern: "signal",
        from: "Running (an agent waits for an event, with a timeout)",
        input: "FireTimer of the timeout before the event",
        to: "Running (the wait ended; the agent called again with event_timed_out)",
        records: &["signal.timed_out", "agent.call_scheduled"],
        covered_by: &[Test(
            signal::a_wait_whose_timeout_passes_first_is_called_again_with_event_timed_out,
        )],
    },
    Transition {
        concern: "signal",
        from: "Running",
        input: "RecordResponse with a wait for an event the agent may not receive; a write to an event's domain, or an annotation naming no received event",
        to: "Running (the agent told; the event unchanged)",
        records: &[
            "policy.decided",
            "episode.action_denied",
            "agent.call_scheduled",
            "domain.write_denied",
        ],
        covered_by: &[
            Test(signal::a_wait_for_an_event_the_agent_may_not_receive_is_refused_and_the_agent_told),
            Test(signal::agents_annotate_an_event_in_its_annotations_domain_and_never_write_its_own),
        ],
    },
];

/// The decide files a row may name (each exists: `include_str!` fails the build if not).
const CONCERN_FILES: &[(&str, &str)] = &[
    ("mod", include_str!("decide/mod.rs")),
    ("response", include_str!("decide/response.rs")),
    ("capability", include_str!("decide/capability.rs")),
    ("context", include_str!("decide/context.rs")),
    ("handoff", include_str!("decide/handoff.rs")),
    ("fan_out", include_str!("decide/fan_out.rs")),
    ("classification", include_str!("decide/classification.rs")),
    ("intent", include_str!("decide/intent.rs")),
    ("failure", include_str!("decide/failure.rs")),
    ("reassign", include_str!("decide/reassign.rs")),
    ("circuit", include_str!("decide/circuit.rs")),
    ("ticket", include_str!("decide/ticket.rs")),
    ("overrides", include_str!("decide/overrides.rs")),
    ("cancel", include_str!("decide/cancel.rs")),
    ("pause", include_str!("decide/pause.rs")),
    ("episode", include_str!("decide/episode.rs")),
    ("domain", include_str!("decide/domain.rs")),
    ("effect", include_str!("decide/effect.rs")),
    ("browser", include_str!("decide/browser.rs")),
    ("tool", include_str!("decide/tool.rs")),
    ("timer", include_str!("decide/timer.rs")),
    ("signal", include_str!("decide/signal.rs")),
];

/// The test sources, where property tests are looked up by name.
const TEST_SOURCES: &[&str] = &[
    include_str!("tests/mod.rs"),
    include_str!("tests/handoff.rs"),
    include_str!("tests/response.rs"),
    include_str!("tests/capability.rs"),
    include_str!("tests/gate.rs"),
    include_str!("tests/classification.rs"),
    include_str!("tests/intent.rs"),
    include_str!("tests/failure.rs"),
    include_str!("tests/reassign.rs"),
    include_str!("tests/authority.rs"),
    include_str!("tests/circuit.rs"),
    include_str!("tests/fan_out.rs"),
    include_str!("tests/ticket.rs"),
    include_str!("tests/overrides.rs"),
    include_str!("tests/episode.rs"),
    include_str!("tests/domain.rs"),
    include_str!("tests/effect.rs"),
    include_str!("tests/browser.rs"),
    include_str!("tests/replay.rs"),
    include_str!("tests/tool.rs"),
    include_str!("tests/cancel.rs"),
    include_str!("tests/timer.rs"),
    include_str!("tests/signal.rs"),
];

#[test]
fn each_transition_records_the_events_its_row_lists() {
    for t in TRANSITIONS {
        let mut recorded = BTreeSet::new();
        for cover in t.covered_by {
            if let Test(test) = cover {
                recorded.extend(recorded_by(*test));
            }
        }
        let not_a_kind: Vec<&&str> = recorded
            .iter()
            .filter(|k| !RunEvent::KINDS.contains(k))
            .collect();
        assert!(
            not_a_kind.is_empty(),
            "RunEvent::KINDS misses {not_a_kind:?}"
        );
        let missing: Vec<&str> = t
            .records
            .iter()
            .copied()
            .filter(|kind| !recorded.contains(kind))
            .collect();
        assert!(
            missing.is_empty(),
            "{} --[{}]--> {}: the covering tests never record {missing:?} (they record {recorded:?})",
            t.from,
            t.input,
            t.to
        );
    }
}

#[test]
fn every_event_kind_is_recorded_by_some_transition_and_is_a_kind() {
    let listed: BTreeSet<&str> = TRANSITIONS
        .iter()
        .flat_map(|t| t.records.iter().copied())
        .collect();
    let kinds: BTreeSet<&str> = RunEvent::KINDS.iter().copied().collect();
    let unknown: Vec<&&str> = listed.difference(&kinds).collect();
    assert!(
        unknown.is_empty(),
        "rows list kinds that do not exist: {unknown:?}"
    );
    // Inputs open batches: their events are the commands themselves.
    let inputs = [
        "run.requested",
        "agent.responded",
        "agent.call_failed",
        "human.decided",
        "human.overrode",
        "human.wrote_domain",
        "run.cancelled",
        "agent.circuit_checked",
        "effect.dry_run",
        "effect.kill_switch_checked",
        "effect.sandbox_ran",
        "effect.applied",
        "effect.failed",
        "effect.verified",
        "effect.recovered",
        "tool.returned",
        "tool.failed",
        "timer.fired",
        "run.paused",
        "run.unpaused",
        "signal.received",
    ];
    let unlisted: Vec<&&str> = kinds
        .difference(&listed)
        .filter(|k| !inputs.contains(k))
        .collect();
    assert!(
        unlisted.is_empty(),
        "no transition records {unlisted:?}: add the row that does"
    );
}

#[test]
fn every_row_names_a_decide_file_and_existing_tests() {
    for t in TRANSITIONS {
        assert!(
            CONCERN_FILES
                .iter()
                .any(|(name, text)| *name == t.concern && !text.is_empty()),
            "{}: no decide/{}.rs",
            t.input,
            t.concern
        );
        for cover in t.covered_by {
            if let Property(name) = cover {
                let defined = format!("fn {name}(");
                assert!(
                    TEST_SOURCES.iter().any(|src| src.contains(&defined)),
                    "{}: no property test {name}",
                    t.input
                );
            }
        }
    }
}

#[test]
fn the_kinds_list_matches_what_events_say_they_are() {
    let unknown_variant = |kind: &str| {
        let payload = serde_json::json!({ "kind": kind }).to_string();
        // An unknown kind fails as "unknown variant"; a known one on its missing fields.
        match RunEvent::decode(kind, payload.as_bytes()) {
            Ok(_) => false,
            Err(err) => err.message.contains("unknown variant"),
        }
    };
    assert!(
        unknown_variant("run.misspelt"),
        "the check tells an unknown kind"
    );
    for kind in RunEvent::KINDS {
        assert!(
            !unknown_variant(kind),
            "{kind} is not a kind RunEvent decodes"
        );
    }
}
