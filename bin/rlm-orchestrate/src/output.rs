//! Human-readable rendering: keys and aligned tables (sizes and times come from
//! [`rlm_orchestrator::format`]).
//!
//! Kept apart from the commands so that every command formats the same things the
//! same way, and so the formatting is unit-tested without running the binary.

use std::io::{self, Write};

/// A key as shown to a person: as is, unless it holds control characters (a newline
/// would break a table), which are escaped.
pub fn shown_key(key: &str) -> String {
    if key.chars().any(char::is_control) {
        escape_controls(key)
    } else {
        key.to_owned()
    }
}

/// Escapes control characters (`\n`, `\t`, `\u{1b}`…) and nothing else.
pub fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// Text for a terminal: control characters (`ESC`, so ANSI and OSC sequences, `\r`,
/// backspace…) escaped as `\u{1b}` and the like, newlines and tabs kept. Model answers
/// and error messages go through it on their way to a terminal, so no answer can clear
/// the screen, retitle the window or hide a line (`runs show` escapes the same way).
pub fn terminal_text(text: &str) -> String {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// Writes rows as left-aligned columns separated by two spaces, with a header row.
pub fn write_table(out: &mut dyn Write, header: &[&str], rows: &[Vec<String>]) -> io::Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', width - cell.chars().count() + 2));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// A writer that remembers whether the reader on the other end went away (`EPIPE`),
/// whatever error type a layer above turns that into.
#[derive(Debug)]
pub struct PipeAware<W> {
    inner: W,
    closed: bool,
}

impl<W: Write> PipeAware<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            closed: false,
        }
    }

    /// True once a write failed because the reader closed the pipe.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    fn watch<T>(&mut self, result: io::Result<T>) -> io::Result<T> {
        if let Err(e) = &result {
            if e.kind() == io::ErrorKind::BrokenPipe {
                self.closed = true;
            }
        }
        result
    }
}

impl<W: Write> Write for PipeAware<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let result = self.inner.write(buf);
        self.watch(result)
    }

    fn flush(&mut self) -> io::Result<()> {
        let result = self.inner.flush();
        self.watch(result)
    }
}

/// Prints `warning: …` on stderr (ignoring a closed stderr: there is no one to tell).
pub fn warning(message: std::fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "warning: {message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_in_keys() {
        assert_eq!(shown_key("a/b é"), "a/b é");
        assert_eq!(shown_key("a\nb\t"), "a\\nb\\t");
    }

    #[test]
    fn terminal_text_escapes_controls_but_keeps_lines() {
        assert_eq!(
            terminal_text("a\u{1b}[2J\u{1b}]0;owned\u{7}b\r\n\tc"),
            "a\\u{1b}[2J\\u{1b}]0;owned\\u{7}b\\r\n\tc"
        );
        assert_eq!(terminal_text("plain\ntext"), "plain\ntext");
    }

    #[test]
    fn tables_align_columns() {
        let mut out = Vec::new();
        let rows = vec![
            vec!["a".to_owned(), "text".to_owned()],
            vec!["long-key".to_owned(), "json".to_owned()],
        ];
        write_table(&mut out, &["KEY", "TYPE"], &rows).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "KEY       TYPE\na         text\nlong-key  json\n"
        );
    }

    #[test]
    fn pipe_aware_notices_a_closed_reader() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut out = PipeAware::new(Closed);
        assert!(!out.is_closed());
        assert!(out.write_all(b"x").is_err());
        assert!(out.is_closed());
    }
}
