//! `rlm-orchestrate`: the command-line interface.
fn main() {}
