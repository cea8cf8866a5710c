//! Integration tests of rlm-test-support's binaries, run as the scripts and benchmarks
//! run them: one test binary with a module per binary.

mod mock_llm_bin;
