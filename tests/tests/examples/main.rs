//! The examples (examples/*) run through the binary as their READMEs say, each asserting
//! what its README's "What a run must output" states, one module per example.

mod example_claims;
mod example_consulting;
mod example_geo;
mod example_llm_triage;
mod example_social;
mod example_software_team;
