//! The names of the loop's correction rules and the set a run switches on
//! (`--corrections all|none|LIST`): which rules exist, in the order they are asked,
//! what each handles and at which hook. A setting like any other (`RunSettings`
//! carries it, nested runs inherit it); the rules themselves are in
//! `rlm::correction`.

use serde::{Deserialize, Serialize};

use crate::events::CorrectionHook as Hook;

/// A correction rule, by name. The order of [`Rule::ALL`] is the order rules are asked:
/// a cut reply first (nothing else of it counts), then the notes of a reply, then the
/// refusals of a reply that did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// A reply cut at the model's output-token limit.
    TruncatedReply,
    /// A `FINAL(` or `FINAL_VAR(` opened and never closed.
    UnclosedFinal,
    /// A reply with no code or call and no answer.
    NoAction,
    /// Actions the reply wrote without taking them (quoted, indented, declined).
    NotTaken,
    /// Code that came as a tool call, run as code.
    ToolCallAsCode,
    /// A `FINAL` written beside code or calls, before their results.
    PrematureFinal,
    /// The same code or the same tool call sent again after it ran twice.
    RepeatLimit,
    /// Code that pastes text into `context` instead of reading it.
    ContextLiteral,
    /// The REPL's error message sent back as code.
    EchoedError,
    /// A block that is only a value or a sentence.
    ValueBlock,
    /// `FINAL(word)` in code, where `word` is no variable.
    BareFinal,
    /// An answer before any tool result could support it (the environment's gate).
    AnswerBeforeResult,
    /// A forced answer cut short or written as a sentence.
    ForcedRetry,
}

impl Rule {
    /// Every rule, in the order the loop asks them.
    pub const ALL: [Rule; 13] = [
        Rule::TruncatedReply,
        Rule::NotTaken,
        Rule::ToolCallAsCode,
        Rule::PrematureFinal,
        Rule::UnclosedFinal,
        Rule::NoAction,
        Rule::RepeatLimit,
        Rule::ContextLiteral,
        Rule::EchoedError,
        Rule::ValueBlock,
        Rule::BareFinal,
        Rule::AnswerBeforeResult,
        Rule::ForcedRetry,
    ];

    /// The name `--corrections` and the trace use.
    pub fn name(self) -> &'static str {
        match self {
            Rule::TruncatedReply => "truncated_reply",
            Rule::UnclosedFinal => "unclosed_final",
            Rule::NoAction => "no_action",
            Rule::NotTaken => "not_taken",
            Rule::ToolCallAsCode => "tool_call_as_code",
            Rule::PrematureFinal => "premature_final",
            Rule::RepeatLimit => "repeat_limit",
            Rule::ContextLiteral => "context_literal",
            Rule::EchoedError => "echoed_error",
            Rule::ValueBlock => "value_block",
            Rule::BareFinal => "bare_final",
            Rule::AnswerBeforeResult => "answer_before_result",
            Rule::ForcedRetry => "forced_retry",
        }
    }

    /// The failure class the rule handles, in a few words (`config show`).
    pub fn handles(self) -> &'static str {
        match self {
            Rule::TruncatedReply => "a reply cut at its token limit runs nothing",
            Rule::UnclosedFinal => "a FINAL( never closed is not an answer",
            Rule::NoAction => "a reply with no code, no call and no answer",
            Rule::NotTaken => "actions quoted or shown as examples were not taken",
            Rule::ToolCallAsCode => "code sent as a tool call ran as code",
            Rule::PrematureFinal => "a FINAL beside code, before its output",
            Rule::RepeatLimit => "the same code or call a third time",
            Rule::ContextLiteral => "code that pastes text into `context`",
            Rule::EchoedError => "the REPL's error message sent back as code",
            Rule::ValueBlock => "a block that is only a value or a sentence",
            Rule::BareFinal => "FINAL(word) in code where word is no variable",
            Rule::AnswerBeforeResult => "an answer no tool result supports yet",
            Rule::ForcedRetry => "a forced answer cut short or in a sentence",
        }
    }

    /// The hooks the rule acts at.
    pub fn hooks(self) -> &'static [Hook] {
        match self {
            Rule::TruncatedReply
            | Rule::UnclosedFinal
            | Rule::NoAction
            | Rule::NotTaken
            | Rule::ToolCallAsCode
            | Rule::PrematureFinal => &[Hook::OnReply],
            Rule::RepeatLimit | Rule::ContextLiteral | Rule::EchoedError | Rule::ValueBlock => {
                &[Hook::BeforeBlock]
            }
            Rule::BareFinal => &[Hook::AfterBlock],
            Rule::AnswerBeforeResult => &[Hook::OnAnswer],
            Rule::ForcedRetry => &[Hook::OnForced],
        }
    }

    /// The rule of `name`, if there is one.
    pub fn named(name: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|rule| rule.name() == name)
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--corrections` list naming a rule that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--corrections: unknown rule `{name}`; give all, none or a comma list of: {}",
    known()
)]
pub struct UnknownRule {
    /// The name as given.
    pub name: String,
}

fn known() -> String {
    Rule::ALL.map(Rule::name).join(", ")
}

/// The rules a run switches on (`--corrections all|none|LIST`), kept in the order of
/// [`Rule::ALL`] whatever order the list gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Corrections {
    rules: Vec<Rule>,
}

impl Default for Corrections {
    fn default() -> Self {
        Self::all()
    }
}

impl Corrections {
    /// Every rule (the default).
    pub fn all() -> Self {
        Self {
            rules: Rule::ALL.to_vec(),
        }
    }

    /// No rule: the model reads only the protocol's own messages.
    pub fn none() -> Self {
        Self { rules: Vec::new() }
    }

    /// `all`, `none`, or a comma list of rule names (spaces around names ignored).
    pub fn from_names(list: &str) -> Result<Self, UnknownRule> {
        match list.trim() {
            "all" => return Ok(Self::all()),
            "none" | "" => return Ok(Self::none()),
            _ => {}
        }
        let mut named = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let rule = Rule::named(name).ok_or_else(|| UnknownRule {
                name: name.to_owned(),
            })?;
            named.push(rule);
        }
        Ok(Self {
            rules: Rule::ALL
                .into_iter()
                .filter(|rule| named.contains(rule))
                .collect(),
        })
    }

    /// The enabled rules, in order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// True when `rule` is on.
    pub fn is_on(&self, rule: Rule) -> bool {
        self.rules.contains(&rule)
    }

    /// The list as `--corrections` takes it back (`all`, `none`, or the names).
    pub fn to_list(&self) -> String {
        if self.rules.len() == Rule::ALL.len() {
            "all".to_owned()
        } else if self.rules.is_empty() {
            "none".to_owned()
        } else {
            self.rules
                .iter()
                .map(|r| r.name())
                .collect::<Vec<_>>()
                .join(",")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_into_the_order_of_all() {
        assert_eq!(Corrections::from_names("all").unwrap(), Corrections::all());
        assert_eq!(
            Corrections::from_names("none").unwrap(),
            Corrections::none()
        );
        let two = Corrections::from_names(" value_block , truncated_reply").unwrap();
        assert_eq!(two.rules(), [Rule::TruncatedReply, Rule::ValueBlock]);
        assert_eq!(two.to_list(), "truncated_reply,value_block");
        assert_eq!(Corrections::all().to_list(), "all");
        assert_eq!(Corrections::none().to_list(), "none");
    }

    #[test]
    fn an_unknown_name_is_an_error_listing_the_known_ones() {
        let error = Corrections::from_names("value_block,answer_form").unwrap_err();
        assert_eq!(error.name, "answer_form");
        let text = error.to_string();
        for rule in Rule::ALL {
            assert!(text.contains(rule.name()), "{text}");
        }
    }

    #[test]
    fn every_rule_is_named_once_and_answers_to_its_own_name() {
        for rule in Rule::ALL {
            assert_eq!(Rule::named(rule.name()), Some(rule));
            assert!(!rule.hooks().is_empty());
        }
    }

    #[test]
    fn settings_serialise_as_the_list_of_names() {
        let two = Corrections::from_names("value_block,repeat_limit").unwrap();
        let json = serde_json::to_string(&two).unwrap();
        assert_eq!(json, r#"["repeat_limit","value_block"]"#);
        assert_eq!(serde_json::from_str::<Corrections>(&json).unwrap(), two);
    }
}
