//! Sub-calls that return structure: `llm_query(…, schema=…)` in the code environments
//! and a plan's `{"ask": …, "schema": …}` map.
//!
//! The schema goes to the sub-model's server in the form `--sub-constrain` resolves
//! to (`response_format` as `json_schema`, llama-cpp-python's `json_object` with a
//! `schema`, or a grammar made from it for a server that takes only grammars), and it
//! is always stated in the sub-prompt too, so a server that says nothing still gets a
//! model asked for JSON. The reply is parsed and checked against the schema: the code
//! gets the JSON value, or an error naming the mismatch — never the text passed off
//! as the value.

use rlm_protocol::host_call::HostError;
use serde_json::Value;

use crate::provider::ResponseFormat;

/// The name the schema goes under in `response_format` (`json_schema.name`).
const FORMAT_NAME: &str = "answer";

/// Characters of a reply shown in a mismatch's message.
const REPLY_PREVIEW_CHARS: usize = 300;

/// Characters of the schema shown in a mismatch's message.
const SCHEMA_PREVIEW_CHARS: usize = 300;

/// A sub-call's schema, checked once: what it asks the server and the model, and how
/// a reply is read against it.
pub(crate) struct Shape {
    schema: Value,
    validator: jsonschema::Validator,
    /// The helper the schema was given to, as the model knows it (`llm_query`, the
    /// plan's map): its messages name it.
    helper: String,
}

impl std::fmt::Debug for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shape")
            .field("schema", &self.schema)
            .field("helper", &self.helper)
            .finish()
    }
}

impl Shape {
    /// The schema `schema` of a call of `helper`, refused with what to write instead
    /// when it is not a JSON Schema object.
    pub(crate) fn new(schema: &Value, helper: &str) -> Result<Self, HostError> {
        if !schema.is_object() {
            return Err(HostError::RespondToModel(format!(
                "{helper}: `schema` must be a JSON Schema object, such as {{\"type\": \"integer\"}} or {{\"type\": \"array\", \"items\": {{\"type\": \"string\"}}}}; got {}",
                kind_of(schema)
            )));
        }
        // Offline: the schema is the model's, so no `$ref` is fetched (a file or a
        // URL it names is refused, not read).
        let validator = jsonschema::options().offline().build(schema).map_err(|error| {
            HostError::RespondToModel(format!(
                "{helper}: `schema` is not a valid JSON Schema: {error} (at {}); write it as, for example, {{\"type\": \"object\", \"properties\": {{\"count\": {{\"type\": \"integer\"}}}}, \"required\": [\"count\"]}}",
                location(&error.instance_path().to_string())
            ))
        })?;
        Ok(Self {
            schema: schema.clone(),
            validator,
            helper: helper.to_owned(),
        })
    }

    /// The sub-prompt `content` with the schema stated after it.
    pub(crate) fn prompt(&self, content: &str) -> String {
        format!("{content}{}", self.stated())
    }

    /// What [`Self::prompt`] adds after a sub-prompt's content: the schema stated (a
    /// plan's price counts it in every leaf).
    pub(crate) fn stated(&self) -> String {
        format!(
            "\n\nAnswer with JSON only: one value that matches this JSON Schema, with no prose and no code fence.\nSchema: {}",
            self.schema
        )
    }

    /// The request's `response_format`.
    pub(crate) fn format(&self) -> ResponseFormat {
        ResponseFormat {
            name: FORMAT_NAME.to_owned(),
            schema: self.schema.clone(),
        }
    }

    /// The value `reply` holds (a code fence around it is looked past), checked
    /// against the schema; an error naming the helper and what is wrong.
    pub(crate) fn read(&self, reply: &str) -> Result<Value, HostError> {
        let helper = &self.helper;
        let text = unfenced(reply);
        let value: Value = serde_json::from_str(text).map_err(|error| {
            HostError::RespondToModel(format!(
                "{helper}: the sub-model's answer does not match the schema {}: it is not JSON ({error}); the answer was: {}",
                preview(&self.schema.to_string(), SCHEMA_PREVIEW_CHARS),
                quoted(reply)
            ))
        })?;
        let errors: Vec<String> = self
            .validator
            .iter_errors(&value)
            .take(3)
            .map(|e| format!("at {}: {e}", location(&e.instance_path().to_string())))
            .collect();
        if errors.is_empty() {
            return Ok(value);
        }
        Err(HostError::RespondToModel(format!(
            "{helper}: the sub-model's answer does not match the schema {}: {}; the answer was: {}",
            preview(&self.schema.to_string(), SCHEMA_PREVIEW_CHARS),
            errors.join("; "),
            quoted(reply)
        )))
    }
}

/// `reply` without the whitespace and the one code fence (```` ```json ````) a model
/// may wrap it in.
fn unfenced(reply: &str) -> &str {
    let text = reply.trim();
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let Some((_tag, body)) = rest.split_once('\n') else {
        return text;
    };
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

/// A JSON pointer as a message says it: `$` for the top.
fn location(pointer: &str) -> String {
    if pointer.is_empty() {
        "the top".to_owned()
    } else {
        pointer.to_owned()
    }
}

/// What kind of JSON value `value` is, for a message.
fn kind_of(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {}", quoted(s)),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// `text` quoted, cut to [`REPLY_PREVIEW_CHARS`].
fn quoted(text: &str) -> String {
    serde_json::to_string(&preview(text, REPLY_PREVIEW_CHARS)).unwrap_or_default()
}

/// `text` cut to `chars` characters, with an ellipsis when cut.
fn preview(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(chars).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(result: Result<impl std::fmt::Debug, HostError>) -> String {
        match result {
            Err(HostError::RespondToModel(message)) => message,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_reply_is_read_as_its_value_or_refused_naming_the_mismatch() {
        let labels = json!({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}});
        let shape = Shape::new(&labels, "llm_query").unwrap();
        assert_eq!(shape.read(" [\"a\", \"b\"]\n").unwrap(), json!(["a", "b"]));
        assert_eq!(shape.read("```json\n[\"b\"]\n```").unwrap(), json!(["b"]));
        let wrong = message(shape.read("[\"c\"]"));
        assert!(
            wrong.contains("does not match the schema") && wrong.contains("/0"),
            "{wrong}"
        );
        let prose = message(shape.read("The labels are a and b."));
        assert!(
            prose.contains("not JSON") && prose.contains("The labels"),
            "{prose}"
        );
        let count = Shape::new(&json!({"type": "integer"}), "llm_query").unwrap();
        assert_eq!(count.read("42").unwrap(), json!(42));
        let top = message(count.read("\"42\""));
        assert!(top.contains("at the top"), "{top}");
        assert!(count
            .prompt("How many?")
            .ends_with("Schema: {\"type\":\"integer\"}"));
    }

    #[test]
    fn a_bad_schema_is_refused_with_what_to_write() {
        let not_object = message(Shape::new(&json!("integer"), "llm_query"));
        assert!(
            not_object.contains("must be a JSON Schema object")
                && not_object.contains("\"integer\""),
            "{not_object}"
        );
        let invalid = message(Shape::new(&json!({"type": "integr"}), "llm_query"));
        assert!(invalid.contains("not a valid JSON Schema"), "{invalid}");
    }

    /// A schema comes from the model's code: a `$ref` to a file (or a URL) is not
    /// fetched, so code cannot make the host read `/dev/zero` or a private file.
    #[test]
    fn a_schema_that_refers_outside_itself_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("integer.json");
        std::fs::write(&elsewhere, r#"{"type": "integer"}"#).unwrap();
        let url = format!("file://{}", elsewhere.display());
        let refused = message(Shape::new(&json!({ "$ref": url }), "llm_query"));
        assert!(refused.contains("not a valid JSON Schema"), "{refused}");
    }
}
