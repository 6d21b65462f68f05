//! What one agent call costs per executor, as a ratio to calling the agent function
//! directly (measured in the same run). Run with `cargo bench -p docket-bench-engine
//! --bench agent_call`; the figures depend on the machine, the ratios much less.
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use docket_decider::{
    Action, AgentRequest, AgentResponse, Confidence, ValidateResponse, parse_response,
};
use docket_runtime::{AgentExecutor, CommandConfig, CommandExecutor, InProcessExecutor};
use serde_json::json;

/// The `docket` binary's allocator, so figures are the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn request(i: u64) -> AgentRequest {
    AgentRequest::new(
        format!("req-{i}"),
        "reasoning",
        "strategy",
        "STRATEGY_RECOMMEND",
    )
    .in_run("run-1", "ep-1", "run-1")
    .with_decision_input(
        "reasoning",
        "gaps",
        json!({"gaps": [{"id": "gap-1", "priority": "HIGH"}]}),
    )
    .with_context_input(
        "intelligence",
        "geo_scores",
        json!({"Acme": {"geo_score": 35.4}}),
    )
}

fn agent(request: &AgentRequest) -> AgentResponse {
    AgentResponse::success(
        request.request_id.clone(),
        Confidence::High,
        vec![Action::Handoff {
            to: "governance".into(),
            output_type: "recommendations".into(),
            payload: json!({"recommendations": [{"id": "rec-1", "gap_id": "gap-1"}]}),
            task: None,
        }],
    )
}

fn report(name: &str, calls: u64, elapsed: Duration, baseline_ns: f64) -> f64 {
    let ns = elapsed.as_nanos() as f64 / calls as f64;
    println!(
        "{name:<44} {calls:>8} calls  {:>12.0} calls/s  {ns:>10.0} ns/call  {:>8.1}x baseline",
        1e9 / ns,
        ns / baseline_ns
    );
    ns
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let requests: Vec<AgentRequest> = (0..1000).map(request).collect();

    // Baseline: the agent function plus the response check every executor does.
    let calls = 200_000_u64;
    let start = Instant::now();
    let mut ok = 0_u64;
    for i in 0..calls {
        let req = &requests[(i % 1000) as usize];
        let response = std::hint::black_box(agent(req));
        ok += u64::from(response.validate_for(req).is_ok());
    }
    assert_eq!(ok, calls);
    let baseline = start.elapsed().as_nanos() as f64 / calls as f64;
    report(
        "direct call + validate (baseline)",
        calls,
        start.elapsed(),
        baseline,
    );

    // In-process executor behind Arc<dyn AgentExecutor>.
    let executor: Arc<dyn AgentExecutor> = Arc::new(InProcessExecutor::new(agent));
    let start = Instant::now();
    runtime.block_on(async {
        for i in 0..calls {
            let req = &requests[(i % 1000) as usize];
            let response = executor.call(req).await.expect("answers");
            std::hint::black_box(response);
        }
    });
    report(
        "in-process executor (Arc<dyn>)",
        calls,
        start.elapsed(),
        baseline,
    );

    // The JSON work the command and HTTP executors add on docket's side.
    let calls = 50_000_u64;
    let start = Instant::now();
    for i in 0..calls {
        let req = &requests[(i % 1000) as usize];
        let line = serde_json::to_vec(req).expect("encodes");
        let answer = serde_json::to_vec(&agent(req)).expect("encodes");
        let response = parse_response(&answer).expect("parses");
        std::hint::black_box((line, response.validate_for(req).is_ok()));
    }
    report(
        "JSON encode request + parse response",
        calls,
        start.elapsed(),
        baseline,
    );

    // A child process over stdin/stdout (the test agent, echoing).
    let command =
        CommandExecutor::new(CommandConfig::new(docket_tests::test_program("test-agent")));
    let calls = 5_000_u64;
    let start = runtime.block_on(async {
        command
            .call(&requests[0])
            .await
            .expect("starts and answers");
        let start = Instant::now();
        for i in 0..calls {
            let mut req = requests[(i % 1000) as usize].clone();
            req.capability_code = "echo".into();
            command.call(&req).await.expect("answers");
        }
        start
    });
    report(
        "command executor (test-agent, one process)",
        calls,
        start.elapsed(),
        baseline,
    );
    runtime.block_on(command.shutdown());
}
