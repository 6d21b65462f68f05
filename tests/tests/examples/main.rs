//! The five examples (examples/*) run through the binary as their READMEs say, one
//! module per example.

mod example_claims;
mod example_consulting;
mod example_geo;
mod example_social;
mod example_software_team;
