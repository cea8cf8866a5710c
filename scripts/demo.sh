#!/usr/bin/env bash
# A tour of the context store with `rlm-orchestrate vars`, on a scratch copy of
# .rlm-data.example (the committed example is never modified). No API key needed.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --quiet -p rlm-orchestrate
bin=target/debug/rlm-orchestrate
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
cp -R .rlm-data.example/. "$data/"
export RLM_DATA_DIR="$data"

run() { printf '\n$ rlm-orchestrate %s\n' "$*"; "$bin" "$@"; }

run vars list
run vars show notes
run vars get notes
run vars set greeting "hello from the demo"
sha=$("$bin" vars list --json | python3 -c 'import json,sys; print(next(v["sha256"] for v in json.load(sys.stdin) if v["key"]=="greeting"))')
run vars set greeting "updated only if nobody else wrote it" --if-sha256 "$sha"
printf '\n$ rlm-orchestrate vars set greeting "stale write" --if-sha256 %s   # must conflict\n' "$sha"
if "$bin" vars set greeting "stale write" --if-sha256 "$sha"; then
  echo "expected a conflict" >&2; exit 1
else
  echo "(exit code $? = conflict, as expected)"
fi
run vars get greeting
run vars path greeting
echo
echo "A sub-agent in any language reads that file with a JSON parser and finds the data under \"value\"."
