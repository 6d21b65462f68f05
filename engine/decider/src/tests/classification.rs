//! `decide/classification.rs`: risk classifiers between an agent's answer and its actions.

use serde_json::json;

use super::*;
use crate::RunStatus;
use docket_protocol::Action;

#[test]
pub(crate) fn risk_classifier_verdicts() {
    for (verdict, expect) in [
        ("SAFE", RunStatus::Running),
        ("REVIEW_REQUIRED", RunStatus::WaitingForHuman),
        ("DANGEROUS", RunStatus::Blocked),
    ] {
        let b = bundle();
        let mut request = run_requested(&b);
        request.workflow.agents.insert("risk".into(), in_process());
        if let Some(a) = request.workflow.agents.get_mut("a") {
            a.classifiers = vec!["risk".into()];
        }
        let given = start_events(&b, request);
        let mut run = History::new(b).given(&given).clock(2_000, 0);
        run.when(respond(vec![handoff("b", "ab", json!({"y": 1}))]));
        let classifier_call = run.state.pending_requests()[0].clone();
        assert_eq!(classifier_call.target_agent, "risk");
        assert_eq!(
            classifier_call.decision_inputs[0].payload["actions"][0]["to"], "b",
            "the classifier is shown the response"
        );
        run.when(respond(vec![Action::Finish {
            output: json!({"verdict": verdict, "reason": "because"}),
        }]))
        .then(|events| assert_eq!(events[1].kind(), "risk.classified"));
        assert_eq!(run.state.status, expect, "{verdict}");
        if verdict == "SAFE" {
            assert_eq!(run.state.pending_requests()[0].target_agent, "b");
        }
        run.replays();
    }
}
