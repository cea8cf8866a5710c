//! A matcher for the subset of GBNF the reply grammar uses, for its tests only: rules,
//! string literals, character classes (ranges, `^`, `\xHH` escapes), groups, `|`, and
//! `*` `+` `?`.
//! No crate on crates.io matches text against a GBNF grammar without a model
//! (`llama-cpp-gbnf` only validates one), so the corpus test reads the grammar's very
//! text with this. It is exact for what it reads and refuses what it does not.

use std::collections::{BTreeSet, HashMap};

/// One element of a rule's body.
#[derive(Debug, Clone)]
enum Node {
    Literal(Vec<char>),
    Class {
        negated: bool,
        items: Vec<(char, char)>,
    },
    Rule(String),
    Seq(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: usize,
        max: Option<usize>,
    },
}

/// A parsed grammar.
#[derive(Debug)]
pub struct Grammar {
    rules: HashMap<String, Node>,
}

impl Grammar {
    /// Parses `text`; panics on what this subset does not read (a test helper).
    pub fn parse(text: &str) -> Self {
        let mut rules = HashMap::new();
        let mut current: Option<(String, String)> = None;
        for line in text.lines() {
            if let Some((name, body)) = line.split_once("::=") {
                if let Some((n, b)) = current.take() {
                    rules.insert(n, Body::new(&b).alt());
                }
                current = Some((name.trim().to_owned(), body.to_owned()));
            } else if let Some((_, body)) = current.as_mut() {
                body.push(' ');
                body.push_str(line);
            }
        }
        if let Some((n, b)) = current {
            rules.insert(n, Body::new(&b).alt());
        }
        Self { rules }
    }

    /// True when the whole of `text` is a `root`.
    pub fn accepts(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        let mut memo = HashMap::new();
        self.ends(&Node::Rule("root".into()), &chars, 0, &mut memo)
            .contains(&chars.len())
    }

    /// Every position a match of `node` starting at `at` can end at.
    fn ends(
        &self,
        node: &Node,
        text: &[char],
        at: usize,
        memo: &mut HashMap<(String, usize), BTreeSet<usize>>,
    ) -> BTreeSet<usize> {
        match node {
            Node::Literal(chars) => {
                let fits = text.get(at..at + chars.len()) == Some(chars.as_slice());
                fits.then_some(at + chars.len()).into_iter().collect()
            }
            Node::Class { negated, items } => match text.get(at) {
                Some(c) if items.iter().any(|(lo, hi)| lo <= c && c <= hi) != *negated => {
                    [at + 1].into()
                }
                _ => BTreeSet::new(),
            },
            Node::Rule(name) => {
                let key = (name.clone(), at);
                if let Some(known) = memo.get(&key) {
                    return known.clone();
                }
                let body = self
                    .rules
                    .get(name)
                    .unwrap_or_else(|| panic!("no rule {name}"));
                let found = self.ends(body, text, at, memo);
                memo.insert(key, found.clone());
                found
            }
            Node::Seq(nodes) => {
                let mut here: BTreeSet<usize> = [at].into();
                for node in nodes {
                    here = here
                        .into_iter()
                        .flat_map(|p| self.ends(node, text, p, memo))
                        .collect();
                }
                here
            }
            Node::Alt(nodes) => nodes
                .iter()
                .flat_map(|n| self.ends(n, text, at, memo))
                .collect(),
            Node::Repeat { node, min, max } => {
                let mut all = BTreeSet::new();
                let mut frontier: BTreeSet<usize> = [at].into();
                let mut count = 0;
                loop {
                    if count >= *min {
                        all.extend(frontier.iter().copied());
                    }
                    if max.is_some_and(|m| count >= m) || frontier.is_empty() {
                        break;
                    }
                    let next: BTreeSet<usize> = frontier
                        .iter()
                        .flat_map(|p| self.ends(node, text, *p, memo))
                        .filter(|p| count < *min || !all.contains(p))
                        .collect();
                    frontier = next;
                    count += 1;
                }
                all
            }
        }
    }
}

/// The text of a rule's body, read left to right.
struct Body {
    chars: Vec<char>,
    at: usize,
}

impl Body {
    fn new(text: &str) -> Self {
        Self {
            chars: text.chars().collect(),
            at: 0,
        }
    }

    fn skip_space(&mut self) {
        while self.chars.get(self.at).is_some_and(|c| c.is_whitespace()) {
            self.at += 1;
        }
    }

    fn alt(&mut self) -> Node {
        let mut options = vec![self.seq()];
        while self.peek() == Some('|') {
            self.at += 1;
            options.push(self.seq());
        }
        Node::Alt(options)
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_space();
        self.chars.get(self.at).copied()
    }

    fn seq(&mut self) -> Node {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            let atom = match c {
                '|' | ')' => break,
                '(' => {
                    self.at += 1;
                    let inner = self.alt();
                    assert_eq!(self.peek(), Some(')'), "unclosed group");
                    self.at += 1;
                    inner
                }
                '"' => Node::Literal(self.quoted('"')),
                '[' => self.class(),
                _ => {
                    let start = self.at;
                    while self
                        .chars
                        .get(self.at)
                        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                    {
                        self.at += 1;
                    }
                    assert!(self.at > start, "unexpected {c:?}");
                    Node::Rule(self.chars[start..self.at].iter().collect())
                }
            };
            let (min, max) = match self.chars.get(self.at) {
                Some('*') => (0, None),
                Some('+') => (1, None),
                Some('?') => (0, Some(1)),
                _ => {
                    items.push(atom);
                    continue;
                }
            };
            self.at += 1;
            items.push(Node::Repeat {
                node: Box::new(atom),
                min,
                max,
            });
        }
        Node::Seq(items)
    }

    /// One character of a literal or class, escapes read.
    fn char(&mut self) -> char {
        let c = self.chars[self.at];
        self.at += 1;
        if c != '\\' {
            return c;
        }
        let e = self.chars[self.at];
        self.at += 1;
        match e {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'x' => {
                let hex: String = self.chars[self.at..self.at + 2].iter().collect();
                self.at += 2;
                u32::from_str_radix(&hex, 16)
                    .ok()
                    .and_then(char::from_u32)
                    .unwrap_or_else(|| panic!("bad escape \\x{hex}"))
            }
            other => other,
        }
    }

    fn quoted(&mut self, close: char) -> Vec<char> {
        self.at += 1;
        let mut out = Vec::new();
        while self.chars[self.at] != close {
            out.push(self.char());
        }
        self.at += 1;
        out
    }

    fn class(&mut self) -> Node {
        self.at += 1;
        let negated = self.chars[self.at] == '^';
        if negated {
            self.at += 1;
        }
        let mut items = Vec::new();
        while self.chars[self.at] != ']' {
            let lo = self.char();
            let hi = if self.chars[self.at] == '-' && self.chars[self.at + 1] != ']' {
                self.at += 1;
                self.char()
            } else {
                lo
            };
            items.push((lo, hi));
        }
        self.at += 1;
        Node::Class { negated, items }
    }
}

#[test]
fn the_matcher_reads_what_it_is_given() {
    let g = Grammar::parse("root ::= \"a\" [b-d]* (x | \"e\"?)\nx ::= [^a-z]+\n");
    for yes in ["a", "abbd", "ae", "ab12"] {
        assert!(g.accepts(yes), "{yes}");
    }
    for no in ["", "b", "aee", "abx", "a1e"] {
        assert!(!g.accepts(no), "{no}");
    }
}
