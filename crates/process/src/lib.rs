//! Spawning and supervising child processes (sub-agents, nested runs, REPL kernels).
//!
//! This crate is the only place in rlm allowed to use `libc`/`unsafe`: it puts every
//! child in its own process group, arms a parent-death signal, caps what it reads from
//! the child's pipes and kills the whole group on timeout, cancellation or drop, so no
//! orphan survives the orchestrator. It is filled in with the sub-agent work (issue 4);
//! for now it only fixes the crate boundary.
