//! Helpers shared by rlm's tests and benchmarks: a mock model server (also run as the
//! `mock-llm` binary), fake agents run as real processes (`fake-agent`), and checks
//! that the processes a test started are gone.

pub mod mock_llm;
pub mod procs;
