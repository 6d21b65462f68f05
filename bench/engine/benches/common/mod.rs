//! What the engine benchmarks share: the GEO pipeline of `examples/geo` with in-process
//! agents, its input, and percentiles.

use std::sync::Arc;
use std::time::Duration;

use docket_decider::{AgentRequest, AgentResponse, ExecutorSpec};
use docket_example_geo::{governance, intelligence, observation, reasoning, strategy};
use docket_runtime::{AgentExecutor, InProcessExecutor, Runtime, Workflow};
use docket_store::EventStore;
use docket_tests::{geo_workflow, workspace_root};
use serde_json::Value;

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The GEO workflow with every agent in-process.
pub fn workflow() -> Workflow {
    let mut wf = Workflow::load(&geo_workflow()).expect("geo workflow loads");
    for agent in wf.spec.agents.values_mut() {
        agent.executor = ExecutorSpec::InProcess { in_process: true };
    }
    wf
}

/// An in-process agent's answer to a request.
pub type Handler = fn(&AgentRequest) -> AgentResponse;

/// The pipeline's agents, by name.
pub const AGENTS: [(&str, Handler); 5] = [
    ("governance", governance),
    ("observation", observation),
    ("intelligence", intelligence),
    ("reasoning", reasoning),
    ("strategy", strategy),
];

/// Registers the five GEO agents.
pub fn register<S: EventStore + 'static>(runtime: &Runtime<S>) {
    for (name, handle) in AGENTS {
        let executor: Arc<dyn AgentExecutor> = Arc::new(InProcessExecutor::new(handle));
        runtime.register_agent(name, executor);
    }
}

pub fn input() -> Value {
    let text = std::fs::read_to_string(workspace_root().join("examples/geo/input.json"))
        .expect("geo input");
    serde_json::from_str(&text).expect("input JSON")
}

/// The geo input with one more competitor, `brand`, named by this run alone: every payload
/// of the run lists the brands, so no two runs hand over the same texts, as real runs do
/// not (identical runs would let a thread's memory of texts it counted serve one run from
/// another's).
pub fn input_naming(input: &Value, brand: String) -> Value {
    let mut input = input.clone();
    if let Some(brands) = input.get_mut("brands").and_then(Value::as_array_mut) {
        brands.push(Value::String(brand));
    }
    input
}
