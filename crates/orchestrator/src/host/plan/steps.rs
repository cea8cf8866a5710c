//! The combinators one step at a time (`ctx_split`, `ctx_filter`, `ctx_map`,
//! `ctx_reduce` in every environment): the cutting, pricing, mapping and reducing of
//! a whole plan ([`RunHost::run_plan`]), with each step's output a store variable the
//! next step names. Pieces are references — byte ranges of the input's text file,
//! never the text again — so cutting a 10 GB file costs a list of offsets; a step that
//! calls a model is priced and checked against the window and every budget first.

use std::path::PathBuf;

use rlm_context_store::SetOptions;
use rlm_plan::pieces::{texts_to_reduce, PieceRef, PieceResult, PieceSet};
use rlm_plan::price::{Estimate, Limits};
use rlm_plan::split::Piece;
use rlm_plan::work::HostWork;
use rlm_plan::{Filter, Map, PlanError, Reduce, Split, SplitBy};
use rlm_protocol::host_call::{HostError, SplitStepArgs};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::price::Origin;
use super::{keep_passing, nesting_of_map, off_runtime, refused, RecordFilter, Source};
use crate::events::PlanStage;
use crate::host::serve::RunHost;

/// Tokens a split with no size leaves beside each piece for the instruction that will
/// map it (an instruction longer than this may find the pieces too large, and is told).
const STEP_INSTRUCTION_TOKENS: u64 = 200;

/// A step's part (`split`, `filter`, `map`, `reduce`) read from the JSON the model gave.
fn part<T: DeserializeOwned>(name: &str, value: Value) -> Result<T, HostError> {
    serde_json::from_value(value).map_err(|e| refused(PlanError::Json(format!("`{name}`: {e}"))))
}

/// A part that is one of several options (`filter`, `map`): exactly one given (a map's
/// `{"ask": …, "schema": …}` is one).
fn one_option<T: DeserializeOwned>(
    name: &str,
    options: &str,
    value: Value,
) -> Result<T, HostError> {
    match &value {
        Value::Object(given) if name == "map" && Map::is_shaped_ask(given) => part(name, value),
        Value::Object(given) if given.len() != 1 => Err(refused(PlanError::Json(format!(
            "`{name}` takes one of {options}, not several (and not none): {value}"
        )))),
        _ => part(name, value),
    }
}

/// Priced, or refused with the figures.
fn checked(estimate: &Estimate, limits: &Limits) -> Result<(), HostError> {
    estimate.check(limits).map_err(refused)
}

impl RunHost {
    /// `ctx_split`: cuts the input and stores its pieces by reference.
    pub(in crate::host) async fn plan_split(
        &self,
        args: SplitStepArgs,
    ) -> Result<Value, HostError> {
        let split: Split = part("split", args.split)?;
        split.check().map_err(refused)?;
        let key = format!("pieces-{}", crate::ids::AgentId::generate());
        let file = match (args.text, split.by) {
            // A JSON list's items, one per line: `records` then cuts lines.
            (text, SplitBy::Records) => {
                let lines = self.records_of(&args.input, text).await?;
                self.stored_text(format!("{key}-text"), lines).await?
            }
            (Some(text), _) => self.stored_text(format!("{key}-text"), text).await?,
            (None, _) => {
                let input = args.input.clone();
                self.blocking(move |store| store.text_view(&input)).await?
            }
        };
        let source = Source::file(file.clone())?;
        let work = HostWork::over(source.bytes());
        let pieces = self
            .cut(&split, STEP_INSTRUCTION_TOKENS, &source, &work)
            .await?;
        let chars: Vec<u64> = pieces.iter().map(|p| p.chars).collect();
        let set = PieceSet {
            pieces_of: args.input,
            file: file.display().to_string(),
            file_bytes: file_bytes(&file)?,
            split,
            filtered: Vec::new(),
            pieces: refs(pieces.iter().copied().enumerate()),
        };
        self.store_value(key.clone(), &set).await?;
        Ok(json!({
            "pieces": key,
            "count": set.pieces.len(),
            "chars": {
                "total": chars.iter().sum::<u64>(),
                "smallest": chars.iter().min().copied().unwrap_or(0),
                "largest": chars.iter().max().copied().unwrap_or(0),
            },
        }))
    }

    /// `ctx_filter`: the pieces a regex or a `where` condition (no call) or a yes/no
    /// question keeps.
    pub(in crate::host) async fn plan_filter(
        &self,
        pieces: String,
        filter: Value,
    ) -> Result<Value, HostError> {
        let spec = filter.clone();
        let filter: Filter = one_option("filter", "regex, where, ask", filter)?;
        filter.check().map_err(refused)?;
        let (mut set, source, _) = self.piece_set(&pieces).await?;
        let all = set.pieces.iter().map(|p| (p.index, p.piece()));
        let (kept, calls) = match &filter {
            Filter::Regex(_) | Filter::Where(_) => (
                keep_passing(&filter, &set.split, &source, all.collect()).await?,
                0,
            ),
            Filter::Ask(question) => {
                let all: Vec<(usize, Piece)> = all.collect();
                let limits = self.plan_limits(Some(&source)).await;
                let mut estimate = Estimate::default();
                let origin = Origin {
                    by: set.split.by,
                    source: &source,
                };
                self.price_ask_filter(question, &origin, &all, &limits, &mut estimate)?;
                checked(&estimate, &limits)?;
                (
                    self.ask_filter(question, &source, all).await?,
                    estimate.calls,
                )
            }
        };
        let of = set.pieces.len();
        set.filtered.push(spec);
        set.pieces = refs(kept.into_iter());
        let key = format!("pieces-{}", crate::ids::AgentId::generate());
        self.store_value(key.clone(), &set).await?;
        Ok(json!({"pieces": key, "count": set.pieces.len(), "of": of, "calls": calls}))
    }

    /// `ctx_map`: every piece mapped — priced and checked first, leaves in parallel,
    /// each a `plan` event — and the results stored.
    pub(in crate::host) async fn plan_map(
        &self,
        pieces: String,
        map: Value,
    ) -> Result<Value, HostError> {
        let started = std::time::Instant::now();
        let plan_id = crate::ids::AgentId::generate().to_string();
        let map: Map = one_option(
            "map",
            "ask (with schema or not), count, extract, sub_rlm, agent, plan",
            map,
        )?;
        map.check(0).map_err(refused)?;
        let nesting = nesting_of_map(&map);
        let max_depth = self.settings.delegation.max_depth;
        if nesting > max_depth {
            return Err(refused(PlanError::Shape(format!(
                "the map nests {nesting} plans deep, over --max-depth {max_depth}"
            ))));
        }
        let (set, source, work) = self.piece_set(&pieces).await?;
        let spec = json!({"pieces": pieces, "map": map});
        let kept: Vec<(usize, Piece)> = set.pieces.iter().map(|p| (p.index, p.piece())).collect();
        let limits = self.plan_limits(Some(&source)).await;
        let mut estimate = Estimate {
            pieces: kept.len() as u64,
            kept: kept.len() as u64,
            ..Estimate::default()
        };
        let origin = Origin {
            by: set.split.by,
            source: &source,
        };
        let priced = match self.price_map(&map, &origin, &kept, &limits, &mut estimate) {
            Ok(()) => self
                .price_nested(&map, &source, &kept, (&limits, &work), &mut estimate)
                .await
                .and_then(|()| checked(&estimate, &limits)),
            Err(error) => Err(error),
        };
        self.priced_or_refused(&plan_id, spec, priced, &estimate)?;
        // The regex and `where` filters that kept these pieces: a count or extract
        // reads only the records they pass, as in a whole plan.
        let filters: Vec<Filter> = set
            .filtered
            .iter()
            .filter_map(|f| serde_json::from_value(f.clone()).ok())
            .collect();
        let records = RecordFilter::new(&filters.iter().collect::<Vec<_>>(), &set.split)?;
        let results = self
            .map_pieces(&plan_id, &map, records, &source, &kept)
            .await?;
        let key = format!("results-{plan_id}");
        self.store_value(key.clone(), &results).await?;
        self.plan_event(
            &plan_id,
            PlanStage::Done {
                answer: format!("{} results", results.len()),
                results: key.clone(),
                duration_ms: started.elapsed().as_millis() as u64,
            },
        );
        let first: Vec<String> = results
            .iter()
            .take(3)
            .map(|r| crate::format::clip(&r.result, 120))
            .collect();
        Ok(json!({
            "results": key,
            "count": results.len(),
            "pieces": kept.len(),
            "calls": estimate.calls,
            "first": first,
        }))
    }

    /// `ctx_reduce`: a results variable (or any JSON list) reduced to one answer.
    pub(in crate::host) async fn plan_reduce(
        &self,
        results: String,
        reduce: Value,
    ) -> Result<Value, HostError> {
        let reduce: Reduce = part("reduce", reduce)?;
        reduce.check().map_err(refused)?;
        let key = results.clone();
        let value = self.blocking(move |store| store.get(&key)).await?;
        let texts = texts_to_reduce(&results, &value).map_err(refused)?;
        let count = texts.len();
        if let Reduce::Ask { .. } = reduce {
            let limits = self.plan_limits(None).await;
            let mut estimate = Estimate::default();
            self.price_reduce(&reduce, count, &limits, &mut estimate)?;
            checked(&estimate, &limits)?;
        }
        let answer = self.reduce(&reduce, texts, None).await?;
        Ok(json!({"answer": answer, "count": count}))
    }

    /// The pieces variable `key`, the file its pieces point into, and what its pieces
    /// repeat of it — refused when the file is gone or changed since the split, when a
    /// piece lies outside it, or when the pieces would repeat it past the bound
    /// ([`HostWork`]). A pieces variable is data model code may write, so each piece's
    /// characters are counted from the file: the plan is priced on what its leaves
    /// would send, not on what the variable claims (the fourth hostile review: `chars:
    /// 1` over a whole file sent 977 KB past every check).
    async fn piece_set(&self, key: &str) -> Result<(PieceSet, Source, HostWork), HostError> {
        if let Some(refusal) = text_for_a_key(key) {
            return Err(refusal);
        }
        let k = key.to_owned();
        let value = self
            .blocking(move |store| store.has(&k).then(|| store.get(&k)).transpose())
            .await?
            .ok_or_else(|| {
                HostError::RespondToModel(format!(
                    "no variable `{key}`: give the pieces variable ctx_split or ctx_filter returned"
                ))
            })?;
        let mut set = PieceSet::from_value(key, &value).map_err(refused)?;
        // A pieces variable is data anyone's code may write (`store.set` in js, whose
        // engine reads no file): its `file` is read only when it is one the store
        // gave out — a text view, or the file a signed `file` variable refers to.
        let (claimed, of) = (set.file.clone(), set.pieces_of.clone());
        let trusted = self
            .blocking(move |store| source_is_the_stores(store, &claimed, &of))
            .await?;
        if !trusted {
            return Err(HostError::RespondToModel(format!(
                "`{key}` points into {}, which is neither a text view of the store nor the file of `{}`: pieces come from ctx_split, not from store.set",
                set.file, set.pieces_of
            )));
        }
        let file = PathBuf::from(&set.file);
        let now = file_bytes(&file).map_err(|_| {
            HostError::RespondToModel(format!(
                "the pieces in `{key}` point into {}, which is gone: split `{}` again",
                set.file, set.pieces_of
            ))
        })?;
        if now != set.file_bytes {
            return Err(HostError::RespondToModel(format!(
                "the pieces in `{key}` point into {}, which changed since the split ({} bytes, now {now}): split `{}` again",
                set.file, set.file_bytes, set.pieces_of
            )));
        }
        if let Some(outside) = set.pieces.iter().find(|p| p.start > p.end || p.end > now) {
            return Err(HostError::RespondToModel(format!(
                "piece {} of `{key}` (bytes {}–{}) lies outside {} ({now} bytes): split `{}` again with ctx_split",
                outside.index, outside.start, outside.end, set.file, set.pieces_of
            )));
        }
        let source = Source::file(file)?;
        let work = HostWork::over(now);
        let pieces: Vec<Piece> = set.pieces.iter().map(PieceRef::piece).collect();
        let what = format!("the pieces of `{key}`");
        work.count_pieces(
            &pieces,
            now,
            (
                &what,
                "pieces overlap far more than a split makes: split the input again with ctx_split",
            ),
        )
        .map_err(refused)?;
        let mut measured: Vec<(usize, Piece)> =
            set.pieces.iter().map(|p| (p.index, p.piece())).collect();
        let counted = source.clone();
        let measured =
            off_runtime(move || counted.measured(&mut measured).map(|()| measured)).await?;
        for (piece, (_, real)) in set.pieces.iter_mut().zip(measured) {
            piece.chars = real.chars;
        }
        Ok((set, source, work))
    }

    /// Stores `text` as the variable `key` and returns its text file.
    async fn stored_text(&self, key: String, text: String) -> Result<PathBuf, HostError> {
        let scope = self.scope();
        self.blocking(move |store| {
            store.set(
                &key,
                Value::String(text),
                SetOptions::default().scope(scope),
            )?;
            store.text_view(&key)
        })
        .await
    }

    /// Stores `value` as the variable `key` in this run's scope.
    async fn store_value(
        &self,
        key: String,
        value: &impl serde::Serialize,
    ) -> Result<(), HostError> {
        let value = serde_json::to_value(value)
            .map_err(|e| HostError::Fatal(format!("a step's result could not be encoded: {e}")))?;
        let scope = self.scope();
        self.blocking(move |store| {
            store
                .set(&key, value, SetOptions::default().scope(scope))
                .map(|_| ())
        })
        .await
    }
}

/// True when `file` is one the store gave out: a file of its text views, or the file
/// the (signed) `file` variable `of` refers to.
fn source_is_the_stores(
    store: &rlm_context_store::Store,
    file: &str,
    of: &str,
) -> Result<bool, rlm_context_store::StoreError> {
    let claimed = std::path::Path::new(file);
    let in_views = match (
        std::fs::canonicalize(claimed),
        std::fs::canonicalize(store.views_dir()),
    ) {
        (Ok(file), Ok(views)) => file.parent() == Some(views.as_path()),
        _ => false,
    };
    if in_views {
        return Ok(true);
    }
    Ok(store.has(of)
        && store
            .file_reference(of)?
            .is_some_and(|referenced| referenced.path == claimed))
}

/// The pieces as a set lists them.
fn refs(pieces: impl Iterator<Item = (usize, Piece)>) -> Vec<PieceRef> {
    pieces
        .map(|(index, p)| PieceRef {
            index,
            start: p.start,
            end: p.end,
            chars: p.chars,
        })
        .collect()
}

/// The size of the file pieces point into.
fn file_bytes(file: &std::path::Path) -> Result<u64, HostError> {
    std::fs::metadata(file).map(|m| m.len()).map_err(|e| {
        HostError::RespondToModel(format!("{} could not be read: {e}", file.display()))
    })
}

/// A results list's entry for one mapped piece.
pub(super) fn piece_result(index: usize, piece: Piece, result: String) -> PieceResult {
    PieceResult {
        index,
        start: piece.start,
        end: piece.end,
        chars: piece.chars,
        result,
    }
}

/// The characters of a text passed where a pieces key goes that the refusal quotes.
const TEXT_SHOWN_CHARS: usize = 40;

/// The refusal of `key` when it is text, not a key — longer than any key or over
/// several lines: a model that passes `context` itself to `ctx_filter` must be told
/// with the text's start only, since a refusal that quoted it whole would be redacted
/// as an echo of the context and say nothing. `None` for what may be a key.
fn text_for_a_key(key: &str) -> Option<HostError> {
    if key.len() <= rlm_context_store::MAX_KEY_BYTES && !key.contains('\n') {
        return None;
    }
    let chars = key.chars().count();
    let start: String = key.chars().take(TEXT_SHOWN_CHARS).collect();
    Some(HostError::RespondToModel(format!(
        "ctx_filter and ctx_map take the key of a pieces variable, and this is a text of {chars} characters (`{}…`), not a key: cut it into pieces with ctx_split first (ctx_split of \"context\" by lines returns a key) and pass the key it returns",
        start.replace('\n', " ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_passed_for_a_pieces_key_is_refused_with_its_start_not_whole() {
        let text = "2026-03-07 14:02 order=1 level=warn bytes=50\n".repeat(300);
        let Some(HostError::RespondToModel(message)) = text_for_a_key(&text) else {
            panic!("refused");
        };
        assert!(
            message.contains(
                "a text of 13500 characters (`2026-03-07 14:02 order=1 level=warn byte…`)"
            ) && message.contains("cut it into pieces with ctx_split first"),
            "{message}"
        );
        assert!(message.len() < 400, "{message}");
        // One line of two, and a key: only the text is refused.
        assert!(text_for_a_key("line one\nline two").is_some());
        assert!(text_for_a_key("pieces-3f2a").is_none());
    }
}
