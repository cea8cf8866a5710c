//! Helpers shared by rlm's tests and benchmarks: a mock model server (also run as the
//! `mock-llm` binary), fake agents run as real processes (`fake-agent`), checks
//! that the processes a test started are gone, and a host and fixture for driving a
//! code REPL (python or js) in a test.

pub mod mock_llm;
pub mod procs;
pub mod repl;
pub mod test_host;
