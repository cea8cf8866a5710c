//! OOLONG-synth's questions over a window (`task_constructors.py`: counting, user and
//! timeline tasks), each a [`Question`] that is written in OOLONG's words, read back
//! from them, and answered from a window's rows. The generator, the oracle and tests
//! all answer through [`Question::answer`], so a question means one thing everywhere.
//!
//! The wording is OOLONG's, kept to the letter (its typos included: `occuring`, the
//! quote missing after the first label of the month question), since it is the
//! benchmark's definition and released files hold it.

use chrono::{Datelike, NaiveDate};
use regex::Regex;

use super::window::{line_date, Row};
use crate::score::oolong::AnswerKind;
pub(crate) use crate::tally::{ranked, tally};

/// The instances a question is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// All of them ("In the above data").
    All,
    /// Those of these users (listed in this order).
    Users(Vec<u32>),
    /// Those of this month (1 to 12) of any year.
    Month(u32),
    /// Those from the first to the last date, inclusive.
    Range(NaiveDate, NaiveDate),
}

impl Scope {
    fn keeps(&self, row: &Row) -> bool {
        match self {
            Self::All => true,
            Self::Users(users) => users.contains(&row.user),
            Self::Month(month) => row.day.month() == *month,
            Self::Range(first, last) => (*first..=*last).contains(&row.day),
        }
    }
}

/// What is asked of the instances in scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// The most common of `labels` (listed in this order).
    MostCommon(Vec<String>),
    /// The least common of `labels`; a tie goes to the first listed.
    LeastCommon(Vec<String>),
    /// Whether the first label is more common, less common or as common as the second.
    Compare(String, String),
    /// How many instances have the label.
    Count(String),
    /// The user with the most instances (`true`: the second most).
    TopUser(bool),
    /// The user with the most instances of the label.
    UserMostOf(String),
    /// Which of two users has more instances of the label.
    UserMoreOf(String, u32, u32),
    /// The date with the most instances (`true`: the second most).
    TopDate(bool),
    /// How many dates have exactly this many instances.
    DatesExactly(usize),
    /// Whether the label's share is larger before the date than after it.
    BeforeAfter(String, NaiveDate),
    /// The first month in which the first label occurs more often than the second.
    FirstMonth(String, String),
    /// In how many months the first label occurs more often than the second.
    MonthsMore(String, String),
    /// In how many months the label is the single most frequent.
    MonthsSingleMost(String),
}

/// One question: a scope and what is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The instances it is about.
    pub scope: Scope,
    /// What it asks.
    pub ask: Ask,
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

const USER_FORM: &str = "Give your final answer in the form 'User: [X]', where [X] is the user ID.";
const DATE_FORM: &str = "Give your final answer in the form 'Date: [X]', where [X] is the date in the format MM/DD/YYYY.";

fn ids(users: &[u32]) -> String {
    users
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A month (year, month) and its label counts.
type MonthCounts = ((i32, u32), Vec<(String, usize)>);

/// Label counts per month, months in order.
fn by_month(rows: &[&Row]) -> Vec<MonthCounts> {
    let mut months: Vec<(i32, u32)> = rows.iter().map(|r| (r.day.year(), r.day.month())).collect();
    months.sort_unstable();
    months.dedup();
    months
        .into_iter()
        .map(|m| {
            let counts = tally(
                rows.iter()
                    .filter(|r| (r.day.year(), r.day.month()) == m)
                    .map(|r| r.label.clone()),
            );
            (m, counts)
        })
        .collect()
}

fn count_of(counts: &[(String, usize)], label: &str) -> usize {
    counts
        .iter()
        .find(|(l, _)| l == label)
        .map_or(0, |(_, n)| *n)
}

impl Question {
    /// The kind of its answer.
    pub fn kind(&self) -> AnswerKind {
        match &self.ask {
            Ask::MostCommon(_) | Ask::LeastCommon(_) => AnswerKind::Label,
            Ask::Compare(..) | Ask::BeforeAfter(..) => AnswerKind::Comparison,
            Ask::Count(_)
            | Ask::DatesExactly(_)
            | Ask::MonthsMore(..)
            | Ask::MonthsSingleMost(_) => AnswerKind::Numeric,
            Ask::TopUser(_) | Ask::UserMostOf(_) | Ask::UserMoreOf(..) => AnswerKind::User,
            Ask::TopDate(_) => AnswerKind::Date,
            Ask::FirstMonth(..) => AnswerKind::MonthYear,
        }
    }

    /// The question in OOLONG's words.
    pub fn text(&self) -> String {
        let (lead, users_lead) = match &self.scope {
            Scope::All => ("In the above data,".to_owned(), "In the above data,".to_owned()),
            Scope::Users(users) => (
                format!("For the following question, only consider the subset of instances that are associated with user IDs {}. Among instances associated with these users,", ids(users)),
                format!("For the following question, only consider the subset of users with IDs {}. Among these users,", ids(users)),
            ),
            Scope::Month(m) => {
                let name = MONTHS[(*m as usize).clamp(1, 12) - 1];
                let lead = format!("For the following question, only consider the subset of instances that occur in {name} of any year. Among instances occuring in {name},");
                (lead.clone(), lead)
            }
            Scope::Range(first, last) => {
                let lead = format!("For the following question, only consider the subset of instances that occur between {} and {}, inclusive. Among instances occuring in this date range,", line_date(*first), line_date(*last));
                (lead.clone(), lead)
            }
        };
        match &self.ask {
            Ask::MostCommon(labels) => format!("{lead} which of the labels is the most common? Give your final answer in the form 'Label: answer' where answer is one of the labels: {}.", labels.join(", ")),
            Ask::LeastCommon(labels) => format!("{lead} which of the labels is the least common? Give your final answer in the form 'Label: answer' where answer is one of the labels: {}.", labels.join(", ")),
            Ask::Compare(a, b) => format!("{lead} is label '{a}' more common, less common, or the same frequency as label '{b}'? Give your final answer in the form 'Answer: {a} is [X] {b}', where [X] is 'more common than', 'less common than', or 'same frequency as'."),
            Ask::Count(label) => format!("{lead} how many data points should be classified as label '{label}'? Give your final answer in the form 'Answer: number'."),
            Ask::TopUser(second) => format!("{users_lead} which user is represented {}? {USER_FORM}", if *second { "the second most often" } else { "most often" }),
            Ask::UserMostOf(label) => format!("{users_lead} which user has the most instances with the label {label}? {USER_FORM}"),
            Ask::UserMoreOf(label, a, b) => format!("In the above data, which user has more instances with the label {label}: User {a} or User {b}? {USER_FORM}"),
            Ask::TopDate(second) => format!("In the above data, which date is represented {}? {DATE_FORM}", if *second { "the second most often" } else { "most often" }),
            Ask::DatesExactly(n) => format!("In the above data, how many dates are represented exactly {n} times? Give your final answer in the form 'Answer: [X]', where [X] is the number of dates represented exactly {n} times."),
            Ask::BeforeAfter(label, day) => format!("In the above data, was label '{label}' more common, less common, or the same frequency before {day}, as compared to after {day}? Give your final answer in the form 'Answer: {label} is [X] before {day}', where [X] is 'more common', 'less common', or 'the same frequency'."),
            Ask::FirstMonth(a, b) => format!("In which month did the label '{a} first occur more often than the label '{b}'? Give your final answer in the form 'Answer: [month] [year]', where [month] is the name of the month and [year] is the four-digit year where '{a}' first occured more often than '{b}.'"),
            Ask::MonthsMore(a, b) => format!("For how many months does the label '{a}' occur more frequently than the label '{b}'? Disregard months where there is a tie.  Give your final answer in the form 'Answer: [X]', where [X] is the number of months where '{a}' occurs more often than '{b}.'"),
            Ask::MonthsSingleMost(label) => format!("For how many months is the label '{label}' the single most frequently occuring label? Disregard months where there is a tie for the most common label.  Give your final answer in the form 'Answer: [X]', where [X] is the number of months where '{label}' is the most common label."),
        }
    }

    /// Reads a question in OOLONG's words back; `None` when it is not one.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let grab = |pattern: &str, on: &str| -> Option<Vec<String>> {
            let captures = Regex::new(pattern).ok()?.captures(on)?;
            Some(
                captures
                    .iter()
                    .skip(1)
                    .map(|c| c.map_or_else(String::new, |m| m.as_str().to_owned()))
                    .collect(),
            )
        };
        let user_list = |list: &str| -> Option<Vec<u32>> {
            list.split(", ").map(|u| u.trim().parse().ok()).collect()
        };
        // Whole questions first (no scope lead).
        if let Some(g) = grab(
            r"^In which month did the label '(.+?) first occur more often than the label '(.+?)'\?",
            text,
        ) {
            return Some(Self {
                scope: Scope::All,
                ask: Ask::FirstMonth(g[0].clone(), g[1].clone()),
            });
        }
        if let Some(g) = grab(
            r"^For how many months does the label '(.+?)' occur more frequently than the label '(.+?)'\?",
            text,
        ) {
            return Some(Self {
                scope: Scope::All,
                ask: Ask::MonthsMore(g[0].clone(), g[1].clone()),
            });
        }
        if let Some(g) = grab(
            r"^For how many months is the label '(.+?)' the single most frequently occuring label\?",
            text,
        ) {
            return Some(Self {
                scope: Scope::All,
                ask: Ask::MonthsSingleMost(g[0].clone()),
            });
        }
        let (scope, rest) = if let Some(rest) = text.strip_prefix("In the above data, ") {
            (Scope::All, rest.to_owned())
        } else if let Some(g) = grab(
            r"^For the following question, only consider the subset of (?:instances that are associated with user IDs|users with IDs) ([\d, ]+)\. Among (?:instances associated with these users|these users), (.*)$",
            text,
        ) {
            (Scope::Users(user_list(&g[0])?), g[1].clone())
        } else if let Some(g) = grab(
            r"^For the following question, only consider the subset of instances that occur in (\w+) of any year\. Among instances occuring in \w+, (.*)$",
            text,
        ) {
            let month = MONTHS.iter().position(|m| *m == g[0])? as u32 + 1;
            (Scope::Month(month), g[1].clone())
        } else if let Some(g) = grab(
            r"^For the following question, only consider the subset of instances that occur between (\w{3} \d{2}, \d{4}) and (\w{3} \d{2}, \d{4}), inclusive\. Among instances occuring in this date range, (.*)$",
            text,
        ) {
            let day = |d: &str| NaiveDate::parse_from_str(d, "%b %d, %Y").ok();
            (Scope::Range(day(&g[0])?, day(&g[1])?), g[2].clone())
        } else {
            return None;
        };
        let labels = |list: &str| list.split(", ").map(str::to_owned).collect::<Vec<_>>();
        let ask = if let Some(g) = grab(
            r"^which of the labels is the most common\? Give your final answer in the form 'Label: answer' where answer is one of the labels: (.+)\.$",
            &rest,
        ) {
            Ask::MostCommon(labels(&g[0]))
        } else if let Some(g) = grab(
            r"^which of the labels is the least common\? Give your final answer in the form 'Label: answer' where answer is one of the labels: (.+)\.$",
            &rest,
        ) {
            Ask::LeastCommon(labels(&g[0]))
        } else if let Some(g) = grab(
            r"^is label '(.+?)' more common, less common, or the same frequency as label '(.+?)'\?",
            &rest,
        ) {
            Ask::Compare(g[0].clone(), g[1].clone())
        } else if let Some(g) = grab(
            r"^how many data points should be classified as label '(.+?)'\?",
            &rest,
        ) {
            Ask::Count(g[0].clone())
        } else if let Some(g) = grab(
            r"^which user is represented (most often|the second most often)\?",
            &rest,
        ) {
            Ask::TopUser(g[0] != "most often")
        } else if let Some(g) = grab(
            r"^which user has the most instances with the label (.+?)\? Give",
            &rest,
        ) {
            Ask::UserMostOf(g[0].clone())
        } else if let Some(g) = grab(
            r"^which user has more instances with the label (.+?): User (\d+) or User (\d+)\?",
            &rest,
        ) {
            Ask::UserMoreOf(g[0].clone(), g[1].parse().ok()?, g[2].parse().ok()?)
        } else if let Some(g) = grab(
            r"^which date is represented (most often|the second most often)\?",
            &rest,
        ) {
            Ask::TopDate(g[0] != "most often")
        } else if let Some(g) = grab(
            r"^how many dates are represented exactly (\d+) times\?",
            &rest,
        ) {
            Ask::DatesExactly(g[0].parse().ok()?)
        } else if let Some(g) = grab(
            r"^was label '(.+?)' more common, less common, or the same frequency before (\d{4}-\d{2}-\d{2}), as compared",
            &rest,
        ) {
            Ask::BeforeAfter(
                g[0].clone(),
                NaiveDate::parse_from_str(&g[1], "%Y-%m-%d").ok()?,
            )
        } else {
            return None;
        };
        Some(Self { scope, ask })
    }

    /// The gold answer over `rows` (as the answer is kept: a label, a number, a user
    /// id, `YYYY-MM-DD`, `Month YYYY` or a comparison phrase); `None` when there is
    /// none (nothing in scope, no such month).
    pub fn answer(&self, rows: &[Row]) -> Option<String> {
        let rows: Vec<&Row> = rows.iter().filter(|r| self.scope.keeps(r)).collect();
        let labels = tally(rows.iter().map(|r| r.label.clone()));
        Some(match &self.ask {
            Ask::MostCommon(listed) => listed
                .iter()
                .fold(None::<(&String, usize)>, |best, l| {
                    let n = count_of(&labels, l);
                    match best {
                        Some((_, m)) if m >= n => best,
                        _ => Some((l, n)),
                    }
                })?
                .0
                .clone(),
            Ask::LeastCommon(listed) => listed
                .iter()
                .fold(None::<(&String, usize)>, |best, l| {
                    let n = count_of(&labels, l);
                    match best {
                        Some((_, m)) if m <= n => best,
                        _ => Some((l, n)),
                    }
                })?
                .0
                .clone(),
            Ask::Compare(a, b) => {
                let (a, b) = (count_of(&labels, a), count_of(&labels, b));
                match a.cmp(&b) {
                    std::cmp::Ordering::Greater => "more common than",
                    std::cmp::Ordering::Less => "less common than",
                    std::cmp::Ordering::Equal => "same frequency as",
                }
                .to_owned()
            }
            Ask::Count(label) => count_of(&labels, label).to_string(),
            Ask::TopUser(second) => ranked(rows.iter().map(|r| r.user))
                .get(usize::from(*second))?
                .0
                .to_string(),
            Ask::UserMostOf(label) => {
                ranked(rows.iter().filter(|r| &r.label == label).map(|r| r.user))
                    .first()?
                    .0
                    .to_string()
            }
            Ask::UserMoreOf(label, a, b) => {
                let of = |u: u32| {
                    rows.iter()
                        .filter(|r| r.user == u && &r.label == label)
                        .count()
                };
                if of(*a) >= of(*b) { a } else { b }.to_string()
            }
            Ask::TopDate(second) => ranked(rows.iter().map(|r| r.day))
                .get(usize::from(*second))?
                .0
                .format("%Y-%m-%d")
                .to_string(),
            Ask::DatesExactly(n) => tally(rows.iter().map(|r| r.day))
                .iter()
                .filter(|(_, c)| c == n)
                .count()
                .to_string(),
            Ask::BeforeAfter(label, day) => {
                let share = |side: Vec<&&Row>| {
                    (
                        side.iter().filter(|r| &r.label == label).count(),
                        side.len(),
                    )
                };
                let (before, before_all) = share(rows.iter().filter(|r| r.day < *day).collect());
                let (after, after_all) = share(rows.iter().filter(|r| r.day > *day).collect());
                if before_all == 0 || after_all == 0 {
                    return None;
                }
                match (before * after_all).cmp(&(after * before_all)) {
                    std::cmp::Ordering::Greater => "more common",
                    std::cmp::Ordering::Less => "less common",
                    std::cmp::Ordering::Equal => "the same frequency",
                }
                .to_owned()
            }
            Ask::FirstMonth(a, b) => {
                let ((year, month), _) = by_month(&rows)
                    .into_iter()
                    .find(|(_, counts)| count_of(counts, a) > count_of(counts, b))?;
                format!("{} {year}", MONTHS[month as usize - 1])
            }
            Ask::MonthsMore(a, b) => by_month(&rows)
                .iter()
                .filter(|(_, counts)| count_of(counts, a) > count_of(counts, b))
                .count()
                .to_string(),
            Ask::MonthsSingleMost(label) => by_month(&rows)
                .iter()
                .filter(|(_, counts)| {
                    let own = count_of(counts, label);
                    counts.iter().all(|(l, n)| l == label || *n < own)
                })
                .count()
                .to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(day: &str, user: u32, label: &str) -> Row {
        Row {
            day: NaiveDate::parse_from_str(day, "%Y-%m-%d").unwrap(),
            user,
            label: label.to_owned(),
        }
    }

    /// Six rows whose answers are worked out by hand below.
    fn rows() -> Vec<Row> {
        vec![
            row("2023-01-05", 11111, "entity"),
            row("2023-01-05", 22222, "location"),
            row("2023-01-20", 11111, "entity"),
            row("2023-02-02", 33333, "location"),
            row("2023-02-10", 11111, "location"),
            row("2024-01-03", 22222, "human being"),
        ]
    }

    #[test]
    fn answers_are_the_hand_computed_ones() {
        let rows = rows();
        let all = |ask| Question {
            scope: Scope::All,
            ask,
        };
        let l = |s: &str| s.to_owned();
        let three = vec![l("entity"), l("location"), l("human being")];
        for (question, want) in [
            (all(Ask::MostCommon(three.clone())), "location"),
            (all(Ask::LeastCommon(three.clone())), "human being"),
            (
                all(Ask::Compare(l("entity"), l("location"))),
                "less common than",
            ),
            (all(Ask::Count(l("location"))), "3"),
            (all(Ask::TopUser(false)), "11111"),
            (all(Ask::TopUser(true)), "22222"),
            (all(Ask::UserMostOf(l("location"))), "22222"),
            (all(Ask::UserMoreOf(l("entity"), 22222, 11111)), "11111"),
            (all(Ask::TopDate(false)), "2023-01-05"),
            (all(Ask::DatesExactly(1)), "4"),
            // Before Jan 20: entity 1 of 2; after: 0 of 3.
            (
                all(Ask::BeforeAfter(
                    l("entity"),
                    NaiveDate::from_ymd_opt(2023, 1, 20).unwrap(),
                )),
                "more common",
            ),
            (
                all(Ask::FirstMonth(l("location"), l("entity"))),
                "February 2023",
            ),
            (all(Ask::MonthsMore(l("entity"), l("location"))), "1"),
            // Jan 2023: entity 2 > location 1; Feb: location; Jan 2024: human being.
            (all(Ask::MonthsSingleMost(l("location"))), "1"),
            (
                Question {
                    scope: Scope::Users(vec![22222, 33333]),
                    ask: Ask::Count(l("location")),
                },
                "2",
            ),
            (
                Question {
                    scope: Scope::Month(1),
                    ask: Ask::Count(l("entity")),
                },
                "2",
            ),
            (
                Question {
                    scope: Scope::Range(
                        NaiveDate::from_ymd_opt(2023, 1, 20).unwrap(),
                        NaiveDate::from_ymd_opt(2023, 2, 10).unwrap(),
                    ),
                    ask: Ask::MostCommon(vec![l("entity"), l("location")]),
                },
                "location",
            ),
        ] {
            assert_eq!(
                question.answer(&rows).as_deref(),
                Some(want),
                "{}",
                question.text()
            );
            // Written in OOLONG's words and read back, it is the same question.
            assert_eq!(
                Question::parse(&question.text()),
                Some(question.clone()),
                "{}",
                question.text()
            );
        }
    }

    #[test]
    fn the_wording_is_oolongs() {
        let q = Question {
            scope: Scope::Users(vec![67144, 53321]),
            ask: Ask::Count("entity".into()),
        };
        assert_eq!(q.text(), "For the following question, only consider the subset of instances that are associated with user IDs 67144, 53321. Among instances associated with these users, how many data points should be classified as label 'entity'? Give your final answer in the form 'Answer: number'.");
        let q = Question {
            scope: Scope::All,
            ask: Ask::Compare(
                "description and abstract concept".into(),
                "numeric value".into(),
            ),
        };
        assert_eq!(q.text(), "In the above data, is label 'description and abstract concept' more common, less common, or the same frequency as label 'numeric value'? Give your final answer in the form 'Answer: description and abstract concept is [X] numeric value', where [X] is 'more common than', 'less common than', or 'same frequency as'.");
        assert_eq!(Question::parse("What is the capital of France?"), None);
    }
}
