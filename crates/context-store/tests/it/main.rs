//! Integration tests of the context store: one test binary (it builds once) with a
//! module per concern of the store (docs/store.md).
//!
//! Tests that need several processes (racing `compare_and_set`, `kill -9` of a writer,
//! another process's writes becoming visible) do not rely on helper binaries: they run
//! *this test binary* again as a worker, asking libtest for exactly one `#[test]`
//! function whose body does the worker's job only when an environment variable names
//! it (see [`support`]). That needs no extra crate or feature, works the same under
//! `cargo test` and `cargo nextest`, and keeps each worker's code beside the test that
//! drives it.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers outside #[test] functions must fail the test loudly too"
)]

mod disk;
mod format_props;
mod fuzz;
mod integrity;
mod keys;
mod memory;
mod processes;
mod roundtrip;
mod scale;
mod streaming;
mod support;
mod views;
