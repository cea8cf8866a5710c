//! Contexts that are files referenced by the store, read by a real `python3` kernel:
//! whole (a real `str`, decoded straight from the file) or lazily (a memory-mapped
//! `LazyText`), and refused clearly once the file changed.
//!
//! The lazy semantics are checked against Python's own: the kernel reads the file
//! into a real `str` too and compares every operation on both, on text that crosses
//! the lazy index's 1 MiB blocks with multi-byte characters.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rlm_context_store::{SetOptions, Store};
use rlm_env::{CodeRepl, ContextShape, ContextSource, EnvConfig, Host};
use rlm_env_python::{PythonEnv, PythonOptions};
use rlm_test_support::repl::run;
use rlm_test_support::test_host::TestHost;
use tempfile::TempDir;

use crate::support::python_options;

struct Referenced {
    env: PythonEnv,
    file: std::path::PathBuf,
    _dir: TempDir,
}

/// A kernel whose `context` is a `file` variable referring to a file holding `text`;
/// files larger than `lazy_above` bytes are lazy.
async fn referenced(text: &str, lazy_above: Option<u64>) -> Referenced {
    referenced_with(text, lazy_above, python_options()).await
}

async fn referenced_with(
    text: &str,
    lazy_above: Option<u64>,
    options: PythonOptions,
) -> Referenced {
    let dir = TempDir::new().unwrap();
    let file = dir.path().join("input.log");
    std::fs::write(&file, text).unwrap();
    let env = kernel_over(&dir.path().join("data"), &file, lazy_above, options, || {}).await;
    Referenced {
        env,
        file,
        _dir: dir,
    }
}

/// Starts a kernel whose `context` is the `file` variable `ctx` of a store in
/// `data_dir`, referring to `file`; `before_start` runs between the reference and the
/// kernel's start (to change the file under it).
async fn kernel_over(
    data_dir: &Path,
    file: &Path,
    lazy_above: Option<u64>,
    options: PythonOptions,
    before_start: impl FnOnce(),
) -> PythonEnv {
    let store = Arc::new(Store::open(data_dir).unwrap());
    let (_, reference) = store
        .set_file_reference("ctx", file, SetOptions::default())
        .unwrap();
    before_start();
    let context = ContextSource {
        shape: ContextShape::Single,
        files: vec![store.path_of("ctx").unwrap()],
        keys: vec!["ctx".into()],
        chunk_chars: 1000,
        chars: None,
        max_char: None,
        referenced: vec![reference.path],
    };
    let config = EnvConfig {
        data_dir: store.data_dir().to_owned(),
        context: Some(context),
        query: "q".into(),
        history: Vec::new(),
        exec_timeout: Duration::from_secs(120),
        depth: 0,
        max_depth: 1,
        sub_context_chars: 100_000,
        lazy_above,
    };
    let host = TestHost::new(Arc::clone(&store));
    PythonEnv::start(config, host as Arc<dyn Host>, options)
        .await
        .unwrap()
}

/// About 2.6 MB over three lazy blocks: ASCII lines, then lines with 2-, 3- and 4-byte
/// characters (so characters straddle block boundaries), and no final newline.
fn mixed_text() -> String {
    let mut text = String::new();
    for i in 0..40_000 {
        text.push_str(&format!("{i:06} ascii line with words\n"));
    }
    for i in 0..30_000 {
        text.push_str(&format!("{i:06} é ünïcödé → ☃ 𝄞 mixed\n"));
    }
    text.push_str("last line NEEDLE-42 without newline");
    text
}

fn escape(path: &Path) -> String {
    serde_json::to_string(&path.display().to_string()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_referenced_file_is_a_real_str_read_from_the_file() {
    let mut r = referenced("héllo\nwörld\n", Some(1 << 30)).await;
    let out = run(
        &mut r.env,
        "print(type(context).__name__, len(context), repr(context[:5]), context.count('\\n'))",
    )
    .await;
    assert_eq!(out, "str 12 'héllo' 2\n");
    let info = r.env.wait_ready().await.unwrap();
    assert_eq!(info.load_method, "file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_loaded_whole_in_small_chunks_is_exactly_its_text() {
    // Backslashes and escape-like text stay as they are (a file is not JSON), and
    // characters of every width cross the 29-byte chunks.
    let mut text = mixed_text();
    text.push_str("\nC:\\temp\\new \\u0041 \\n \"quoted\" \\\\ end é");
    let options = PythonOptions {
        load_chunk_bytes: Some(29),
        ..python_options()
    };
    let mut r = referenced_with(&text, Some(1 << 30), options).await;
    let check = format!(
        "real = open({}, encoding='utf-8', newline='').read()\nprint(type(context).__name__, context == real, len(context) == len(real))",
        escape(&r.file)
    );
    assert_eq!(run(&mut r.env, &check).await, "str True True\n");
    assert_eq!(r.env.wait_ready().await.unwrap().load_method, "file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_context_behaves_like_the_str_it_stands_for() {
    let text = mixed_text();
    let mut r = referenced(&text, Some(0)).await;
    let check = format!(
        r#"
import random
real = open({path}, encoding="utf-8", newline="").read()
lazy = context
assert type(lazy).__name__ == "LazyText", type(lazy)
assert len(lazy) == len(real), (len(lazy), len(real))
rng = random.Random(7)
n = len(real)
for _ in range(400):
    a, b = rng.randrange(-n - 5, n + 5), rng.randrange(-n - 5, n + 5)
    assert lazy[a:b] == real[a:b], (a, b)
    if -n <= a < n:
        assert lazy[a] == real[a], a
    step = rng.choice([2, 3, -1, -7])
    lo, hi = sorted((abs(a) % n, abs(b) % n))
    hi = min(hi, lo + 5000)
    assert lazy[lo:hi:step] == real[lo:hi:step], (lo, hi, step)
for bad in (n, -n - 1):
    try:
        lazy[bad]
    except IndexError:
        pass
    else:
        raise AssertionError(f"no IndexError at {{bad}}")
for sub in ["NEEDLE-42", "é ü", "𝄞 mixed\n0", "\n", "zz-not-there", "ascii", "☃"]:
    assert (sub in lazy) == (sub in real), sub
    assert lazy.count(sub) == real.count(sub), sub
    assert lazy.find(sub) == real.find(sub), sub
    assert lazy.rfind(sub) == real.rfind(sub), sub
    assert lazy.find(sub, 1000, 2_000_000) == real.find(sub, 1000, 2_000_000), sub
    assert lazy.count(sub, -50_000) == real.count(sub, -50_000), sub
assert lazy.count("aa") == real.count("aa") and lazy.count("") == real.count("")
assert lazy.startswith("000000 ascii") and lazy.endswith("without newline")
assert list(lazy) == real.splitlines(keepends=True)
lines = lazy.splitlines()
assert len(lines) == len(real.splitlines())
assert lines[0] == real.splitlines()[0] and lines[-1] == real.splitlines()[-1]
assert lines[45_000] == real.splitlines()[45_000]
assert lines[39_998:40_003] == real.splitlines()[39_998:40_003]
assert list(lazy.split("\n")) == real.split("\n")
assert lazy.split(" ", 3) == real.split(" ", 3)
assert list(lazy.iter_split("→")) == real.split("→")
assert [m.group(0) for _, m in lazy.finditer(r"\d{{6}} é")][:3] == ["000000 é", "000001 é", "000002 é"]
assert [o for o, _ in lazy.finditer("NEEDLE-\\d+")] == [real.find("NEEDLE-42")]
hits = search(lazy, "NEEDLE-42")
want = search(real, "NEEDLE-42")
assert hits == want, (hits, want)
assert search(lazy, r"0299\d\d é", regex=True, max_results=3) == search(real, r"0299\d\d é", regex=True, max_results=3)
assert peek(lazy, 10, 40) == real[10:40]
assert len(context_chunks) == -(-n // 1000) and context_chunks[1234] == real[1_234_000:1_235_000]
assert lazy.upper()[:20] == real.upper()[:20]
assert str(lazy) == real and lazy == real
print("same")
"#,
        path = escape(&r.file)
    );
    assert_eq!(run(&mut r.env, &check).await, "same\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn splitting_a_lazy_context_whole_says_to_iterate_and_oversized_loads_say_why() {
    let mut r = referenced(&mixed_text(), Some(0)).await;
    // The variable inventory after each cell does not read the file to size a view.
    run(&mut r.env, "c = context\nlines = context.splitlines()").await;
    let vars = r.env.variables().await.unwrap();
    assert!(
        vars.iter()
            .any(|v| v.name == "c" && v.type_name == "LazyText"),
        "{vars:?}"
    );
    assert_eq!(run(&mut r.env, "print(c._indexed())").await, "False\n");
    let outcome = r.env.execute("context.split(' ')").await.unwrap();
    let error = outcome.error.unwrap_or_default();
    assert!(
        error.contains("LazyContextError") && error.contains("iterate instead"),
        "{error}"
    );
    // Within the same kernel, pretend its memory is small: loading it whole is refused
    // with the way out, and the kernel goes on.
    let outcome = r
        .env
        .execute("LazyText._whole.__globals__['_MEMORY_BYTES'] = 1 << 20\nstr(context)")
        .await
        .unwrap();
    let error = outcome.error.unwrap_or_default();
    assert!(
        error.contains("MemoryError") && error.contains("--kernel-memory-mb"),
        "{error}"
    );
    assert_eq!(run(&mut r.env, "print(context[:6])").await, "000000\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_file_is_refused_with_what_changed_and_what_to_do() {
    let mut r = referenced(&mixed_text(), Some(0)).await;
    assert_eq!(run(&mut r.env, "print(context[:6])").await, "000000\n");
    std::fs::write(&r.file, "something else entirely\n").unwrap();
    let outcome = r
        .env
        .execute("for line in context:\n    pass")
        .await
        .unwrap();
    let error = outcome.error.unwrap_or_default();
    assert!(
        error.contains("ContextChanged")
            && error.contains("changed since the run referenced it")
            && error.contains("size went from")
            && error.contains("--copy-context"),
        "{error}"
    );

    // Loaded whole, a file changed before the kernel reads it fails the start clearly.
    let dir = TempDir::new().unwrap();
    let file = dir.path().join("small.txt");
    std::fs::write(&file, "before\n").unwrap();
    let change = || std::fs::write(&file, "after, longer\n").unwrap();
    let data = dir.path().join("data");
    let mut env = kernel_over(&data, &file, Some(1 << 30), python_options(), change).await;
    let error = env.wait_ready().await.unwrap_err().to_string();
    assert!(
        error.contains("changed since the run referenced it")
            && error.contains("size went from 7 to 14"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_is_not_utf8_is_named_with_its_offset() {
    let mut text = "ok line\n".repeat(10);
    text.push_str("then \u{0}");
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(&[0xff, b'\n']);
    let dir = TempDir::new().unwrap();
    let file = dir.path().join("bin.dat");
    std::fs::write(&file, &bytes).unwrap();
    let data = dir.path().join("data");
    let mut env = kernel_over(&data, &file, Some(0), python_options(), || {}).await;
    let outcome = env.execute("len(context)").await.unwrap();
    let error = outcome.error.unwrap_or_default();
    assert!(
        error.contains("not valid UTF-8 at byte offset 86"),
        "{error}"
    );

    // Loaded whole, the kernel cannot start, and says why.
    let data = dir.path().join("data2");
    let mut env = kernel_over(&data, &file, Some(1 << 30), python_options(), || {}).await;
    let error = env.wait_ready().await.unwrap_err().to_string();
    assert!(
        error.contains("not valid UTF-8 at byte offset 86"),
        "{error}"
    );
}

/// The lazy view against Python's own str on many small random texts, with the index
/// block, scan window and regex overlap shrunk to a few bytes so that every boundary
/// case (a character split by a block, a match straddling a window, an empty file, a
/// file of one multi-byte character) is crossed many times. Found a real defect:
/// `finditer` returned a match overlapping the previous one when that one ran past a
/// window's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_context_with_tiny_blocks_matches_str_on_random_texts() {
    let mut r = referenced("seed", Some(0)).await;
    let code = format!(
        r#"
import os, random, re
g = LazyText._index_one.__globals__
path = {path}
alphabet = ['a', 'b', '\n', 'é', '☃', '𝄞', ' ', 'x', '\\']
rng = random.Random(11)
checked = 0
for trial in range(300):
    g['_BLOCK'] = rng.choice([1, 2, 3, 5, 7, 16])
    g['_WINDOW'] = rng.choice([4, 5, 8, 13])
    g['_OVERLAP'] = rng.choice([4, 6, 8])
    real = ''.join(rng.choice(alphabet) for _ in range(rng.randrange(0, 50)))
    with open(path, 'w', encoding='utf-8', newline='') as f:
        f.write(real)
    st = os.stat(path)
    lazy = LazyText({{'path': path, 'size': st.st_size, 'mtimeNs': st.st_mtime_ns,
                     'inode': st.st_ino, 'device': st.st_dev}})
    n = len(real)
    assert len(lazy) == n, (real, len(lazy))
    for _ in range(15):
        a, b = rng.randrange(-n - 3, n + 3), rng.randrange(-n - 3, n + 3)
        assert lazy[a:b] == real[a:b], (real, a, b)
        if -n <= a < n:
            assert lazy[a] == real[a], (real, a)
        sub = ''.join(rng.choice(alphabet) for _ in range(rng.randrange(1, 3)))
        assert lazy.find(sub) == real.find(sub), (real, sub)
        assert lazy.rfind(sub) == real.rfind(sub), (real, sub)
        assert lazy.count(sub) == real.count(sub), (real, sub)
        assert lazy.count(sub, a, b) == real.count(sub, a, b), (real, sub, a, b)
        assert (sub in lazy) == (sub in real), (real, sub)
        checked += 1
    assert list(lazy) == real.splitlines(keepends=True), real
    lines = real.split('\n')
    if lines and lines[-1] == '':
        lines = lines[:-1]
    assert list(lazy.splitlines()) == lines and len(lazy.splitlines()) == len(lines), real
    assert [lazy.splitlines()[i] for i in range(len(lines))] == lines, real
    assert list(lazy.split('\n')) == real.split('\n') and len(lazy.split('\n')) == len(real.split('\n')), real
    assert [o for o, _ in lazy.finditer('é.')] == [m.start() for m in re.finditer('é.', real)], real
    assert list(lazy.iter_split('☃')) == real.split('☃'), real
    assert [h['line'] for h in lazy._search('x', False, 100)] == [real.count('\n', 0, m.start()) + 1 for m in re.finditer('x', real)], real
    assert lazy == real, real
print('checked', checked)
"#,
        path = escape(&r.file.with_file_name("random.txt"))
    );
    assert_eq!(run(&mut r.env, &code).await, "checked 4500\n");
}
