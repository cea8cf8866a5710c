//! The prompt an external agent gets: the task, one line per context variable
//! (a reference to its file, never its data), and how to hand back the answer.
//!
//! Each reference costs about 200 bytes whether the variable holds 1 KB or 1 GB: the
//! agent opens the file itself. That is what lets the orchestrator fan a huge context
//! out to agents without any prompt growing with it. The file it names is plain text
//! an agent's own tools read line by line (a text view of the variable, or the file a
//! `file` variable refers to), and every command the prompt gives names this program by
//! absolute path and the result variable literally: an agent CLI's shell may not keep
//! our `PATH`, and its permission check refuses commands that expand variables.

use std::path::{Path, PathBuf};

use rlm_context_store::{Store, StoreError, VariableType};

/// Heading of the section listing the context variables.
pub const CONTEXT_HEADING: &str =
    "--- Context variables (passed by reference: read the files; their data is not in this prompt) ---";

/// Heading of the section saying how to answer.
pub const HOW_TO_ANSWER_HEADING: &str = "--- How to answer ---";

/// A context variable as an agent sees it: where its file is, and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRef {
    /// The variable's key.
    pub key: String,
    /// Absolute path of its JSON file (`{"ref": …, "value": …}`).
    pub path: PathBuf,
    /// Bytes of its JSON-serialised value.
    pub size_bytes: u64,
    /// Its type.
    pub var_type: VariableType,
    /// For a `file` variable: the file it refers to, which the agent reads instead of
    /// the variable file (its data was never copied into the store).
    pub file: Option<PathBuf>,
    /// A plain-text view of the variable's data (the decoded text, or pretty JSON),
    /// which the agent reads instead of the one-line JSON file.
    pub view: Option<PathBuf>,
}

impl AgentRef {
    /// Persists `key` for a sub-agent (`persist_for_sub_agent`) and describes it; a
    /// `file` variable is described by the file it refers to, checked unchanged, any
    /// other by a plain-text view of its data ([`Store::text_view`]), written once.
    /// Synchronous store I/O: call it from `spawn_blocking` in async code.
    pub fn from_store(store: &Store, key: &str) -> Result<Self, StoreError> {
        let path = store.persist_for_sub_agent(key)?;
        let reference = store.reference(key)?;
        let file = store.unchanged_file_reference(key)?;
        let view = match file {
            Some(_) => None,
            None => Some(store.text_view(key)?),
        };
        Ok(Self {
            key: reference.key,
            path,
            size_bytes: file.as_ref().map_or(reference.size_bytes, |f| f.size),
            var_type: reference.var_type,
            file: file.map(|f| f.path),
            view,
        })
    }

    /// The file the agent reads: the referenced file, else the text view, else the
    /// variable file.
    pub fn readable_path(&self) -> &Path {
        self.file
            .as_deref()
            .or(self.view.as_deref())
            .unwrap_or(&self.path)
    }
}

/// How an agent hands back its answer, as its prompt says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerChannel {
    /// The variable the answer goes to (`sub-result-<id>`).
    pub result_key: String,
    /// Its file, for an agent that writes it by hand.
    pub result_file: PathBuf,
    /// The `rlm-orchestrate` executable the commands name (absolute), if known.
    pub rlm_bin: Option<PathBuf>,
}

impl AnswerChannel {
    /// The program as the prompt's commands name it: its absolute path, else the bare
    /// name.
    fn program(&self) -> String {
        match &self.rlm_bin {
            Some(path) => shell_words::quote(&path.to_string_lossy()).into_owned(),
            None => "rlm-orchestrate".to_owned(),
        }
    }
}

/// The line naming one variable, e.g.
/// `Context variable "chunk-3" (1048576 bytes, type: text): read /abs/.rlm-data/variables/chunk-3.json — the JSON file has a "value" field with the data.`
/// A `file` variable names the file it refers to instead: the agent reads the text
/// where it is.
///
/// The key is quoted as a JSON string, so quotes or newlines in it cannot break the
/// line.
pub fn ref_line(reference: &AgentRef) -> String {
    if let Some(view) = &reference.view {
        return format!(
            "Context variable {} ({} bytes, type: {}): read {} — plain UTF-8 text (the data itself).",
            json_quote(&reference.key),
            reference.size_bytes,
            reference.var_type.as_str(),
            view.display()
        );
    }
    if let Some(file) = &reference.file {
        return format!(
            "Context variable {} ({} bytes, type: file): read {} — a plain UTF-8 text file (the data itself, not JSON).",
            json_quote(&reference.key),
            reference.size_bytes,
            file.display()
        );
    }
    format!(
        "Context variable {} ({} bytes, type: {}): read {} — the JSON file has a \"value\" field with the data.",
        json_quote(&reference.key),
        reference.size_bytes,
        reference.var_type.as_str(),
        reference.path.display()
    )
}

/// The whole prompt: `task`, one [`ref_line`] per reference, how to read a variable
/// by lines, and how to answer (print on stdout, or store the result variable).
pub fn agent_prompt(task: &str, refs: &[AgentRef], answer: &AnswerChannel) -> String {
    let mut prompt = String::with_capacity(task.len() + 900 + refs.len() * 200);
    let program = answer.program();
    prompt.push_str(task.trim_end());
    prompt.push_str("\n\n");
    if !refs.is_empty() {
        prompt.push_str(CONTEXT_HEADING);
        prompt.push('\n');
        for reference in refs {
            prompt.push_str(&ref_line(reference));
            prompt.push('\n');
        }
        prompt.push_str(&format!(
            "To read a variable by lines instead: `{program} vars get KEY --lines A:B` (1-based, inclusive).\n\n"
        ));
    }
    let result_key = &answer.result_key;
    let key = json_quote(result_key);
    prompt.push_str(HOW_TO_ANSWER_HEADING);
    prompt.push('\n');
    prompt.push_str(&format!(
        "Print only your answer on stdout. For a long or structured answer you may instead store it as the variable {key}, \
with exactly this command (add --json before --file for a JSON answer):\n\
{program} vars set {result_key} --file - <<'RLM_ANSWER'\n\
<your answer>\n\
RLM_ANSWER\n\
or write the file {} yourself as \
{{\"ref\":{{\"id\":\"1\",\"key\":{key},\"scope\":\"agent\",\"type\":\"text\",\"sizeBytes\":0,\"createdAt\":0}},\"value\":<your answer>}} \
(write a temporary file in the same directory, then rename it). A stored answer is used instead of stdout.\n",
        answer.result_file.display()
    ));
    prompt
}

fn json_quote(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(key: &str, size_bytes: u64) -> AgentRef {
        AgentRef {
            key: key.to_owned(),
            path: PathBuf::from(format!("/abs/.rlm-data/variables/{key}.json")),
            size_bytes,
            var_type: VariableType::Text,
            file: None,
            view: None,
        }
    }

    fn answer(key: &str) -> AnswerChannel {
        AnswerChannel {
            result_key: key.to_owned(),
            result_file: PathBuf::from(format!("/abs/.rlm-data/variables/{key}.json")),
            rlm_bin: Some(PathBuf::from("/opt/rlm/rlm-orchestrate")),
        }
    }

    #[test]
    fn a_file_variable_names_the_file_it_refers_to() {
        let line = ref_line(&AgentRef {
            var_type: VariableType::File,
            file: Some(PathBuf::from("/logs/big.log")),
            ..reference("run-1-context", 3_000_000_000)
        });
        assert_eq!(
            line,
            "Context variable \"run-1-context\" (3000000000 bytes, type: file): read /logs/big.log — a plain UTF-8 text file (the data itself, not JSON)."
        );
    }

    #[test]
    fn the_reference_line_has_the_documented_form() {
        assert_eq!(
            ref_line(&reference("chunk-3", 1_048_576)),
            "Context variable \"chunk-3\" (1048576 bytes, type: text): read /abs/.rlm-data/variables/chunk-3.json — the JSON file has a \"value\" field with the data."
        );
    }

    #[test]
    fn odd_keys_cannot_break_the_line() {
        let mut odd = reference("x", 1);
        odd.key = "a\"b\nc".to_owned();
        let line = ref_line(&odd);
        assert!(line.starts_with(r#"Context variable "a\"b\nc" (1 bytes"#));
        assert!(!line.contains('\n'));
    }

    #[test]
    fn the_prompt_grows_by_about_200_bytes_per_reference() {
        let base = agent_prompt("task", &[], &answer("sub-result-x")).len();
        let refs: Vec<AgentRef> = (0..10)
            .map(|i| reference(&format!("chunk-{i}"), 1 << 30))
            .collect();
        let with = agent_prompt("task", &refs, &answer("sub-result-x")).len();
        let per_ref = (with - base - CONTEXT_HEADING.len() - 130) / refs.len();
        assert!(
            (100..=250).contains(&per_ref),
            "{per_ref} bytes per reference"
        );
    }

    #[test]
    fn the_prompt_says_how_to_answer_with_commands_that_expand_nothing() {
        let prompt = agent_prompt(
            "Count the errors.\n",
            &[reference("c", 5)],
            &answer("sub-result-a1"),
        );
        assert!(prompt.starts_with("Count the errors.\n\n"));
        assert!(prompt.contains(CONTEXT_HEADING));
        assert!(prompt.contains(
            "\n/opt/rlm/rlm-orchestrate vars set sub-result-a1 --file - <<'RLM_ANSWER'\n<your answer>\nRLM_ANSWER\n"
        ));
        assert!(prompt.contains("`/opt/rlm/rlm-orchestrate vars get KEY --lines A:B`"));
        assert!(prompt.contains("/abs/.rlm-data/variables/sub-result-a1.json"));
        assert!(prompt.contains(r#""key":"sub-result-a1""#));
        assert!(
            !prompt.contains('$'),
            "nothing for a shell to expand: {prompt}"
        );
        assert!(!agent_prompt("t", &[], &answer("k")).contains(CONTEXT_HEADING));
    }

    #[test]
    fn a_text_view_is_named_instead_of_the_json_file() {
        let line = ref_line(&AgentRef {
            view: Some(PathBuf::from("/abs/.rlm-data/views/ab12.txt")),
            ..reference("chunk-3", 10)
        });
        assert_eq!(
            line,
            "Context variable \"chunk-3\" (10 bytes, type: text): read /abs/.rlm-data/views/ab12.txt — plain UTF-8 text (the data itself)."
        );
    }
}
