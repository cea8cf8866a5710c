//! Usage, cost and budgets of a run.
//!
//! Every model call of a run — root turns and the sub-calls its code makes — is
//! recorded here; the loop checks [`Accounting::exhausted`] before each turn and the
//! host before each sub-call, so a spent budget ends the run cleanly with a forced
//! answer instead of failing mid-way.
//!
//! The forced answer is one call, and it counts: each run *holds* one call of the
//! call budget for it from its start ([`Accounting::hold_final`]; a nested run's is
//! held by its parent before the child starts, [`Accounting::hold_for_child`]), so the
//! other calls stop one short of the budget and the tree makes exactly the calls it
//! was given (`--max-llm-calls 20` over a root and four looping children made 26
//! requests). A forced reply that is cut short or in prose is asked again only while a
//! budget leaves a call for it.

use rlm_context_store::private_fs::write_private_new_with;
use rlm_context_store::Durability;
use std::collections::BTreeSet;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::provider::Usage;
use rlm_protocol::RunTotals;

/// Limits of a run; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// `--max-llm-calls`.
    pub max_llm_calls: Option<u64>,
    /// `--max-tokens` (prompt + completion).
    pub max_tokens: Option<u64>,
    /// `--max-cost-usd`.
    pub max_cost_usd: Option<f64>,
    /// `--max-time`.
    #[serde(with = "crate::format::option_duration_ms", rename = "max_time_ms")]
    pub max_time: Option<Duration>,
}

/// What a run has used so far.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Totals {
    /// Tokens.
    pub usage: Usage,
    /// Model calls.
    pub llm_calls: u64,
    /// Cost of calls whose price is known.
    pub cost_usd: f64,
    /// True once any call had a known price.
    pub cost_known: bool,
    /// Sub-agents started, descendants included.
    pub sub_agents: u64,
    /// The deepest depth reached by a descendant (0 when none ran).
    pub depth_reached: u32,
}

impl Totals {
    /// The run totals as every report of a run carries them (the cost only when a
    /// price was known).
    pub fn run_totals(&self) -> RunTotals {
        RunTotals {
            llm_calls: self.llm_calls,
            sub_agents: self.sub_agents,
            usage: self.usage,
            cost_usd: self.cost_known.then_some(self.cost_usd),
        }
    }
}

/// What a finished child run used, itself and its descendants together.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ChildTotals {
    /// Its calls, sub-agents, tokens and cost.
    pub totals: RunTotals,
    /// The deepest depth reached.
    pub depth_reached: u32,
}

/// What a model call is expected to cost before it is made: its prompt's estimated
/// tokens and their cost. Reserved in the tree's budget with the call, so concurrent
/// children see each other's calls in flight; replaced by what the call really cost
/// when it returns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reservation {
    /// Estimated prompt tokens.
    pub tokens: u64,
    /// Their estimated cost, when prices are configured.
    pub cost_usd: f64,
}

/// Directory of the tree budgets, under the data directory.
pub const BUDGETS_DIR: &str = "budgets";

/// The budget a whole tree of runs shares: the root's call, token and cost limits and
/// what every run of the tree has used, in one small JSON file that each process
/// updates under an exclusive `flock`. A model call is *reserved* before it is made
/// (counted, with its prompt's estimated tokens and cost), so concurrent children
/// cannot all take the last call or the last tokens; its real tokens and cost are
/// *settled* when it returns. Each run of the tree holds one call for its forced final
/// answer (by agent id) until it uses or releases it: the call budget counts held
/// calls as spent, so a run whose other calls spent the budget still answers, within
/// it.
#[derive(Debug, Clone)]
pub struct TreeBudget {
    path: PathBuf,
}

/// The ledger's content.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Ledger {
    limits: Limits,
    llm_calls: u64,
    tokens: u64,
    cost_usd: f64,
    /// Estimated tokens of the calls in flight.
    #[serde(default)]
    reserved_tokens: u64,
    /// Estimated cost of the calls in flight.
    #[serde(default)]
    reserved_cost_usd: f64,
    /// Agent ids of the runs holding one call for their forced final answer.
    #[serde(default)]
    held_finals: BTreeSet<String>,
}

/// What budgets leave: calls, tokens, dollars (`None`: no such budget).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BudgetLeft {
    /// Model calls left.
    pub calls: Option<u64>,
    /// Tokens left.
    pub tokens: Option<u64>,
    /// Dollars left.
    pub cost_usd: Option<f64>,
}

impl BudgetLeft {
    /// The tighter of two: each budget's smaller remainder.
    fn min(self, other: Self) -> Self {
        fn least<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(if b < a { b } else { a }),
                (a, b) => a.or(b),
            }
        }
        Self {
            calls: least(self.calls, other.calls),
            tokens: least(self.tokens, other.tokens),
            cost_usd: least(self.cost_usd, other.cost_usd),
        }
    }
}

impl TreeBudget {
    /// What the tree's budgets leave, counting the calls in flight as spent.
    pub fn left(&self) -> std::io::Result<BudgetLeft> {
        self.update(|ledger| {
            let limits = ledger.limits;
            BudgetLeft {
                calls: limits
                    .max_llm_calls
                    .map(|max| max.saturating_sub(ledger.committed_calls())),
                tokens: limits
                    .max_tokens
                    .map(|max| max.saturating_sub(ledger.tokens + ledger.reserved_tokens)),
                cost_usd: limits
                    .max_cost_usd
                    .map(|max| (max - ledger.cost_usd - ledger.reserved_cost_usd).max(0.0)),
            }
        })
    }

    /// A new ledger for the tree rooted at run `run_id`, with the root's `limits`.
    pub fn create(data_dir: &Path, run_id: &str, limits: Limits) -> std::io::Result<Self> {
        let path = data_dir.join(BUDGETS_DIR).join(format!("{run_id}.json"));
        let ledger = Ledger {
            limits,
            ..Ledger::default()
        };
        let bytes = serde_json::to_vec(&ledger).map_err(std::io::Error::other)?;
        // A ledger matters only while the tree runs: nothing on the way to the first
        // request waits for the disk.
        write_private_new_with(&path, &bytes, Durability::Bulk).map_err(|e| e.source)?;
        Ok(Self { path })
    }

    /// The ledger a parent run created.
    pub fn open(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
        }
    }

    /// The ledger's file, for the tree's child runs.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reserves one model call expected to cost `expected`, unless a tree budget is
    /// spent: then nothing is reserved and the reason says which.
    fn reserve_call(&self, expected: Reservation) -> std::io::Result<Option<String>> {
        self.update(|ledger| {
            let spent = ledger.spent();
            if spent.is_none() {
                ledger.llm_calls += 1;
                ledger.reserved_tokens += expected.tokens;
                ledger.reserved_cost_usd += expected.cost_usd;
            }
            spent
        })
    }

    /// Replaces a call's reservation by its real tokens and cost (none for a call
    /// that failed).
    fn settle(
        &self,
        reserved: Reservation,
        tokens: u64,
        cost_usd: Option<f64>,
    ) -> std::io::Result<()> {
        self.update(|ledger| {
            ledger.reserved_tokens = ledger.reserved_tokens.saturating_sub(reserved.tokens);
            ledger.reserved_cost_usd = (ledger.reserved_cost_usd - reserved.cost_usd).max(0.0);
            ledger.tokens += tokens;
            ledger.cost_usd += cost_usd.unwrap_or(0.0);
        })
    }

    /// Holds one call for the forced final answer of the run `holder` (an agent id),
    /// unless it holds one already; `false` when the call budget has none left to hold.
    fn hold_final(&self, holder: &str) -> std::io::Result<bool> {
        self.update(|ledger| {
            if ledger.held_finals.contains(holder) {
                return true;
            }
            let room = match ledger.limits.max_llm_calls {
                Some(max) => ledger.committed_calls() < max,
                None => true,
            };
            if room {
                ledger.held_finals.insert(holder.to_owned());
            }
            room
        })
    }

    /// Gives back the call `holder` held for its forced answer, if it still holds one.
    fn release_final(&self, holder: &str) -> std::io::Result<()> {
        self.update(|ledger| {
            ledger.held_finals.remove(holder);
        })
    }

    /// Counts the forced final answer of `holder`, expected to cost `expected`: the
    /// call it held becomes a call made (one is counted even when it held none, past
    /// the budget: a run always answers once).
    fn use_final(&self, holder: &str, expected: Reservation) -> std::io::Result<()> {
        self.update(|ledger| {
            ledger.held_finals.remove(holder);
            ledger.llm_calls += 1;
            ledger.reserved_tokens += expected.tokens;
            ledger.reserved_cost_usd += expected.cost_usd;
        })
    }

    /// Which tree budget is spent, if any.
    fn spent(&self) -> std::io::Result<Option<String>> {
        self.update(|ledger| ledger.spent())
    }

    /// Reads, changes and writes the ledger under an exclusive lock.
    fn update<T>(&self, change: impl FnOnce(&mut Ledger) -> T) -> std::io::Result<T> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.path)?;
        file.lock()?;
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        let mut ledger: Ledger = serde_json::from_str(&text).map_err(std::io::Error::other)?;
        let out = change(&mut ledger);
        let bytes = serde_json::to_vec(&ledger).map_err(std::io::Error::other)?;
        file.rewind()?;
        file.set_len(0)?;
        file.write_all(&bytes)?;
        Ok(out)
    }
}

impl Ledger {
    /// Calls made or in flight, and calls held for forced answers.
    fn committed_calls(&self) -> u64 {
        self.llm_calls + self.held_finals.len() as u64
    }

    fn spent(&self) -> Option<String> {
        let limits = &self.limits;
        if let Some(max) = limits
            .max_llm_calls
            .filter(|max| self.committed_calls() >= *max)
        {
            return Some(format!(
                "the run tree's model-call budget (--max-llm-calls {max}) is spent"
            ));
        }
        let tokens = self.tokens + self.reserved_tokens;
        if let Some(max) = limits.max_tokens.filter(|max| tokens >= *max) {
            return Some(format!(
                "the run tree's token budget (--max-tokens {max}) is spent"
            ));
        }
        let cost = self.cost_usd + self.reserved_cost_usd;
        if let Some(max) = limits.max_cost_usd.filter(|max| cost >= *max) {
            return Some(format!(
                "the run tree's cost budget (--max-cost-usd {max}) is spent"
            ));
        }
        None
    }
}

impl Limits {
    /// Some call, token or cost budget is set (what a [`TreeBudget`] shares).
    pub fn has_budget(&self) -> bool {
        self.max_llm_calls.is_some() || self.max_tokens.is_some() || self.max_cost_usd.is_some()
    }
}

/// Thread-safe usage accounting with limits.
#[derive(Debug)]
pub struct Accounting {
    limits: Limits,
    started: Instant,
    totals: Mutex<Totals>,
    tree: Option<TreeBudget>,
    /// This run's agent id: whose held call the tree's ledger keeps.
    holder: String,
    /// One call is held for this run's forced final answer.
    final_held: AtomicBool,
}

impl Accounting {
    /// What this run's budgets and its tree's leave, the tighter of each (for pricing a
    /// plan before it runs). A tree ledger that cannot be read counts this run only.
    pub fn left(&self) -> BudgetLeft {
        let remaining = self.remaining();
        let run = BudgetLeft {
            calls: remaining.max_llm_calls,
            tokens: remaining.max_tokens,
            cost_usd: remaining.max_cost_usd,
        };
        match self.tree.as_ref().map(TreeBudget::left) {
            Some(Ok(tree)) => run.min(tree),
            Some(Err(error)) => {
                tracing::warn!(%error, "the tree budget could not be read; counting this run only");
                run
            }
            None => run,
        }
    }

    /// Starts accounting now.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            started: Instant::now(),
            totals: Mutex::new(Totals::default()),
            tree: None,
            holder: String::new(),
            final_held: AtomicBool::new(false),
        }
    }

    /// Accounting of the run `holder` (its agent id) that also reserves and settles
    /// every call in the tree's budget.
    pub fn with_tree(limits: Limits, tree: Option<TreeBudget>, holder: &str) -> Self {
        Self {
            tree,
            holder: holder.to_owned(),
            ..Self::new(limits)
        }
    }

    /// Holds one call of the call budgets for this run's forced final answer (called
    /// once, as the run starts; a nested run finds the call its parent held for it).
    /// `false` when no call is left to hold: the forced answer is then counted past
    /// the budget.
    pub fn hold_final(&self) -> bool {
        let totals = self.totals();
        let mut held = self
            .limits
            .max_llm_calls
            .is_none_or(|max| totals.llm_calls < max);
        if let Some(tree) = &self.tree {
            match tree.hold_final(&self.holder) {
                Ok(granted) => held &= granted,
                Err(error) => {
                    tracing::warn!(%error, path = %tree.path.display(), "the tree budget could not be read; counting this run only");
                }
            }
        }
        self.final_held.store(held, Ordering::SeqCst);
        held
    }

    /// Before the forced final answer, expected to cost `expected`: counts it, with
    /// the call held for it (or past the budget when none was held); the reservation
    /// to settle with [`Accounting::record_call`] or give back with
    /// [`Accounting::release`].
    pub fn start_final(&self, expected: Reservation) -> Reservation {
        self.final_held.store(false, Ordering::SeqCst);
        if let Some(tree) = &self.tree {
            if let Err(error) = tree.use_final(&self.holder, expected) {
                tracing::warn!(%error, path = %tree.path.display(), "the tree budget could not be updated");
            }
        }
        expected
    }

    /// Gives back the call held for the forced final answer, when the run ended
    /// without one.
    pub fn release_final(&self) {
        if !self.final_held.swap(false, Ordering::SeqCst) {
            return;
        }
        if let Some(tree) = &self.tree {
            if let Err(error) = tree.release_final(&self.holder) {
                tracing::warn!(%error, path = %tree.path.display(), "the tree budget could not be updated");
            }
        }
    }

    /// Holds one call of the tree's budget for the forced answer of the nested run
    /// `child` (an agent id) before it starts; `Some(reason)` when none is left, and
    /// the child must not start (it could not answer). Released by
    /// [`Accounting::release_child`] once the child ended, however it ended.
    pub fn hold_for_child(&self, child: &str) -> Option<String> {
        let tree = self.tree.as_ref()?;
        match tree.hold_final(child) {
            Ok(true) => None,
            Ok(false) => Some(format!(
                "the run tree's model-call budget (--max-llm-calls {}) has no call left for a sub-run's answer",
                tree_limit(tree).unwrap_or_default()
            )),
            Err(error) => {
                tracing::warn!(%error, path = %tree.path.display(), "the tree budget could not be read; the sub-run starts uncounted");
                None
            }
        }
    }

    /// Gives back the call held for `child`'s forced answer, if the child did not use
    /// it (it answered, or it was killed).
    pub fn release_child(&self, child: &str) {
        if let Some(tree) = &self.tree {
            if let Err(error) = tree.release_final(child) {
                tracing::warn!(%error, path = %tree.path.display(), "the tree budget could not be updated");
            }
        }
    }

    /// 1 while a call is held for this run's forced answer, else 0.
    fn held(&self) -> u64 {
        u64::from(self.final_held.load(Ordering::SeqCst))
    }

    /// The tree's budget, if one is shared.
    pub fn tree(&self) -> Option<&TreeBudget> {
        self.tree.as_ref()
    }

    /// Before a model call (not a forced final answer) expected to cost `expected`:
    /// which budget, this run's or the tree's, is spent (`Some`: do not call);
    /// otherwise the call is reserved in the tree's budget, to be settled by
    /// [`Accounting::record_call`] or given back by [`Accounting::release`].
    pub fn start_call(&self, expected: Reservation) -> Option<String> {
        if let Some(reason) = self.exhausted() {
            return Some(reason);
        }
        let tree = self.tree.as_ref()?;
        match tree.reserve_call(expected) {
            Ok(spent) => spent,
            Err(error) => {
                tracing::warn!(%error, path = %tree.path.display(), "the tree budget could not be read; counting this run only");
                None
            }
        }
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Gives back the reservation of a call that failed (its tokens are unknown).
    pub fn release(&self, reserved: Reservation) {
        if let Some(tree) = &self.tree {
            if let Err(error) = tree.settle(reserved, 0, None) {
                tracing::warn!(%error, path = %tree.path.display(), "the tree budget could not be updated");
            }
        }
    }

    /// Records one model call, settling what `reserved` held for it.
    pub fn record_call(&self, usage: Usage, cost_usd: Option<f64>, reserved: Reservation) {
        if let Some(tree) = &self.tree {
            if let Err(error) = tree.settle(reserved, usage.total(), cost_usd) {
                tracing::warn!(%error, path = %tree.path.display(), "the tree budget could not be updated");
            }
        }
        let mut totals = self.lock();
        totals.usage.add(usage);
        totals.llm_calls += 1;
        if let Some(cost) = cost_usd {
            totals.cost_usd += cost;
            totals.cost_known = true;
        }
    }

    /// Records a sub-agent start.
    pub fn record_sub_agent(&self) {
        self.lock().sub_agents += 1;
    }

    /// Adds what a finished child run reported: its calls, tokens, cost and
    /// sub-agents, and how deep it went.
    pub fn record_child(&self, child: &ChildTotals) {
        let mut totals = self.lock();
        let child_run = &child.totals;
        totals.usage.add(child_run.usage);
        totals.llm_calls += child_run.llm_calls;
        if let Some(cost) = child_run.cost_usd {
            totals.cost_usd += cost;
            totals.cost_known = true;
        }
        totals.sub_agents += child_run.sub_agents;
        totals.depth_reached = totals.depth_reached.max(child.depth_reached);
    }

    /// What is left of each limit: the budgets a child run is given (less the call
    /// held for this run's own forced answer).
    pub fn remaining(&self) -> Limits {
        let totals = self.totals();
        let limits = &self.limits;
        Limits {
            max_llm_calls: limits
                .max_llm_calls
                .map(|max| max.saturating_sub(totals.llm_calls + self.held())),
            max_tokens: limits
                .max_tokens
                .map(|max| max.saturating_sub(totals.usage.total())),
            max_cost_usd: limits
                .max_cost_usd
                .map(|max| (max - totals.cost_usd).max(0.0)),
            max_time: limits.max_time.map(|max| {
                max.saturating_sub(self.started.elapsed())
                    .max(Duration::from_secs(1))
            }),
        }
    }

    /// What is left of `--max-time` now (`None`: no time budget): how long a model
    /// call begun now may take.
    pub fn time_left(&self) -> Option<Duration> {
        self.limits
            .max_time
            .map(|max| max.saturating_sub(self.started.elapsed()))
    }

    /// A copy of the totals.
    pub fn totals(&self) -> Totals {
        *self.lock()
    }

    /// Which budget is spent, in words, if any (the call held for the forced answer
    /// counted as spent).
    pub fn exhausted(&self) -> Option<String> {
        let totals = self.totals();
        let limits = &self.limits;
        if let Some(max) = limits
            .max_llm_calls
            .filter(|max| totals.llm_calls + self.held() >= *max)
        {
            return Some(format!(
                "the model-call budget (--max-llm-calls {max}) is spent"
            ));
        }
        if let Some(max) = limits.max_tokens.filter(|max| totals.usage.total() >= *max) {
            return Some(format!("the token budget (--max-tokens {max}) is spent"));
        }
        if let Some(max) = limits.max_cost_usd.filter(|max| totals.cost_usd >= *max) {
            return Some(format!("the cost budget (--max-cost-usd {max}) is spent"));
        }
        if let Some(reason) = self.time_spent() {
            return Some(reason);
        }
        match self.tree.as_ref().map(TreeBudget::spent) {
            Some(Ok(reason)) => reason,
            _ => None,
        }
    }

    /// The time budget (`--max-time`), in words, when it is spent: what the loop checks
    /// after each model reply as well as before each call.
    pub fn time_spent(&self) -> Option<String> {
        let max = self
            .limits
            .max_time
            .filter(|max| self.started.elapsed() >= *max)?;
        Some(format!(
            "the time budget (--max-time {} s) is spent",
            max.as_secs()
        ))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Totals> {
        self.totals.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The tree's call budget, for messages.
fn tree_limit(tree: &TreeBudget) -> Option<u64> {
    tree.update(|ledger| ledger.limits.max_llm_calls)
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_reported_when_spent() {
        let acc = Accounting::new(Limits {
            max_llm_calls: Some(2),
            max_tokens: Some(100),
            ..Limits::default()
        });
        assert_eq!(acc.exhausted(), None);
        acc.record_call(
            Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
            },
            Some(0.5),
            Reservation::default(),
        );
        assert_eq!(acc.exhausted(), None);
        acc.record_call(
            Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
            },
            None,
            Reservation::default(),
        );
        assert!(acc
            .exhausted()
            .unwrap_or_default()
            .contains("--max-llm-calls 2"));
        let totals = acc.totals();
        assert_eq!(totals.usage.total(), 30);
        assert!(totals.cost_known);
        let tokens = Accounting::new(Limits {
            max_tokens: Some(10),
            ..Limits::default()
        });
        tokens.record_call(
            Usage {
                prompt_tokens: 10,
                completion_tokens: 0,
            },
            None,
            Reservation::default(),
        );
        assert!(tokens
            .exhausted()
            .unwrap_or_default()
            .contains("token budget"));
    }

    #[test]
    fn what_is_left_is_the_tighter_of_the_run_and_its_tree() {
        let dir = tempfile::tempdir().unwrap();
        let tree_limits = Limits {
            max_llm_calls: Some(10),
            max_tokens: Some(1_000),
            ..Limits::default()
        };
        let tree = TreeBudget::create(dir.path(), "r1", tree_limits).unwrap();
        // A sibling elsewhere in the tree has a call in flight.
        let sibling =
            Accounting::with_tree(tree_limits, Some(TreeBudget::open(tree.path())), "sibling");
        let reservation = Reservation {
            tokens: 300,
            cost_usd: 0.0,
        };
        assert_eq!(sibling.start_call(reservation), None);
        let run = Accounting::with_tree(
            Limits {
                max_llm_calls: Some(5),
                ..Limits::default()
            },
            Some(tree),
            "run",
        );
        let left = run.left();
        assert_eq!(left.calls, Some(5), "the run's own budget is tighter");
        assert_eq!(
            left.tokens,
            Some(700),
            "the tree's, less the call in flight"
        );
        assert_eq!(left.cost_usd, None);
        assert_eq!(
            Accounting::new(Limits::default()).left(),
            BudgetLeft::default()
        );
    }

    #[test]
    fn a_tree_budget_is_shared_by_every_accounting_that_opens_it() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            max_llm_calls: Some(2),
            max_tokens: Some(1000),
            ..Limits::default()
        };
        let tree = TreeBudget::create(dir.path(), "r1", limits).unwrap();
        let root = Accounting::with_tree(limits, Some(tree.clone()), "root");
        // A child was handed the whole remaining budget, but shares the tree's.
        let child = Accounting::with_tree(
            root.remaining(),
            Some(TreeBudget::open(tree.path())),
            "child",
        );
        assert_eq!(root.start_call(Reservation::default()), None);
        assert_eq!(child.start_call(Reservation::default()), None);
        let refused = child.start_call(Reservation::default()).unwrap_or_default();
        assert!(
            refused.contains("run tree's model-call budget"),
            "{refused}"
        );
        assert!(root.start_call(Reservation::default()).is_some());
        child.record_call(
            Usage {
                prompt_tokens: 600,
                completion_tokens: 500,
            },
            None,
            Reservation::default(),
        );
        let spent = root.exhausted().unwrap_or_default();
        assert!(
            spent.contains("run tree's"),
            "the root sees its child's use: {spent}"
        );
        assert!(
            TreeBudget::create(dir.path(), "r1", limits).is_err(),
            "never overwritten"
        );
    }

    #[test]
    fn forced_answers_are_held_from_the_start_and_the_tree_makes_exactly_its_calls() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            max_llm_calls: Some(5),
            ..Limits::default()
        };
        let tree = TreeBudget::create(dir.path(), "r1", limits).unwrap();
        let root = Accounting::with_tree(limits, Some(tree.clone()), "root");
        assert!(root.hold_final());
        assert!(root.hold_final(), "holding again holds nothing more");
        assert_eq!(root.start_call(Reservation::default()), None);
        // Three children held by the root before they start; a fourth finds no call.
        for child in ["a", "b", "c"] {
            assert_eq!(root.hold_for_child(child), None, "{child}");
        }
        let refused = root.hold_for_child("d").unwrap_or_default();
        assert!(refused.contains("--max-llm-calls 5"), "{refused}");
        // Child `a` finds its held call, and has no other: it answers, forced.
        let a = Accounting::with_tree(root.remaining(), Some(TreeBudget::open(tree.path())), "a");
        assert!(a.hold_final());
        assert!(a.start_call(Reservation::default()).is_some());
        a.start_final(Reservation::default());
        root.release_child("a");
        // Child `b` was killed before it answered: its parent gives its call back,
        // which the root may use.
        root.release_child("b");
        assert_eq!(root.start_call(Reservation::default()), None);
        assert!(root.start_call(Reservation::default()).is_some());
        // Child `c` answered without forcing: its call comes back too.
        root.release_child("c");
        assert_eq!(root.start_call(Reservation::default()), None);
        root.start_final(Reservation::default());
        let ledger = tree.update(|ledger| ledger.clone()).unwrap();
        assert_eq!(ledger.llm_calls, 5, "the tree made exactly its five calls");
        assert!(ledger.held_finals.is_empty());
        // A run that answered without forcing gives its held call back.
        let other = TreeBudget::create(dir.path(), "r2", limits).unwrap();
        let run = Accounting::with_tree(limits, Some(other.clone()), "run");
        assert!(run.hold_final());
        assert_eq!(run.left().calls, Some(4));
        run.release_final();
        assert_eq!(run.left().calls, Some(5));
    }

    #[test]
    fn without_a_tree_the_forced_answer_is_held_in_the_runs_own_budget() {
        let run = Accounting::new(Limits {
            max_llm_calls: Some(2),
            ..Limits::default()
        });
        assert!(run.hold_final());
        assert_eq!(run.start_call(Reservation::default()), None);
        run.record_call(Usage::default(), None, Reservation::default());
        let spent = run.start_call(Reservation::default()).unwrap_or_default();
        assert!(spent.contains("--max-llm-calls 2"), "{spent}");
        run.start_final(Reservation::default());
        run.record_call(Usage::default(), None, Reservation::default());
        assert_eq!(run.totals().llm_calls, 2);
    }
}
