//! Integration tests of the `python` environment that only Python has: a real
//! `python3` kernel as a process (crashes, restarts, children, confinement), its
//! fast context loading, referenced and lazy contexts, and model code that attacks
//! the kernel's plumbing. What python shares with js is tested against both in
//! `rlm-env-conformance`.

mod hostile;
mod kernel;
mod loading;
mod referenced_context;
mod support;
