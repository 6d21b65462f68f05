//! Governed runs: the agent and effect executors, the protocol, governance, episodes,
//! tools, overrides, partial results, circuit breakers, the golden logs of every decider
//! version and the crate boundaries, one module per capability.

mod agent_executors;
mod agent_protocol;
mod architecture;
mod audit_reading;
mod authority;
mod backends;
mod circuit_breaker;
mod effect_durable_points;
mod effect_executors;
mod effects;
mod engine_run;
mod episodes;
mod geo_agents;
mod golden_logs;
mod governance;
mod handoff_audit;
mod handoff_rules;
mod overrides;
mod partial_results;
mod tools;
mod workers;
