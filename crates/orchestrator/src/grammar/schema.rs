//! A JSON reply's schema as a GBNF grammar, for a server that takes grammars and no
//! schema (`--constrain grammar` against such a server, or `auto` where its record
//! says so): the text-protocol call of the tools and plan environments, a sub-call's
//! `schema=`.
//!
//! The subset our schemas use converts: `type` (`object`, `array`, `string`,
//! `number`, `integer`, `boolean`, `null`, or a list of them), `properties` with
//! `required` (members in the schema's order, the optional ones optional), `items`,
//! `enum`, `const`, `anyOf`/`oneOf`, and `{}` for any value. Annotations
//! (`description`, `title`, `default`, `examples`) are skipped, and so are the bounds a
//! grammar does not hold (`minimum`, `maxLength`, `pattern`, `format`…): the value is
//! checked against the whole schema where it is read. Anything else (`$ref`, `allOf`,
//! `not`…) is refused with its place, and the request then goes unconstrained.
//!
//! The grammar writes compact JSON (one optional space between tokens): an object
//! holds only its listed properties, in the schema's order. Its tests read the
//! grammar's own text with the test-only GBNF matcher ([`super::gbnf`]): every value
//! generated from a schema is accepted, malformed and mismatched replies are not.

use std::fmt::Write as _;

use serde_json::Value;

/// A schema that does not convert: what, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the schema's {what} (at {at}) has no GBNF form here; the request goes without a grammar")]
pub struct UnconvertibleSchema {
    /// The keyword or value that does not convert.
    pub what: String,
    /// Where, as a JSON pointer into the schema (`` for the top).
    pub at: String,
}

/// Keywords skipped: annotations, and bounds the value is checked for where it is read.
const SKIPPED: &[&str] = &[
    "description",
    "title",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "additionalProperties",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
];

/// The rules every grammar shares: whitespace, strings, numbers, any value.
const SHARED: &str = r#"ws ::= " "?
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" hex hex hex hex)
hex ::= [0-9a-fA-F]
integer ::= "-"? ("0" | [1-9] [0-9]*)
number ::= integer ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws (string ws ":" ws value ("," ws string ws ":" ws value)*)? ws "}"
array ::= "[" ws (value ("," ws value)*)? ws "]"
"#;

/// The GBNF grammar of the JSON values `schema` admits (see the module's doc), with
/// `root` its start.
pub fn schema_to_gbnf(schema: &Value) -> Result<String, UnconvertibleSchema> {
    let mut builder = Builder::default();
    let root = builder.expression(schema, "")?;
    let mut text = format!("root ::= {root}\n");
    for (name, body) in &builder.rules {
        let _ = writeln!(text, "{name} ::= {body}");
    }
    text.push_str(SHARED);
    Ok(text)
}

/// The rules made so far.
#[derive(Default)]
struct Builder {
    rules: Vec<(String, String)>,
}

impl Builder {
    /// A new rule of `body`; its name.
    fn rule(&mut self, body: String) -> String {
        let name = format!("r{}", self.rules.len());
        self.rules.push((name.clone(), body));
        name
    }

    /// The GBNF expression of the values `schema` (at `at`) admits.
    fn expression(&mut self, schema: &Value, at: &str) -> Result<String, UnconvertibleSchema> {
        let refuse = |what: String| UnconvertibleSchema {
            what,
            at: at.to_owned(),
        };
        let object = match schema {
            Value::Bool(true) => return Ok("value".to_owned()),
            Value::Object(object) => object,
            other => return Err(refuse(format!("schema {other}"))),
        };
        if let Some(key) = object.keys().find(|k| {
            !SKIPPED.contains(&k.as_str())
                && ![
                    "type",
                    "properties",
                    "required",
                    "items",
                    "enum",
                    "const",
                    "anyOf",
                    "oneOf",
                ]
                .contains(&k.as_str())
        }) {
            return Err(refuse(format!("`{key}`")));
        }
        if let Some(value) = object.get("const") {
            return Ok(literal_of(value));
        }
        if let Some(values) = object.get("enum") {
            let Some(values) = values.as_array().filter(|v| !v.is_empty()) else {
                return Err(refuse("`enum` (not a list of values)".to_owned()));
            };
            let options: Vec<String> = values.iter().map(literal_of).collect();
            return Ok(format!("({})", options.join(" | ")));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(list) = object.get(key) {
                let Some(list) = list.as_array().filter(|l| !l.is_empty()) else {
                    return Err(refuse(format!("`{key}` (not a list of schemas)")));
                };
                let mut options = Vec::new();
                for (index, option) in list.iter().enumerate() {
                    options.push(self.expression(option, &format!("{at}/{key}/{index}"))?);
                }
                return Ok(self.rule(options.join(" | ")));
            }
        }
        let types: Vec<&str> = match object.get("type") {
            None => return self.untyped(object, at),
            Some(Value::String(kind)) => vec![kind.as_str()],
            Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect(),
            Some(other) => return Err(refuse(format!("`type` {other}"))),
        };
        let mut options = Vec::new();
        for kind in types {
            options.push(match kind {
                "string" | "number" | "integer" | "boolean" | "null" => kind.to_owned(),
                "object" => self.object(object, at)?,
                "array" => self.array(object, at)?,
                other => return Err(refuse(format!("`type` \"{other}\""))),
            });
        }
        match options.len() {
            0 => Err(refuse("`type` (an empty list)".to_owned())),
            1 => Ok(options.remove(0)),
            _ => Ok(self.rule(options.join(" | "))),
        }
    }

    /// A schema of no `type`: an object's or an array's keywords say which, else any
    /// value.
    fn untyped(
        &mut self,
        object: &serde_json::Map<String, Value>,
        at: &str,
    ) -> Result<String, UnconvertibleSchema> {
        if object.contains_key("properties") {
            self.object(object, at)
        } else if object.contains_key("items") {
            self.array(object, at)
        } else {
            Ok("value".to_owned())
        }
    }

    /// An object: its listed properties in order, the required ones always; any
    /// object when none are listed.
    fn object(
        &mut self,
        object: &serde_json::Map<String, Value>,
        at: &str,
    ) -> Result<String, UnconvertibleSchema> {
        let Some(properties) = object.get("properties").and_then(Value::as_object) else {
            return Ok("object".to_owned());
        };
        let required: Vec<&str> = object
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut members = Vec::new();
        for (name, schema) in properties {
            let value = self.expression(schema, &format!("{at}/properties/{name}"))?;
            let key = literal_of(&Value::String(name.clone()));
            members.push((
                format!("{key} ws \":\" ws {value}"),
                required.contains(&name.as_str()),
            ));
        }
        // `after`: the members from here on once one is written; `first`: before any
        // is. Both are rules, made from the last member back.
        let mut after: Option<String> = None;
        let mut first: Option<String> = None;
        for (member, required) in members.iter().rev() {
            let tail = after.clone();
            let comma = format!("\",\" ws {member}");
            let head = if *required {
                comma
            } else {
                format!("({comma})?")
            };
            after = Some(self.rule(sequence(&[Some(head), tail.clone()])));
            let with = sequence(&[Some(member.clone()), tail]);
            let body = match (required, &first) {
                (true, _) => with,
                (false, Some(rest)) => format!("{with} | {rest}"),
                (false, None) => format!("({with})?"),
            };
            first = Some(self.rule(body));
        }
        let body = match first {
            Some(first) => format!("\"{{\" ws {first} ws \"}}\""),
            None => "\"{\" ws \"}\"".to_owned(),
        };
        Ok(self.rule(body))
    }

    /// An array of `items` (of any values when not given).
    fn array(
        &mut self,
        object: &serde_json::Map<String, Value>,
        at: &str,
    ) -> Result<String, UnconvertibleSchema> {
        let item = match object.get("items") {
            None => "value".to_owned(),
            Some(items) => self.expression(items, &format!("{at}/items"))?,
        };
        Ok(self.rule(format!("\"[\" ws ({item} (\",\" ws {item})*)? ws \"]\"")))
    }
}

/// The parts given, in order, as one GBNF sequence.
fn sequence(parts: &[Option<String>]) -> String {
    parts
        .iter()
        .flatten()
        .cloned()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The GBNF literal of `value`'s compact JSON text.
fn literal_of(value: &Value) -> String {
    let json = value.to_string();
    let mut out = String::with_capacity(json.len() + 2);
    out.push('"');
    for c in json.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            other => out.push(other),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests;
