//! Values between Rust and QuickJS: running a cell and reading back its echo and its
//! exception the way the model reads them, and setting the globals the prelude
//! provides (`query`, `history`, `context`, …) from JSON.

use rquickjs::context::EvalOptions;
use rquickjs::{CatchResultExt, CaughtError, Ctx, Function, Promise, Value};

use super::error::EngineError;

/// Lines of a stack trace kept in an error the model sees.
const STACK_LINES: usize = 12;

/// Characters of an echoed string value.
const ECHO_CHARS: usize = 20_000;

/// What one cell left: the echo of its last expression and its error.
pub(super) struct CellOutcome {
    /// The echo of the completion value (nothing for `undefined`).
    pub echo: Option<String>,
    /// The exception, as the model reads it.
    pub error: Option<String>,
}

/// Runs one (rewritten) cell to completion, awaiting its top-level Promises.
pub(super) async fn run_cell(ctx: &Ctx<'_>, cell: String, filename: String) -> CellOutcome {
    let mut options = EvalOptions::default();
    options.promise = true;
    options.filename = Some(filename);
    let promise: Promise = match ctx.eval_with_options(cell, options).catch(ctx) {
        Ok(promise) => promise,
        Err(error) => {
            return CellOutcome {
                echo: None,
                error: Some(describe(error)),
            }
        }
    };
    match promise.into_future::<Value>().await.catch(ctx) {
        Ok(completion) => CellOutcome {
            echo: echo_of(ctx, completion),
            error: None,
        },
        Err(error) => CellOutcome {
            echo: None,
            error: Some(describe(error)),
        },
    }
}

/// The REPL echo of a cell's completion value (`{value}` in QuickJS's async eval):
/// nothing for `undefined`, strings quoted, anything else as JSON.
fn echo_of<'js>(ctx: &Ctx<'js>, completion: Value<'js>) -> Option<String> {
    let value: Value = completion.as_object()?.get("value").ok()?;
    if value.is_undefined() {
        return None;
    }
    if let Some(text) = value.as_string().and_then(|s| s.to_string().ok()) {
        let shown: String = text.chars().take(ECHO_CHARS).collect();
        let quoted = serde_json::to_string(&shown).unwrap_or(shown);
        let total = text.chars().count();
        return Some(if total > ECHO_CHARS {
            format!("{quoted} … [{total} chars]")
        } else {
            quoted
        });
    }
    let json: Function = ctx.globals().get("__rlm_json").ok()?;
    json.call::<_, String>((value,)).ok()
}

/// An exception as the model reads it: `Name: message` and the top of the stack.
fn describe(error: CaughtError<'_>) -> String {
    let text = match &error {
        CaughtError::Exception(exception) => {
            let message = exception.message().unwrap_or_default();
            let name: String = exception
                .get::<_, String>("name")
                .unwrap_or_else(|_| "Error".to_owned());
            let stack = exception.stack().unwrap_or_default();
            let stack: Vec<&str> = stack.lines().filter(|l| !l.contains("<rlm-")).collect();
            let mut text = format!("{name}: {message}");
            for line in stack.iter().take(STACK_LINES) {
                text.push('\n');
                text.push_str(line);
            }
            if stack.len() > STACK_LINES {
                text.push_str(&format!(
                    "\n    … {} more frames",
                    stack.len() - STACK_LINES
                ));
            }
            text
        }
        CaughtError::Value(value) => {
            let shown = if let Some(text) = value.as_string().and_then(|s| s.to_string().ok()) {
                text
            } else if value.is_null() {
                "null".to_owned()
            } else if value.is_undefined() {
                "undefined".to_owned()
            } else if let Some(flag) = value.as_bool() {
                flag.to_string()
            } else if let Some(number) = value.as_number() {
                number.to_string()
            } else {
                format!("a value of type {}", value.type_name())
            };
            format!("Uncaught {shown}")
        }
        CaughtError::Error(error) => error.to_string(),
    };
    text
}

/// The JSON text of a value (fields in declaration order).
pub(super) fn json_text(value: &impl serde::Serialize) -> Result<String, EngineError> {
    Ok(serde_json::to_string(value)?)
}

/// Sets a provided global (not listed as the model's) from JSON text.
pub(super) fn provide_json(ctx: &Ctx<'_>, name: &str, json: &str) -> Result<(), EngineError> {
    let parsed = ctx
        .json_parse(json)
        .catch(ctx)
        .map_err(|e| EngineError::Thrown(e.to_string()))?;
    provide(ctx, name, parsed)
}

/// Sets a provided global.
pub(super) fn provide<'js>(
    ctx: &Ctx<'js>,
    name: &str,
    value: Value<'js>,
) -> Result<(), EngineError> {
    let provide: Function = ctx.globals().get("__rlm_provide")?;
    provide
        .call::<_, ()>((name, value))
        .catch(ctx)
        .map_err(|e| EngineError::Provide {
            name: name.to_owned(),
            error: e.to_string(),
        })
}

/// Calls a global function without arguments.
pub(super) fn call0(ctx: &Ctx<'_>, name: &str) -> Result<(), EngineError> {
    let function: Function = ctx.globals().get(name)?;
    function
        .call::<_, ()>(())
        .catch(ctx)
        .map_err(|e| EngineError::Call {
            name: name.to_owned(),
            error: e.to_string(),
        })
}
