//! Integration tests of the `js` environment that only JavaScript has: notebook
//! re-declaration, top-level `await`, `console`'s formatting, thrown values and
//! rejected promises, each confinement claim of the embedded engine, and the guards
//! that end one step (an interrupt that cannot be caught, memory, stack). What js
//! shares with python is tested against both in `rlm-env-conformance`.

mod cells;
mod guards;
mod support;
