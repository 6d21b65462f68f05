//! The geo example's five agents, chained the way the geo pipeline runs them
//! (Governance → Observation → Intelligence → Reasoning → Strategy → Governance), over the
//! bundled snapshots. The engine's decider will do this chaining under the policy bundle;
//! here a minimal driver follows the handoffs so the agents' computations and contracts
//! are checked end to end: in-process always, and over stdio with the built binaries when
//! they are present.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use docket_decider::{Action, AgentRequest, AgentResponse, ResponseStatus};
use docket_example_geo::{
    GapsAndOpportunities, Priority, ValidatedRecommendations, agents, output_types,
};
use docket_example_geo::{governance, intelligence, observation, reasoning, strategy};
use docket_runtime::{AgentExecutor, CommandConfig, CommandExecutor, InProcessExecutor};
use serde_json::{Value, json};

type Executors = BTreeMap<&'static str, Arc<dyn AgentExecutor>>;
type Handler = fn(&AgentRequest) -> AgentResponse;

const AGENTS: [&str; 5] = [
    agents::GOVERNANCE,
    agents::OBSERVATION,
    agents::INTELLIGENCE,
    agents::REASONING,
    agents::STRATEGY,
];

fn in_process() -> Executors {
    let handlers: [(&'static str, Handler); 5] = [
        (agents::GOVERNANCE, governance),
        (agents::OBSERVATION, observation),
        (agents::INTELLIGENCE, intelligence),
        (agents::REASONING, reasoning),
        (agents::STRATEGY, strategy),
    ];
    handlers
        .into_iter()
        .map(|(name, handle)| {
            let executor: Arc<dyn AgentExecutor> = Arc::new(InProcessExecutor::new(handle));
            (name, executor)
        })
        .collect()
}

/// The agent binaries, built next to the test agent by `cargo test --workspace` or
/// `cargo build -p docket-example-geo`.
fn binaries() -> Option<Executors> {
    let dir = PathBuf::from(env!("CARGO_BIN_EXE_test-agent"))
        .parent()?
        .to_owned();
    let mut executors = Executors::new();
    for name in AGENTS {
        let program = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
        if !program.exists() {
            return None;
        }
        let executor: Arc<dyn AgentExecutor> =
            Arc::new(CommandExecutor::new(CommandConfig::new(program)));
        executors.insert(name, executor);
    }
    Some(executors)
}

/// What a run of the pipeline produced.
struct Run {
    /// (from, to, output_type) of every handoff, in order.
    path: Vec<(String, String, String)>,
    /// The status of each agent's response, in order.
    statuses: Vec<ResponseStatus>,
    /// Each handoff's payload, by output type.
    payloads: BTreeMap<String, Value>,
    /// Governance's finish output.
    output: Value,
}

/// Follows the handoffs from an analysis request to Governance's finish, giving Strategy
/// Intelligence's scores as a read-only context input.
async fn run_pipeline(executors: &Executors, analysis: Value) -> Run {
    let mut request = AgentRequest::new("req-1", "external", agents::GOVERNANCE, "GEO_ANALYSE")
        .in_run("run-geo", "run-geo/ep-1", "run-geo")
        .with_decision_input("external", output_types::ANALYSIS_REQUEST, analysis);
    let mut run = Run {
        path: Vec::new(),
        statuses: Vec::new(),
        payloads: BTreeMap::new(),
        output: Value::Null,
    };
    for step in 1..=6 {
        let executor = &executors[request.target_agent.as_str()];
        let response = executor.call(&request).await.expect("the agent answers");
        run.statuses.push(response.status);
        assert!(
            matches!(
                response.status,
                ResponseStatus::Success | ResponseStatus::Partial
            ),
            "{} answered {response:?}",
            request.target_agent
        );
        match response.actions.as_slice() {
            [Action::Finish { output }] => {
                run.output = output.clone();
                return run;
            }
            [
                Action::Handoff {
                    to,
                    output_type,
                    payload,
                    task: None,
                },
            ] => {
                run.path.push((
                    request.target_agent.to_string(),
                    to.to_string(),
                    output_type.clone(),
                ));
                run.payloads.insert(output_type.clone(), payload.clone());
                let from = request.target_agent.clone();
                let mut next = AgentRequest::new(
                    format!("req-{}", step + 1),
                    from.clone(),
                    to.clone(),
                    "GEO_ANALYSE",
                )
                .in_run("run-geo", "run-geo/ep-1", "run-geo")
                .with_decision_input(from, output_type.clone(), payload.clone());
                if to == agents::STRATEGY
                    && let Some(scores) = run.payloads.get(output_types::GEO_SCORES)
                {
                    next = next.with_context_input(
                        agents::INTELLIGENCE,
                        output_types::GEO_SCORES,
                        scores.clone(),
                    );
                }
                request = next;
            }
            other => panic!("expected one handoff or finish, got {other:?}"),
        }
    }
    panic!("the pipeline did not finish in 6 steps");
}

fn analysis() -> Value {
    json!({
        "topics": ["crm for startups", "email marketing", "help desk software"],
        "brands": ["Acme", "Globex", "Initech"],
        "regions": ["US", "EU"]
    })
}

fn check_run(run: &Run) {
    let path: Vec<(&str, &str, &str)> = run
        .path
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    assert_eq!(
        path,
        [
            ("governance", "observation", "validated_scope"),
            ("observation", "intelligence", "ai_answer_snapshots"),
            ("intelligence", "reasoning", "geo_scores"),
            ("reasoning", "strategy", "gaps_and_opportunities"),
            ("strategy", "governance", "recommendations"),
        ],
        "the geo bundle's allowed interactions, in order"
    );
    // Observation is PARTIAL: snapshot s12 has no answer text.
    assert_eq!(run.statuses[1], ResponseStatus::Partial);

    // Hand-checked against examples/geo/data/snapshots.json (Acme is the focus brand):
    // help desk: Acme 0/3, Globex 3/3; crm: Acme 3/6, Globex 6/6; email: Acme 3/5,
    // Initech 4/5 (s12 is empty).
    let scores = &run.payloads[output_types::GEO_SCORES];
    assert_eq!(scores["answers"], 14);
    assert_eq!(
        scores["by_topic"]["crm for startups"]["Acme"]["mention_rate"],
        0.5
    );
    assert_eq!(
        scores["by_topic"]["email marketing"]["Initech"]["mention_rate"],
        0.8
    );
    let analysis: GapsAndOpportunities =
        serde_json::from_value(run.payloads[output_types::GAPS_AND_OPPORTUNITIES].clone())
            .expect("gaps parse");
    let gaps: Vec<(&str, &str, &str, f64, Priority)> = analysis
        .gaps
        .iter()
        .map(|g| {
            (
                g.id.as_str(),
                g.topic.as_str(),
                g.leader.as_str(),
                g.delta,
                g.priority,
            )
        })
        .collect();
    assert_eq!(
        gaps,
        [
            ("gap-1", "help desk software", "Globex", 1.0, Priority::High),
            ("gap-2", "crm for startups", "Globex", 0.5, Priority::High),
            ("gap-3", "email marketing", "Initech", 0.2, Priority::Low),
        ]
    );

    let validated: ValidatedRecommendations =
        serde_json::from_value(run.output.clone()).expect("validated recommendations");
    assert_eq!(validated.status, "validated");
    assert_eq!(validated.recommendations.len(), analysis.gaps.len());
    for (rec, gap) in validated.recommendations.iter().zip(&analysis.gaps) {
        // Provenance (Guardrail 2): each recommendation cites a Reasoning gap, in
        // Reasoning's order, with Reasoning's priority.
        assert_eq!(rec.gap_id, gap.id);
        assert_eq!(rec.priority, gap.priority);
        assert_eq!(rec.topic, gap.topic);
    }
    // Strategy used Intelligence's scores as context for the expected impact only.
    assert!(
        validated.recommendations[0]
            .expected_impact
            .contains("overall GEO score today"),
        "{}",
        validated.recommendations[0].expected_impact
    );
}

#[tokio::test]
async fn the_pipeline_runs_in_process_and_is_deterministic() {
    let executors = in_process();
    let first = run_pipeline(&executors, analysis()).await;
    check_run(&first);
    let second = run_pipeline(&executors, analysis()).await;
    assert_eq!(first.output, second.output);
    assert_eq!(first.payloads, second.payloads);
}

#[tokio::test]
async fn the_pipeline_runs_over_stdio_with_the_agent_binaries() {
    let Some(executors) = binaries() else {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "note: the geo agent binaries are not built (run `cargo build -p \
                 docket-example-geo` or `cargo test --workspace`); skipping the stdio run"
            );
        }
        return;
    };
    let over_stdio = run_pipeline(&executors, analysis()).await;
    check_run(&over_stdio);
    let in_process = run_pipeline(&in_process(), analysis()).await;
    assert_eq!(
        over_stdio.output, in_process.output,
        "same answers either way"
    );
}

#[tokio::test]
async fn governance_refuses_a_request_without_competitors() {
    let executors = in_process();
    let request = AgentRequest::new("req-1", "external", agents::GOVERNANCE, "GEO_ANALYSE")
        .in_run("run-geo", "ep", "run-geo")
        .with_decision_input(
            "external",
            output_types::ANALYSIS_REQUEST,
            json!({"topics": ["crm for startups"], "brands": ["Acme"], "regions": ["US"]}),
        );
    let response = executors[agents::GOVERNANCE]
        .call(&request)
        .await
        .expect("answers");
    assert_eq!(response.status, ResponseStatus::Error);
    assert_eq!(
        response.error_code.as_deref(),
        Some("INPUT_VALIDATION_FAILED")
    );
}
