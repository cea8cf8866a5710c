//! Combinator plans (docs/plans.md): `split` the input into pieces, `filter` them,
//! `map` each to a result (a sub-model answer, a count, a nested run…), `reduce` the
//! results to one. A plan is data — JSON the model writes, or the helpers build — so
//! before anything runs its pieces are counted and sized against the sub-model's
//! window, and its calls, tokens and cost estimated and checked against the budgets
//! ([`price`]). Running it is the orchestrator's; this crate holds what needs no
//! model: the types ([`spec`]), the splitter ([`split`], streaming: a file of any size
//! is cut in one pass with bounded memory), the deterministic reductions ([`reduce`];
//! those over records, `group_by` and `argmax`: [`group`]), the variables the
//! step-by-step combinators leave ([`pieces`]), and the bound on the host's own work
//! over a plan's pieces ([`work`]).

pub mod condition;
pub mod error;
pub mod group;
pub mod pattern;
pub mod pieces;
pub mod price;
pub mod reading;
pub mod reduce;
pub mod spec;
pub mod split;
pub mod work;

pub use error::PlanError;
pub use spec::{Aggregate, Filter, Map, Plan, Reduce, Split, SplitBy};

/// How deep plans may nest (`map: {"plan": …}`), whatever `--max-depth` allows.
pub const MAX_NESTING: u32 = 3;

/// Pieces a plan may cut its input into, all levels together: a hostile or careless
/// `size` (one character) must not cut a large file into a billion pieces, each held
/// in memory and traced.
pub const MAX_PIECES: usize = 10_000;
