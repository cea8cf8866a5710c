//! What a `count` or an `extract` map reads of a piece its filters kept: the records
//! every regex matches and every `where` condition holds for — lines, or for a `regex`
//! split the records its pattern starts (a multi-line record is kept or dropped
//! whole). A filter before a count means records to whoever writes one: "the amounts
//! of the `label=shipping` records". With no such filter, the whole piece.
//!
//! The piece is read in chunks ([`Source::chunks`]) and what is kept handed on in
//! chunks of about [`CHUNK_MAX_BYTES`], so a piece of any size — a file with no line
//! end is one piece of a `lines` split — is read with bounded memory. A record longer
//! than a chunk is tested, and kept or dropped, a chunk at a time.

use std::ops::ControlFlow;

use regex::Regex;
use rlm_plan::condition::Condition;
use rlm_plan::split::Piece;
use rlm_plan::{Filter, PlanError, Split, SplitBy};
use rlm_protocol::host_call::HostError;

use super::refused;
use super::source::{Source, CHUNK_MAX_BYTES};

/// The records of a piece a plan's filters keep (see the module's comment).
#[derive(Clone, Default)]
pub(super) struct RecordFilter {
    tests: Vec<RecordTest>,
    /// Where a record starts (`None`: at every line).
    record_start: Option<Regex>,
}

/// What a record must pass: a regex filter's match, or a `where` condition.
#[derive(Clone)]
enum RecordTest {
    /// `{"regex": P}`.
    Matches(Regex),
    /// `{"where": "latency_ms > 250"}`.
    Meets(Condition),
}

impl RecordTest {
    /// The test of `filter`; none for a yes/no question (a model's, per piece).
    fn of(filter: &Filter) -> Result<Option<Self>, HostError> {
        let shape = |e: String| refused(PlanError::Shape(e));
        Ok(match filter {
            Filter::Regex(pattern) => Some(Self::Matches(
                rlm_plan::pattern::compile(pattern).map_err(|e| shape(e.to_string()))?,
            )),
            Filter::Where(condition) => Some(Self::Meets(
                Condition::parse(condition).map_err(|e| shape(format!("`filter.where`: {e}")))?,
            )),
            Filter::Ask(_) => None,
        })
    }

    fn passes(&self, record: &str) -> bool {
        match self {
            Self::Matches(regex) => regex.is_match(record),
            Self::Meets(condition) => condition.holds_for(record),
        }
    }
}

impl RecordFilter {
    /// The filter of these `filters` (their regexes and conditions) over pieces cut by
    /// `split`.
    pub(super) fn new(filters: &[&Filter], split: &Split) -> Result<Self, HostError> {
        let mut tests = Vec::new();
        for filter in filters {
            tests.extend(RecordTest::of(filter)?);
        }
        let record_start = match (split.by, &split.pattern) {
            (SplitBy::Regex, Some(pattern)) => Some(
                rlm_plan::pattern::compile(pattern)
                    .map_err(|e| refused(PlanError::Shape(e.to_string())))?,
            ),
            _ => None,
        };
        Ok(Self {
            tests,
            record_start,
        })
    }

    /// True when a piece passes the filter: a match of its one regex anywhere in it,
    /// or a record that passes every test.
    pub(super) fn passes(&self, source: &Source, piece: &Piece) -> Result<bool, HostError> {
        let mut passes = false;
        let mut found = |text: &str| {
            passes = !text.is_empty();
            if passes {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        match self.tests.as_slice() {
            [RecordTest::Matches(regex)] => source.chunks(piece, &mut |text| {
                found(if regex.is_match(text) { text } else { "" })
            })?,
            _ => self.kept(source, piece, &mut found)?,
        }
        Ok(passes)
    }

    /// Hands what the filter keeps of `piece` to `each`, in order, in chunks of about
    /// [`CHUNK_MAX_BYTES`] (of whole records, with their line ends): the records every
    /// test passes, or the whole piece when there is no test.
    pub(super) fn kept(
        &self,
        source: &Source,
        piece: &Piece,
        each: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<(), HostError> {
        if self.tests.is_empty() {
            return source.chunks(piece, each);
        }
        let mut gather = Gather {
            filter: self,
            record: String::new(),
            kept: String::new(),
            at_line_start: true,
        };
        let mut stopped = false;
        source.chunks(piece, &mut |text| {
            let flow = gather.chunk(text, each);
            stopped = flow.is_break();
            flow
        })?;
        if !stopped {
            let _ = gather.finish(each);
        }
        Ok(())
    }

    /// What the filter keeps of `text` (a text in memory), whole.
    #[cfg(test)]
    fn apply(&self, text: String) -> String {
        let mut kept = String::new();
        let _ = self.kept(
            &Source::text(text.clone()),
            &Piece {
                start: 0,
                end: text.len() as u64,
                chars: 0,
            },
            &mut |part| {
                kept.push_str(part);
                ControlFlow::Continue(())
            },
        );
        kept
    }
}

/// The record being read and what is kept so far, across the chunks of a piece.
struct Gather<'f> {
    filter: &'f RecordFilter,
    record: String,
    kept: String,
    /// True when the next byte starts a line (a chunk may end inside a long line).
    at_line_start: bool,
}

impl Gather<'_> {
    /// Reads the lines of `text`, handing on what is kept once it fills a chunk.
    fn chunk(
        &mut self,
        text: &str,
        each: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        for line in text.split_inclusive('\n') {
            let starts = self.at_line_start
                && self
                    .filter
                    .record_start
                    .as_ref()
                    .is_none_or(|s| s.is_match(line));
            if (starts && !self.record.is_empty()) || self.record.len() >= CHUNK_MAX_BYTES {
                self.end_record(each)?;
            }
            self.record.push_str(line);
            self.at_line_start = line.ends_with('\n');
        }
        ControlFlow::Continue(())
    }

    /// The record read ends: kept when every test passes it.
    fn end_record(&mut self, each: &mut dyn FnMut(&str) -> ControlFlow<()>) -> ControlFlow<()> {
        if !self.record.is_empty() && self.filter.tests.iter().all(|t| t.passes(&self.record)) {
            self.kept.push_str(&self.record);
        }
        self.record.clear();
        if self.kept.len() >= CHUNK_MAX_BYTES {
            let flow = each(&self.kept);
            self.kept.clear();
            return flow;
        }
        ControlFlow::Continue(())
    }

    /// The piece ends: its last record, and what is kept and not yet handed on.
    fn finish(mut self, each: &mut dyn FnMut(&str) -> ControlFlow<()>) -> ControlFlow<()> {
        self.end_record(each)?;
        if self.kept.is_empty() {
            return ControlFlow::Continue(());
        }
        each(&self.kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(json: &str) -> Split {
        serde_json::from_str(json).expect("a valid split")
    }

    #[test]
    fn pattern_maps_read_the_lines_every_filter_matches() {
        let lines = split(r#"{"by": "lines", "size": 10}"#);
        let filter = |patterns: &[&str]| {
            let filters: Vec<Filter> = patterns
                .iter()
                .map(|p| Filter::Regex((*p).into()))
                .collect();
            RecordFilter::new(&filters.iter().collect::<Vec<_>>(), &lines).expect("valid")
        };
        let log = "label=shipping amount=5\nlabel=fraud amount=7\nLABEL=Shipping amount=11\nlast label=shipping";
        assert_eq!(
            filter(&["label=shipping"]).apply(log.to_owned()),
            "label=shipping amount=5\nLABEL=Shipping amount=11\nlast label=shipping"
        );
        assert_eq!(
            filter(&["label=shipping", "amount"]).apply(log.to_owned()),
            "label=shipping amount=5\nLABEL=Shipping amount=11\n"
        );
        assert_eq!(filter(&[]).apply(log.to_owned()), log);
    }

    #[test]
    fn a_where_condition_keeps_the_records_it_holds_for() {
        let lines = split(r#"{"by": "lines", "size": 10}"#);
        let born = Filter::Where("year > 2000".into());
        let oslo = Filter::Regex("city=oslo".into());
        let people = "person=a city=Oslo year=2003\nperson=b city=Lima year=1999\nperson=c city=Oslo year=1980\nperson=d city=Lima year=2001\n";
        let filter = RecordFilter::new(&[&born], &lines).expect("valid");
        assert_eq!(
            filter.apply(people.to_owned()),
            "person=a city=Oslo year=2003\nperson=d city=Lima year=2001\n"
        );
        let both = RecordFilter::new(&[&born, &oslo], &lines).expect("valid");
        assert_eq!(
            both.apply(people.to_owned()),
            "person=a city=Oslo year=2003\n"
        );
        // A question asks a model per piece: it chooses no records.
        let asked = Filter::Ask("is it about Oslo?".into());
        let none = RecordFilter::new(&[&asked], &lines).expect("valid");
        assert_eq!(none.apply(people.to_owned()), people);
    }

    #[test]
    fn under_a_regex_split_a_filter_keeps_whole_records() {
        // A record of several lines (a header and its details): the filter's match on
        // one line keeps the lines the pattern reads on the others.
        let records = split(r#"{"by": "regex", "pattern": "^Record"}"#);
        let shipping = Filter::Regex("label=shipping".into());
        let filter = RecordFilter::new(&[&shipping], &records).expect("valid");
        let log = "preamble\nRecord 1 label=shipping\n  amount=5\nRecord 2 label=fraud\n  amount=7\nRecord 3 label=shipping\n  amount=11\n";
        assert_eq!(
            filter.apply(log.to_owned()),
            "Record 1 label=shipping\n  amount=5\nRecord 3 label=shipping\n  amount=11\n"
        );
    }

    #[test]
    fn kept_records_of_a_large_piece_come_in_bounded_chunks_and_lose_none() {
        let lines = split(r#"{"by": "lines", "size": 10}"#);
        let shipping = Filter::Regex("label=shipping".into());
        let filter = RecordFilter::new(&[&shipping], &lines).expect("valid");
        let log: String = (0..200_000)
            .map(|i| {
                let label = if i % 2 == 0 { "shipping" } else { "fraud" };
                format!("record {i:06} label={label}\n")
            })
            .collect();
        let source = Source::text(log.clone());
        let whole = Piece {
            start: 0,
            end: log.len() as u64,
            chars: 0,
        };
        let mut chunks = Vec::new();
        filter
            .kept(&source, &whole, &mut |text| {
                chunks.push(text.to_owned());
                ControlFlow::Continue(())
            })
            .unwrap();
        assert!(chunks.len() >= 2, "{}", chunks.len());
        assert!(chunks.iter().all(|c| c.len() <= CHUNK_MAX_BYTES + 64));
        let kept = chunks.concat();
        assert_eq!(kept.lines().count(), 100_000);
        assert!(kept.lines().all(|l| l.ends_with("label=shipping")));
        assert!(filter.passes(&source, &whole).unwrap());
        let fraud_only = Source::text("record 1 label=fraud\n");
        let one = Piece {
            start: 0,
            end: 21,
            chars: 0,
        };
        assert!(!filter.passes(&fraud_only, &one).unwrap());
    }
}
