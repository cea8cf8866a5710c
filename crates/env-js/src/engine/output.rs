//! What `console.log` and `console.error` wrote during one execution, kept up to a
//! cap per stream ([`crate::JsOptions::output_cap_bytes`]), with a note saying how
//! much more was written.

/// Output of the running execution, capped per stream.
#[derive(Debug, Default)]
pub(super) struct Capture {
    /// Bytes kept of each stream.
    cap: usize,
    stdout: String,
    stderr: String,
    dropped: usize,
}

impl Capture {
    /// Keeps up to `cap` bytes of each stream.
    pub(super) fn new(cap: usize) -> Self {
        Self {
            cap,
            ..Self::default()
        }
    }

    /// Appends `text` to stdout (`stream` 1) or stderr (2), up to the cap.
    pub(super) fn write(&mut self, stream: i32, text: &str) {
        let cap = self.cap;
        let target = if stream == 2 {
            &mut self.stderr
        } else {
            &mut self.stdout
        };
        let room = cap.saturating_sub(target.len());
        if text.len() <= room {
            target.push_str(text);
        } else {
            let mut cut = room;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            target.push_str(&text[..cut]);
            self.dropped += text.len() - cut;
        }
    }

    /// The execution's stdout and stderr, with a note on what the cap dropped.
    pub(super) fn take(&mut self) -> (String, String) {
        let mut stdout = std::mem::take(&mut self.stdout);
        let stderr = std::mem::take(&mut self.stderr);
        if self.dropped > 0 {
            stdout.push_str(&format!(
                "\n[output truncated: {} more bytes were written; the first {} of each stream are kept]",
                self.dropped, self.cap
            ));
            self.dropped = 0;
        }
        (stdout, stderr)
    }
}
