#!/usr/bin/env bash
# The project's test command (README and CI run exactly this):
# formatting, clippy with warnings as errors, every test of the workspace, then the
# Python-side tests (MCP client, the pip-installed package: scripts/test_python.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> layout: no module import cycle, no crate over 35 %, no production file over 600 lines, no Result<_, String> in a library crate"
python3 scripts/test_check_layout.py
python3 scripts/check_layout.py

echo "==> eval reading scripts"
python3 scripts/test_eval_failures.py
python3 scripts/test_eval_local.py
python3 scripts/test_readings.py
python3 scripts/test_eval_public.py

echo "==> cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

profile=default
[ "${CI:-}" = "true" ] && profile=ci
if cargo nextest --version >/dev/null 2>&1; then
  echo "==> cargo nextest run"
  cargo nextest run --workspace --locked --profile "$profile"
  echo "==> doc tests"
  cargo test --workspace --locked --doc
else
  echo "==> cargo test (cargo-nextest not installed)"
  cargo test --workspace --locked
fi

echo "==> Python: the MCP server and the package (scripts/test_python.sh)"
bash scripts/test_python.sh
