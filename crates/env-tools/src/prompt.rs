//! The system prompt of the micro-tools: what each tool offered does, and the
//! delegation rules of the design they come from (cheapest first: grep, slice, then
//! summarize). Short on purpose: the models this environment is for are small.

use std::fmt::Write as _;

use crate::catalog::MicroTool;
use crate::text_protocol;
use rlm_env::PromptFeatures;

/// The system prompt of the micro-tools: what each does, and the delegation rules of
/// the design they come from (cheapest first: grep, slice, then summarize). Short on
/// purpose: the models this environment is for are small.
pub(crate) fn system_prompt(features: PromptFeatures, tools: &[MicroTool]) -> String {
    let mut text = String::from(
        "You answer a task about a context that is far too large to read at once. The context is NOT in this conversation: you read it with tools, and each tool's result comes back in the next message.\n\nTools:\n",
    );
    for tool in tools {
        let _ = writeln!(text, "- {}: {}", tool.signature(), tool.spec().description);
    }
    text.push_str("\nRules:\n- `variable` is `context` (the task's context) or the key of a stored variable.\n");
    let offers = |tool| tools.contains(&tool);
    if offers(MicroTool::Grep) {
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
    if offers(MicroTool::MapReduce) {
        text.push_str("- For a count, a sum or a list over the whole context (more than one match could hold), use ctx_map_reduce rather than reading it piece by piece.\n");
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
    text.push_str("- When you know the answer, call final_answer(answer) alone, or write FINAL(…) on its own line with the answer inside the parentheses.\n");
    if features.text_tool_protocol {
        text.push('\n');
        text.push_str(text_protocol::PROTOCOL);
    }
    text
}

/// The system prompt of `--env plan`: the model's one action is a plan; a worked
/// example; the plan's parts.
pub(crate) fn plan_system_prompt(features: PromptFeatures) -> String {
    let mut text = String::from(
        "You answer a task about a context that is far too large to read at once. The context is NOT in this conversation. You do not read it yourself: each step you give one plan, the orchestrator runs it over the whole context — cutting it into pieces, asking a helper model about each piece or counting a pattern in it, and reducing the results to one — and its result comes back in the next message.\n\nTools:\n",
    );
    for tool in [
        MicroTool::Length,
        MicroTool::MapReduce,
        MicroTool::FinalAnswer,
    ] {
        let _ = writeln!(text, "- {}: {}", tool.signature(), tool.spec().description);
    }
    text.push_str(
        "\nA plan:\n- split: {\"by\": \"chars\", \"size\": 20000} (or \"lines\"; \"regex\" with a \"pattern\" where each record starts); leave out size to use the largest piece the helper model takes.\n- filter (optional): {\"regex\": \"payment\"} keeps the pieces that mention it.\n- map: {\"ask\": \"How many failed payments are listed? Answer with a number.\"} asks the helper model about each piece; {\"count\": \"ERROR\"} counts matches and {\"extract\": \"id=(\\\\d+)\"} lists them, with no model.\n- reduce: {\"op\": \"sum\"} adds numbers; count, min, max, vote, union (distinct items), join, concat, top_k (with k), or {\"op\": \"ask\", \"instruction\": \"…\"} to let the helper model combine the answers.\n\nExample: to count the failed payments in a log, call ctx_map_reduce with {\"variable\": \"context\", \"split\": {\"by\": \"chars\", \"size\": 20000}, \"filter\": {\"regex\": \"payment\"}, \"map\": {\"ask\": \"How many failed payments are listed? Answer with a number.\"}, \"reduce\": {\"op\": \"sum\"}}.\n\nRules:\n- Ask the helper model short, exact questions that a piece alone can answer; ask for a number, or a list, only.\n- A plan that would cost more than the budget is refused with the figures: use larger pieces, a filter, or a map with no model.\n- When the result answers the task, call final_answer(answer) alone, or write FINAL(…) on its own line.\n",
    );
    if features.text_tool_protocol {
        // Replies are held to a call keyed by the tool's name (`response_format`).
        text.push('\n');
        text.push_str(text_protocol::KEYED_REPLY);
    }
    text
}
