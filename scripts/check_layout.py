#!/usr/bin/env python3
"""Keep the workspace layout of issue 21: no import cycle between modules of one crate,
no crate over 35 % of the Rust code, no production file over 600 lines of code,
(issue 49) no `Result<_, String>` in a library crate, and (issue 54) no workspace
member missing from docs/architecture.md.

Usage:
    python3 scripts/check_layout.py            # enforce: exit 1 on any violation
    python3 scripts/check_layout.py --report   # print the table, always exit 0
    python3 scripts/check_layout.py --root DIR --max-share 35 --max-file-lines 600

Python 3 standard library only; reads the members and their targets from
`cargo metadata --no-deps --format-version 1`.

## Import cycles

For every lib and bin target of every workspace member, the module tree is followed
from the crate root through `mod name;` and inline `mod name { … }` exactly as rustc
does (`a.rs` or `a/mod.rs`; a crate root or `mod.rs` keeps its children in its own
directory, `a.rs` in `a/`). `#[path]` is not followed (a warning says so).

Inside a module, these references become edges: `crate::a::…` and `super::…`,
`self::…` paths anywhere in code (uses, `pub use`, expressions, types), with
`use a::{b, c::{d}}` trees expanded, and names a `use` binds to a module (`use
super::protocol;` then `protocol::X`). A path is resolved to the deepest module it
names. An edge from module `p::a::…` to `p::b::…` is an edge `a → b` in the graph of
`p`'s direct children; a reference to an ancestor or a descendant is not an edge. A
cycle in any of those graphs (the crate root's children, or the children of any module,
recursively) fails the check and is printed as `crate: a → b → a`, with one
file:line for each edge.

Test code may reach anywhere, so it is left out: items under `#[cfg(test)]` (or a cfg
that can only hold under test, like `all(test, unix)`), modules declared that way and
everything below them, and `tests/`, `benches/`, `examples/`.

## Lines of code

A line of code is a line of a `.rs` file that holds something other than whitespace
and comments (`//`, `///`, `//!`, `/* … */`); a line inside a string literal counts.
- **Crate share**: lines of code of every `.rs` file in the package directory (`src/`,
  `tests/`, `benches/`, `examples/`, `build.rs`; `cfg(test)` blocks included), over the
  sum for all members. Limit: `--max-share` percent (35).
- **Production file**: a file reached from a lib or bin root through modules that are
  not test-only, counted without its `cfg(test)` items. Limit: `--max-file-lines` (600).
  Exempt: files reached only through `cfg(test)` modules, and the files of a member that
  the other members use only as a dev-dependency (test support such as mock servers);
  `--report` still lists them.

## The architecture page names every package

When the workspace has `docs/architecture.md`, every member must be named there by its
directory in backticks (`` `crates/plan` ``, `` `bin/rlm-orchestrate` ``), as the page's
table of packages does; a member it does not name fails the check with the name and
directory to add.

## Errors of library crates

A library's errors are `thiserror` types (STYLE.md, "Errors"): a `Result` whose error
type is `String` (`Result<T, String>`, `std::result::Result<T, std::string::String>`,
inside another type too: `Result<Result<T, String>, E>`) in a file reached from a lib
target, outside `cfg(test)` items, fails the check with its file and line. Comments and
string literals are not read; binaries (`anyhow` is theirs) and test support are exempt.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_MAX_SHARE_PERCENT = 35.0
DEFAULT_MAX_FILE_LINES = 600
SKIPPED_DIRS = {"target", ".git", "node_modules"}


# ---------------------------------------------------------------------------
# Lexing: blank out comments and string interiors, remember which lines hold code.


@dataclass
class Source:
    """One `.rs` file: its text with comments and literal interiors replaced by spaces
    (newlines kept, so offsets and lines match the file) and the lines of code."""

    path: Path
    masked: str
    code_lines: set[int]
    line_starts: list[int]

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.line_starts, offset)


RAW_STRING = re.compile(r'(?:b|c)?r(#*)"')


def lex(path: Path) -> Source:
    text = path.read_text(encoding="utf-8", errors="replace")
    out = list(text)
    code_lines: set[int] = set()
    n = len(text)
    i = 0
    line = 1

    def blank(a: int, b: int) -> None:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    def mark(a: int, b: int, first_line: int) -> int:
        """Mark non-blank chars of text[a:b] as code; return the line after b."""
        ln = first_line
        for k in range(a, b):
            c = text[k]
            if c == "\n":
                ln += 1
            elif not c.isspace():
                code_lines.add(ln)
        return ln

    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            line += text.count("\n", i, j)
            blank(i, j)
            i = j
        elif (m := RAW_STRING.match(text, i)) and (
            i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")
        ):
            close = '"' + m.group(1)
            j = text.find(close, m.end())
            j = n if j < 0 else j + len(close)
            line = mark(i, j, line)
            blank(m.end(), j - len(close))
            i = j
        elif c == '"' or (c in "bc" and text.startswith('"', i + 1)
                          and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))):
            start = i + (1 if c == '"' else 2)
            j = start
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            line = mark(i, j, line)
            blank(start, j - 1)
            i = j
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}', '\'') or a lifetime/label ('a).
            if text.startswith("\\", i + 1):
                j = i + 3  # past the escaped character, which may be a quote
                while j < n and text[j] != "'":
                    j += 1
                j += 1
            elif i + 2 < n and text[i + 2] == "'":
                j = i + 3
            else:
                j = i + 1
            line = mark(i, j, line)
            if j - i > 1:
                blank(i + 1, j - 1)
            i = j
        else:
            code_lines.add(line)
            i += 1
    masked = "".join(out)
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    return Source(path, masked, code_lines, line_starts)


# ---------------------------------------------------------------------------
# Items: attributes, `cfg(test)`, module declarations.

OPEN, CLOSE = "([{", ")]}"


def match_bracket(s: str, i: int) -> int:
    """Offset just past the bracket that closes the one at `i`."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] in OPEN:
            depth += 1
        elif s[j] in CLOSE:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(s)


def item_end(s: str, i: int) -> int:
    """Offset just past the item starting at `i`: its `;` at depth 0, or the `}` that
    closes its body."""
    depth = 0
    for j in range(i, len(s)):
        ch = s[j]
        if ch in OPEN:
            depth += 1
        elif ch in CLOSE:
            depth -= 1
            if depth <= 0 and ch == "}":
                return j + 1
        elif ch == ";" and depth == 0:
            return j + 1
    return len(s)


def skip_attributes(s: str, i: int) -> int:
    while True:
        m = re.compile(r"\s*#\s*\[").match(s, i)
        if not m:
            return re.compile(r"\s*").match(s, i).end()
        i = match_bracket(s, m.end() - 1)


def cfg_requires_test(pred: str) -> bool:
    """Whether a cfg predicate can only hold when compiling tests."""
    pred = pred.strip()
    if pred == "test":
        return True
    m = re.fullmatch(r"(all|any|not)\s*\((.*)\)", pred, re.S)
    if not m:
        return False
    op, args = m.group(1), split_top_level(m.group(2))
    if op == "all":
        return any(cfg_requires_test(a) for a in args)
    if op == "any":
        return bool(args) and all(cfg_requires_test(a) for a in args)
    return False


def split_top_level(s: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return [p for p in (p.strip() for p in parts) if p]


CFG_ATTR = re.compile(r"#\s*(!?)\s*\[\s*cfg\s*\(")


def test_ranges(src: Source) -> tuple[list[tuple[int, int]], bool]:
    """Offsets of the items under a test-only cfg, and whether the whole file is
    (`#![cfg(test)]`)."""
    s = src.masked
    ranges: list[tuple[int, int]] = []
    whole = False
    for m in CFG_ATTR.finditer(s):
        open_paren = m.end() - 1
        close = match_bracket(s, open_paren)
        if not cfg_requires_test(s[open_paren + 1 : close - 1]):
            continue
        if m.group(1) == "!":
            whole = True
            continue
        attr_end = match_bracket(s, s.index("[", m.start()))
        start = skip_attributes(s, attr_end)
        ranges.append((m.start(), item_end(s, start)))
    return ranges, whole


def inside(ranges: list[tuple[int, int]], pos: int) -> bool:
    return any(a <= pos < b for a, b in ranges)


MOD_DECL = re.compile(r"(?<![\w#])mod\s+(?:r#)?([A-Za-z_]\w*)\s*([;{])")
PATH_ATTR = re.compile(r"#\s*\[\s*path\s*=")


# ---------------------------------------------------------------------------
# Module trees.


@dataclass
class Module:
    path: tuple[str, ...]
    file: Path
    test_only: bool


@dataclass
class FileInfo:
    """A file of the module tree: where its module sits and which parts are tests."""

    module: tuple[str, ...]
    src: Source
    test_only: bool
    tests: list[tuple[int, int]]
    # (start, end, name) of inline non-test modules, for offsets inside them.
    inline: list[tuple[int, int, str]] = field(default_factory=list)

    def module_at(self, pos: int) -> tuple[str, ...]:
        path = list(self.module)
        for a, b, name in self.inline:  # outermost first
            if a <= pos < b:
                path.append(name)
        return tuple(path)


@dataclass
class CrateTree:
    name: str
    modules: dict[tuple[str, ...], Module] = field(default_factory=dict)
    files: dict[Path, FileInfo] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def build_tree(name: str, root_file: Path, cache: dict[Path, Source]) -> CrateTree:
    tree = CrateTree(name)

    def load(file: Path, module: tuple[str, ...], child_dir: Path, test_only: bool) -> None:
        if file in tree.files:
            return
        src = cache.get(file) or cache.setdefault(file, lex(file))
        tests, whole = test_ranges(src)
        test_only = test_only or whole
        info = FileInfo(module, src, test_only, tests)
        tree.files[file] = info
        tree.modules[module] = Module(module, file, test_only)
        s = src.masked
        # Inline modules first, so declarations inside them resolve below them.
        inline_all = []
        for m in MOD_DECL.finditer(s):
            if m.group(2) == "{":
                brace = m.end() - 1
                inline_all.append((m.start(), match_bracket(s, brace), m.group(1)))
        for m in MOD_DECL.finditer(s):
            pos = m.start()
            mod_test = test_only or inside(tests, pos)
            enclosing = [(a, b, n) for a, b, n in inline_all if a < pos < b]
            sub = tuple(n for _, _, n in enclosing)
            path = module + sub + (m.group(1),)
            if m.group(2) == "{":
                if not mod_test:
                    info.inline.append((pos, match_bracket(s, m.end() - 1), m.group(1)))
                tree.modules[path] = Module(path, file, mod_test)
                continue
            before = s[max(0, pos - 200) : pos]
            if PATH_ATTR.search(before.split(";")[-1].split("}")[-1]):
                tree.warnings.append(
                    f"{file}:{src.line_of(pos)}: #[path] on `mod {m.group(1)}` is not followed"
                )
                continue
            d = child_dir.joinpath(*sub)
            candidates = [d / f"{m.group(1)}.rs", d / m.group(1) / "mod.rs"]
            found = next((c for c in candidates if c.is_file()), None)
            if found is None:
                tree.warnings.append(
                    f"{file}:{src.line_of(pos)}: no file for `mod {m.group(1)}`"
                )
                continue
            load(found, path, d / m.group(1), mod_test)
        info.inline.sort()

    load(root_file, (), root_file.parent, False)
    return tree


# ---------------------------------------------------------------------------
# References between modules.

TOKEN = re.compile(r"::|[A-Za-z_]\w*|[{},*;]|\S")
PUB_IN = re.compile(r"pub\s*\(\s*in\s+[^)]*\)")
USE_STMT = re.compile(r"(?<![\w$:])use\s")


def parse_use_tree(tokens: list[tuple[str, int]], i: int, prefix: list[tuple[str, int]],
                   out: list[tuple[list[tuple[str, int]], str | None]]) -> int:
    """Parse one use tree starting at tokens[i]; append (segments, alias) leaves."""
    segs = list(prefix)
    while i < len(tokens):
        tok, pos = tokens[i]
        if tok == "::":
            i += 1
        elif tok == "{":
            i += 1
            while i < len(tokens) and tokens[i][0] != "}":
                i = parse_use_tree(tokens, i, segs, out)
                if i < len(tokens) and tokens[i][0] == ",":
                    i += 1
            return i + 1
        elif tok == "*":
            out.append((segs, None))
            return i + 1
        elif tok == "as":
            alias = tokens[i + 1][0] if i + 1 < len(tokens) else None
            out.append((segs, alias))
            return i + 2
        elif tok in {",", "}", ";"}:
            break
        elif re.fullmatch(r"[A-Za-z_]\w*", tok):
            segs.append((tok, pos))
            i += 1
        else:
            i += 1
    if len(segs) > len(prefix):
        out.append((segs, None))
    return i


def resolve(tree: CrateTree, here: tuple[str, ...], segs: list[str],
            aliases: dict[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """The deepest module a path names, or None for paths outside the crate."""
    if not segs:
        return None
    first, rest = segs[0], segs[1:]
    if first == "crate":
        base: tuple[str, ...] = ()
    elif first == "self":
        base = here
    elif first == "super":
        base = here[:-1] if here else ()
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    elif first in aliases:
        base = aliases[first]
    elif here + (first,) in tree.modules:
        base, rest = here + (first,), rest
    else:
        return None
    for seg in rest:
        if seg == "self":
            continue
        if base + (seg,) in tree.modules:
            base = base + (seg,)
        else:
            break
    return base


@dataclass
class Edge:
    parent: tuple[str, ...]
    src: str
    dst: str
    where: str


def crate_edges(tree: CrateTree, root: Path) -> dict[tuple[tuple[str, ...], str, str], Edge]:
    edges: dict[tuple[tuple[str, ...], str, str], Edge] = {}

    def add(here: tuple[str, ...], target: tuple[str, ...], file: Path, line: int) -> None:
        k = 0
        while k < len(here) and k < len(target) and here[k] == target[k]:
            k += 1
        if k == len(here) or k == len(target):
            return  # the module itself, an ancestor or a descendant
        key = (here[:k], here[k], target[k])
        if key not in edges:
            edges[key] = Edge(here[:k], here[k], target[k], f"{rel(file, root)}:{line}")

    for file, info in tree.files.items():
        if info.test_only:
            continue
        s = PUB_IN.sub(lambda m: " " * len(m.group(0)), info.src.masked)
        aliases_by_module: dict[tuple[str, ...], dict[str, tuple[str, ...]]] = {}
        uses: list[tuple[tuple[str, ...], list[str], int]] = []
        for m in USE_STMT.finditer(s):
            if inside(info.tests, m.start()):
                continue
            end = s.find(";", m.end())
            end = len(s) if end < 0 else end
            tokens = [(t.group(0), m.end() + t.start())
                      for t in TOKEN.finditer(s[m.end():end])]
            leaves: list[tuple[list[tuple[str, int]], str | None]] = []
            parse_use_tree(tokens, 0, [], leaves)
            here = info.module_at(m.start())
            for segs, alias in leaves:
                names = [t for t, _ in segs]
                pos = segs[-1][1] if segs else m.start()
                uses.append((here, names, info.src.line_of(pos)))
                # `use super::protocol;` or `use crate::env::{self as e}` binds a
                # name to a module: later `protocol::X` paths go through it.
                named = names[:-1] if names[-1:] == ["self"] else names
                target = resolve(tree, here, named, {})
                if named and target and target[-1] == named[-1] and named[-1] not in {
                        "crate", "super", "self"}:
                    aliases_by_module.setdefault(here, {})[alias or named[-1]] = target
        for here, names, line in uses:
            target = resolve(tree, here, names, aliases_by_module.get(here, {}))
            if target is not None:
                add(here, target, file, line)
        # Paths outside `use`: crate::…, super::…, self::…, and names bound to modules.
        for m in re.finditer(r"(?<![\w$:])([A-Za-z_]\w*)(?:\s*::\s*[A-Za-z_]\w*)+", s):
            if inside(info.tests, m.start()):
                continue
            here = info.module_at(m.start())
            names = re.split(r"\s*::\s*", m.group(0))
            aliases = aliases_by_module.get(here, {})
            if names[0] not in {"crate", "super", "self"} and names[0] not in aliases:
                continue
            target = resolve(tree, here, names, aliases)
            if target is not None:
                add(here, target, file, info.src.line_of(m.start()))
    return edges


@dataclass
class Cycle:
    """A cycle among the children of one module, and the whole strongly connected group
    of siblings it belongs to."""

    edges: list[Edge]
    group: list[str]


def find_cycles(edges: dict[tuple[tuple[str, ...], str, str], Edge]) -> list[Cycle]:
    """For each strongly connected group of siblings, the shortest cycle through each of
    its members (the same cycle is listed once)."""
    graphs: dict[tuple[str, ...], dict[str, dict[str, Edge]]] = {}
    for (parent, a, b), e in edges.items():
        graphs.setdefault(parent, {}).setdefault(a, {})[b] = e
    cycles = []
    for parent in sorted(graphs):
        g = graphs[parent]
        for scc in sorted(strongly_connected(g), key=min):
            if len(scc) < 2:
                continue
            seen_cycles = set()
            for start in sorted(scc):
                path = shortest_cycle(g, scc, start)
                key = frozenset(zip(path, path[1:]))
                if key in seen_cycles:
                    continue
                seen_cycles.add(key)
                cycles.append(Cycle([g[a][b] for a, b in zip(path, path[1:])], sorted(scc)))
    return cycles


def shortest_cycle(g: dict[str, dict[str, Edge]], scc: set[str], start: str) -> list[str]:
    """Breadth-first search for the shortest way from `start` back to itself inside the
    group; returns the nodes, `start` first and last."""
    prev: dict[str, str] = {}
    queue, seen = [start], {start}
    while queue:
        nxt = []
        for a in queue:
            for b in sorted(g.get(a, {})):
                if b not in scc:
                    continue
                if b == start:
                    path = [a]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if b not in seen:
                    seen.add(b)
                    prev[b] = a
                    nxt.append(b)
        queue = nxt
    raise AssertionError("a strongly connected group always has a cycle")


def strongly_connected(g: dict[str, dict[str, Edge]]) -> list[set[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    nodes = sorted(set(g) | {b for bs in g.values() for b in bs})

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    for v in nodes:
        if v not in index:
            visit(v)
    return out


# ---------------------------------------------------------------------------
# The workspace.


@dataclass
class Package:
    name: str
    dir: Path
    roots: list[tuple[str, Path]]  # (target name, root file) of lib and bin targets
    test_support: bool
    lib_roots: list[Path] = field(default_factory=list)  # root files of lib targets


def rel(p: Path, root: Path) -> str:
    try:
        return str(p.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(p)


def workspace_packages(root: Path) -> list[Package]:
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1",
         "--manifest-path", str(root / "Cargo.toml")],
        check=True, capture_output=True, text=True).stdout)
    members = set(meta["workspace_members"])
    pkgs = [p for p in meta["packages"] if p["id"] in members]
    names = {p["name"] for p in pkgs}
    used_normally: set[str] = set()
    used_in_dev: set[str] = set()
    for p in pkgs:
        for d in p["dependencies"]:
            if d["name"] in names:
                (used_in_dev if d["kind"] == "dev" else used_normally).add(d["name"])
    out = []
    for p in sorted(pkgs, key=lambda p: p["name"]):
        lib_kinds = {"lib", "rlib", "dylib", "cdylib", "staticlib", "proc-macro"}
        roots = [(t["name"], Path(t["src_path"])) for t in p["targets"]
                 if set(t["kind"]) & (lib_kinds | {"bin"})]
        libs = [Path(t["src_path"]) for t in p["targets"] if set(t["kind"]) & lib_kinds]
        out.append(Package(p["name"], Path(p["manifest_path"]).parent, roots,
                           p["name"] in used_in_dev and p["name"] not in used_normally,
                           libs))
    return out


def rust_files(d: Path) -> list[Path]:
    files = []
    for dirpath, dirnames, filenames in os.walk(d):
        dirnames[:] = sorted(x for x in dirnames
                             if x not in SKIPPED_DIRS and not (Path(dirpath) / x / "Cargo.toml").exists())
        files += [Path(dirpath) / f for f in sorted(filenames) if f.endswith(".rs")]
    return files


@dataclass
class FileRow:
    file: Path
    crate: str
    lines: int
    status: str  # "production", "test-only", "test support"


@dataclass
class StringError:
    """A `Result` whose error type is `String`, in library code."""

    file: Path
    line: int
    text: str


RESULT_OPEN = re.compile(r"(?<![\w$])Result\s*<")
STRING_TYPE = re.compile(r"(?:(?:::\s*)?(?:std|alloc)\s*::\s*string\s*::\s*)?String")


def generic_args(s: str, i: int) -> tuple[list[str], int] | None:
    """The top-level arguments of the generic list opened just before `i`, and the
    offset past its `>`; None when it does not close like a type's (a `;` first)."""
    depth, parts, cur, j = 1, [], [], i
    while j < len(s):
        if s.startswith("->", j):
            cur.append("->")
            j += 2
            continue
        c = s[j]
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            depth -= 1
            if depth == 0:
                parts.append("".join(cur))
                return parts, j + 1
        elif c == "," and depth == 1:
            parts.append("".join(cur))
            cur = []
            j += 1
            continue
        elif c == ";":
            return None
        cur.append(c)
        j += 1
    return None


def string_errors(info: "FileInfo") -> list[StringError]:
    """Every `Result<_, String>` of `info`'s code outside its test items."""
    s = info.src.masked
    found = []
    for m in RESULT_OPEN.finditer(s):
        if inside(info.tests, m.start()):
            continue
        parsed = generic_args(s, m.end())
        if parsed is None:
            continue
        args, end = parsed
        if len(args) == 2 and STRING_TYPE.fullmatch(args[1].strip()):
            text = re.sub(r"\s+", " ", s[m.start():end])
            text = re.sub(r"([<(]) ", r"\1", text).replace(" ,", ",")
            found.append(StringError(info.src.path, info.src.line_of(m.start()), text))
    return found


ARCHITECTURE_DOC = Path("docs") / "architecture.md"


def unnamed_packages(root: Path, packages: list[tuple[str, Path]]) -> list[tuple[str, str]]:
    """(name, directory) of each member docs/architecture.md does not name by its
    directory in backticks; nothing when the workspace has no such page."""
    doc = root / ARCHITECTURE_DOC
    if not doc.exists():
        return []
    text = doc.read_text(encoding="utf-8", errors="replace")
    missing = []
    for name, directory in packages:
        rel_dir = rel(directory, root)
        if f"`{rel_dir}`" not in text:
            missing.append((name, rel_dir))
    return missing


@dataclass
class Result:
    shares: list[tuple[str, int, float]]
    total: int
    files: list[FileRow]
    cycles: list[tuple[str, Cycle]]
    warnings: list[str]
    string_errors: list[StringError] = field(default_factory=list)
    unnamed: list[tuple[str, str]] = field(default_factory=list)


def analyse(root: Path) -> Result:
    cache: dict[Path, Source] = {}
    shares, files, cycles, warnings = [], [], [], []
    string_errs: dict[tuple[Path, int, str], StringError] = {}
    packages = workspace_packages(root)
    for pkg in packages:
        all_files = rust_files(pkg.dir)
        count = sum(len(cache.setdefault(f, lex(f)).code_lines) for f in all_files)
        shares.append((pkg.name, count))
        status_by_file: dict[Path, tuple[str, int]] = {}
        for target, root_file in pkg.roots:
            label = pkg.name if len(pkg.roots) == 1 else f"{pkg.name} ({target})"
            tree = build_tree(label, root_file, cache)
            warnings += tree.warnings
            for path, info in tree.files.items():
                lines = {ln for ln in info.src.code_lines
                         if not any(info.src.line_of(a) <= ln <= info.src.line_of(max(a, b - 1))
                                    for a, b in info.tests)}
                status = ("test-only" if info.test_only else
                          "test support" if pkg.test_support else "production")
                old = status_by_file.get(path)
                if old is None or old[0] != "production":
                    status_by_file[path] = (status, len(lines))
            cycles += [(label, c) for c in find_cycles(crate_edges(tree, root))]
            if root_file in pkg.lib_roots and not pkg.test_support:
                for info in tree.files.values():
                    if not info.test_only:
                        for e in string_errors(info):
                            string_errs[(e.file, e.line, e.text)] = e
        for path, (status, lines) in status_by_file.items():
            files.append(FileRow(path, pkg.name, lines, status))
    total = sum(c for _, c in shares)
    return Result([(n, c, 100.0 * c / total if total else 0.0) for n, c in shares],
                  total, files, cycles, warnings,
                  sorted(string_errs.values(), key=lambda e: (str(e.file), e.line)),
                  unnamed_packages(root, [(p.name, p.dir) for p in packages]))


def module_name(parent: tuple[str, ...], name: str) -> str:
    return "::".join(parent + (name,))


def format_cycle(crate: str, cycle: Cycle) -> list[str]:
    parent = cycle.edges[0].parent
    names = [module_name(parent, e.src) for e in cycle.edges]
    names.append(names[0])
    lines = [f"{crate}: {' → '.join(names)}"]
    if len(cycle.group) > len(cycle.edges):
        lines.append(f"    (one cycle of the group {{{', '.join(module_name(parent, n) for n in cycle.group)}}})")
    for e in cycle.edges:
        lines.append(f"    {module_name(e.parent, e.src)} → {module_name(e.parent, e.dst)}"
                     f"  ({e.where})")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--report", action="store_true",
                    help="print crate shares, largest files and cycles; exit 0")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                    help="workspace root (default: this repository)")
    ap.add_argument("--max-share", type=float, default=DEFAULT_MAX_SHARE_PERCENT,
                    help="largest share of the Rust code one crate may hold, in percent")
    ap.add_argument("--max-file-lines", type=int, default=DEFAULT_MAX_FILE_LINES,
                    help="most lines of code in one production file")
    ap.add_argument("--top", type=int, default=15, help="files listed in the report")
    args = ap.parse_args(argv)
    root = args.root.resolve()
    res = analyse(root)

    over_share = [(n, c, s) for n, c, s in res.shares if s > args.max_share]
    big = sorted((f for f in res.files if f.lines > args.max_file_lines),
                 key=lambda f: -f.lines)
    big_prod = [f for f in big if f.status == "production"]
    for w in res.warnings:
        print(f"warning: {w}", file=sys.stderr)

    if args.report:
        print(f"Rust lines of code by crate (non-blank, non-comment; src, tests, benches): "
              f"{res.total} in all")
        width = max(len(n) for n, _, _ in res.shares)
        for n, c, s in sorted(res.shares, key=lambda x: -x[1]):
            flag = "  over the limit" if s > args.max_share else ""
            print(f"  {n:<{width}}  {c:>7}  {s:5.1f} %{flag}")
        print(f"\nLargest files, lines of code without cfg(test) items "
              f"(limit {args.max_file_lines} for production files):")
        for f in sorted(res.files, key=lambda f: -f.lines)[: args.top]:
            note = "" if f.status == "production" else f"  ({f.status}, exempt)"
            flag = "  over the limit" if f.status == "production" and f.lines > args.max_file_lines else ""
            print(f"  {f.lines:>5}  {rel(f.file, root)}{note}{flag}")
        prod = [f for f in res.files if f.status == "production"]
        print(f"  production files: {len(prod)}, over {args.max_file_lines}: {len(big_prod)}")
        groups = {(crate, tuple(c.group), c.edges[0].parent) for crate, c in res.cycles}
        print(f"\nModule import cycles: {len(res.cycles)}, in {len(groups)} groups of "
              f"modules that reach each other (the shortest through each member)")
        for crate, cyc in res.cycles:
            print("\n".join("  " + ln for ln in format_cycle(crate, cyc)))
        print(f"\nResult<_, String> in library crates: {len(res.string_errors)}")
        for e in res.string_errors:
            print(f"  {rel(e.file, root)}:{e.line}: {e.text}")
        return 0

    failed = False
    for n, c, s in over_share:
        print(f"error: {n} holds {s:.1f} % of the workspace's Rust code ({c} of {res.total} "
              f"lines), over {args.max_share:g} %", file=sys.stderr)
        failed = True
    for f in big_prod:
        print(f"error: {rel(f.file, root)} has {f.lines} lines of code, over "
              f"{args.max_file_lines}", file=sys.stderr)
        failed = True
    for crate, cyc in res.cycles:
        print("error: module import cycle in " + "\n".join(format_cycle(crate, cyc)),
              file=sys.stderr)
        failed = True
    for e in res.string_errors:
        print(f"error: {rel(e.file, root)}:{e.line}: `{e.text}` in a library crate: give "
              f"the error a thiserror type that names what failed (STYLE.md, Errors)",
              file=sys.stderr)
        failed = True
    for name, rel_dir in res.unnamed:
        print(f"error: {ARCHITECTURE_DOC} does not name the workspace package {name} "
              f"(`{rel_dir}`): add a row for it to the page's table of packages",
              file=sys.stderr)
        failed = True
    if failed:
        print("hint: `python3 scripts/check_layout.py --report` prints the whole table",
              file=sys.stderr)
        return 1
    print(f"layout ok: {len(res.shares)} crates, largest share "
          f"{max((s for _, _, s in res.shares), default=0):.1f} %, no production file over "
          f"{args.max_file_lines} lines, no module import cycle, no Result<_, String> in a "
          f"library crate, every package in {ARCHITECTURE_DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
