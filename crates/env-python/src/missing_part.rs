//! A note under a traceback whose code read a part that some lines do not have:
//! `line.split('user=')[1]` over every line of the context raises `IndexError` on a
//! line with no `user=` (a header, a blank last line), and `re.search(...).group(1)`
//! raises `AttributeError` on `None` where the pattern does not match. The bare error
//! names neither the line nor the fix, and a model tends to read it as its variable
//! being wrong; the note names the part, why it is missing, and the filter to write
//! first. It reads only the model's code and its error.

use std::sync::LazyLock;

use regex::Regex;

/// `error` (a traceback) with the note when its last line is an `IndexError` and a
/// line of it indexes a `.split(…)` past its first part, or an `AttributeError` on
/// `None` and a line of it calls `.group(` on a `search(`/`match(`; else as it is.
pub(crate) fn explained(error: String) -> String {
    let last = error.trim_end().lines().last().unwrap_or_default().trim();
    let note = if last.starts_with("IndexError:") {
        split_part(&error).map(|(separator, index)| {
            format!(
                "`.split({separator})[{index}]` is out of range on a line that has no {separator} (a header, a blank last line): keep only the lines that contain it first, as in `[line for line in context.splitlines() if {separator} in line]`, and split those."
            )
        })
    } else if last.starts_with("AttributeError: 'NoneType' object has no attribute 'group'")
        && error.contains(".group(")
        && (error.contains("search(") || error.contains("match("))
    {
        Some("`re.search(…)` (or `re.match`) gives None on a line the pattern does not match: keep the matches first, as in `m = re.search(pattern, line)`, then `if m:` … `m.group(1)`.".to_owned())
    } else {
        None
    };
    match note {
        Some(note) => format!("{}\n{note}", error.trim_end()),
        None => error,
    }
}

/// The separator (as written, quotes and all) and the index of the first
/// `.split(…)[k]` with k ≥ 1 in `text`.
fn split_part(text: &str) -> Option<(&str, &str)> {
    static SPLIT_INDEX: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r#"\.split\(\s*('[^']*'|"[^"]*")\s*\)\s*\[\s*([1-9][0-9]*)\s*\]"#).ok()
    });
    let found = SPLIT_INDEX.as_ref()?.captures(text)?;
    Some((found.get(1)?.as_str(), found.get(2)?.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_part_missing_on_a_line_is_explained() {
        let error = "Traceback (most recent call last):\n  File \"<cell 1>\", line 1, in <module>\n    users = [line.split('user=')[1].split()[0] for line in context.splitlines()]\n              ~~~~~~~~~~~~~~~~~~~~~^^^\nIndexError: list index out of range\n".to_owned();
        let told = explained(error.clone());
        assert!(told.starts_with(error.trim_end()), "{told}");
        assert!(
            told.contains("`.split('user=')[1]` is out of range on a line that has no 'user='"),
            "{told}"
        );
        assert!(
            told.ends_with("keep only the lines that contain it first, as in `[line for line in context.splitlines() if 'user=' in line]`, and split those."),
            "{told}"
        );
    }

    #[test]
    fn a_group_of_no_match_is_explained() {
        let error = "Traceback (most recent call last):\n  File \"<cell 2>\", line 3, in <module>\n    size = int(re.search(r'bytes=(\\d+)', line).group(1))\nAttributeError: 'NoneType' object has no attribute 'group'".to_owned();
        assert!(explained(error).contains("gives None on a line the pattern does not match"));
    }

    #[test]
    fn other_errors_are_left_as_they_are() {
        for error in [
            "Traceback (most recent call last):\n    x = items[5]\nIndexError: list index out of range",
            "Traceback (most recent call last):\n    a = b.split(',')[0]\nIndexError: list index out of range",
            "Traceback (most recent call last):\n    x.split('=')[1]\nKeyError: 'x'",
            "AttributeError: 'NoneType' object has no attribute 'group'",
        ] {
            assert_eq!(explained(error.to_owned()), error);
        }
    }
}
