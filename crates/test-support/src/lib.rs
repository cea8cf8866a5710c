//! Helpers shared by rlm's tests and benchmarks: fixtures for the context store, and
//! (with the loop) mock model servers and fake agents run as real processes.

pub mod mock_llm;
