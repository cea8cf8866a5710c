//! The schema-to-grammar converter, read back with the test-only GBNF matcher: every
//! value generated from a schema (proptest) is accepted in compact JSON and with
//! spaces after `:` and `,`; replies that are not JSON, or JSON of another shape, are
//! refused.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::super::gbnf::Grammar;
use super::schema_to_gbnf;
use crate::env::tools::{text_reply_schema as reply_schema, MicroTool};

/// The schemas the converter is for: sub-calls' and the text protocol's.
fn schemas() -> Vec<(&'static str, Value)> {
    vec![
        ("integer", json!({"type": "integer"})),
        ("number", json!({"type": "number", "minimum": 0})),
        (
            "labels",
            json!({"type": "array", "items": {"type": "string", "enum": ["spam", "ham", "a \"quoted\" one"]}}),
        ),
        (
            "record",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "description": "who"},
                "count": {"type": "integer"},
                "ok": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "note": {"type": ["string", "null"]}
            }, "required": ["name", "count"], "additionalProperties": false}),
        ),
        (
            "all optional",
            json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"const": 1}}}),
        ),
        (
            "choice",
            json!({"oneOf": [
                {"type": "object", "properties": {"yes": {"type": "string"}}, "required": ["yes"]},
                {"type": "object", "properties": {"no": {"type": "number"}}, "required": ["no"]}
            ]}),
        ),
        ("anything", json!({})),
        (
            "plan reply",
            reply_schema(&[
                MicroTool::Length,
                MicroTool::MapReduce,
                MicroTool::FinalAnswer,
            ]),
        ),
        ("tools reply", reply_schema(&MicroTool::ALL)),
    ]
}

/// Values of `schema`, as the converter's subset reads it.
fn values_of(schema: &Value, depth: u32) -> BoxedStrategy<Value> {
    let text = || {
        prop_oneof![
            any::<String>(),
            "[a-z \"\\\\/\n\t\u{1}é]{0,6}".prop_map(String::from),
        ]
        .prop_map(Value::String)
    };
    if let Some(value) = schema.get("const") {
        return Just(value.clone()).boxed();
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return proptest::sample::select(values.clone()).boxed();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(list) = schema.get(key).and_then(Value::as_array) {
            let options: Vec<_> = list.iter().map(|s| values_of(s, depth)).collect();
            return proptest::strategy::Union::new(options).boxed();
        }
    }
    let kinds: Vec<&str> = match schema.get("type") {
        Some(Value::String(kind)) => vec![kind.as_str()],
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect(),
        _ if schema.get("properties").is_some() => vec!["object"],
        _ if schema.get("items").is_some() => vec!["array"],
        _ => vec![
            "string", "number", "integer", "boolean", "null", "array", "object",
        ],
    };
    // Deep enough for containers, but for an object of no listed properties one level
    // more (a structured map's own `{"type": "object"}` sits this deep in a tool
    // call): its members are then plain values.
    let open_object = depth == 3 && schema.get("properties").is_none();
    let kinds: Vec<&str> = kinds
        .into_iter()
        .filter(|kind| {
            depth < 3 || !matches!(*kind, "array" | "object") || (*kind == "object" && open_object)
        })
        .collect();
    if kinds.is_empty() {
        return Just(json!([])).boxed();
    }
    let options: Vec<BoxedStrategy<Value>> = kinds
        .into_iter()
        .map(|kind| match kind {
            "string" => text().boxed(),
            "integer" => match schema.get("minimum").and_then(Value::as_i64) {
                Some(min) => (min..min + 1_000_000).prop_map(Value::from).boxed(),
                None => any::<i64>().prop_map(Value::from).boxed(),
            },
            "number" => match schema.get("minimum").and_then(Value::as_f64) {
                Some(min) => (min..min + 1e9).prop_map(Value::from).boxed(),
                None => prop_oneof![
                    any::<f64>()
                        .prop_filter("finite", |f| f.is_finite())
                        .prop_map(Value::from),
                    any::<i32>().prop_map(Value::from),
                ]
                .boxed(),
            },
            "boolean" => any::<bool>().prop_map(Value::Bool).boxed(),
            "null" => Just(Value::Null).boxed(),
            "array" => {
                let item = schema.get("items").cloned().unwrap_or(json!({}));
                proptest::collection::vec(values_of(&item, depth + 1), 0..3)
                    .prop_map(Value::Array)
                    .boxed()
            }
            _ => object_of(schema, depth),
        })
        .collect();
    proptest::strategy::Union::new(options).boxed()
}

/// Objects of `schema`: the required properties, some of the optional ones.
fn object_of(schema: &Value, depth: u32) -> BoxedStrategy<Value> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        // An object of no listed properties: any members.
        return proptest::collection::btree_map(
            "[a-z\"]{0,3}",
            values_of(&json!({}), depth + 1),
            0..3,
        )
        .prop_map(|m| Value::Object(m.into_iter().collect()))
        .boxed();
    };
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let members: Vec<BoxedStrategy<Option<(String, Value)>>> = properties
        .iter()
        .map(|(name, property)| {
            let name = name.clone();
            let value = values_of(property, depth + 1);
            if required.contains(&name) {
                value.prop_map(move |v| Some((name.clone(), v))).boxed()
            } else {
                proptest::option::of(value)
                    .prop_map(move |v| v.map(|v| (name.clone(), v)))
                    .boxed()
            }
        })
        .collect();
    members
        .prop_map(|members| Value::Object(members.into_iter().flatten().collect()))
        .boxed()
}

/// `value` as JSON with a space after every `:` and `,` outside strings (Python's
/// `json.dumps` form).
fn spaced(value: &Value) -> String {
    let mut out = String::new();
    let (mut in_string, mut escaped) = (false, false);
    for c in value.to_string().chars() {
        out.push(c);
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if c == ':' || c == ',' {
            out.push(' ');
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_value_of_a_schema_is_accepted_by_its_grammar(
        (name, schema, value) in proptest::sample::select(schemas())
            .prop_flat_map(|(name, schema)| {
                let values = values_of(&schema, 0);
                (Just(name), Just(schema), values)
            })
    ) {
        let grammar = Grammar::parse(&schema_to_gbnf(&schema).unwrap());
        prop_assert!(jsonschema::is_valid(&schema, &value), "{name}: generated {value}");
        prop_assert!(grammar.accepts(&value.to_string()), "{name}: {value}");
        prop_assert!(grammar.accepts(&spaced(&value)), "{name}: {}", spaced(&value));
    }
}

#[test]
fn replies_of_another_shape_are_refused() {
    let refused: &[(&str, &[&str])] = &[
        ("integer", &["1.5", "\"3\"", "three", "03", "1 ", "", "-"]),
        ("number", &["1.", ".5", "1e", "NaN", "[1]"]),
        (
            "labels",
            &[
                "[\"eggs\"]",
                "[\"spam\",]",
                "[\"spam\"",
                "\"spam\"",
                "[spam]",
            ],
        ),
        (
            "record",
            // Members go in the schema's order: alphabetical here (count, name, …).
            &[
                r#"{"name": "a"}"#,
                r#"{"name": "a", "count": 1}"#,
                r#"{"count": 1, "name": "a", "extra": 2}"#,
                r#"{"count": "1", "name": "a"}"#,
                r#"{"count": 1, "name": "a""#,
                r#"{"count": 1, "name": "a",}"#,
                r#"{"count": 1, "name": "a\q"}"#,
                "{\"count\": 1, \"name\": \"a\nb\"}",
            ],
        ),
        (
            "all optional",
            &[r#"{"b": 2}"#, r#"{,"a": 1}"#, r#"{"a": 1,}"#],
        ),
        (
            "choice",
            &[r#"{"yes": 1}"#, r#"{"yes": "a", "no": 1}"#, "{}"],
        ),
        ("anything", &["{", "[1,]", "tru", "'a'", "{\"a\" 1}"]),
        (
            "plan reply",
            &[
                r#"{"ctx_grep": {"variable": "context", "pattern": "x"}}"#,
                r#"{"final_answer": {"answer": "a"}} {"final_answer": {"answer": "b"}}"#,
                r#"{"tool": "final_answer", "arguments": {"answer": "a"}}"#,
                "```tool\n{\"final_answer\": {\"answer\": \"a\"}}\n```",
                r#"{"final_answer": {}}"#,
            ],
        ),
    ];
    let schemas = schemas();
    for (name, replies) in refused {
        let (_, schema) = schemas.iter().find(|(n, _)| n == name).unwrap();
        let grammar = Grammar::parse(&schema_to_gbnf(schema).unwrap());
        for reply in *replies {
            assert!(!grammar.accepts(reply), "{name} accepted {reply:?}");
        }
    }
    // And the forms a reply takes are accepted.
    let (_, record) = &schemas[3];
    let grammar = Grammar::parse(&schema_to_gbnf(record).unwrap());
    assert!(grammar.accepts(r#"{"count": 1, "name": "a"}"#));
    assert!(grammar.accepts(r#"{"count":1,"name":"a\"b","note":null,"ok":true}"#));
    let (_, plan) = &schemas[7];
    let grammar = Grammar::parse(&schema_to_gbnf(plan).unwrap());
    assert!(grammar.accepts(r#"{"final_answer": {"answer": "42"}}"#));
    assert!(grammar.accepts(r#"{"ctx_length": {"variable": "context"}}"#));
}

#[test]
fn what_does_not_convert_is_refused_with_its_place() {
    let error = schema_to_gbnf(&json!({"type": "object", "properties": {
        "a": {"$ref": "#/definitions/x"}}}))
    .unwrap_err();
    assert_eq!(error.what, "`$ref`");
    assert_eq!(error.at, "/properties/a");
    assert!(
        error.to_string().contains("goes without a grammar"),
        "{error}"
    );
    assert!(schema_to_gbnf(&json!({"allOf": [{}]})).is_err());
    assert!(schema_to_gbnf(&json!({"type": "date"})).is_err());
    assert!(schema_to_gbnf(&json!("integer")).is_err());
    assert!(schema_to_gbnf(&json!({"enum": []})).is_err());
}

/// A structured map carries the model's own schema, of any shape: `{"type": "object"}`
/// with no properties is any JSON object, in the tools' reply grammar as alone.
#[test]
fn a_call_that_carries_a_schema_of_any_shape_is_accepted() {
    let any_object = Grammar::parse(&schema_to_gbnf(&json!({"type": "object"})).unwrap());
    for object in [
        "{}",
        r#"{"a": [1, {"b": null}], "c": "d"}"#,
        r#"{"type":"integer"}"#,
    ] {
        assert!(any_object.accepts(object), "{object}");
    }
    for other in ["[]", "1", "\"{}\"", "{"] {
        assert!(!any_object.accepts(other), "{other}");
    }
    let schema = reply_schema(&MicroTool::ALL);
    let grammar = Grammar::parse(&schema_to_gbnf(&schema).unwrap());
    let accepted = [
        r#"{"ctx_map_reduce": {"map": {"ask": "How many?", "schema": {"type": "integer"}}, "reduce": {"op": "sum"}}}"#,
        r#"{"ctx_map_reduce": {"map": {"ask": "Which labels?", "schema": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}}, "reduce": {"op": "union"}}}"#,
        r#"{"ctx_map": {"ask": "How many?", "pieces": "pieces-1", "schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}"#,
        r#"{"ctx_map": {"ask": "q", "pieces": "p", "schema": {}}}"#,
        r#"{"ctx_map": {"count": "x", "pieces": "p"}}"#,
    ];
    for reply in accepted {
        let value: Value = serde_json::from_str(reply).unwrap();
        assert!(jsonschema::is_valid(&schema, &value), "{reply}");
        assert!(grammar.accepts(reply), "{reply}");
    }
    let refused = [
        // A schema that is not an object, or a shaped map without its instruction.
        r#"{"ctx_map_reduce": {"map": {"ask": "How many?", "schema": "integer"}, "reduce": {"op": "sum"}}}"#,
        r#"{"ctx_map_reduce": {"map": {"schema": {"type": "integer"}}, "reduce": {"op": "sum"}}}"#,
        r#"{"ctx_map_reduce": {"map": {"count": "x", "schema": {}}, "reduce": {"op": "sum"}}}"#,
        r#"{"ctx_map": {"ask": "q", "pieces": "p", "schema": [1]}}"#,
    ];
    for reply in refused {
        let value: Value = serde_json::from_str(reply).unwrap();
        assert!(!jsonschema::is_valid(&schema, &value), "{reply}");
        assert!(!grammar.accepts(reply), "{reply}");
    }
}
