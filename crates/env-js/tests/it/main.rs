//! Integration tests of the `js` environment that only JavaScript has: notebook
//! re-declaration, top-level `await`, `console`'s formatting, thrown values and
//! rejected promises, each confinement claim of the embedded engine, built-ins the
//! model replaces that must not break the plumbing (`builtins`), and the guards
//! that end one step (an interrupt that cannot be caught, memory, stack). What js
//! shares with python is tested against both in `rlm-env-conformance`.

mod builtins;
mod cells;
mod guards;
mod prototypes;
mod support;
