//! `SUBMIT(value)` from code: the payload must validate against `--output-schema`
//! (always on: not a correction), and the answer it gives.

use serde_json::Value;

use crate::rlm::LoopSettings;

/// The answer a `SUBMIT(value)` gives: a string as it is, else the value as JSON —
/// but with no `--output-schema` (`schema` false), an object of one member whose value
/// is a string, a number or a boolean gives that value: the caller asked for text, and
/// the model wrapped it. The payload itself is kept beside the answer either way.
pub(super) fn submitted_answer(value: &Value, schema: bool) -> String {
    let sole = match value {
        Value::Object(members) if !schema && members.len() == 1 => members.values().next(),
        _ => None,
    };
    match (value, sole) {
        (Value::String(text), _) | (_, Some(Value::String(text))) => text.clone(),
        (_, Some(scalar @ (Value::Number(_) | Value::Bool(_)))) => scalar.to_string(),
        (other, _) => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// A SUBMIT payload that does not match `--output-schema`: what is wrong, one line
/// each, for the model to fix.
#[derive(Debug, thiserror::Error)]
#[error("SUBMIT was rejected: the payload does not match the output schema:\n{}\nFix it and call SUBMIT again.", .0.join("\n"))]
pub(super) struct SchemaMismatch(Vec<String>);

/// Checks a SUBMIT payload against `--output-schema`.
pub(super) fn validate(settings: &LoopSettings, value: &Value) -> Result<(), SchemaMismatch> {
    let Some(schema) = &settings.output_schema else {
        return Ok(());
    };
    let errors: Vec<String> = schema
        .iter_errors(value)
        .map(|e| format!("- at {}: {e}", e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SchemaMismatch(errors))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::submitted_answer;

    #[test]
    fn a_submitted_object_of_one_scalar_is_that_value_when_no_schema_asks_for_json() {
        assert_eq!(
            submitted_answer(&json!({"answer": "fraud"}), false),
            "fraud"
        );
        assert_eq!(submitted_answer(&json!({"count": 46}), false), "46");
        assert_eq!(submitted_answer(&json!("plain"), false), "plain");
        // With a schema, or with more than one member or a nested value, the JSON.
        assert_eq!(
            submitted_answer(&json!({"answer": "fraud"}), true),
            "{\n  \"answer\": \"fraud\"\n}"
        );
        assert_eq!(
            submitted_answer(&json!({"a": 1, "b": 2}), false),
            "{\n  \"a\": 1,\n  \"b\": 2\n}"
        );
        assert_eq!(submitted_answer(&json!(7), false), "7");
    }
}
