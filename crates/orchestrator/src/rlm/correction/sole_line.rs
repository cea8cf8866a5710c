//! The one line of a block, comments and blank lines aside: the shape of the blocks a
//! model writes instead of code (`FINAL(word)`).

/// The block's only line, trimmed, when `code` holds exactly one line that is not
/// blank or a comment (`#` or `//`).
pub(super) fn sole_line(code: &str) -> Option<&str> {
    let mut lines = code
        .lines()
        .map(str::trim)
        .filter(|line| !(line.is_empty() || line.starts_with('#') || line.starts_with("//")));
    match (lines.next(), lines.next()) {
        (Some(line), None) => Some(line),
        _ => None,
    }
}

/// The block's one statement: its [`sole_line`] without a trailing `;` (`FINAL(x);`,
/// `payments;`).
pub(super) fn sole_statement(code: &str) -> Option<&str> {
    Some(sole_line(code)?.trim_end_matches(';').trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_among_comments_is_the_sole_line() {
        assert_eq!(
            sole_line("# the answer\n  FINAL(x)  \n\n"),
            Some("FINAL(x)")
        );
        assert_eq!(sole_line("// js\nlabel=a;"), Some("label=a;"));
        assert_eq!(sole_line("a\nb"), None);
        assert_eq!(sole_line("# only a comment"), None);
    }
}
