//! Integration tests of the model clients, in one test binary so it builds once: each
//! provider against the scripted mock model servers (and real commands for `cli`).

mod bounds;
mod providers;
