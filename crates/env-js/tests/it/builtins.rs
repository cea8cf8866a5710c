//! The `js` environment's own plumbing against model code that replaces built-ins
//! (issue 22, item 5): after `Array.prototype.map`, `Array.prototype.join`,
//! `JSON.parse`, `JSON.stringify` or the `String.prototype` methods the output path
//! uses are replaced, printing, the echo, `store.set`/`store.get` round trips and the
//! helpers still work as before, while the model's own code sees its own replacements.
//! What model code adds to a built-in prototype is in `prototypes.rs`.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::sync::Arc;
use std::time::Duration;

use rlm_context_store::Store;
use rlm_env::Host;
use rlm_env::{CodeRepl, EnvConfig};
use rlm_env_js::{JsEnv, JsOptions};
use serde_json::json;
use tempfile::TempDir;

use rlm_test_support::test_host::TestHost;

struct Fixture {
    env: JsEnv,
    host: Arc<TestHost>,
    store: Arc<Store>,
    _dir: TempDir,
}

async fn plain() -> Fixture {
    let dir = TempDir::new().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let host = TestHost::new(Arc::clone(&store));
    let config = EnvConfig {
        data_dir: dir.path().to_owned(),
        context: None,
        query: "q".into(),
        history: Vec::new(),
        exec_timeout: Duration::from_secs(60),
        depth: 0,
        max_depth: 2,
        sub_context_chars: 100_000,
        lazy_above: None,
    };
    let env = JsEnv::start(
        config,
        Arc::clone(&host) as Arc<dyn Host>,
        JsOptions::default(),
    )
    .await
    .unwrap();
    Fixture {
        env,
        host,
        store,
        _dir: dir,
    }
}

/// Runs code that must not fail; returns its stdout.
async fn run(env: &mut JsEnv, code: &str) -> String {
    let outcome = env.execute(code).await.unwrap();
    assert_eq!(outcome.error, None, "code failed: {code}\n{outcome:?}");
    outcome.stdout
}

/// After `attack`, everything the host sees is as it was before it.
async fn plumbing_survives(attack: &str) {
    let mut f = plain().await;
    run(&mut f.env, attack).await;
    // Printing: several arguments, an object, an array.
    assert_eq!(
        run(&mut f.env, "console.log('a', 1, {b: [2, 3]}, [4, 'c'])").await,
        "a 1 {\"b\":[2,3]} [4,\"c\"]\n",
        "console.log after: {attack}"
    );
    assert_eq!(
        run(&mut f.env, "print('x y')").await,
        "x y\n",
        "print after: {attack}"
    );
    // The echo of the last expression.
    assert_eq!(
        run(&mut f.env, "({k: [1, 'two'], s: 'text'})")
            .await
            .trim_end(),
        "{\"k\":[1,\"two\"],\"s\":\"text\"}",
        "echo after: {attack}"
    );
    assert_eq!(
        run(&mut f.env, "'quoted'").await.trim_end(),
        "\"quoted\"",
        "string echo after: {attack}"
    );
    // store.set stores exactly the value, store.get returns it.
    run(
        &mut f.env,
        "var stored = await store.set('kept', {n: 1, list: ['a', 'b'], nested: {t: true}})",
    )
    .await;
    assert_eq!(
        *f.store.get("kept").unwrap(),
        json!({"n": 1, "list": ["a", "b"], "nested": {"t": true}}),
        "store.set after: {attack}"
    );
    assert_eq!(
        run(
            &mut f.env,
            "var back = await store.get('kept'); print(back.n, back.list.length, back.nested.t)"
        )
        .await,
        "1 2 true\n",
        "store.get after: {attack}"
    );
    // A helper call, and one whose arguments are an array.
    assert_eq!(
        run(&mut f.env, "print(await llm_query('hello'))").await,
        "answer to hello\n",
        "llm_query after: {attack}"
    );
    assert_eq!(
        run(
            &mut f.env,
            "print((await llm_query_parallel(['p', 'q'])).length)"
        )
        .await,
        "2\n",
        "llm_query_parallel after: {attack}"
    );
    assert_eq!(
        f.host.calls("llm_query").last().unwrap()["prompt"],
        json!("hello")
    );
    // Errors still read as errors.
    let outcome = f.env.execute("throw new Error('mine')").await.unwrap();
    assert!(
        outcome
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("mine"),
        "error after: {attack}: {outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_array_map_leaves_the_plumbing_intact() {
    plumbing_survives("Array.prototype.map = function () { return ['MAPPED']; }").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_array_join_leaves_the_plumbing_intact() {
    plumbing_survives("Array.prototype.join = function () { return 'JOINED'; }").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrapping_json_parse_leaves_the_plumbing_intact() {
    plumbing_survives(
        "const realParse = JSON.parse; JSON.parse = (t) => { const v = realParse(t); \
         if (v && typeof v === 'object') { v.n = 666; v.injected = true; if (v.value) v.value = 'EVIL'; } return v; }",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_json_stringify_leaves_the_plumbing_intact() {
    plumbing_survives("JSON.stringify = function () { throw new Error('no stringify for you'); }")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_the_string_methods_of_the_output_path_leaves_it_intact() {
    plumbing_survives(
        "for (const name of ['slice', 'toString', 'concat', 'startsWith', 'includes', 'trim', \
         'indexOf', 'split', 'replace', 'padEnd', 'repeat']) { \
           String.prototype[name] = function () { return 'STRING-' + name; }; } \
         String = function () { return 'S'; }; \
         Object.fromEntries = () => ({hijacked: true}); Array.from = () => ['FROM']; \
         Function.prototype.call = function () { return 'CALLED'; }; \
         Function.prototype.apply = function () { return 'APPLIED'; }; \
         try { Object.prototype.toJSON = undefined; } catch (e) {}",
    )
    .await;
}

/// Replacing a built-in changes the model's own world. Adding to a built-in prototype
/// is refused (issue 49, item 14: `prototypes.rs`), with why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_still_changes_its_own_world() {
    let mut f = plain().await;
    run(
        &mut f.env,
        "Array.prototype.includes = function () { return 'includes of ' + this.length; };\n\
         Array.prototype.join = function () { return 'mine'; };\n\
         JSON.stringify = () => 'my stringify';",
    )
    .await;
    assert_eq!(
        run(
            &mut f.env,
            "print([1, 2].includes(3), [1].join(), JSON.stringify({}))"
        )
        .await,
        "includes of 2 mine my stringify\n"
    );
    let added = f
        .env
        .execute("Array.prototype.foo = function () { return 'foo'; }")
        .await
        .unwrap();
    assert!(
        added
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("No property can be added to a built-in prototype"),
        "{added:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_the_preludes_own_functions_changes_nothing() {
    plumbing_survives(
        "for (const name of ['__rlm_json', '__rlm_write', '__rlm_host', '__rlm_call', \
         '__rlm_plain', '__rlm_render', '__rlm_user_variables']) { \
           try { globalThis[name] = () => 'HIJACKED'; } catch (e) {} \
           try { Object.defineProperty(globalThis, name, {value: () => 'HIJACKED'}); } catch (e) {} }",
    )
    .await;
}
