//! Fan-out and join: handoffs to several agents at once run as parallel branches; their
//! outputs are held until the last branch answers, then delivered once (agreeing),
//! resolved by confidence, or put to a human (conflicting). With `fan_out_partial`, a branch that failed past retrying is a gap the join goes on
//! without, its receivers told (docs/governance.md#partial-results).

use super::*;
use crate::events::{AGENT_AUTHORITY, BranchGap, LABELLED_INPUTS};
use crate::state::Call;
use docket_policies::Authority;
use docket_policies::ErrorClass;
use docket_protocol::{AgentId, CallId, ConflictingOutput, SettledConflict, Settlement};

/// The output type of the decision input that tells a receiver of a fan-out's gap.
const BRANCH_FAILED: &str = "branch_failed";

/// A conflict's `resolution` when authority settled it.
const HIGHER_AUTHORITY: &str = "higher_authority";

/// What authority left of a conflict.
enum Outranked {
    /// One output outranked every other: kept, labelled with the conflict.
    Kept(Box<Delivery>),
    /// The outputs of the highest authority among them (all of them when authority does
    /// not settle conflicts or they are peers), to be settled as any conflict.
    Peers(Vec<Delivery>),
}

impl Batch<'_> {
    /// Sends governed outputs on: one call per receiving agent, carrying every output for
    /// it as a decision input plus its read-only context inputs. Several receivers make a
    /// parallel fan-out whose branches are joined before anything goes further.
    pub(super) fn dispatch(&mut self, origin: Option<&CallId>, deliveries: Vec<Delivery>) {
        self.dispatch_with_gaps(origin, deliveries, &[]);
    }

    /// [`Self::dispatch`], each receiver also told of the joined fan-out's failed branches
    /// by a `branch_failed` decision input from the failed agent, through the gate.
    fn dispatch_with_gaps(
        &mut self,
        origin: Option<&CallId>,
        deliveries: Vec<Delivery>,
        gaps: &[BranchGap],
    ) {
        let mut targets: Vec<(AgentId, Vec<Delivery>)> = Vec::new();
        for d in deliveries {
            match targets.iter_mut().find(|(to, _)| *to == d.to) {
                Some((_, list)) => list.push(d),
                None => targets.push((d.to.clone(), vec![d])),
            }
        }
        let branch_of = (targets.len() > 1)
            .then(|| origin.map_or_else(|| self.run_id().to_string(), CallId::to_string));
        let priority = origin
            .and_then(|o| self.state.calls.get(o))
            .map(|c| c.recorded.priority);
        for (to, list) in targets {
            if self.stopped() {
                return;
            }
            let Some(first) = list.first() else { continue };
            let mut request = self.new_request(&first.from, &to, &first.output_type);
            let labelled = self.state.decider_version() >= LABELLED_INPUTS;
            request.decision_inputs = list
                .iter()
                .map(|d| DecisionInput {
                    confidence_level: d.confidence.filter(|_| labelled),
                    warnings: d.warnings.clone(),
                    conflict: d.conflict.clone(),
                    ..DecisionInput::new(
                        d.from.clone(),
                        d.output_type.clone(),
                        Arc::clone(&d.payload),
                    )
                })
                .collect();
            for gap in gaps {
                let payload = self.gap_input(gap, &to);
                request.decision_inputs.push(payload);
            }
            if let Some(priority) = priority {
                request.priority = priority;
            }
            request.context_inputs = self.context_inputs(&to);
            request.task = merged_task(&list);
            self.schedule(request, None, None, branch_of.clone());
        }
    }

    /// After a response's actions: hold a branch's outputs until its fan-out's last
    /// branch answers, then join; otherwise dispatch.
    pub(super) fn flush(&mut self, request_id: &CallId) {
        let deliveries = std::mem::take(&mut self.outbox);
        if self.stopped() {
            return;
        }
        let branch = self
            .state
            .calls
            .get(request_id)
            .and_then(|c| c.branch_of.clone());
        let Some(group) = branch else {
            self.dispatch(Some(request_id), deliveries);
            return;
        };
        if self.branch_pending(&group) {
            for delivery in deliveries {
                self.push(RunEvent::OutputHeld {
                    group: group.clone(),
                    delivery,
                });
            }
            return;
        }
        let mut all = self.state.held.get(&group).cloned().unwrap_or_default();
        all.extend(deliveries);
        if all.is_empty() {
            self.push(RunEvent::FanoutJoined {
                group,
                deliveries: Vec::new(),
            });
            return;
        }
        self.join(&group, request_id, all);
    }

    pub(super) fn branch_pending(&self, group: &str) -> bool {
        self.state.pending.iter().any(|id| {
            self.state
                .calls
                .get(id)
                .is_some_and(|c| c.branch_of.as_deref() == Some(group))
        }) || self.state.effects_in_flight_in(group) // Side effects
            || self.state.tools_in_flight_in(group) // Governed tools
            || self.state.timers_pending_in(group) // Durable timers
            || self.state.signal_waits_in(group) // Outside events
    }

    /// Aggregates a fan-out's outputs: the same output type for the same agent with
    /// different payloads is a conflict, resolved as the bundle says (prefer the higher
    /// confidence, or a human decides: docs/governance.md#escalation-and-tickets), the
    /// losers archived.
    pub(super) fn join(&mut self, group: &str, origin: &CallId, all: Vec<Delivery>) {
        let mut by_key: Vec<((AgentId, String), Vec<Delivery>)> = Vec::new();
        for d in all {
            let key = (d.to.clone(), d.output_type.clone());
            match by_key.iter_mut().find(|(k, _)| *k == key) {
                Some((_, list)) => list.push(d),
                None => by_key.push((key, vec![d])),
            }
        }
        let resolution = self.bundle.spec().multi_agent_handoffs.conflict_resolution;
        let resolution_name = match resolution {
            ConflictResolution::PreferHigherConfidence => "prefer_higher_confidence",
            ConflictResolution::Human => "human",
        };
        let mut proceed = Vec::new();
        let mut for_human = Vec::new();
        for (_, list) in by_key {
            let Some(first) = list.first().cloned() else {
                continue;
            };
            if list.iter().all(|d| d.payload == first.payload) {
                proceed.push(first);
                continue;
            }
            // Authority first (decider version 15): the highest level's outputs are kept,
            // the lower ones archived; between peers, as below.
            let list = match self.settle_by_authority(group, list) {
                Outranked::Kept(kept) => {
                    proceed.push(*kept);
                    continue;
                }
                Outranked::Peers(peers) => peers,
            };
            let Some(first) = list.first().cloned() else {
                continue;
            };
            if list.iter().all(|d| d.payload == first.payload) {
                proceed.push(first);
                continue;
            }
            let best = list.iter().filter_map(|d| d.confidence).max();
            let top: Vec<usize> = (0..list.len())
                .filter(|i| best.is_some() && list[*i].confidence == best)
                .collect();
            let winner = (resolution == ConflictResolution::PreferHigherConfidence
                && top.len() == 1)
                .then(|| top[0]);
            self.push(RunEvent::ConflictDetected {
                group: group.to_owned(),
                candidates: list.clone(),
                resolution: resolution_name.to_owned(),
                winner,
            });
            match winner {
                Some(w) => {
                    for (i, d) in list.iter().enumerate() {
                        if i != w {
                            self.push(RunEvent::OutputArchived {
                                group: group.to_owned(),
                                delivery: d.clone(),
                                reason: format!(
                                    "conflict resolved for {}'s output (higher confidence)",
                                    list[w].from
                                ),
                            });
                        }
                    }
                    proceed.push(self.kept(&list, w, Settlement::HigherConfidence, None));
                }
                None => for_human.push(list),
            }
        }
        self.resolve_or_ask(group, origin, for_human, proceed);
    }

    /// With `[multi_agent_handoffs] authority_settles_conflicts`, from decider version 15
    /// ([`AGENT_AUTHORITY`]): the conflicting outputs of agents below the highest
    /// authority among them are overridden by it (docs/governance.md#authority-between-agents).
    /// One output at the highest level is kept (`higher_authority`, the conflict
    /// recorded, each overridden output decided and archived); several at the highest
    /// level are peers, returned to be settled as any conflict, the lower ones archived.
    fn settle_by_authority(&mut self, group: &str, list: Vec<Delivery>) -> Outranked {
        let applies = self.state.decider_version() >= AGENT_AUTHORITY
            && self
                .bundle
                .spec()
                .multi_agent_handoffs
                .authority_settles_conflicts;
        let levels: Vec<Authority> = list
            .iter()
            .map(|d| self.bundle.authority_of(&d.from))
            .collect();
        let Some(top) = levels.iter().min().copied() else {
            return Outranked::Peers(list);
        };
        if !applies || levels.iter().all(|l| *l == top) {
            return Outranked::Peers(list);
        }
        let at_top: Vec<usize> = (0..list.len()).filter(|i| levels[*i] == top).collect();
        let winner = (at_top.len() == 1).then(|| at_top[0]);
        if let Some(w) = winner {
            self.push(RunEvent::ConflictDetected {
                group: group.to_owned(),
                candidates: list.clone(),
                resolution: HIGHER_AUTHORITY.to_owned(),
                winner: Some(w),
            });
        }
        let by = at_top
            .first()
            .map(|i| list[*i].from.clone())
            .unwrap_or_default();
        for (i, d) in list.iter().enumerate() {
            if levels[i] == top {
                continue;
            }
            let decision = self.bundle.decide_override(&by, &d.from);
            self.push(RunEvent::PolicyDecided {
                subject: group.to_owned(),
                decision,
            });
            self.push(RunEvent::OutputArchived {
                group: group.to_owned(),
                delivery: d.clone(),
                reason: format!(
                    "conflict resolved for {by}'s output (higher authority: {} over {})",
                    top.as_str(),
                    levels[i].as_str()
                ),
            });
        }
        match winner {
            Some(w) => Outranked::Kept(Box::new(self.kept(
                &list,
                w,
                Settlement::HigherAuthority,
                None,
            ))),
            None => Outranked::Peers(at_top.into_iter().map(|i| list[i].clone()).collect()),
        }
    }

    /// The output of `list` kept at `kept`, carrying from decider version 14
    /// ([`LABELLED_INPUTS`]) the conflict it was kept in: every output, how it was settled
    /// and by whom (`person`: the person and the ticket).
    pub(super) fn kept(
        &self,
        list: &[Delivery],
        kept: usize,
        settled_by: Settlement,
        person: Option<(&str, &TicketId)>,
    ) -> Delivery {
        let mut delivery = list[kept].clone();
        if self.state.decider_version() >= LABELLED_INPUTS {
            delivery.conflict = Some(SettledConflict {
                output_type: delivery.output_type.clone(),
                receiver: delivery.to.clone(),
                settled_by,
                decided_by: person.map(|(by, _)| by.to_owned()),
                ticket: person.map(|(_, ticket)| ticket.to_string()),
                outputs: list
                    .iter()
                    .enumerate()
                    .map(|(i, d)| ConflictingOutput {
                        source_agent: d.from.clone(),
                        confidence_level: d.confidence,
                        kept: i == kept,
                        payload: Some(Arc::clone(&d.payload)),
                    })
                    .collect(),
            });
        }
        delivery
    }

    pub(super) fn resolve_or_ask(
        &mut self,
        group: &str,
        origin: &CallId,
        conflicts: Vec<Vec<Delivery>>,
        proceed: Vec<Delivery>,
    ) {
        if let Some(first) = conflicts.first() {
            let options: Vec<String> = first
                .iter()
                .enumerate()
                .map(|(i, d)| format!("{}: {}'s", i + 1, d.from))
                .collect();
            let ticket = self.next_ticket();
            self.push(RunEvent::Escalated {
                ticket,
                reason: format!(
                    "conflicting {} outputs for {} ({}); approve with the number of the one to keep",
                    first[0].output_type,
                    first[0].to,
                    options.join(", ")
                ),
                subject: TicketSubject::Conflict {
                    group: group.to_owned(),
                    origin: origin.clone(),
                    conflicts,
                    proceed,
                },
            });
            return;
        }
        let gaps = self.state.gaps.get(group).cloned().unwrap_or_default();
        self.push(RunEvent::FanoutJoined {
            group: group.to_owned(),
            deliveries: proceed.clone(),
        });
        self.dispatch_with_gaps(Some(origin), proceed, &gaps);
    }

    /// With `[multi_agent_handoffs] fan_out_partial`: a fan-out
    /// branch the ladder gives up on (escalate or block, not a class that stops the flow
    /// at once) is recorded as a gap and the group joins without it, when something can
    /// go on (another branch still running, or an output held). False: the ladder goes
    /// on as for any call.
    pub(super) fn branch_gap(
        &mut self,
        request_id: &CallId,
        call: &Call,
        class: &ErrorClass,
        message: &str,
    ) -> bool {
        let Some(group) = call.branch_of.clone() else {
            return false;
        };
        let allowed = self.bundle.spec().multi_agent_handoffs.fan_out_partial
            && call.reply_to.is_none()
            && call.classifies.is_none();
        let others = self.branch_pending(&group)
            || self.state.held.get(&group).is_some_and(|h| !h.is_empty());
        if !allowed || !others {
            return false;
        }
        self.push(RunEvent::FanoutBranchFailed {
            group,
            gap: BranchGap {
                request_id: request_id.clone(),
                agent: call.recorded.target_agent.clone(),
                error_code: class.code.clone(),
                error_class: class.class.clone(),
                error_message: message.to_owned(),
                attempts: call.recorded.attempt,
            },
        });
        self.flush(request_id);
        true
    }

    /// A gap as the receiver `to` gets it: `{agent, error_code, error_class,
    /// error_message, attempts}` from the failed agent, scoped and recorded by the gate.
    fn gap_input(&mut self, gap: &BranchGap, to: &str) -> DecisionInput {
        let rule = "multi_agent_handoffs.fan_out_partial";
        let authority = PolicyDecision {
            kind: DecisionKind::Handoff,
            verdict: Verdict::Allow,
            rule_id: rule.into(),
            reason: format!(
                "{}'s branch failed; {to} goes on without it and is told",
                gap.agent
            )
            .into(),
            bundle_hash: self.bundle.hash(),
            chain: vec![RuleStep::new(
                rule,
                StepOutcome::Applied,
                "the fan-out goes on with the other branches",
            )],
        };
        let payload = json!({
            "agent": gap.agent,
            "error_code": gap.error_code,
            "error_class": gap.error_class,
            "error_message": gap.error_message,
            "attempts": gap.attempts,
        });
        let payload = self.gate_content(
            &gap.agent,
            to,
            (BRANCH_FAILED, InputKind::Decision),
            &payload,
            &authority,
        );
        DecisionInput::new(gap.agent.clone(), BRANCH_FAILED, payload)
    }
}

/// The task the receiver of `deliveries` is given: that of the first
/// delivery that gives one, forbidding what every delivery's task forbids (tasks restrict,
/// never grant).
fn merged_task(deliveries: &[Delivery]) -> Option<docket_protocol::TaskRestrictions> {
    let mut tasks = deliveries.iter().filter_map(|d| d.task.as_ref());
    let mut task = tasks.next()?.clone();
    for other in tasks {
        for pattern in &other.denied_tools {
            if !task.denied_tools.contains(pattern) {
                task.denied_tools.push(pattern.clone());
            }
        }
    }
    Some(task)
}
