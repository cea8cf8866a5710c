#!/usr/bin/env bash
# The Python-side tests (scripts/test.sh runs them after the Rust tests):
#   - `rlm-orchestrate mcp` driven by the official MCP Python SDK (`mcp` from PyPI);
#   - the package built by `pip install .` (maturin) into a fresh venv, exercised
#     against the scripted mock model.
# Needs python3 with venv and PyPI. The wheel is built in the same target directory as
# everything else (CARGO_TARGET_DIR), so it reuses the release build's dependencies.
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
CARGO_TARGET_DIR=$target_dir "$venv/bin/pip" install -q --disable-pip-version-check .

cd python/tests
echo "==> MCP server against the official client"
timeout 300 "$venv/bin/python" test_mcp.py "$bin" "$mock"
echo "==> the Python package"
timeout 300 "$venv/bin/python" test_package.py "$mock"
