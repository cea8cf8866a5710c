//! Every behaviour the python and js REPLs share, written once and run against both.
//!
//! A behaviour is an `async fn name<L: Lang>()`; `both!(name)` next to it makes the
//! tests `python_name` and `js_name`. Where a language does not meet a behaviour yet,
//! its test is marked `#[ignore = "…"]` with the reason (`both!(name, js: [#[ignore =
//! "…"]])`), never deleted. No test asserts on durations: timeouts are configured.

/// Makes a `python_<name>` and a `js_<name>` test of the generic behaviour `name`,
/// each with its own extra attributes (`#[ignore = "…"]`).
macro_rules! both {
    ($name:ident) => {
        both!($name, python: [], js: []);
    };
    ($name:ident, js: [$(#[$js:meta])*]) => {
        both!($name, python: [], js: [$(#[$js])*]);
    };
    ($name:ident, python: [$(#[$python:meta])*]) => {
        both!($name, python: [$(#[$python])*], js: []);
    };
    ($name:ident, python: [$(#[$python:meta])*], js: [$(#[$js:meta])*]) => {
        pastey::paste! {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            $(#[$python])*
            async fn [<python_ $name>]() {
                $name::<crate::lang::Python>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            $(#[$js])*
            async fn [<js_ $name>]() {
                $name::<crate::lang::Js>().await;
            }
        }
    };
}

mod combinators;
mod contexts;
mod explore;
mod host_calls;
mod interrupts;
mod lang;
mod repl;
