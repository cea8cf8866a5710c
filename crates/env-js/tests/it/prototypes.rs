//! Properties model code puts on the built-in prototypes (issue 49, item 14). A getter
//! on `Object.prototype.value` broke every later cell: the engine's completion record
//! of a cell is a plain object whose `value` it assigns. A `then` there made every
//! object a thenable (a cell's completion record too), a `toJSON` reshaped what the
//! host was sent, setters caught the arguments the helpers assemble, and a replaced
//! array iterator broke every helper that takes a list.
//!
//! Each test runs one attack cell, then checks that later cells and every helper work
//! as before ([`helpers_work`]): printing, the echo, the store, each host helper (with
//! the exact arguments the host received), the final answers, the variable listing and
//! the context helpers.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::time::Duration;

use rlm_env::{CodeRepl, ContextShape, FinalAnswer};
use rlm_env_js::{JsEnv, JsOptions};
use rlm_test_support::repl::{outcome, run};
use serde_json::{json, Value};

use crate::support::{fixture_with, JsFixture};

/// Long enough for any cell here on a loaded machine; short enough that a cell hung
/// by a hijacked `then` fails the test in seconds rather than a minute.
const CELL_TIMEOUT: Duration = Duration::from_secs(20);

/// The context every test starts with.
const CONTEXT: &str = "alpha line\nthe needle is here\nomega line\n";

async fn engine() -> JsFixture {
    fixture_with(
        &[json!(CONTEXT)],
        ContextShape::Single,
        CELL_TIMEOUT,
        JsOptions::default(),
    )
    .await
}

/// The arguments of the last call of `method` the host received.
fn last_call(f: &JsFixture, method: &str) -> Value {
    f.host
        .calls(method)
        .last()
        .cloned()
        .unwrap_or_else(|| panic!("no {method} call reached the host"))
}

/// The final answer a cell of `code` gives.
async fn final_of(env: &mut JsEnv, code: &str) -> Option<FinalAnswer> {
    let done = outcome(env, code).await;
    assert_eq!(done.error, None, "{code}: {done:?}");
    done.final_answer
}

/// Everything the host sees works as it did before `after` ran.
async fn helpers_work(f: &mut JsFixture, after: &str) {
    let env = &mut f.env;
    // Printing, the echo.
    assert_eq!(
        run(env, "console.log('a', 1, {b: [2, 3]}, [4, 'c'])").await,
        "a 1 {\"b\":[2,3]} [4,\"c\"]\n",
        "console.log after {after}"
    );
    assert_eq!(
        run(env, "({k: [1, 'two'], s: 'text'})").await.trim_end(),
        "{\"k\":[1,\"two\"],\"s\":\"text\"}",
        "echo after {after}"
    );
    assert_eq!(
        run(env, "[1, 'x']").await.trim_end(),
        "[1,\"x\"]",
        "{after}"
    );
    assert_eq!(
        run(env, "'quoted'").await.trim_end(),
        "\"quoted\"",
        "{after}"
    );
    // The store, each way.
    run(
        env,
        "var stored = await store.set('kept', {n: 1, list: ['a', 'b'], nested: {t: true}})",
    )
    .await;
    assert_eq!(
        *f.store.get("kept").unwrap(),
        json!({"n": 1, "list": ["a", "b"], "nested": {"t": true}}),
        "store.set after {after}"
    );
    let env = &mut f.env;
    assert_eq!(
        run(
            env,
            "var back = await store.get('kept'); print(back.n, back.list.length, back.nested.t)"
        )
        .await,
        "1 2 true\n",
        "store.get after {after}"
    );
    assert_eq!(
        run(
            env,
            "var r = await store.ref('kept'); var all = await store.list(); print(r.key, all.length > 0)"
        )
        .await,
        "kept true\n",
        "store.ref/list after {after}"
    );
    // Each host helper: its answer, and exactly the arguments it sent.
    assert_eq!(
        run(env, "print(await llm_query('hello', {c: [1]}))").await,
        "answer to hello with {\"c\":[1]}\n",
        "llm_query after {after}"
    );
    assert_eq!(
        last_call(f, "llm_query"),
        json!({"prompt": "hello", "context": {"c": [1]}})
    );
    let env = &mut f.env;
    assert_eq!(
        run(
            env,
            "var answers = await llm_query_parallel(['p', ['q', 'ctx']]); print(answers.length, answers[0], answers[1])"
        )
        .await,
        "2 answer to p answer to q\n",
        "llm_query_parallel after {after}"
    );
    assert_eq!(
        last_call(f, "llm_query_parallel"),
        json!({"prompts": [{"prompt": "p"}, {"prompt": "q", "context": "ctx"}]})
    );
    let env = &mut f.env;
    assert_eq!(
        run(env, "print(await summarize('abcd'))").await,
        "summary of 4 chars\n",
        "summarize after {after}"
    );
    // The test host serves no sub-runs or agents: the call arrives, its refusal is a
    // HostError.
    for (code, method, args) in [
        (
            "await sub_rlm('q', {a: 1})",
            "sub_rlm",
            json!({"query": "q", "context": {"a": 1}}),
        ),
        (
            "await sub_rlm_parallel([['q1', 'c1'], 'q2'])",
            "sub_rlm_parallel",
            json!({"jobs": [{"query": "q1", "context": "c1"}, {"query": "q2"}]}),
        ),
        (
            "await spawn_agent('t', ['kept'])",
            "spawn_agent",
            json!({"task": "t", "refs": ["kept"]}),
        ),
        (
            "await spawn_agents([['t1', ['kept']], 't2'])",
            "spawn_agents",
            json!({"jobs": [{"task": "t1", "refs": ["kept"]}, {"task": "t2", "refs": []}]}),
        ),
    ] {
        let env = &mut f.env;
        let code = format!("try {{ {code} }} catch (e) {{ print(e instanceof HostError) }}");
        assert_eq!(run(env, &code).await, "true\n", "{method} after {after}");
        assert_eq!(last_call(f, method), args, "{method} after {after}");
    }
    // Final answers.
    let env = &mut f.env;
    assert_eq!(
        final_of(env, "var x = {a: [1, 2]}; FINAL_VAR('x')").await,
        Some(FinalAnswer::Var {
            name: "x".into(),
            value: "{\"a\":[1,2]}".into()
        }),
        "FINAL_VAR after {after}"
    );
    assert_eq!(
        final_of(env, "SUBMIT({answer: 42, list: ['a']})").await,
        Some(FinalAnswer::Submit {
            value: json!({"answer": 42, "list": ["a"]})
        }),
        "SUBMIT after {after}"
    );
    // The variable listing.
    let shown = run(env, "print(SHOW_VARS())").await;
    assert!(
        shown.contains("x: Object, size 1 = {\"a\":[1,2]}"),
        "SHOW_VARS after {after}: {shown}"
    );
    let variables = env.variables().await.unwrap();
    assert!(
        variables
            .iter()
            .any(|v| v.name == "x" && v.type_name == "Object"),
        "variables after {after}: {variables:?}"
    );
    // The context helpers.
    assert_eq!(
        run(env, "print(peek(context, 0, 5))").await,
        "alpha\n",
        "peek after {after}"
    );
    assert_eq!(
        run(
            env,
            "var hits = search(context, 'needle'); print(hits.length, hits[0].line, hits[0].match)"
        )
        .await,
        "1 2 needle\n",
        "search after {after}"
    );
    assert_eq!(
        run(
            env,
            "var best = find_relevant(context.split('\\n'), 'needle', 1); print(best.length, best[0].index)"
        )
        .await,
        "1 1\n",
        "find_relevant after {after}"
    );
    assert_eq!(
        run(env, "print(context_chunks.length, context_chunks[0])").await,
        "5 alpha line\n",
        "context_chunks after {after}"
    );
    // Errors still read as errors, and a later cell runs.
    let failed = outcome(env, "throw new Error('mine')").await;
    assert!(
        failed.error.as_deref().unwrap_or_default().contains("mine"),
        "error after {after}: {failed:?}"
    );
    assert_eq!(run(env, "1 + 1").await.trim_end(), "2", "{after}");
}

/// Names the engine or the prelude reads or assigns on objects they make or are
/// given, each tried on every built-in prototype below (where it is not there yet).
const NAMES: &str = "['value', 'then', 'toJSON', 'get', 'set', 'writable', 'enumerable', \
    'configurable', 'done', 'next', 'ok', 'error', 'prompt', 'context', 'split', 'query', \
    'jobs', 'task', 'refs', 'answer', 'pieces', 'results', 'note', 'last', 'key', 'kind', \
    'name', 'index', 'offset', 'preview', 'match', 'line', '0', '1', Symbol.iterator, \
    Symbol.asyncIterator, Symbol.toPrimitive, Symbol.toStringTag, Symbol.isConcatSpreadable]";

/// The built-in prototypes the attacks write to.
const PROTOTYPES: &str = "[Object.prototype, Array.prototype, Function.prototype, \
    String.prototype, Number.prototype, Boolean.prototype, Symbol.prototype, \
    Promise.prototype, Error.prototype, RegExp.prototype, Map.prototype, Set.prototype, \
    Date.prototype, Object.getPrototypeOf([][Symbol.iterator]()), \
    Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]())), \
    Object.getPrototypeOf(async function () {}), Object.getPrototypeOf(function* () {})]";

/// A cell that defines `property` (a descriptor expression over `name`) for every
/// name of [`NAMES`] on every prototype of [`PROTOTYPES`] that lacks it, and prints
/// how many definitions took. Loops by index: its own completion may be hijacked.
fn define_everywhere(property: &str) -> String {
    format!(
        "var __names = {NAMES}; var __protos = {PROTOTYPES}; var __took = 0;\n\
         for (var i = 0; i < __protos.length; i++) for (var j = 0; j < __names.length; j++) {{\n\
           var name = __names[j];\n\
           if (Object.getOwnPropertyDescriptor(__protos[i], name)) continue;\n\
           try {{ Object.defineProperty(__protos[i], name, {property}); __took++; }} catch (e) {{}}\n\
         }}\n\
         print('took', __took);"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throwing_getters_and_setters_on_every_prototype_break_no_later_cell() {
    let mut f = engine().await;
    let attack = define_everywhere(
        "{ __proto__: null, get() { throw new Error('HIJACKED get ' + String(name)); }, \
           set(v) { throw new Error('HIJACKED set ' + String(name)); }, configurable: true }",
    );
    let done = outcome(&mut f.env, &attack).await;
    assert!(
        done.stdout.contains("took 0"),
        "the prototypes take no new property: {done:?}"
    );
    helpers_work(&mut f, "getters and setters").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_named_like_what_the_engine_reads_break_no_later_cell() {
    let mut f = engine().await;
    // A `then` that never settles, a `toJSON` that renames everything, plain values.
    let attack = define_everywhere(
        "{ __proto__: null, value: name === 'then' ? function (resolve) {} : name === 'toJSON' ? \
             function () { return 'HIJACKED'; } : 'HIJACKED', writable: true, configurable: true }",
    );
    outcome(&mut f.env, &attack).await;
    helpers_work(&mut f, "values").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assignment_adding_to_a_prototype_is_refused_and_says_why() {
    let mut f = engine().await;
    let done = outcome(
        &mut f.env,
        "try { Object.prototype.then = function (resolve) {}; } catch (e) {}\n\
         try { Array.prototype.toJSON = function () { return 'HIJACKED'; }; } catch (e) {}\n\
         Array.prototype.sum = function () { return 1; };",
    )
    .await;
    let error = done.error.unwrap_or_default();
    assert!(
        error.starts_with("TypeError: object is not extensible")
            && error.contains("line 3: Array.prototype.sum")
            && error.contains("No property can be added to a built-in prototype")
            && error.contains("Write a function instead"),
        "{error}"
    );
    helpers_work(&mut f, "assignments").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_what_iteration_and_await_read_breaks_no_helper() {
    let mut f = engine().await;
    let done = outcome(
        &mut f.env,
        "var boom = { __proto__: null, get() { throw new Error('HIJACKED'); }, configurable: true };\n\
         var arrayIterator = Object.getPrototypeOf([][Symbol.iterator]());\n\
         var targets = [[Array.prototype, Symbol.iterator], [arrayIterator, 'next'], \
           [Promise.prototype, 'then'], [Promise.prototype, 'constructor'], [Promise, Symbol.species], \
           [Object.prototype, 'constructor'], [Object.prototype, 'toString'], \
           [Object.prototype, 'valueOf'], [Object.prototype, 'hasOwnProperty'], \
           [Object.prototype, '__proto__'], [Function.prototype, 'toString'], \
           [Error.prototype, 'name'], [Error.prototype, 'toString'], [Map.prototype, 'entries'], \
           [Set.prototype, 'values'], [String.prototype, Symbol.iterator]];\n\
         for (var i = 0; i < targets.length; i++) {\n\
           try { Object.defineProperty(targets[i][0], targets[i][1], boom); } catch (e) {}\n\
         }",
    )
    .await;
    assert_eq!(done.error, None, "{done:?}");
    helpers_work(&mut f, "replaced iteration and await").await;
}
