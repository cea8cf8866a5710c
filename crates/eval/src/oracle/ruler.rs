//! The oracle on RULER's items: what a question asks (read from the template's words),
//! the answer from a context, and the Python an RLM's root model would run for it.

use regex::Regex;

use crate::tally::ranked;

/// What a RULER question asks.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Ask {
    /// The values of these keys; `kind` is the needles' plural (`numbers`, `uuids`).
    Niah { kind: String, keys: Vec<String> },
    /// The variables assigned this value.
    Vt(String),
    /// The ten most common words of a numbered list.
    Cwe,
    /// The three most frequent coded words.
    Fwe,
}

/// Reads a RULER question (as `Parts::question` words it); `None` when it is not one.
pub(super) fn read(question: &str) -> Option<Ask> {
    let grab = |pattern: &str| {
        Regex::new(pattern).ok()?.captures(question).map(|c| {
            c.iter()
                .skip(1)
                .flatten()
                .map(|m| m.as_str().to_owned())
                .collect::<Vec<_>>()
        })
    };
    if let Some(g) = grab(
        r"What (?:are all|is) the special magic (\w+) for (.+?) mentioned in the provided text\?",
    ) {
        let kind = if g[0].ends_with('s') {
            g[0].clone()
        } else {
            format!("{}s", g[0])
        };
        let keys = match g[1].rsplit_once(", and ") {
            Some((rest, last)) => rest.split(", ").chain([last]).map(str::to_owned).collect(),
            None => vec![g[1].clone()],
        };
        return Some(Ask::Niah { kind, keys });
    }
    if let Some(g) = grab(r"Find all variables that are assigned the value (\d+) in the text above")
    {
        return Some(Ask::Vt(g[0].clone()));
    }
    if question.contains("What are the 10 most common words in the above list?") {
        return Some(Ask::Cwe);
    }
    if question
        .contains("What are the three most frequently appeared words in the above coded text?")
    {
        return Some(Ask::Fwe);
    }
    None
}

/// The answer to `ask` computed from `context`.
pub(super) fn solve(ask: &Ask, context: &str) -> Option<String> {
    Some(match ask {
        Ask::Niah { kind, keys } => {
            let mut values = Vec::new();
            for key in keys {
                let re = Regex::new(&format!(
                    r"One of the special magic {} for {} is: (.+?)\.(?:\s|$)",
                    regex::escape(kind),
                    regex::escape(key)
                ))
                .ok()?;
                values.extend(re.captures_iter(context).map(|c| c[1].to_owned()));
            }
            values.join(", ")
        }
        Ask::Vt(value) => {
            let direct = Regex::new(r"VAR (\w+) = (\d+)").ok()?;
            let link = Regex::new(r"VAR (\w+) = VAR (\w+)").ok()?;
            let mut found: Vec<String> = direct
                .captures_iter(context)
                .filter(|c| &c[2] == value)
                .map(|c| c[1].to_owned())
                .collect();
            let links: Vec<(String, String)> = link
                .captures_iter(context)
                .map(|c| (c[1].to_owned(), c[2].to_owned()))
                .collect();
            loop {
                let before = found.len();
                for (to, from) in &links {
                    if found.contains(from) && !found.contains(to) {
                        found.push(to.clone());
                    }
                }
                if found.len() == before {
                    break;
                }
            }
            found.join(" ")
        }
        Ask::Cwe => {
            let entry = Regex::new(r"(?:^|\s)\d+\. ").ok()?;
            let words = entry
                .split(context)
                .map(str::trim)
                .filter(|w| !w.is_empty());
            top(ranked(words.map(str::to_owned)), 10)
        }
        Ask::Fwe => top(
            ranked(
                context
                    .split_whitespace()
                    .filter(|w| *w != "...")
                    .map(str::to_owned),
            ),
            3,
        ),
    })
}

/// The first `n` of `ranked`, joined by commas.
fn top(ranked: Vec<(String, usize)>, n: usize) -> String {
    ranked
        .into_iter()
        .take(n)
        .map(|(w, _)| w)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A Python string literal of `text` (JSON's is one).
pub(super) fn py(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "''".to_owned())
}

/// The Python an RLM's root model would run for `ask`, leaving the answer in `answer`.
pub(super) fn code(ask: &Ask) -> String {
    match ask {
        Ask::Niah { kind, keys } => {
            let keys: Vec<String> = keys.iter().map(|k| py(k)).collect();
            format!(
                "import re\nvalues = []\nfor key in [{}]:\n    values += re.findall(r'One of the special magic ' + re.escape({}) + r' for ' + re.escape(key) + r' is: (.+?)\\.(?:\\s|$)', context)\nanswer = ', '.join(values)\nprint(answer)",
                keys.join(", "),
                py(kind)
            )
        }
        Ask::Vt(value) => format!(
            "import re\nfound = [a for a, v in re.findall(r'VAR (\\w+) = (\\d+)', context) if v == {}]\nlinks = re.findall(r'VAR (\\w+) = VAR (\\w+)', context)\nchanged = True\nwhile changed:\n    changed = False\n    for a, b in links:\n        if b in found and a not in found:\n            found.append(a)\n            changed = True\nanswer = ' '.join(found)\nprint(answer)",
            py(value)
        ),
        Ask::Cwe => "import re\nfrom collections import Counter\ncounts = Counter(w.strip() for w in re.split(r'(?:^|\\s)\\d+\\. ', context) if w.strip())\nanswer = ', '.join(w for w, _ in counts.most_common(10))\nprint(answer)".to_owned(),
        Ask::Fwe => "from collections import Counter\ncounts = Counter(w for w in context.split() if w != '...')\nanswer = ', '.join(w for w, _ in counts.most_common(3))\nprint(answer)".to_owned(),
    }
}
