//! Benchmarks of the context store (filled in below).
fn main() {}
