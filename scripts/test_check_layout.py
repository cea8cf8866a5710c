#!/usr/bin/env python3
"""Tests for scripts/check_layout.py on small synthetic workspaces in a temp dir.

Run: python3 scripts/test_check_layout.py  (needs cargo on PATH for `cargo metadata`)
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_layout  # noqa: E402


def write_workspace(root: Path, crates: dict[str, dict[str, str]],
                    dev_deps: dict[str, list[str]] | None = None) -> None:
    """crates: name -> {relative path: source}. Each crate lives in crates/<name>."""
    dev_deps = dev_deps or {}
    members = ", ".join(f'"crates/{n}"' for n in crates)
    (root / "Cargo.toml").write_text(f"[workspace]\nresolver = \"2\"\nmembers = [{members}]\n")
    for name, files in crates.items():
        d = root / "crates" / name
        dev = "".join(f'{dep} = {{ path = "../{dep}" }}\n' for dep in dev_deps.get(name, []))
        (d / "src").mkdir(parents=True)
        (d / "Cargo.toml").write_text(
            f'[package]\nname = "{name}"\nversion = "0.1.0"\nedition = "2021"\n'
            f"\n[dev-dependencies]\n{dev}")
        for rel, text in files.items():
            p = d / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(textwrap.dedent(text))


def run(root: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = check_layout.main(["--root", str(root), *args])
    return code, out.getvalue(), err.getvalue()


def code_lines(n: int) -> str:
    return "".join(f"pub fn f{i}() {{}}\n" for i in range(n))


class CheckLayoutTest(unittest.TestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.root = Path(self._tmp.name)

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def test_clean_crate_passes(self) -> None:
        write_workspace(self.root, {
            "clean": {
                "src/lib.rs": "//! A crate.\nmod a;\nmod b;\npub use a::A;\n",
                "src/a.rs": "use crate::b::helper;\npub struct A;\nfn g() { helper() }\n",
                # A reference to the parent and a `crate::` path in a comment or a
                # string are not edges: b must not depend on a.
                "src/b.rs": ("// crate::a::A\npub fn helper() { let _ = \"crate::a::A\"; }\n"
                             "use super::*;\n"),
            },
            # Keep the share check quiet: a second crate of the same size.
            "other": {"src/lib.rs": "pub fn x() {}\npub fn y() {}\npub fn z() {}\n"
                                    "pub fn w() {}\npub fn v() {}\n"},
        })
        code, out, err = run(self.root, "--max-share", "80")
        self.assertEqual(code, 0, err)
        self.assertIn("layout ok", out)

    def test_top_level_cycle_fails_with_file_and_line(self) -> None:
        write_workspace(self.root, {
            "cyc": {
                "src/lib.rs": "mod prompt;\nmod env;\n",
                "src/prompt.rs": "//! Prompts.\n\nuse crate::env::Env;\npub struct Prompt;\n",
                "src/env.rs": "pub struct Env;\nfn f() -> crate::prompt::Prompt { todo!() }\n",
            },
        })
        code, _, err = run(self.root, "--max-share", "100")
        self.assertEqual(code, 1)
        self.assertIn("cyc: env → prompt → env", err)
        self.assertIn("crates/cyc/src/prompt.rs:3", err)
        self.assertIn("crates/cyc/src/env.rs:2", err)

    def test_sibling_cycle_through_super_and_use_trees(self) -> None:
        write_workspace(self.root, {
            "sib": {
                "src/lib.rs": "pub mod env;\n",
                "src/env/mod.rs": "pub mod python;\n",
                "src/env/python/mod.rs": "mod kernel;\nmod protocol;\n",
                "src/env/python/kernel.rs": "use super::{protocol::{self, Msg}};\n"
                                            "fn f(_: Msg) { protocol::send() }\n",
                "src/env/python/protocol.rs": "pub struct Msg;\npub fn send() {}\n"
                                              "fn g() { super::kernel::start() }\n",
            },
        })
        code, _, err = run(self.root, "--max-share", "100")
        self.assertEqual(code, 1)
        self.assertIn("sib: env::python::kernel → env::python::protocol → env::python::kernel",
                      err)
        self.assertIn("crates/sib/src/env/python/protocol.rs:3", err)

    def test_cfg_test_edges_are_ignored(self) -> None:
        write_workspace(self.root, {
            "t": {
                "src/lib.rs": "mod a;\nmod b;\n",
                "src/a.rs": "use crate::b::B;\npub struct A;\n",
                "src/b.rs": textwrap.dedent("""\
                    pub struct B;
                    #[cfg(test)]
                    mod tests {
                        use crate::a::A;
                    }
                    #[cfg(all(test, unix))]
                    use crate::a::A as Unused;
                    #[cfg(test)]
                    mod more_tests;
                    """),
                "src/b/more_tests.rs": "use crate::a::A;\n",
            },
        })
        code, out, err = run(self.root, "--max-share", "100")
        self.assertEqual(code, 0, err)
        # …but a cfg that also holds outside tests is production code.
        b = self.root / "crates/t/src/b.rs"
        b.write_text(b.read_text() + "#[cfg(any(test, unix))]\nuse crate::a::A as Also;\n")
        code, _, err = run(self.root, "--max-share", "100")
        self.assertEqual(code, 1)
        self.assertIn("crates/t/src/b.rs:11", err)

    def test_file_over_the_limit_fails_but_tests_do_not_count(self) -> None:
        tests = "#[cfg(test)]\nmod tests {\n" + code_lines(50) + "}\n"
        write_workspace(self.root, {
            "big": {
                "src/lib.rs": "mod big;\nmod fine;\n#[cfg(test)]\nmod only_tests;\n",
                "src/big.rs": "/// Docs do not count.\n\n" + code_lines(31),
                "src/fine.rs": code_lines(30) + "\n// comment\n/* block\n comment */\n" + tests,
                "src/only_tests.rs": code_lines(80),
            },
        })
        code, _, err = run(self.root, "--max-share", "100", "--max-file-lines", "30")
        self.assertEqual(code, 1)
        self.assertIn("crates/big/src/big.rs has 31 lines of code, over 30", err)
        self.assertNotIn("fine.rs", err)
        self.assertNotIn("only_tests.rs", err)

    def test_crate_share_and_test_support_exemption(self) -> None:
        write_workspace(self.root, {
            "app": {"src/lib.rs": code_lines(10), "tests/it.rs": code_lines(10)},
            "support": {"src/lib.rs": code_lines(50)},
        }, dev_deps={"app": ["support"]})
        code, _, err = run(self.root, "--max-file-lines", "40")
        # support holds 50 of 70 lines (71 %); its 50-line file is exempt as test support.
        self.assertEqual(code, 1)
        self.assertIn("support holds 71.4 %", err)
        self.assertNotIn("lines of code, over", err)
        code, out, _ = run(self.root, "--report", "--max-file-lines", "40")
        self.assertEqual(code, 0)
        self.assertIn("(test support, exempt)", out)

    def test_string_errors_in_library_crates_fail(self) -> None:
        # Issue 49 item 13: ten lines of `Result<_, String>` came back into a library
        # crate (env-tools' combinators) with nothing to stop them.
        write_workspace(self.root, {
            "lib": {
                "src/lib.rs": ("//! A library.\n"
                               "pub fn f() -> Result<(), String> { Ok(()) }\n"
                               "pub fn g(x: u8)\n    -> std::result::Result<Vec<u8>,\n"
                               "        std::string::String> { Ok(vec![x]) }\n"
                               "pub fn h() -> Result<Result<u8, String>, std::io::Error> { Ok(Ok(1)) }\n"
                               "pub fn ok() -> std::io::Result<String> { Ok(String::new()) }\n"
                               "pub fn typed() -> Result<String, Box<dyn Fn() -> String>> { todo!() }\n"
                               "// Result<(), String> in a comment\n"
                               "pub const S: &str = \"Result<(), String>\";\n"
                               "#[cfg(test)]\nmod tests {\n    fn t() -> Result<(), String> { Ok(()) }\n}\n"),
            },
            "app": {
                "src/main.rs": "fn main() {}\nfn parse() -> Result<u8, String> { Ok(1) }\n",
            },
            "support": {
                "src/lib.rs": "pub fn mock() -> Result<(), String> { Ok(()) }\n",
            },
        }, dev_deps={"lib": ["support"]})
        code, _, err = run(self.root, "--max-share", "100")
        self.assertEqual(code, 1, err)
        flagged = [line for line in err.splitlines() if "in a library crate" in line]
        self.assertEqual(len(flagged), 3, err)
        self.assertIn("crates/lib/src/lib.rs:2: `Result<(), String>` in a library crate", err)
        self.assertIn("crates/lib/src/lib.rs:4: `Result<Vec<u8>, std::string::String>`", err)
        self.assertIn("crates/lib/src/lib.rs:6: `Result<u8, String>`", err)
        self.assertIn("thiserror", err)
        # The binary, test support and test code are not library code.
        self.assertNotIn("crates/app", err)
        self.assertNotIn("crates/support", err)
        code, out, _ = run(self.root, "--report", "--max-share", "100")
        self.assertEqual(code, 0)
        self.assertIn("Result<_, String> in library crates: 3", out)

    def test_lexer_counts_strings_and_skips_comments(self) -> None:
        p = self.root / "x.rs"
        p.write_text('let s = r#"\n\n  "quoted"\n"#; // c\n/* a /* nested */ b\n*/ let c = \'"\';\n'
                     "let l: &'static str = \"//\";\n")
        src = check_layout.lex(p)
        self.assertEqual(src.code_lines, {1, 3, 4, 6, 7})
        self.assertNotIn("quoted", src.masked)
        self.assertIn("'static", src.masked)

    def test_architecture_page_must_name_every_package(self) -> None:
        write_workspace(self.root, {
            "alpha": {"src/lib.rs": code_lines(5)},
            "beta": {"src/lib.rs": code_lines(5)},
        })
        (self.root / "docs").mkdir()
        page = self.root / "docs" / "architecture.md"
        page.write_text("| crate | job |\n| `crates/alpha` (`alpha`) | a |\n")
        code, _, err = run(self.root, "--max-share", "80")
        self.assertEqual(code, 1)
        self.assertIn("does not name the workspace package beta (`crates/beta`)", err)
        self.assertNotIn("package alpha", err)
        page.write_text("| `crates/alpha` | a |\n| `crates/beta` | b |\n")
        code, out, err = run(self.root, "--max-share", "80")
        self.assertEqual(code, 0, err)
        self.assertIn("every package in docs/architecture.md", out)

    def test_no_architecture_page_no_check(self) -> None:
        write_workspace(self.root, {
            "alpha": {"src/lib.rs": code_lines(5)},
            "beta": {"src/lib.rs": code_lines(5)},
        })
        code, _, err = run(self.root, "--max-share", "80")
        self.assertEqual(code, 0, err)


if __name__ == "__main__":
    unittest.main()
