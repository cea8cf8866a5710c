//! The conformance suite of rlm's code REPLs, as a crate of its own so that it can
//! depend on every environment without any of them depending on the others.
//!
//! Everything is in `tests/it/`: `lang.rs` says how python and js differ (how to
//! start one, how to write a snippet, how a value is echoed), and every other module
//! writes a behaviour once, as a function generic over the language, from which
//! `both!` makes a `python_…` and a `js_…` test. The library itself is empty.
