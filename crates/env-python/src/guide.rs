//! What the system prompt says about the Python REPL: its helpers, with their
//! Python call syntax.

use rlm_env::{EnvGuide, PromptFeatures, CHUNK_CHARS};

/// The reductions over records, with an example a format of its own each (JSON lines,
/// an access log), worded as no particular task is.
const RECORDS: &str = r#" Over records (one a line), a reduction also groups and ranks with no model: map={'extract': '^.*$'} keeps each line whole, then reduce={'op': 'group_by', 'key': r'"host": "([^"]+)"', 'value': r'"ms": (\d+)', 'agg': 'max'} gives each host's slowest call over JSON lines (agg: count, sum, min or max; the patterns' first groups are the key and the number; 'k': 3 keeps the three largest), {'op': 'argmax', 'value': r'(\d+)ms'} the line of an access log's slowest request, and {'op': 'count_distinct'} after map={'extract': r'"host": "([^"]+)"'} how many distinct hosts; ctx_reduce(results, op='group_by', key=..., value=..., agg=...) is the same step. A reduction that cannot read its records says which pattern matched nothing or which values are not numbers."#;

/// What the system prompt says about the Python REPL and its helpers.
pub fn guide(features: PromptFeatures) -> EnvGuide {
    let chars = features.sub_context_chars;
    let mut delegate = format!(
        "llm_query(prompt, context=piece) asks a sub-model about a piece of at most about {chars} characters (longer is refused; llm_query(prompt, context=text, split=True) splits it for you and combines the answers); llm_query_parallel([...]) asks about many pieces at once; sub_rlm(query, context=piece) runs a nested RLM over a large piece and sub_rlm_parallel([(query, piece), ...]) runs several at once"
    );
    if features.agents {
        delegate.push_str(
            "; spawn_agent(task, refs=[keys]) runs the external agent on stored variables",
        );
    }
    delegate.push_str(". For counts, sums and lists over the whole context, map_reduce runs a whole plan for you — cut into pieces, each asked or counted, the results reduced — priced first and refused with the figures if over budget, e.g. map_reduce(split={'by': 'chars', 'size': 20000}, map={'ask': 'How many failed payments are listed? Answer with a number.'}, reduce={'op': 'sum'}); map={'count': 'ERROR'} or {'extract': 'id=(\\d+)'} needs no model; reduce ops: sum, count, min, max, concat, vote, union, top_k, join. The same step by step, each step a stored variable the next takes: pieces = ctx_split('context', by='lines', size=500); results = ctx_map(pieces, count='ERROR'); total = ctx_reduce(results, op='sum') (ctx_filter(pieces, regex=...) keeps some pieces).");
    delegate.push_str(RECORDS);
    let mut helpers = vec![
        format!("context, context_chunks (the context in pieces of {CHUNK_CHARS} characters), query, history"),
        "peek(var, start=0, end=10)  search(var, pattern, regex=False, max_results=10)".to_owned(),
        "summarize(var, max_tokens=500)  find_relevant(var, query, top_k=5)".to_owned(),
        "llm_query(prompt, context=None, split=False, schema=None)  llm_query_parallel(prompts, split=False, schema=None)  (schema={'type': 'integer'} or any JSON Schema: the answer is that value, not text)  sub_rlm(query, context=None)  sub_rlm_parallel(jobs)".to_owned(),
        "map_reduce(split={...}, filter={...}, map={...}, reduce={...})  (map_reduce.last: pieces, kept, calls)".to_owned(),
        "ctx_split(input, by=, size=) → pieces  ctx_filter(pieces, regex=|where=|ask=) → pieces  ctx_map(pieces, ask=[, schema=]|count=|extract=|sub_rlm=) → results  ctx_reduce(results, op=, key=, value=, agg=) → answer".to_owned(),
    ];
    if features.agents {
        helpers.push("spawn_agent(task, refs=None)  spawn_agents([(task, refs), ...])".to_owned());
    }
    helpers.push(
        "store.set(key, value)  store.get(key)  store.ref(key)  store.list()  store.delete(key)"
            .to_owned(),
    );
    helpers.push("SHOW_VARS()  FINAL_VAR(name)  SUBMIT(obj)".to_owned());
    EnvGuide {
        language: "Python",
        how_code_runs:
            "Every block runs in the same persistent REPL and you then see what it printed."
                .to_owned(),
        delegate,
        store_note: "store.set(key, value) stores one where sub-agents can read it by reference."
            .to_owned(),
        helpers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The system prompt of the Python REPL, whole: a change is a reviewed snapshot.
    #[test]
    fn the_system_prompt_keeps_its_text() {
        let features = PromptFeatures {
            agents: true,
            sub_context_chars: 20_000,
            text_tool_protocol: false,
            constrained_calls: false,
        };
        insta::assert_snapshot!(rlm_env::system_prompt(&guide(features)));
    }
}
