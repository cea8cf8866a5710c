//! Integration tests of the orchestrator library, in one test binary so it builds
//! once: external agents as real processes, the text parsers under fuzzing, and
//! persistent sessions end to end. The environments are tested in their own crates
//! (`rlm-env-python`, `rlm-env-js`) and against each other in `rlm-env-conformance`.

mod agents;
mod fuzz;
mod session;
