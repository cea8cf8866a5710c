//! What differs between the languages, and nothing else: how to start a REPL, how to
//! write a value or a snippet, how the REPL echoes a value. The behaviours in the other
//! modules are written against [`Lang`] and hold one set of assertions for both.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rlm_context_store::Store;
use rlm_env::{CodeRepl, ContextShape, ContextSource, EnvConfig, EnvError, EnvKind, Host};
use rlm_env_js::{JsEnv, JsOptions};
use rlm_env_python::{PythonEnv, PythonOptions};
use rlm_test_support::repl::{run, Fixture, EXEC_TIMEOUT};
use rlm_test_support::test_host::{BARRIER_PARTIES, SYNC_PREFIX};
use serde_json::{json, Value};
use tempfile::TempDir;

/// A language of code REPL, as the shared behaviours see it.
pub trait Lang: Sized + 'static {
    /// Its environment.
    type Env: CodeRepl;
    /// How that environment is run.
    type Options: Clone;

    /// What `Environment::kind` says.
    const KIND: EnvKind;
    /// The fence tags whose code it runs.
    const FENCE_TAGS: &'static [&'static str];

    /// The default options (python: the interpreter from `RLM_TEST_PYTHON` if set).
    fn options() -> Self::Options;
    /// The default options with stdout and stderr capped at `bytes` each.
    fn capped(bytes: usize) -> Self::Options;
    /// The default options with contexts loaded in chunks small enough that characters
    /// of every width cross them (python's fast path; js reads whole files).
    fn small_load_chunks() -> Self::Options;
    /// Starts an environment.
    async fn start(
        config: EnvConfig,
        host: Arc<dyn Host>,
        options: Self::Options,
    ) -> Result<Self::Env, EnvError>;
    /// How many times its kernel or engine was replaced.
    fn restarts(env: &Self::Env) -> u32;

    /// `value` written as a literal of the language.
    fn literal(value: &Value) -> String;
    /// What the REPL prints when a cell ends in an expression worth `value`.
    fn echo(value: &Value) -> String;
    /// Code that prints the JSON of `expr` on its last line.
    fn print_json(expr: &str) -> String;
    /// `expr` (a call of a host helper) as a value: awaited where helpers are async
    /// (in parentheses, so a line before it must end its statement).
    fn call(expr: &str) -> String;
    /// The length of `expr`.
    fn len(expr: &str) -> String;
    /// A statement binding the global `name` to `expr`.
    fn assign(name: &str, expr: &str) -> String;
    /// Whether the global `name` is defined, as a boolean expression.
    fn defined(name: &str) -> String;
    /// A call of the raw host bridge that helpers use, with `args` as they are sent.
    fn raw_host_call(method: &str, args: &Value) -> String;
    /// A call of the `ctx_reduce` helper over the results variable `results` with the
    /// reduction's `options` (`{"op": …, …}`), in the language's usual form.
    fn ctx_reduce(results: &str, options: &Value) -> String;

    /// An expression that echoes nothing.
    const NOTHING: &'static str;
    /// Prints `one` and `two` to stdout and `warned` to stderr between them.
    const STDOUT_STDERR: &'static str;
    /// Prints `line 0`, `line 1`, … 10 000 lines.
    const FLOOD: &'static str;
    /// Sets `a = 1`, then calls `f`, which reads the undefined `missing_name`.
    const UNDEFINED_NAME: &'static str;
    /// What the error of [`Lang::UNDEFINED_NAME`] starts with, then what else it shows
    /// (the exception, the frame of `f`).
    const UNDEFINED_NAME_SHOWS: &'static [&'static str];
    /// What marks the REPL's own frames, which errors never show.
    const OWN_FRAMES: &'static str;
    /// Code that does not parse.
    const SYNTAX_ERROR: &'static str;
    /// Raises a `TypeError` saying `bad input`.
    const RAISE_TYPE_ERROR: &'static str;
    /// Binds `answer` to `'forty-two'` and finishes with `FINAL_VAR('answer')`.
    const FINAL_VAR_BY_NAME: &'static str;
    /// Binds `data` to `{n: [1, 2]}` and finishes with `FINAL_VAR(data)`.
    const FINAL_VAR_BY_VALUE: &'static str;
    /// What the error of `FINAL_VAR('nope')` says.
    const NO_VARIABLE_NOPE: &'static str;
    /// Each way to `SUBMIT`, with the value it submits.
    fn submits() -> Vec<(&'static str, Value)>;
    /// Defines `items` (0..100), `name` (500 × `x`) and a function `helper`, after
    /// importing a module where the language has them.
    const ITEMS_NAME_HELPER: &'static str;
    /// The type name of `items`.
    const LIST_TYPE: &'static str;
    /// How the output of `SHOW_VARS()` starts after [`Lang::ITEMS_NAME_HELPER`].
    const SHOW_VARS_START: &'static str;
    /// Rebinds `context` to its upper-case version.
    const UPPER_CONTEXT: &'static str;
    /// `context_chunks` from the second to the third.
    const CHUNKS_1_TO_3: &'static str;
    /// Whether the chunks joined are `context`, as a boolean expression.
    const CHUNKS_JOINED_ARE_CONTEXT: &'static str;
    /// How `context_chunks[4]` of a 4-chunk context ends: `Ok(echo)` or `Err(error)`.
    const CHUNK_PAST_THE_END: Result<&'static str, &'static str>;
    /// `search(context, error\W case-insensitively as a regex, at most 2 results)`.
    const SEARCH_REGEX_AT_MOST_2: &'static str;
    /// `llm_query('hi')` with the context `[1, 2]`, in the language's usual form.
    const QUERY_WITH_CONTEXT: &'static str;
    /// `llm_query('hi', 'ctx')` asking to be split when it does not fit the window.
    const QUERY_SPLIT: &'static str;
    /// `llm_query_parallel` of `a`, (`b` with the context `ctx`) and `fail`.
    const PARALLEL_QUERIES: &'static str;
    /// Calls `llm_query('fail')` and prints the JSON of `[message, is a HostError, is
    /// the language's base error class]`.
    const CATCH_HOST_ERROR: &'static str;
    /// Calls `llm_query('fatal')` inside a try that would print `seen`.
    const CATCH_FATAL: &'static str;
    /// What a refusal of [`Lang::raw_host_call`] starts with (raised or returned).
    const RAW_REFUSAL: &'static str;
    /// `BARRIER_PARTIES` concurrent `llm_query('sync:<i>')` calls, their answers echoed.
    fn concurrent_calls() -> String;
    /// How many `store_ref` host calls one `store.get` and one `store.ref` make.
    const STORE_REF_CALLS: usize;
    /// Prints `before`, then loops forever.
    const PRINT_THEN_LOOP: &'static str;
    /// Loops forever.
    const ENDLESS_LOOP: &'static str;
    /// What the error of code interrupted at the timeout says.
    const INTERRUPTED: &'static str;
    /// What the error of code stopped at the timeout while it awaited a host call says.
    const CALL_INTERRUPTED: &'static str;
}

/// The `python` environment: a real `python3` kernel.
pub struct Python;

/// The `js` environment: the embedded QuickJS engine.
pub struct Js;

impl Lang for Python {
    type Env = PythonEnv;
    type Options = PythonOptions;

    const KIND: EnvKind = EnvKind::Python;
    const FENCE_TAGS: &'static [&'static str] = &["python", "py", "python3"];

    fn options() -> PythonOptions {
        match std::env::var_os("RLM_TEST_PYTHON") {
            Some(python) => PythonOptions::from(PathBuf::from(python)),
            None => PythonOptions::default(),
        }
    }

    fn capped(bytes: usize) -> PythonOptions {
        PythonOptions {
            output_cap_bytes: bytes,
            ..Self::options()
        }
    }

    fn small_load_chunks() -> PythonOptions {
        PythonOptions {
            load_chunk_bytes: Some(37),
            ..Self::options()
        }
    }

    async fn start(
        config: EnvConfig,
        host: Arc<dyn Host>,
        options: PythonOptions,
    ) -> Result<PythonEnv, EnvError> {
        PythonEnv::start(config, host, options).await
    }

    fn restarts(env: &PythonEnv) -> u32 {
        env.restarts()
    }

    fn literal(value: &Value) -> String {
        py_repr(value)
    }

    fn echo(value: &Value) -> String {
        format!("{}\n", py_repr(value))
    }

    fn print_json(expr: &str) -> String {
        format!("import json\nprint(json.dumps({expr}))")
    }

    fn call(expr: &str) -> String {
        expr.to_owned()
    }

    fn len(expr: &str) -> String {
        format!("len({expr})")
    }

    fn assign(name: &str, expr: &str) -> String {
        format!("{name} = {expr}")
    }

    fn defined(name: &str) -> String {
        format!("('{name}' in globals())")
    }

    fn raw_host_call(method: &str, args: &Value) -> String {
        format!(
            "llm_query.__globals__['_host']('{method}', {})",
            py_repr(args)
        )
    }

    fn ctx_reduce(results: &str, options: &Value) -> String {
        let keywords: Vec<String> = options
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, value)| format!("{name}={}", py_repr(value)))
            .collect();
        format!("ctx_reduce('{results}', {})", keywords.join(", "))
    }

    const NOTHING: &'static str = "None";
    const STDOUT_STDERR: &'static str =
        "import sys\nprint('one')\nsys.stderr.write('warned\\n')\nprint('two')";
    // The shell's output is capped too.
    const FLOOD: &'static str =
        "for i in range(10000): print('line', i)\nimport os; os.system('seq 1 100000')";
    const UNDEFINED_NAME: &'static str = "a = 1\ndef f():\n    return missing_name\nf()";
    const UNDEFINED_NAME_SHOWS: &'static [&'static str] = &[
        "Traceback",
        "return missing_name",
        "NameError: name 'missing_name' is not defined",
    ];
    const OWN_FRAMES: &'static str = "rlm-driver";
    const SYNTAX_ERROR: &'static str = "def (:";
    const RAISE_TYPE_ERROR: &'static str = "raise TypeError('bad input')";
    const FINAL_VAR_BY_NAME: &'static str = "answer = 'forty-two'\nFINAL_VAR('answer')";
    const FINAL_VAR_BY_VALUE: &'static str = "data = {'n': [1, 2]}\nFINAL_VAR(data)";
    const NO_VARIABLE_NOPE: &'static str = "no variable named 'nope'";

    fn submits() -> Vec<(&'static str, Value)> {
        vec![
            (
                "SUBMIT({'answer': 42, 'why': ('a', 'b')})",
                json!({"answer": 42, "why": ["a", "b"]}),
            ),
            ("SUBMIT(answer=1)", json!({"answer": 1})),
        ]
    }

    const ITEMS_NAME_HELPER: &'static str =
        "import re\nitems = list(range(100))\nname = 'x' * 500\ndef helper(): pass";
    const LIST_TYPE: &'static str = "list";
    const SHOW_VARS_START: &'static str = "items: list, size 100 = [0, 1, 2";
    const UPPER_CONTEXT: &'static str = "context = context.upper()";
    const CHUNKS_1_TO_3: &'static str = "context_chunks[1:3]";
    const CHUNKS_JOINED_ARE_CONTEXT: &'static str = "''.join(context_chunks) == context";
    const CHUNK_PAST_THE_END: Result<&'static str, &'static str> = Err("IndexError");
    const SEARCH_REGEX_AT_MOST_2: &'static str =
        r"search(context, r'(?i)error\W', regex=True, max_results=2)";
    const QUERY_WITH_CONTEXT: &'static str = "llm_query('hi', context=[1, 2])";
    const QUERY_SPLIT: &'static str = "llm_query('hi', 'ctx', split=True)";
    const PARALLEL_QUERIES: &'static str = "llm_query_parallel(['a', ('b', 'ctx'), 'fail'])";
    const CATCH_HOST_ERROR: &'static str = "import json\ntry:\n    llm_query('fail')\nexcept HostError as e:\n    print(json.dumps([str(e), isinstance(e, HostError), isinstance(e, RuntimeError)]))";
    const CATCH_FATAL: &'static str =
        "try:\n    llm_query('fatal')\nexcept HostError as e:\n    print('seen', e)";
    const RAW_REFUSAL: &'static str = "HostError: ";

    fn concurrent_calls() -> String {
        format!(
            "from concurrent.futures import ThreadPoolExecutor\n\
             with ThreadPoolExecutor({BARRIER_PARTIES}) as pool:\n    \
                 answers = list(pool.map(llm_query, ['{SYNC_PREFIX}%d' % i for i in range({BARRIER_PARTIES})]))\n\
             answers"
        )
    }

    // `store.get` asks for a reference and reads the file itself.
    const STORE_REF_CALLS: usize = 2;
    const PRINT_THEN_LOOP: &'static str = "print('before')\nwhile True:\n    pass";
    const ENDLESS_LOOP: &'static str = "while True:\n    pass";
    const INTERRUPTED: &'static str = "KeyboardInterrupt";
    const CALL_INTERRUPTED: &'static str = "KeyboardInterrupt";
}

impl Lang for Js {
    type Env = JsEnv;
    type Options = JsOptions;

    const KIND: EnvKind = EnvKind::Js;
    const FENCE_TAGS: &'static [&'static str] = &["js", "javascript"];

    fn options() -> JsOptions {
        JsOptions::default()
    }

    fn capped(bytes: usize) -> JsOptions {
        JsOptions {
            output_cap_bytes: bytes,
            ..JsOptions::default()
        }
    }

    fn small_load_chunks() -> JsOptions {
        JsOptions::default()
    }

    async fn start(
        config: EnvConfig,
        host: Arc<dyn Host>,
        options: JsOptions,
    ) -> Result<JsEnv, EnvError> {
        JsEnv::start(config, host, options).await
    }

    fn restarts(env: &JsEnv) -> u32 {
        env.restarts()
    }

    fn literal(value: &Value) -> String {
        format!("({value})")
    }

    fn echo(value: &Value) -> String {
        format!("{value}\n")
    }

    fn print_json(expr: &str) -> String {
        format!("print(JSON.stringify({expr}))")
    }

    fn call(expr: &str) -> String {
        format!("(await {expr})")
    }

    fn len(expr: &str) -> String {
        format!("({expr}).length")
    }

    /// Ends with `;`: a next line that starts with `(` would otherwise call it.
    fn assign(name: &str, expr: &str) -> String {
        format!("var {name} = {expr};")
    }

    fn defined(name: &str) -> String {
        format!("(typeof {name} !== 'undefined')")
    }

    fn raw_host_call(method: &str, args: &Value) -> String {
        let args = Value::String(args.to_string());
        format!("await __rlm_host('{method}', {args})")
    }

    fn ctx_reduce(results: &str, options: &Value) -> String {
        format!("ctx_reduce('{results}', {options})")
    }

    const NOTHING: &'static str = "undefined";
    const STDOUT_STDERR: &'static str = "console.log('one')\nconsole.error('warned')\nprint('two')";
    const FLOOD: &'static str = "for (let i = 0; i < 10000; i++) console.log('line', i)";
    const UNDEFINED_NAME: &'static str = "var a = 1\nfunction f() { return missing_name }\nf()";
    const UNDEFINED_NAME_SHOWS: &'static [&'static str] =
        &["ReferenceError:", "missing_name", "at f"];
    const OWN_FRAMES: &'static str = "<rlm-";
    const SYNTAX_ERROR: &'static str = "function (";
    const RAISE_TYPE_ERROR: &'static str = "throw new TypeError('bad input')";
    const FINAL_VAR_BY_NAME: &'static str = "var answer = 'forty-two'\nFINAL_VAR('answer')";
    const FINAL_VAR_BY_VALUE: &'static str = "var data = {n: [1, 2]}\nFINAL_VAR(data)";
    const NO_VARIABLE_NOPE: &'static str = "no variable named \"nope\"";

    fn submits() -> Vec<(&'static str, Value)> {
        vec![(
            "SUBMIT({answer: 42, why: ['a', 'b'], skipped: undefined})",
            json!({"answer": 42, "why": ["a", "b"]}),
        )]
    }

    const ITEMS_NAME_HELPER: &'static str = "const items = Array.from({length: 100}, (_, i) => i)\nvar name = 'x'.repeat(500)\nfunction helper() {}";
    const LIST_TYPE: &'static str = "Array";
    const SHOW_VARS_START: &'static str = "\"items: Array, size 100 = [0,1,2";
    const UPPER_CONTEXT: &'static str = "context = context.toUpperCase()";
    const CHUNKS_1_TO_3: &'static str = "context_chunks.slice(1, 3)";
    const CHUNKS_JOINED_ARE_CONTEXT: &'static str = "[...context_chunks].join('') === context";
    const CHUNK_PAST_THE_END: Result<&'static str, &'static str> = Ok("");
    const SEARCH_REGEX_AT_MOST_2: &'static str =
        r"search(context, '[Ee][Rr][Rr][Oo][Rr]\\W', true, 2)";
    const QUERY_WITH_CONTEXT: &'static str = "llm_query('hi', [1, 2])";
    const QUERY_SPLIT: &'static str = "llm_query('hi', 'ctx', {split: true})";
    const PARALLEL_QUERIES: &'static str = "llm_query_parallel(['a', ['b', 'ctx'], 'fail'])";
    const CATCH_HOST_ERROR: &'static str = "try { await llm_query('fail') } catch (e) { print(JSON.stringify([e.message, e instanceof HostError, e instanceof Error])) }";
    const CATCH_FATAL: &'static str =
        "try { await llm_query('fatal') } catch (e) { console.log('seen', e.message) }";
    const RAW_REFUSAL: &'static str = "";

    fn concurrent_calls() -> String {
        format!(
            "await Promise.all(Array.from({{length: {BARRIER_PARTIES}}}, (_, i) => llm_query('{SYNC_PREFIX}' + i)))"
        )
    }

    const STORE_REF_CALLS: usize = 1;
    const PRINT_THEN_LOOP: &'static str = "print('before')\nwhile (true) {}";
    const ENDLESS_LOOP: &'static str = "while (true) {}";
    const INTERRUPTED: &'static str = "interrupted";
    const CALL_INTERRUPTED: &'static str = "stopped at the timeout";
}

/// Python's `repr` of a JSON value, which is also a Python literal of it.
fn py_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => py_str(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(py_repr).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{}: {}", py_str(k), py_repr(v)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
    }
}

/// Python's `repr` of a str: single quotes unless the text has one and no double.
fn py_str(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::from(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Writes `values` into a fresh store and starts a REPL whose `context` is them.
pub async fn start<L: Lang>(
    values: &[Value],
    shape: ContextShape,
    timeout: Duration,
    options: L::Options,
) -> Fixture<L::Env> {
    Fixture::start(values, shape, timeout, |config, host| {
        L::start(config, host, options)
    })
    .await
}

/// Starts a REPL over `store` whose `context` is `context`.
pub async fn start_over<L: Lang>(
    dir: TempDir,
    store: Arc<Store>,
    context: Option<ContextSource>,
    options: L::Options,
) -> Fixture<L::Env> {
    Fixture::start_over(dir, store, context, EXEC_TIMEOUT, |config, host| {
        L::start(config, host, options)
    })
    .await
}

/// A REPL without a context.
pub async fn plain<L: Lang>() -> Fixture<L::Env> {
    start::<L>(&[], ContextShape::Single, EXEC_TIMEOUT, L::options()).await
}

/// A REPL whose `context` is `value`.
pub async fn with_context<L: Lang>(value: Value) -> Fixture<L::Env> {
    start::<L>(&[value], ContextShape::Single, EXEC_TIMEOUT, L::options()).await
}

/// The JSON of `expr`.
pub async fn json_of<L: Lang>(env: &mut L::Env, expr: &str) -> Value {
    let stdout = run(env, &L::print_json(expr)).await;
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// What a refused call said, whether it was raised or returned.
pub fn said(outcome: &rlm_env::ExecOutcome) -> String {
    format!(
        "{}{}",
        outcome.error.as_deref().unwrap_or_default(),
        outcome.stdout
    )
}

/// The helper the python cases rely on writes what Python would.
#[test]
fn python_literals_are_reprs() {
    assert_eq!(
        py_repr(&json!({"a": [1, true, null], "b'": "it's \"x\"\n\\"})),
        r#"{'a': [1, True, None], "b'": 'it\'s "x"\n\\'}"#
    );
}
