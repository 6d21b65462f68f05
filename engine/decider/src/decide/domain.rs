//! What a domain keeps of a write allowed by the writer's scope, whoever wrote it (an
//! agent, an outside event's sender, a person): its content rules decide, on the content
//! as kept, after the values its `redact` paths reach are replaced
//! (docs/governance.md#domain-content). And a person's write, `human.wrote_domain`
//! (docs/governance.md#a-person-writes-a-domain): checked before it is recorded, so a
//! refused one records nothing.

use docket_policies::{PolicyBundle, PolicyDecision, RuleStep, StepOutcome};
use docket_protocol::EpisodeId;
use serde_json::Value;

use super::{Batch, PersonAct, Rejection};
use crate::events::{
    DOMAIN_CONTENT, DOMAIN_REDACTION, HumanWroteDomain, PERSON_DOMAIN_WRITES, RunEvent,
};
use crate::state::RunState;

/// Whether a person's domain write may be recorded: it names who and why, the run was
/// recorded by a decider that takes it, and the bundle lets the role write that content
/// to the domain (the refusal names the rule and the place).
pub(super) fn check_person_write(
    state: &RunState,
    bundle: &PolicyBundle,
    input: &HumanWroteDomain,
) -> Result<(), Rejection> {
    let version = state.decider_version();
    if version < PERSON_DOMAIN_WRITES {
        return Err(Rejection::DomainWriteRefused(format!(
            "runs recorded by decider version {version} take no person's domain write (that came with version {PERSON_DOMAIN_WRITES})"
        )));
    }
    if input.by.trim().is_empty() {
        return Err(Rejection::Unnamed(PersonAct::DomainWrite));
    }
    if input.reason.trim().is_empty() {
        return Err(Rejection::Unexplained(PersonAct::DomainWrite));
    }
    let decision = person_write_decision(state, bundle, input).0;
    if decision.is_allowed() {
        Ok(())
    } else {
        Err(Rejection::DomainWriteRefused(decision.reason.to_string()))
    }
}

/// The decision on a person's write and the content it keeps: the role's scope, then
/// the domain's content rules and redaction, with a step naming who wrote and why.
fn person_write_decision(
    state: &RunState,
    bundle: &PolicyBundle,
    input: &HumanWroteDomain,
) -> (PolicyDecision, Value) {
    let mut allowed = bundle.decide_person_domain_write(&input.role, &input.domain);
    if allowed.is_allowed() {
        allowed.chain.push(RuleStep::new(
            "human.wrote_domain",
            StepOutcome::Applied,
            format!("{} writes as {}: {}", input.by, input.role, input.reason),
        ));
    }
    content_kept(state, bundle, &input.domain, &input.content, allowed)
}

/// The decision on writing `content` to `domain`, already `allowed` by the writer's
/// scope, and the content the new version keeps. A redaction is a step of the decision's
/// chain naming each place redacted.
fn content_kept(
    state: &RunState,
    bundle: &PolicyBundle,
    domain: &str,
    content: &Value,
    allowed: PolicyDecision,
) -> (PolicyDecision, Value) {
    let version = state.decider_version();
    if !allowed.is_allowed() || version < DOMAIN_CONTENT {
        return (allowed, content.clone());
    }
    let redacted = (version >= DOMAIN_REDACTION)
        .then(|| bundle.redact_domain_content(domain, content))
        .flatten();
    let Some((kept, places)) = redacted else {
        return (
            bundle.check_domain_content(domain, content, allowed),
            content.clone(),
        );
    };
    let mut decision = bundle.check_domain_content(domain, &kept, allowed);
    if decision.is_allowed() && !places.is_empty() {
        decision.chain.push(RuleStep::new(
            format!("domains.{domain}.redact"),
            StepOutcome::Applied,
            format!("redacted {}", places.join(", ")),
        ));
    }
    (decision, kept)
}

impl Batch<'_> {
    /// [`content_kept`] in this batch's run.
    pub(super) fn domain_content(
        &self,
        domain: &str,
        content: &Value,
        allowed: PolicyDecision,
    ) -> (PolicyDecision, Value) {
        content_kept(&self.state, self.bundle, domain, content, allowed)
    }

    /// A person's write (its event already pushed): the domain's next version, written by
    /// the role and kept as the domain's rules say. Refused only when decided again under
    /// another bundle (what-if): then recorded as refused, counted against no episode.
    pub(super) fn on_person_write(&mut self, input: &HumanWroteDomain) {
        let (decision, content) = person_write_decision(&self.state, self.bundle, input);
        if !decision.is_allowed() {
            self.push(RunEvent::DomainWriteDenied {
                domain: input.domain.clone(),
                agent: input.role.as_str().into(),
                episode_id: EpisodeId::root(),
                decision,
                by: Some(input.by.clone()),
            });
            return;
        }
        let version = self
            .state
            .episodes
            .domains
            .get(&input.domain)
            .map_or(0, Vec::len)
            .saturating_add(1);
        self.push(RunEvent::DomainWritten {
            domain: input.domain.clone(),
            version: u32::try_from(version).unwrap_or(u32::MAX),
            agent: input.role.as_str().into(),
            episode_id: EpisodeId::root(),
            content,
            decision,
            by: Some(input.by.clone()),
        });
    }
}
