//! The words of a task or a question as the plan checks read them: runs of letters and
//! digits, lower-cased. One reading for every check, so "Which label…" and a plan's
//! "which label" are the same words wherever they are compared.

/// The lower-case words of `text`, lazily (a check of the first few words of a long
/// prompt reads only those).
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
}

/// True when a word of `text` starts with one of `stems` ("pairs" with `pair`).
pub fn mentions(text: &str, stems: &[&str]) -> bool {
    words(text).any(|word| stems.iter().any(|stem| word.starts_with(stem)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_lower_case_runs_of_letters_and_digits() {
        let read: Vec<String> = words("Which label=Payments, 2nd?").collect();
        assert_eq!(read, ["which", "label", "payments", "2nd"]);
        assert!(mentions("How many PAIRS share a city?", &["pair"]));
        assert!(!mentions("How many repairs?", &["pair"]));
    }
}
