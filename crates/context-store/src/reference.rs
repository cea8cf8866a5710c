//! Variable references: the small handle a model or a sub-agent sees instead of a value.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The scope every variable gets unless told otherwise.
pub const GLOBAL_SCOPE: &str = "global";

/// What kind of value a variable holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VariableType {
    /// A string.
    Text,
    /// An array, object or scalar.
    Json,
    /// An object with `entries` or `memories`.
    Memory,
    /// An object with `result` or `output`.
    Result,
    /// Explicitly marked streaming data; never inferred.
    Stream,
    /// A reference to a file on disk ([`crate::FileRef`]): the value names the file,
    /// whose contents are read from where they are. Never inferred.
    File,
}

impl VariableType {
    /// Every type, in display order.
    pub const ALL: [VariableType; 6] = [
        Self::Text,
        Self::Json,
        Self::Memory,
        Self::Result,
        Self::Stream,
        Self::File,
    ];

    /// Infers the type of a value the way the original TypeScript context store does
    /// (docs/store.md).
    pub fn infer(value: &Value) -> Self {
        match value {
            Value::String(_) => Self::Text,
            Value::Object(map) if map.contains_key("entries") || map.contains_key("memories") => {
                Self::Memory
            }
            Value::Object(map) if map.contains_key("result") || map.contains_key("output") => {
                Self::Result
            }
            _ => Self::Json,
        }
    }

    /// The lowercase name used on disk and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Json => "json",
            Self::Memory => "memory",
            Self::Result => "result",
            Self::Stream => "stream",
            Self::File => "file",
        }
    }
}

impl fmt::Display for VariableType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error for an unknown type name.
#[derive(Debug, thiserror::Error)]
#[error("unknown variable type {0:?}: expected one of text, json, memory, result, stream, file")]
pub struct UnknownVariableType(pub String);

impl FromStr for VariableType {
    type Err = UnknownVariableType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| UnknownVariableType(s.to_owned()))
    }
}

/// The handle of a variable: everything about it except its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VariableRef {
    /// Random UUID v4, new for every write.
    pub id: String,
    /// The key, any UTF-8.
    pub key: String,
    /// `global`, `agent:{id}`, `session:{id}` or any other string.
    pub scope: String,
    /// The kind of value.
    #[serde(rename = "type")]
    pub var_type: VariableType,
    /// Bytes of the compact JSON serialisation of the value.
    pub size_bytes: u64,
    /// Milliseconds since the Unix epoch.
    pub created_at: u64,
    /// Hex SHA-256 of the compact JSON serialisation of the value. `None` in what
    /// `set` returns for an in-memory value (hashing is deferred until a reference,
    /// list, compare-and-set or spill asks for it) and in files of other programs that
    /// lack it (computed when the value is first read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// Options of a write.
#[derive(Debug, Clone)]
pub struct SetOptions {
    /// Scope of the variable; `global` when `None`.
    pub scope: Option<String>,
    /// Type of the variable; inferred from the value when `None`.
    pub var_type: Option<VariableType>,
    /// Write the variable to disk (the default). `false` keeps it in memory until it is
    /// spilled or persisted explicitly.
    pub persist: bool,
    /// How the write reaches the disk; the store's own setting when `None`.
    /// [`Durability::Bulk`](crate::Durability::Bulk) suits values derived from
    /// something the caller still holds (a context copied from a file).
    pub durability: Option<crate::Durability>,
}

impl Default for SetOptions {
    fn default() -> Self {
        Self {
            scope: None,
            var_type: None,
            persist: true,
            durability: None,
        }
    }
}

impl SetOptions {
    /// Options for a value kept in memory only.
    pub fn in_memory() -> Self {
        Self {
            persist: false,
            ..Self::default()
        }
    }

    /// Sets the scope.
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    /// Sets how the write reaches the disk, instead of the store's setting.
    pub fn durability(mut self, durability: crate::Durability) -> Self {
        self.durability = Some(durability);
        self
    }

    /// Sets the type explicitly.
    pub fn var_type(mut self, var_type: VariableType) -> Self {
        self.var_type = Some(var_type);
        self
    }
}

/// Which variables `list` returns.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only this scope.
    pub scope: Option<String>,
    /// Only this type.
    pub var_type: Option<VariableType>,
}

impl ListFilter {
    /// True when `r` passes the filter.
    pub fn matches(&self, r: &VariableRef) -> bool {
        self.scope.as_deref().is_none_or(|s| s == r.scope)
            && self.var_type.is_none_or(|t| t == r.var_type)
    }
}

/// What `compare_and_set` expects to find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// The variable must not exist.
    Absent,
    /// The variable's current sha256 must be this hex string.
    Sha256(String),
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Absent => f.write_str("none"),
            Self::Sha256(hex) => f.write_str(hex),
        }
    }
}

impl FromStr for Expected {
    type Err = std::convert::Infallible;

    /// `none` means [`Expected::Absent`]; anything else is a sha256 (lowercased).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(if s.eq_ignore_ascii_case("none") {
            Self::Absent
        } else {
            Self::Sha256(s.to_ascii_lowercase())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn types_are_inferred_as_the_typescript_store_does() {
        assert_eq!(VariableType::infer(&json!("x")), VariableType::Text);
        assert_eq!(VariableType::infer(&json!([1])), VariableType::Json);
        assert_eq!(VariableType::infer(&json!({"a": 1})), VariableType::Json);
        assert_eq!(VariableType::infer(&json!(3)), VariableType::Json);
        assert_eq!(
            VariableType::infer(&json!({"entries": []})),
            VariableType::Memory
        );
        assert_eq!(
            VariableType::infer(&json!({"memories": []})),
            VariableType::Memory
        );
        assert_eq!(
            VariableType::infer(&json!({"result": 1})),
            VariableType::Result
        );
        assert_eq!(
            VariableType::infer(&json!({"output": 1})),
            VariableType::Result
        );
    }

    #[test]
    fn reference_serialises_in_camel_case() {
        let r = VariableRef {
            id: "i".into(),
            key: "k".into(),
            scope: GLOBAL_SCOPE.into(),
            var_type: VariableType::Text,
            size_bytes: 3,
            created_at: 7,
            sha256: Some("ab".into()),
        };
        let text = serde_json::to_string(&r).unwrap_or_default();
        assert_eq!(
            text,
            r#"{"id":"i","key":"k","scope":"global","type":"text","sizeBytes":3,"createdAt":7,"sha256":"ab"}"#
        );
    }
}
