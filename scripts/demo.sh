#!/usr/bin/env bash
# The offline demo (README command 1): builds rlm-orchestrate (release), generates a
# 50 MB multi-service log, starts the repository's *example model* — mock-llm, a scripted
# stand-in for an OpenAI-compatible server on 127.0.0.1, NOT a real model — and runs
# `rlm-orchestrate run` over the log. The code the example model "writes" is real and
# runs in the Python REPL over the real log. No API key, no network.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }

echo "building the release binaries (a few minutes the first time)…"
# The same release build that `pip install .` reuses (scripts/test_python.sh): keep the
# profile and flags in step with pyproject.toml's [tool.maturin].
cargo build --release --quiet -p rlm-orchestrate -p rlm-test-support --bin rlm-orchestrate --bin mock-llm
# Where cargo put them: target/ unless CARGO_TARGET_DIR or a cargo config says otherwise.
target_dir=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
bin=$target_dir/release/rlm-orchestrate
mock=$target_dir/release/mock-llm
# Kept after the demo so its trace and HTML view can be opened: target/demo, or demo/
# in the target directory cargo uses. Never somewhere git would pick it up.
work=$target_dir/demo
case "$work/" in
  "$(pwd -P)"/*)
    if ! git check-ignore -q "$work" 2>/dev/null; then
      echo "error: the demo's files would go to $work, inside the repository and not ignored by git" >&2
      echo "hint: unset CARGO_TARGET_DIR, or point it outside the repository" >&2
      exit 1
    fi ;;
esac
rm -rf "$work" && mkdir -p "$work"
mock_pid=""
cleanup() {
  # The mock exits by itself when its stdin (our coproc pipe) closes; make sure.
  if [ -n "$mock_pid" ]; then
    kill "$mock_pid" 2>/dev/null || true
    wait "$mock_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT
export RLM_DATA_DIR="$work/.rlm-data"

say "1. A 50 MB log from six services"
python3 - "$work/app.log" <<'PY'
import random, sys
random.seed(7)
services = ["api", "auth", "billing", "search", "worker", "gateway"]
weights = {"api": 3, "auth": 1, "billing": 9, "search": 2, "worker": 4, "gateway": 1}
with open(sys.argv[1], "w") as f:
    size, t = 0, 0
    while size < 50 * 1024 * 1024:
        t += random.randint(1, 40)
        svc = random.choice(services)
        level = "ERROR" if random.random() < weights[svc] / 400 else random.choice(["INFO", "INFO", "DEBUG", "WARN"])
        line = f"2026-11-22T{9 + t // 3600000 % 10:02d}:{t // 60000 % 60:02d}:{t // 1000 % 60:02d}.{t % 1000:03d}Z svc={svc} level={level} req={random.getrandbits(32):08x} msg=\"{'payment declined' if level == 'ERROR' and svc == 'billing' else 'handled request'}\" ms={random.randint(1, 900)}\n"
        f.write(line)
        size += len(line)
PY
ls -lh "$work/app.log" | awk '{print $5, $9}'

say "2. The example model (scripted stand-in for an OpenAI-compatible server)"
coproc MOCK { exec "$mock" --script scripts/example-model/incident.json; }
mock_pid=$MOCK_PID
read -r line <&"${MOCK[0]}"
url=${line##* }
echo "$line"

say "3. rlm-orchestrate run 'Which service logged the most errors?' --context app.log --agent-cmd '…grep-agent.sh {prompt_file}'"
"$bin" run "Which service logged the most errors, and how many?" \
  --context "$work/app.log" --base-url "$url/v1" --model example-model \
  --agent-cmd "sh $PWD/scripts/agents/grep-agent.sh {prompt_file}"

say "4. What the run left behind"
"$bin" vars list
"$bin" runs list
run_id=$("$bin" runs list --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["run_id"])')
"$bin" runs show "$run_id" --html "$work/trace.html"
echo "the trace as text:  RLM_DATA_DIR=$RLM_DATA_DIR $bin runs show $run_id"
echo "the HTML view:      open $work/trace.html  (self-contained, no network)"

say "5. The store from the shell"
"$bin" vars set greeting "hello from the demo"
sha=$("$bin" vars show greeting --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["ref"]["sha256"])')
"$bin" vars set greeting "updated only if nobody else wrote it" --if-sha256 "$sha"
if "$bin" vars set greeting "stale write" --if-sha256 "$sha" 2>/dev/null; then
  echo "expected a compare-and-set conflict" >&2; exit 1
else
  echo "a stale --if-sha256 write was refused (exit 3), as it should be"
fi
echo "file given to sub-agents: $("$bin" vars path greeting)"

cat <<'TXT'

With a real model, the same command:
  OPENAI_API_KEY=... rlm-orchestrate run "..." --context app.log --model gpt-4o-mini
  rlm-orchestrate run "..." --context app.log --base-url http://127.0.0.1:8080/v1 --model local   # llama.cpp, vLLM, Ollama
  rlm-orchestrate run "..." --context app.log --provider anthropic --model claude-sonnet-4-5     # ANTHROPIC_API_KEY
  rlm-orchestrate run "..." --context app.log --provider cli --llm-cmd 'llm -m gpt-4o-mini'
TXT
