//! The oracle on OOLONG's items: the rows of a window's text (each instance labelled
//! by a wh-word rule, since the labels are not in the context — right on the tests'
//! files, not on TREC as a whole), an answer through [`Question::answer`], and the
//! Python an RLM's root model would run (`oolong.py`, the same rule and answers).

use chrono::NaiveDate;

use super::ruler::py;
use crate::oolong::{Ask, Question, Row, Scope};

/// The Python library the oracle's code starts with.
const LIBRARY: &str = include_str!("oolong.py");

/// An instance's label by its wording (`label_of` of `oolong.py`).
pub(super) fn label_of(text: &str) -> &'static str {
    let low = text.trim().to_lowercase();
    let starts = |prefixes: &[&str]| prefixes.iter().any(|p| low.starts_with(p));
    if low.contains("stand for") || low.contains("abbreviation") {
        "abbreviation"
    } else if starts(&["who"]) {
        "human being"
    } else if starts(&["where"]) {
        "location"
    } else if starts(&["how many", "how much", "when", "what year"]) {
        "numeric value"
    } else if starts(&["why", "how "]) {
        "description and abstract concept"
    } else {
        "entity"
    }
}

/// The rows of a window's text.
pub(super) fn rows_of(context: &str) -> Vec<Row> {
    context
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("Date: ")?;
            let (date, rest) = rest.split_once(" || User: ")?;
            let (user, text) = rest.split_once(" || Instance: ")?;
            Some(Row {
                day: NaiveDate::parse_from_str(date, "%b %d, %Y").ok()?,
                user: user.trim().parse().ok()?,
                label: label_of(text).to_owned(),
            })
        })
        .collect()
}

/// The answer to `question` over `context`, written as the question asks.
pub(super) fn solve(question: &Question, context: &str) -> Option<String> {
    let gold = question.answer(&rows_of(context))?;
    Some(question.kind().written(&gold))
}

/// A Python list of strings.
fn py_list(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|i| py(i)).collect();
    format!("[{}]", items.join(", "))
}

/// The Python an RLM's root model would run for `question`.
pub(super) fn code(question: &Question) -> String {
    let rows = match &question.scope {
        Scope::All => "scope('all', None)".to_owned(),
        Scope::Users(users) => format!("scope('users', {users:?})"),
        Scope::Month(month) => format!("scope('month', {month})"),
        Scope::Range(first, last) => format!("scope('range', ['{first}', '{last}'])"),
    };
    let call = match &question.ask {
        Ask::MostCommon(labels) => format!("most_common({rows}, {})", py_list(labels)),
        Ask::LeastCommon(labels) => format!("least_common({rows}, {})", py_list(labels)),
        Ask::Compare(a, b) => format!("compare({rows}, {}, {})", py(a), py(b)),
        Ask::Count(label) => format!("count({rows}, {})", py(label)),
        Ask::TopUser(second) => format!("top_user({rows}, {})", u8::from(*second)),
        Ask::UserMostOf(label) => format!("user_most_of({rows}, {})", py(label)),
        Ask::UserMoreOf(label, a, b) => format!("user_more_of({rows}, {}, {a}, {b})", py(label)),
        Ask::TopDate(second) => format!("top_date({rows}, {})", u8::from(*second)),
        Ask::DatesExactly(n) => format!("dates_exactly({rows}, {n})"),
        Ask::BeforeAfter(label, day) => format!("before_after({rows}, {}, '{day}')", py(label)),
        Ask::FirstMonth(a, b) => format!("first_month({rows}, {}, {})", py(a), py(b)),
        Ask::MonthsMore(a, b) => format!("months_more({rows}, {}, {})", py(a), py(b)),
        Ask::MonthsSingleMost(label) => format!("months_single_most({rows}, {})", py(label)),
    };
    format!("{LIBRARY}\nanswer = {call}\nprint(answer)")
}
