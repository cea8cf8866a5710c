//! Placeholder; see env/mod.rs.
