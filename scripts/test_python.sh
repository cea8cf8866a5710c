#!/usr/bin/env bash
# The Python-side tests (scripts/test.sh runs them after the Rust tests):
#   - `rlm-orchestrate mcp` driven by the official MCP Python SDK (`mcp` from PyPI);
#   - the package built by `pip install .` (maturin) into a fresh venv, exercised
#     against the scripted mock model.
# Needs python3 with venv and PyPI. The wheel is built in the same target directory as
# everything else (CARGO_TARGET_DIR) and the same profile, with no extra rustc flags
# (pyproject.toml), so after scripts/demo.sh's release build maturin's `cargo rustc
# --profile release` has nothing to compile: the wheel carries that very binary (7 min
# 15 s → 12.5 s for `pip install .` with a warm release build on two cores, issue 54).
# A check below fails if the wheel's binary is ever built a second time.
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
cargo build -q --locked -p rlm-orchestrate -p rlm-test-support --bin rlm-orchestrate --bin mock-llm
bin=$target_dir/debug/rlm-orchestrate
mock=$target_dir/debug/mock-llm

venv=$target_dir/python-tests-venv
rm -rf "$venv"
python3 -m venv "$venv"
echo "==> pip install mcp (the official MCP SDK) and . (this repository) into a fresh venv"
"$venv/bin/pip" install -q --disable-pip-version-check mcp
start=$(date +%s)
CARGO_TARGET_DIR=$target_dir "$venv/bin/pip" install -q --disable-pip-version-check .
echo "    (pip install . took $(( $(date +%s) - start )) s)"
# The wheel's binary is the release build's, byte for byte: a flag that made maturin
# compile it again (strip, features, RUSTFLAGS) would show up here, not only as time.
if ! cmp -s "$venv/bin/rlm-orchestrate" "$target_dir/release/rlm-orchestrate"; then
  echo "error: the wheel's rlm-orchestrate differs from $target_dir/release/rlm-orchestrate:" >&2
  echo "       maturin compiled the binary again instead of reusing the release build" >&2
  echo "hint: keep [tool.maturin] free of strip/features/rustc-args (pyproject.toml)" >&2
  exit 1
fi

cd python/tests
echo "==> MCP server against the official client"
timeout 300 "$venv/bin/python" test_mcp.py "$bin" "$mock"
echo "==> the Python package"
timeout 300 "$venv/bin/python" test_package.py "$mock"
