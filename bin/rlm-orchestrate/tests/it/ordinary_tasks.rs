//! Ordinary tasks, worded as users word them, over the files users have (issue 50, item
//! 5): an orders log of `key=value` fields, an application log in logfmt, a Markdown
//! changelog, JSON lines, a CSV, `key: value` blocks, prose, a web server's access log.
//! In each, a scripted model does the right thing — its first reply runs correct code
//! (Python, JavaScript), the right tool call or the right plan, its second gives the
//! right answer (`FINAL`, `FINAL_VAR`, a `final_answer` call) — and the run must end in
//! exactly two model calls with the model's own answer, the request after its first
//! reply carrying the real output and the run's state and no note the model did not
//! ask for ([`harness`]).
//!
//! None of these wordings is the eval generator's, and the answers take every shape (a
//! number, a name, a list, a sentence, a date, a pair). The first three cases are the
//! issue's own examples, verbatim.

mod data;
mod harness;

use serde_json::json;

use harness::{assert_two_calls_and_own_answer, code, final_answer, lines, tool, Case, Env};
use rlm_test_support::mock_llm::MockReply;

// The three examples.

#[test]
fn plan_the_most_anyone_paid_for_one_order_is_the_max_of_the_amounts() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Plan,
        file: "orders.log",
        data: data::orders_log(),
        task: "What is the most anyone paid for a single order?",
        first: tool(
            "ctx_map_reduce",
            json!({"variable": "context", "map": {"extract": "amount=(\\d+)"}, "reduce": {"op": "max"}}),
        ),
        output: lines("998"),
        second: final_answer("998"),
        answer: "998",
    });
}

#[test]
fn python_the_customer_with_the_most_orders_and_their_count() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Python,
        file: "orders.log",
        data: data::orders_log(),
        task:
            "Which customer placed the most orders? Answer with the name and the number of orders.",
        first: code(MOST_ORDERS),
        output: lines("alice 111"),
        second: MockReply::text("FINAL(alice, 111 orders)"),
        answer: "alice, 111 orders",
    });
}

#[test]
fn python_a_changelog_summarised_in_two_sentences() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Python,
        file: "CHANGELOG.md",
        data: data::changelog(),
        task: "Summarise the most important changes in this changelog. Answer with two or three sentences.",
        first: code("latest = context.split('\\n## ')[1]\nprint('## ' + latest.strip())"),
        output: lines(data::LATEST_RELEASE),
        second: MockReply::text(format!("FINAL({SUMMARY})")),
        answer: SUMMARY,
    });
}

/// The model's code for the customer with the most orders in [`data::orders_log`].
const MOST_ORDERS: &str = "from collections import Counter
counts = Counter(line.split('customer=')[1].split()[0] for line in context.splitlines())
name, n = counts.most_common(1)[0]
print(name, n)";

/// The model's two-sentence summary of [`data::changelog`]'s newest release.
const SUMMARY: &str = "Version 3.0.0 is a breaking release: it drops Python 3.8 and moves the configuration file to ~/.config/quill/config.toml. It also adds parallel exports with --jobs and stops an interrupted save from truncating the document.";

// Python.

#[test]
fn python_the_customer_seen_on_the_most_log_lines_and_how_often() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Python,
        file: "orders.log",
        data: data::orders_log(),
        task: "Which customer shows up in the most lines of this log, and how many times?",
        first: code(MOST_ORDERS),
        output: lines("alice 111"),
        second: MockReply::text("FINAL(alice, 111)"),
        answer: "alice, 111",
    });
}

#[test]
fn python_json_lines_distinct_people_who_logged_in_during_march() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Python,
        file: "events.jsonl",
        data: data::events_jsonl(),
        task: "How many different people logged in during March?",
        first: code(
            "import json
events = [json.loads(line) for line in context.splitlines()]
march = {e['user'] for e in events if e['event'] == 'login' and e['ts'].startswith('2025-03')}
n = len(march)
print(n)",
        ),
        output: lines("37"),
        second: MockReply::text("FINAL_VAR(n)"),
        answer: "37",
    });
}

#[test]
fn python_csv_the_region_that_sold_the_most_units_and_its_total() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Python,
        file: "sales.csv",
        data: data::sales_csv(),
        task: "Which region sold the most units? Answer with the region and its total.",
        first: code(
            "import csv, io
totals = {}
for row in csv.DictReader(io.StringIO(context)):
    totals[row['region']] = totals.get(row['region'], 0) + int(row['units'])
best = max(totals, key=totals.get)
print(best, totals[best])",
        ),
        output: lines("east 879"),
        second: MockReply::text("FINAL(east, 879)"),
        answer: "east, 879",
    });
}

#[test]
fn python_key_value_blocks_the_open_tickets_of_high_priority() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Python,
        file: "tickets.txt",
        data: data::tickets(),
        task: "Which open tickets are marked high priority?",
        first: code(
            "tickets = [dict(line.split(': ', 1) for line in block.splitlines()) for block in context.strip().split('\\n\\n')]
ids = ', '.join(t['Ticket'] for t in tickets if t['Status'] == 'open' and t['Priority'] == 'high')
print(ids)",
        ),
        output: lines("T-1013, T-1033, T-1053"),
        second: MockReply::text("FINAL_VAR(ids)"),
        answer: "T-1013, T-1033, T-1053",
    });
}

#[test]
fn python_prose_the_cities_the_author_travelled_to_in_order() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Python,
        file: "diary.txt",
        data: data::diary(),
        task: "Which cities did the author travel to, in order?",
        first: code(
            "import re
cities = re.findall(r'arrived in ([A-Z][a-z]+)', context)
print(', '.join(cities))",
        ),
        output: lines("Lisbon, Porto, Seville, Granada"),
        second: MockReply::text("FINAL(Lisbon, Porto, Seville, Granada)"),
        answer: "Lisbon, Porto, Seville, Granada",
    });
}

#[test]
fn python_access_log_the_address_that_got_the_most_not_founds() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Python,
        file: "access.log",
        data: data::access_log(),
        task: "Which IP address got the most 404 responses?",
        first: code(
            "import re
from collections import Counter
misses = Counter(line.split()[0] for line in context.splitlines() if re.search(r'\" 404 ', line))
top, n = misses.most_common(1)[0]
print(top, n)",
        ),
        output: lines("10.0.0.23 4"),
        second: MockReply::text("FINAL_VAR(top)"),
        answer: "10.0.0.23",
    });
}

#[test]
fn python_access_log_when_the_first_server_error_happened() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Python,
        file: "access.log",
        data: data::access_log(),
        task: "When did the first server error happen?",
        first: code(
            "import re
first = next(line for line in context.splitlines() if re.search(r'\" 5\\d\\d ', line))
print(first.split('[')[1].split(']')[0])",
        ),
        output: lines("12/Mar/2025:10:01:03 +0000"),
        second: MockReply::text("FINAL(12/Mar/2025:10:01:03 +0000)"),
        answer: "12/Mar/2025:10:01:03 +0000",
    });
}

#[test]
fn python_logfmt_no_line_is_fatal() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Python,
        file: "app.log",
        data: data::app_log(),
        task: "How many lines have level=fatal?",
        first: code(
            "n = sum(1 for line in context.splitlines() if 'level=fatal' in line)\nprint(n)",
        ),
        output: lines("0"),
        second: MockReply::text("FINAL(0)"),
        answer: "0",
    });
}

// JavaScript.

#[test]
fn js_access_log_how_many_requests_failed_with_a_server_error() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Js,
        file: "access.log",
        data: data::access_log(),
        task: "How many requests failed with a server error?",
        first: code(
            "const errors = context.split('\\n').filter(line => /\" 5\\d\\d /.test(line))\nconsole.log(errors.length)",
        ),
        output: lines("17"),
        second: MockReply::text("FINAL(17)"),
        answer: "17",
    });
}

#[test]
fn js_csv_the_day_the_most_units_were_sold() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Js,
        file: "sales.csv",
        data: data::sales_csv(),
        task: "On which day did we sell the most units?",
        first: code(
            "const rows = context.trim().split('\\n').slice(1).map(line => line.split(','))
const byDay = {}
for (const [date, , , units] of rows) byDay[date] = (byDay[date] || 0) + Number(units)
const best = Object.keys(byDay).reduce((a, b) => byDay[b] > byDay[a] ? b : a)
console.log(best, byDay[best])",
        ),
        output: lines("2025-02-14 143"),
        second: MockReply::text("FINAL(2025-02-14)"),
        answer: "2025-02-14",
    });
}

#[test]
fn js_changelog_when_a_version_was_released() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Js,
        file: "CHANGELOG.md",
        data: data::changelog(),
        task: "When was version 2.0.0 released?",
        first: code(
            "const release = context.match(/^## \\[2\\.0\\.0\\] - (\\d{4}-\\d{2}-\\d{2})/m)\nconsole.log(release[1])",
        ),
        output: lines("2025-03-10"),
        second: MockReply::text("FINAL(2025-03-10)"),
        answer: "2025-03-10",
    });
}

// The micro-tools.

#[test]
fn tools_prose_the_rent_found_with_one_grep() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Tools,
        file: "diary.txt",
        data: data::diary(),
        task: "How much is the rent for the flat?",
        first: tool(
            "ctx_grep",
            json!({"variable": "context", "pattern": "rent"}),
        ),
        output: vec![
            "1 line of context matches \"rent\":".to_owned(),
            data::RENT_LINE.to_owned(),
        ],
        second: final_answer("1,450 euros a month"),
        answer: "1,450 euros a month",
    });
}

#[test]
fn tools_key_value_blocks_how_many_servers_are_in_a_location() {
    let data = data::servers();
    let mut output = vec!["14 lines of context match \"^location: fra1$\":".to_owned()];
    output.extend(std::iter::repeat_n("location: fra1".to_owned(), 14));
    assert_two_calls_and_own_answer(Case {
        env: Env::Tools,
        file: "servers.txt",
        data,
        task: "How many of our servers are in fra1?",
        first: tool(
            "ctx_grep",
            json!({"variable": "context", "pattern": "^location: fra1$"}),
        ),
        output,
        second: final_answer("14"),
        answer: "14",
    });
}

#[test]
fn tools_access_log_how_many_requests_one_address_sent() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Tools,
        file: "access.log",
        data: data::access_log(),
        task: "How many requests did 10.0.0.23 send?",
        first: tool(
            "ctx_map_reduce",
            json!({"variable": "context", "map": {"count": "^10\\.0\\.0\\.23 "}, "reduce": {"op": "sum"}}),
        ),
        output: lines("54"),
        second: final_answer("54"),
        answer: "54",
    });
}

#[test]
fn tools_access_log_server_errors_on_the_day_the_log_covers() {
    let mut output = vec!["17 lines of context match \"\\\" 5\\\\d\\\\d \":".to_owned()];
    output.extend(
        data::access_log()
            .lines()
            .filter(|line| line.contains("\" 500 ") || line.contains("\" 503 "))
            .map(str::to_owned),
    );
    assert_two_calls_and_own_answer(Case {
        env: Env::Tools,
        file: "access.log",
        data: data::access_log(),
        task: "How many requests failed with a server error on 2025-03-12?",
        first: tool(
            "ctx_grep",
            json!({"variable": "context", "pattern": "\" 5\\d\\d "}),
        ),
        output,
        second: final_answer("17"),
        answer: "17",
    });
}

// Plans.

#[test]
fn plan_csv_the_units_sold_altogether() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Plan,
        file: "sales.csv",
        data: data::sales_csv(),
        task: "How many units did we sell altogether?",
        first: tool(
            "ctx_map_reduce",
            json!({"variable": "context", "map": {"extract": "^[^,]+,[^,]+,[^,]+,(\\d+),"}, "reduce": {"op": "sum"}}),
        ),
        output: lines("3006"),
        second: final_answer("3006"),
        answer: "3006",
    });
}

#[test]
fn plan_logfmt_how_many_lines_are_errors() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Plan,
        file: "app.log",
        data: data::app_log(),
        task: "How many log lines have level=error?",
        first: tool(
            "ctx_map_reduce",
            json!({"variable": "context", "map": {"count": "level=error"}, "reduce": {"op": "sum"}}),
        ),
        output: lines("23"),
        second: final_answer("23"),
        answer: "23",
    });
}

#[test]
fn plan_access_log_the_pages_that_were_not_found() {
    assert_two_calls_and_own_answer(Case {
        env: Env::Plan,
        file: "access.log",
        data: data::access_log(),
        task: "Which pages returned 404?",
        first: tool(
            "ctx_map_reduce",
            json!({"variable": "context", "filter": {"regex": "\" 404 "}, "map": {"extract": "\"GET (\\S+) HTTP"}, "reduce": {"op": "union"}}),
        ),
        output: lines("/old-home\n/wp-login.php\n/favicon.ico"),
        second: final_answer("/old-home, /wp-login.php, /favicon.ico"),
        answer: "/old-home, /wp-login.php, /favicon.ico",
    });
}
