//! The system prompts of the micro-tools and of `--env plan`: what each tool offered
//! does, and the rules by kind of task (a fact is found with grep and slice; a count,
//! a sum or a ranking is computed by a plan whose map needs no model; a sub-model reads
//! only what neither does). Short on purpose: the models these are for are small.

use std::fmt::Write as _;

use crate::catalog::MicroTool;
use crate::text_protocol;
use rlm_env::PromptFeatures;
use rlm_protocol::host_call::PLAN_EXAMPLE_ASK;

/// Maps with no model over records of several shapes (JSON lines, CSV, an access
/// log), each a pattern that reads one field and a reduction of what it read: exact
/// where a helper model guesses, and written so that a model can copy the shape onto
/// its own records. Shown to both the plan and the tools environments.
const EXACT_MAPS: &str = r#"- JSON lines like {"path": "/api", "latency_ms": 87}, the slowest request: map {"extract": "\"latency_ms\": (\\d+)"}, reduce {"op": "max"}
- CSV lines like 2024-05-01,oak,12, the distinct trees: map {"extract": "^[^,]*,([^,]*),"}, reduce {"op": "union"}
- log lines like GET /index.html status=404 bytes=512, the requests that got a 404: map {"count": "status=404"}, reduce {"op": "sum"}
- the same log, the fewest bytes a failed request sent: filter {"where": "status >= 500"}, map {"extract": "bytes=(\\d+)"}, reduce {"op": "min"}"#;

/// The reductions over records (`group_by`, `argmax`, `count_distinct`, `min`, `max`),
/// shown to the plan environment and to the tools when a reduction is offered. Each is
/// an example over a format of its own (CSV, JSON lines, an access log), worded as no
/// particular task is, so the model learns the reduction, not a question's template.
pub(crate) const RECORD_REDUCTIONS: &str = r##"Reductions over records, with no model (map {"extract": "^.*$"} keeps every line whole, one record a line):
- per key, a count, sum, min or max: over CSV lines like `2024-05-01,kiosk-3,4.50`, {"op": "group_by", "key": "^[^,]*,([^,]+),", "value": ",([\\d.]+)$", "agg": "sum"} gives one `kiosk-3: 81.50` line per kiosk, the largest first; over JSON lines like `{"host": "db-2", "ms": 340}`, {"op": "group_by", "key": "\"host\": \"([^\"]+)\"", "value": "\"ms\": (\\d+)", "agg": "max", "k": 3} gives the three hosts with the slowest calls. A pattern's first group is the key or the number; "agg": "count" needs no value.
- the record with the largest number: over an access log like `GET /cart 200 512ms`, {"op": "argmax", "value": "(\\d+)ms"} gives the slowest request's line.
- how many distinct values: map {"extract": "\"host\": \"([^\"]+)\""}, reduce {"op": "count_distinct"}.
- the smallest or the largest number: map {"extract": "(\\d+)ms"}, reduce {"op": "min"} or {"op": "max"}.
- a reduction that cannot read its records names the pattern that matched nothing or the values that are not numbers: fix that pattern and send the plan again.
"##;

/// The system prompt of the micro-tools: what each does, and the rules by kind of task
/// (without `ctx_map_reduce`, the design's delegation rule: cheapest first, grep, slice,
/// then summarize).
pub(crate) fn system_prompt(features: PromptFeatures, tools: &[MicroTool]) -> String {
    let mut text = String::from(
        "You answer a task about a context that is far too large to read at once. The context is NOT in this conversation: you read it with tools, and each tool's result comes back in the next message.\n\n",
    );
    tool_list(&mut text, features, tools);
    text.push_str("\nRules:\n- `variable` is `context` (the task's context) or the key of a stored variable.\n");
    let offers = |tool| tools.contains(&tool);
    if offers(MicroTool::MapReduce) {
        by_kind_of_task(&mut text, tools);
    } else if offers(MicroTool::Grep) {
        text.push_str("- Cheapest first: ctx_grep to find the lines that matter (it gives line numbers and character offsets)");
        if offers(MicroTool::Slice) {
            text.push_str(", then ctx_slice to read around an offset");
        }
        if offers(MicroTool::Summarize) {
            text.push_str(", and ctx_summarize only when grep and slice are not enough");
        }
        text.push_str(".\n");
    }
    if offers(MicroTool::Summarize) {
        let _ = writeln!(
            text,
            "- ctx_summarize hands a variable of up to about {} characters to a sub-model, and a larger one to a nested run that reads it with these tools.",
            features.sub_context_chars
        );
    }
    if [MicroTool::Split, MicroTool::Map, MicroTool::Reduce]
        .iter()
        .all(|tool| offers(*tool))
    {
        text.push_str("- The same, step by step: ctx_split, then ctx_filter (optional), ctx_map and ctx_reduce; each returns the name of a variable the next step takes. Example, counting the ERROR lines: ctx_split {\"variable\": \"context\", \"by\": \"lines\", \"size\": 500} returns pieces-1a2b; ctx_map {\"pieces\": \"pieces-1a2b\", \"count\": \"ERROR\"} returns results-3c4d; ctx_reduce {\"results\": \"results-3c4d\", \"op\": \"sum\"} returns the count.\n");
    }
    text.push_str(
        "- Never repeat a call with the same arguments: read the result you already have.\n",
    );
    if features.constrained_calls {
        text.push_str("- When you know the answer, call final_answer(answer) alone.\n");
    } else {
        text.push_str("- When you know the answer, call final_answer(answer) alone, or write FINAL(…) on its own line with the answer inside the parentheses.\n");
    }
    if offers(MicroTool::MapReduce) || offers(MicroTool::Reduce) {
        text.push('\n');
        text.push_str(RECORD_REDUCTIONS);
    }
    if features.text_tool_protocol && features.constrained_calls {
        // Replies are held to one call keyed by the tool's name (`--constrain`).
        text.push('\n');
        text.push_str(&text_protocol::keyed_tool_reply(keyed_example(tools)));
    } else if features.text_tool_protocol {
        text.push('\n');
        text.push_str(text_protocol::PROTOCOL);
    }
    text
}

/// The tools offered, at the head of the prompt. Written as text (`--tool-protocol
/// text`), nothing else tells the model what they do: each is listed with its
/// description. Sent natively, the request's tool definitions carry each tool's
/// description and parameters, and the server renders them into the model's prompt:
/// listing the descriptions as well would show every one twice (about 850 of the
/// ~5 400 tokens the ten tools' first request takes with Qwen2.5's template, in a
/// window of 8 192), so the list gives the calls' names and arguments only.
fn tool_list(text: &mut String, features: PromptFeatures, tools: &[MicroTool]) {
    if features.text_tool_protocol {
        text.push_str("Tools:\n");
        for tool in tools {
            let _ = writeln!(text, "- {}: {}", tool.signature(), tool.spec().description);
        }
    } else {
        let calls: Vec<&str> = tools.iter().map(|tool| tool.signature()).collect();
        let _ = writeln!(
            text,
            "Tools (what each does and its parameters are in the tool definitions): {}.",
            calls.join("; ")
        );
    }
}

/// A keyed call of an offered tool, for the prompt of constrained replies.
fn keyed_example(tools: &[MicroTool]) -> &'static str {
    if tools.contains(&MicroTool::Grep) {
        r#"{"ctx_grep": {"variable": "context", "pattern": "<words from the task>"}}"#
    } else if tools.contains(&MicroTool::Length) {
        r#"{"ctx_length": {"variable": "context"}}"#
    } else {
        r#"{"<tool>": {<its arguments>}}"#
    }
}

/// The tools' rules when `ctx_map_reduce` is offered, by the kind of task: one fact is
/// found (grep, slice), a count or a ranking is computed (a plan with no model, the
/// exact maps shown), and a sub-model reads only what neither does. "Cheapest first:
/// grep, slice, then summarize" alone leads a model that grepped a count's lines to
/// ask a summary for the count, which a sub-model then guesses.
fn by_kind_of_task(text: &mut String, tools: &[MicroTool]) {
    let grep = tools.contains(&MicroTool::Grep);
    if grep {
        text.push_str("- To find one fact (the value for a key, a line that says something): ctx_grep finds the lines (with line numbers and character offsets)");
        if tools.contains(&MicroTool::Slice) {
            text.push_str(", then ctx_slice reads around an offset");
        }
        text.push_str(".\n");
    }
    text.push_str("- To count, add up, rank or pair things over the whole context (more than one match could hold): ctx_map_reduce, not reading it piece by piece.");
    if grep {
        text.push_str(" ctx_grep's first line says how many lines match its pattern: that number is already a count.");
    }
    let _ = writeln!(
        text,
        "\n- When the task names what to look for (a word, a key=value), a map with no model answers it exactly. For example, with split {{\"by\": \"lines\"}}:\n{EXACT_MAPS}"
    );
    if tools.contains(&MicroTool::Summarize) {
        text.push_str("- ctx_summarize only when neither grep nor a map with no model can answer: a sub-model reads the variable.\n");
    }
}

/// The system prompt of `--env plan`: the model's one action is a plan; a worked
/// example; the plan's parts.
pub(crate) fn plan_system_prompt(features: PromptFeatures) -> String {
    let mut text = String::from(
        "You answer a task about a context that is far too large to read at once. The context is NOT in this conversation. You do not read it yourself: each step you give one plan, the orchestrator runs it over the whole context — cutting it into pieces, asking a helper model about each piece or counting a pattern in it, and reducing the results to one — and its result comes back in the next message.\n\n",
    );
    tool_list(&mut text, features, &MicroTool::PLAN);
    let example = serde_json::to_string(PLAN_EXAMPLE_ASK).unwrap_or_default();
    let _ = write!(
        text,
        "\nA plan:\n- split: {{\"by\": \"chars\", \"size\": 20000}} (or \"lines\"; \"regex\" with a \"pattern\" where each record starts); leave out size to use the largest piece the helper model takes.\n- filter (optional): {{\"regex\": \"payment\"}} keeps the pieces that mention it; {{\"where\": \"bytes > 1000\"}} keeps the lines whose number field meets the condition (>, >=, <, <=, =, !=; join two with and); with a count or extract map, only the lines a filter keeps are read.\n- map, what each piece becomes. With no model, exact and fast: {{\"count\": PATTERN}} counts the matches of PATTERN (a regular expression, case-insensitive) in the piece; {{\"extract\": PATTERN}} lists them (the text of the first group, in parentheses, when it has one). With the helper model: {{\"ask\": QUESTION}}, the task's own question about one piece, for what no pattern finds.\n- reduce: {{\"op\": \"sum\"}} adds numbers; count, min, max, vote, union (distinct items), join, concat, top_k (with k: the k most frequent items, each with its count), pairs (how many pairs of items are equal), or {{\"op\": \"ask\", \"instruction\": \"…\"}} to let the helper model combine the answers.\n\nWhen the task names what to look for (a word, a key=value), a map with no model answers it exactly. For example, with split {{\"by\": \"lines\"}}:\n{EXACT_MAPS}\n\nExample with the helper model: to count the failed payments in a log whose lines say it in many ways, call ctx_map_reduce with {{\"variable\": \"context\", \"split\": {{\"by\": \"chars\", \"size\": 20000}}, \"filter\": {{\"regex\": \"payment\"}}, \"map\": {{\"ask\": {example}}}, \"reduce\": {{\"op\": \"sum\"}}}}.\n\nRules:\n- Ask the helper model short, exact questions about this task that a piece alone can answer; ask for a number, or a list, only.\n- A plan that would cost more than the budget is refused with the figures: use larger pieces, a filter, or a map with no model.\n- When the result answers the task, call final_answer(answer) alone, or write FINAL(…) on its own line. An answer before any plan has given a result is a guess and is not taken: when a plan fails, write it again as its error says.\n"
    );
    text.push('\n');
    text.push_str(RECORD_REDUCTIONS);
    if features.text_tool_protocol {
        // Replies are held to a call keyed by the tool's name (`response_format`).
        text.push('\n');
        text.push_str(text_protocol::KEYED_REPLY);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_prompt() -> String {
        plan_system_prompt(PromptFeatures::default())
    }

    /// The JSON string after `key` in the prompt's text (`"extract": "…"`), decoded.
    fn json_string_after(text: &str, key: &str) -> String {
        let start = text.find(key).expect("the key is in the prompt") + key.len();
        let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter();
        stream
            .next()
            .expect("a JSON value follows")
            .expect("a JSON string follows")
    }

    #[test]
    fn the_plan_prompt_shows_exact_maps_that_work_as_written() {
        let text = plan_prompt();
        // Each pattern shown, decoded as the model reads it, finds its field in a
        // record of the shape its line names.
        for (before, record, found) in [
            (
                "slowest request: map {\"extract\": ",
                r#"{"path": "/api", "latency_ms": 87}"#,
                Some("87"),
            ),
            (
                "distinct trees: map {\"extract\": ",
                "2024-05-01,oak,12",
                Some("oak"),
            ),
            (
                "got a 404: map {\"count\": ",
                "GET /index.html status=404 bytes=512",
                None,
            ),
            (
                "\"status >= 500\"}, map {\"extract\": ",
                "GET /pay status=503 bytes=128",
                Some("128"),
            ),
        ] {
            let pattern = json_string_after(&text, before);
            let regex = regex::Regex::new(&pattern).expect("the shown pattern compiles");
            let captures = regex.captures(record).expect("it matches its record");
            if let Some(found) = found {
                assert_eq!(&captures[1], found, "{pattern}");
            }
        }
        let condition = json_string_after(&text, "failed request sent: filter {\"where\": ");
        let condition =
            rlm_plan::condition::Condition::parse(&condition).expect("the condition reads");
        assert!(condition.holds_for("GET /pay status=503 bytes=128"));
        assert!(!condition.holds_for("GET /index.html status=404 bytes=512"));
        for reduce in ["max", "union", "sum", "min"] {
            assert!(
                text.contains(&format!("{{\"op\": \"{reduce}\"}}")),
                "{reduce}"
            );
        }
    }

    fn tools_prompt(tools: &[MicroTool]) -> String {
        system_prompt(PromptFeatures::default(), tools)
    }

    #[test]
    fn the_tools_prompt_shows_the_same_exact_maps_and_says_a_grep_count_is_a_count() {
        let text = tools_prompt(&MicroTool::ALL);
        assert!(text.contains(EXACT_MAPS), "{text}");
        assert!(plan_prompt().contains(EXACT_MAPS));
        assert!(
            text.contains("ctx_grep's first line says how many lines match"),
            "{text}"
        );
        // A fact is found first, then counts are computed, then a sub-model reads.
        let fact = text.find("To find one fact").expect("the fact rule");
        let count = text.find("To count, add up").expect("the count rule");
        let summarize = text
            .find("- ctx_summarize only when")
            .expect("the last resort");
        assert!(fact < count && count < summarize, "{text}");
        assert!(!text.contains("Cheapest first"), "{text}");
    }

    #[test]
    fn the_tools_prompt_names_only_the_tools_offered() {
        // Without ctx_map_reduce: the design's rule, cheapest first.
        let classic = tools_prompt(&[
            MicroTool::Length,
            MicroTool::Grep,
            MicroTool::Slice,
            MicroTool::Summarize,
            MicroTool::FinalAnswer,
        ]);
        assert!(classic.contains("Cheapest first: ctx_grep"), "{classic}");
        assert!(!classic.contains(EXACT_MAPS), "{classic}");
        // With it but no grep, slice or summarize: no rule names them.
        let plans = tools_prompt(&[MicroTool::MapReduce, MicroTool::FinalAnswer]);
        assert!(plans.contains(EXACT_MAPS), "{plans}");
        for absent in ["ctx_grep", "ctx_slice", "ctx_summarize"] {
            assert!(!plans.contains(absent), "{absent} in {plans}");
        }
    }

    #[test]
    fn native_tools_are_named_and_text_tools_described() {
        let text = PromptFeatures {
            text_tool_protocol: true,
            ..PromptFeatures::default()
        };
        for (native, written, tools) in [
            (
                tools_prompt(&MicroTool::ALL),
                system_prompt(text, &MicroTool::ALL),
                &MicroTool::ALL[..],
            ),
            (
                plan_prompt(),
                plan_system_prompt(text),
                &MicroTool::PLAN[..],
            ),
        ] {
            for tool in tools {
                let description = tool.spec().description;
                // Natively, the server shows the description from the tool's
                // definition: the prompt names the call and does not repeat it.
                assert!(native.contains(tool.signature()), "{native}");
                assert!(!native.contains(&description), "{description} in {native}");
                // As text, the prompt is all the model has.
                let line = format!("- {}: {description}", tool.signature());
                assert!(written.contains(&line), "{line} not in {written}");
            }
        }
    }

    #[test]
    fn every_prompt_shows_the_one_example_question() {
        // The plan prompt and the tool's description show the same worked example.
        assert!(plan_prompt().contains(&serde_json::to_string(PLAN_EXAMPLE_ASK).unwrap()));
        assert!(MicroTool::MapReduce
            .spec()
            .description
            .contains(PLAN_EXAMPLE_ASK));
    }
}

/// The record reductions' paragraph: its examples run as written on the lines they
/// show, its wording is no task's, and the prompts that carry it are snapshotted.
#[cfg(test)]
mod record_reduction_tests {
    use super::*;
    use rlm_plan::reduce::reduce;
    use rlm_plan::Reduce;

    /// Every `{"op": …}` object of `text`, parsed as the plan crate's reduction.
    fn reductions_in(text: &str) -> Vec<Reduce> {
        text.match_indices("{\"op\": ")
            .map(|(at, _)| {
                let mut stream =
                    serde_json::Deserializer::from_str(&text[at..]).into_iter::<Reduce>();
                let reduce = stream
                    .next()
                    .expect("an object follows")
                    .unwrap_or_else(|e| panic!("{e}: {}", &text[at..]));
                reduce.check().expect("a reduction that passes its checks");
                reduce
            })
            .collect()
    }

    /// The pattern of the `{"extract": …}` after `after` in `text`.
    fn extract_after(text: &str, after: &str) -> regex::Regex {
        let start = text.find(after).expect("the example") + after.len();
        let at = text[start..].find("{\"extract\": ").expect("an extract") + start + 12;
        let mut stream = serde_json::Deserializer::from_str(&text[at..]).into_iter::<String>();
        let pattern = stream.next().expect("a pattern").expect("a JSON string");
        rlm_plan::pattern::compile(&pattern).expect("the shown pattern compiles")
    }

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn the_shown_reductions_work_on_the_lines_they_show() {
        let shown = reductions_in(RECORD_REDUCTIONS);
        assert_eq!(shown.len(), 6, "{shown:?}");
        let csv = lines("2024-05-01,kiosk-3,4.50\n2024-05-01,kiosk-1,2\n2024-05-02,kiosk-3,77");
        assert_eq!(
            reduce(&shown[0], &csv).as_deref(),
            Ok("kiosk-3: 81.50\nkiosk-1: 2")
        );
        let json_lines = lines(
            r#"{"host": "db-2", "ms": 340}
{"host": "web-1", "ms": 12}
{"host": "db-2", "ms": 90}
{"host": "cache", "ms": 5}
{"host": "queue", "ms": 1}"#,
        );
        assert_eq!(
            reduce(&shown[1], &json_lines).as_deref(),
            Ok("db-2: 340\nweb-1: 12\ncache: 5")
        );
        let access = lines("GET /cart 200 512ms\nGET /index 200 35ms\nPOST /pay 500 1020ms");
        assert_eq!(
            reduce(&shown[2], &access).as_deref(),
            Ok("POST /pay 500 1020ms")
        );
        let hosts = extract_after(RECORD_REDUCTIONS, "how many distinct values");
        assert_eq!(
            &hosts.captures(&json_lines[0]).expect("it matches")[1],
            "db-2"
        );
        let ms = extract_after(RECORD_REDUCTIONS, "the smallest or the largest number");
        assert_eq!(&ms.captures(&access[0]).expect("it matches")[1], "512");
        assert_eq!(
            shown[3..],
            [Reduce::CountDistinct, Reduce::Min, Reduce::Max]
        );
    }

    #[test]
    fn the_paragraph_is_worded_as_no_particular_task_is() {
        let text = RECORD_REDUCTIONS.to_lowercase();
        for phrase in ["label", "amount", "city", "year", "magic", "most", "which"] {
            assert!(!text.contains(phrase), "{phrase} in {RECORD_REDUCTIONS}");
        }
    }

    #[test]
    fn constrained_text_calls_are_asked_for_one_keyed_call_a_reply() {
        let text = PromptFeatures {
            text_tool_protocol: true,
            ..PromptFeatures::default()
        };
        let free = system_prompt(text, &MicroTool::ALL);
        assert!(free.contains(text_protocol::PROTOCOL));
        assert!(free.contains("or write FINAL(…)"));
        let held = system_prompt(
            PromptFeatures {
                constrained_calls: true,
                ..text
            },
            &MicroTool::ALL,
        );
        assert!(!held.contains(text_protocol::PROTOCOL), "{held}");
        assert!(!held.contains("FINAL(…)"), "{held}");
        assert!(held.contains(r#"one JSON object keyed by the tool you call, such as {"ctx_grep": {"variable": "context""#), "{held}");
        assert!(held.contains("One call a reply"), "{held}");
        // The example is a call of a tool the run offers.
        let length_only = system_prompt(
            PromptFeatures {
                constrained_calls: true,
                ..text
            },
            &[MicroTool::Length, MicroTool::FinalAnswer],
        );
        assert!(length_only.contains(r#"such as {"ctx_length": {"variable": "context"}}"#));
    }

    #[test]
    fn the_plan_and_tools_prompts_carry_it_only_with_a_reduction() {
        let plan = plan_system_prompt(PromptFeatures::default());
        assert!(plan.contains(RECORD_REDUCTIONS));
        let all = system_prompt(PromptFeatures::default(), &MicroTool::ALL);
        assert!(all.contains(RECORD_REDUCTIONS));
        let steps = system_prompt(
            PromptFeatures::default(),
            &[
                MicroTool::Split,
                MicroTool::Map,
                MicroTool::Reduce,
                MicroTool::FinalAnswer,
            ],
        );
        assert!(steps.contains(RECORD_REDUCTIONS));
        let reading = system_prompt(
            PromptFeatures::default(),
            &[MicroTool::Grep, MicroTool::Slice, MicroTool::FinalAnswer],
        );
        assert!(!reading.contains("group_by"), "{reading}");
    }

    /// The texts the model reads, whole: a change to any is a reviewed snapshot.
    #[test]
    fn the_model_visible_prompts_keep_their_text() {
        let features = PromptFeatures {
            agents: false,
            sub_context_chars: 20_000,
            text_tool_protocol: false,
            constrained_calls: false,
        };
        insta::assert_snapshot!("plan_prompt", plan_system_prompt(features));
        insta::assert_snapshot!("tools_prompt", system_prompt(features, &MicroTool::ALL));
        let specs: Vec<_> = MicroTool::ALL.iter().map(|tool| tool.spec()).collect();
        insta::assert_json_snapshot!("tool_specs", specs);
    }
}
