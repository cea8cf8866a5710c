#!/usr/bin/env bash
# A reading of the project's own suites on a local model (docs/eval.md, "A reading with a
# local model"): rlm's arms, the plain model and the official library (`rlms`) on the same
# local model, the same items and the same endpoint. It takes hours on two cores: run it
# in the background; every step is resumable (`eval --resume`), so run it again after a
# crash, a Ctrl-C or a reboot and it goes on where it stopped.
#
# The default plan, the same for every arm:
#   model      Qwen2.5-Coder-1.5B-Instruct Q4_K_M (scripts/local-model.sh), n_ctx 8192,
#              temperature 0, served on 127.0.0.1:$PORT, one request at a time
#   items      --seed 1, 5 items per cell
#   sets       sniah         real text (Paul Graham's essays, scripts/corpora.sh)
#              multi-needle  real text, 2 distractor needles per context
#              word-count    real text: counts over the whole text
#              aggregate, pairs   generated records
#   lengths    32k characters (past the 8k-token window) first, then 4k (inside it),
#              then 256k
#   arms       rlm --env tools, rlm --env python, baseline (the first 24 000
#              characters, what fits the window with the question and the answer), rlms
#              (rlms 0.1.3, RLM(...).completion, scripts/arms/rlms.py)
# Defaults of `run` otherwise (20 iterations, sub-calls on the same model).
#
# Usage:
#   scripts/eval-local.sh run        install what is missing, start the model, run the plan
#   scripts/eval-local.sh collect    copy every step's results.json, table.md and
#                                    accuracy.svg, the traces of its RLM runs and a
#                                    failures.md into $RLM_EVAL_COLLECT (outside git)
#   scripts/eval-local.sh status     items scored so far per step
#   scripts/eval-local.sh table      the cells scored so far as a markdown table
#   scripts/eval-local.sh show RUN   one RLM run's trace (`runs show`), also once collected
# Work files (contexts, the data directory with every trace) live in $RLM_EVAL_DIR
# (default .local-models/eval), not in git. `collect` keeps what a reading is read back
# from — each step's results.json, failures.md (scripts/eval-failures.py: each item not
# right, its cause and the evidence) and STEP/runs/RUN_ID/ (events.jsonl.gz and
# summary.json of every RLM run) — in $RLM_EVAL_COLLECT (default
# .local-models/readings/MODEL[-NAME]; ignored by git). Raw runs belong in a release
# artifact, not in the source tree: to publish a reading, attach an archive of that
# directory to a release (`tar czf reading.tar.gz -C .local-models/readings MODEL-NAME`).
# A machine handed over new (the work directory gone) goes on from a collected reading:
# unpack it into $RLM_EVAL_COLLECT and `run` starts each step from its results.json, so
# scored items are not asked again; the contexts are made again from the seed, byte for
# byte. `show RUN_ID` reads a collected run as `runs show` does.
# A reading under another name (the same plan with a later rlm, to compare):
# RLM_EVAL_NAME=after keeps its work in .local-models/eval-after and collects into
# .local-models/readings/qwen2.5-coder-1.5b-after; RLM_EVAL_BIN runs a given binary instead
# of building target/release/rlm-orchestrate; RLM_EVAL_ARMS=rlm asks only the RLM arms
# (the baseline and rlms do not change with rlm's loop). RLM_EVAL_ENVS (default
# "tools python"; also plan, plan-text, js), RLM_EVAL_STEPS (step names in the order to run, default
# "sniah multi-needle word-count records"; `aggregate` or `pairs` reads one of the
# records' suites alone, into its own step directory) and RLM_EVAL_LENGTHS (default "32k 4k 256k")
# choose the cells of such a reading; the first env gets RLM_EVAL_ARMS, the others rlm;
# RLM_EVAL_FLAGS adds eval flags (e.g. "--context-window 8192"); RLM_EVAL_SEED (default
# 1) draws other items (give such a reading its own RLM_EVAL_NAME: a step's results are
# kept per item index, not per seed).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
MODEL=qwen2.5-coder-1.5b
PORT="${RLM_EVAL_PORT:-8091}"
SEED="${RLM_EVAL_SEED:-1}"
NAME="${RLM_EVAL_NAME:-}"
WORK="${RLM_EVAL_DIR:-$ROOT/.local-models/eval${NAME:+-$NAME}}"
COLLECTED="${RLM_EVAL_COLLECT:-$ROOT/.local-models/readings}/$MODEL${NAME:+-$NAME}"
BIN="${RLM_EVAL_BIN:-$ROOT/target/release/rlm-orchestrate}"
read -r -a LENGTHS <<<"${RLM_EVAL_LENGTHS:-32k 4k 256k}"
read -r -a ENVS <<<"${RLM_EVAL_ENVS:-tools python}"
read -r -a ORDER <<<"${RLM_EVAL_STEPS:-sniah multi-needle word-count records}"
BASE_URL="http://127.0.0.1:$PORT/v1"

# name | suites | extra flags (haystack sets get --haystack)
STEPS=(
  "sniah|sniah|haystack"
  "multi-needle|multi-needle|haystack --distractors 2"
  "word-count|word-count|haystack"
  "records|aggregate,pairs|"
  "aggregate|aggregate|"
  "pairs|pairs|"
)

log() { echo "eval-local: $*"; }

prepare() {
  if [ -n "${RLM_EVAL_BIN:-}" ]; then
    [ -x "$BIN" ] || { echo "eval-local: RLM_EVAL_BIN=$BIN is not an executable" >&2; exit 1; }
  elif [ ! -x "$BIN" ] || [ -n "$(find crates bin -newer "$BIN" -name '*.rs' -print -quit)" ]; then
    log "building the release binary"
    cargo build --release --quiet -p rlm-orchestrate --bin rlm-orchestrate
  fi
  ESSAYS="$(bash scripts/corpora.sh | awk -F'\t' '/essays/ {print $1}')"
  [ -d "$ESSAYS" ] || { echo "eval-local: the essays corpus is missing" >&2; exit 1; }
  bash scripts/arms/setup-rlms.sh >/dev/null
  RLMS_PYTHON="$(bash scripts/arms/setup-rlms.sh python)"
  bash scripts/local-model.sh --model "$MODEL" install >/dev/null
  if ! curl -sf "$BASE_URL/models" >/dev/null; then
    bash scripts/local-model.sh --model "$MODEL" start "$PORT"
  fi
}

# A step whose work directory has no results.json starts from the one `collect` kept
# (the work directory is gone: a machine handed over new): its scored items are kept.
seed_from_collected() {
  local step=$1
  if [ ! -f "$WORK/$step/results.json" ] && [ -f "$COLLECTED/$step/results.json" ]; then
    mkdir -p "$WORK/$step"
    cp "$COLLECTED/$step/results.json" "$WORK/$step/results.json"
    log "$step: resumed from $COLLECTED/$step/results.json"
  fi
}

# eval for one step, length and arm set.
run_step() {
  local name=$1 suites=$2 extra=$3 length=$4 env=$5 arms=$6
  local out="$WORK/$name-$env"
  local flags=()
  # `plan-text`: --env plan with calls written as text and the plan's schema sent as
  # response_format (a grammar on llama-cpp-python).
  if [ "$env" = plan-text ]; then env=plan; flags+=(--tool-protocol text); fi
  # shellcheck disable=SC2206  # extra eval flags, words as written by the caller
  [ -n "${RLM_EVAL_FLAGS:-}" ] && flags+=($RLM_EVAL_FLAGS)
  case "$extra" in
    haystack*) flags+=(--haystack "$ESSAYS"); extra=${extra#haystack} ;;
  esac
  # shellcheck disable=SC2206  # the extra flags are words written above
  flags+=($extra)
  log "$name · $length · env $env · arms $arms"
  seed_from_collected "$(basename "$out")"
  "$BIN" --data-dir "$WORK/data" eval \
    --suite "$suites" --lengths "$length" --items 5 --seed "$SEED" --parallel 1 \
    --baseline-window 24000 --base-url "$BASE_URL" --model "$MODEL" \
    --temperature 0 --request-timeout 900 --env "$env" \
    --arms "$arms" \
    --arm rlms="$RLMS_PYTHON $ROOT/scripts/arms/rlms.py --base-url {base_url} --model {model} --temperature 0 --timeout 900 --context-file {context_file} --question-file {question_file} --output-file {output_file}" \
    --arm-timeout 7200 --out "$out" --resume "${flags[@]}"
}

case "${1:-}" in
  run)
    prepare
    mkdir -p "$WORK"
    started=$(date +%s)
    for length in "${LENGTHS[@]}"; do
      for wanted in "${ORDER[@]}"; do
        for step in "${STEPS[@]}"; do
          IFS='|' read -r name suites extra <<<"$step"
          [ "$name" = "$wanted" ] || continue
          arms="${RLM_EVAL_ARMS:-rlm,baseline,rlms}"
          for env in "${ENVS[@]}"; do
            # A step with unscored items (the server was down) does not stop the plan:
            # run the script again and --resume asks them again. An interrupted one
            # (Ctrl-C: eval exits 130) does.
            status=0
            run_step "$name" "$suites" "$extra" "$length" "$env" "$arms" || status=$?
            case $status in
              0) ;;
              130) echo "eval-local: interrupted; what was scored is kept: run again to go on" >&2; exit 130 ;;
              *) log "$name · $length · $env: items left unscored; run again to ask them" ;;
            esac
            arms=rlm
          done
        done
      done
    done
    log "the whole plan took $(( $(date +%s) - started )) s in this sitting"
    ;;
  collect)
    for dir in "$WORK"/*/; do
      [ -f "$dir/results.json" ] || continue
      name=$(basename "$dir")
      mkdir -p "$COLLECTED/$name"
      cp "$dir/results.json" "$COLLECTED/$name/"
      # The table and chart are written when a step ends: not while it is mid-way.
      for f in table.md accuracy.svg; do
        if [ -f "$dir/$f" ] && ! [ "$dir/$f" -ot "$dir/results.json" ]; then
          cp "$dir/$f" "$COLLECTED/$name/"
        else
          rm -f "$COLLECTED/$name/$f"
        fi
      done
      # Every RLM run's trace (events.jsonl compressed, and summary.json): what
      # scripts/eval-failures.py and `show` read once the data directory is gone.
      python3 -c 'import json,sys; print("\n".join(r["run_id"] for r in json.load(open(sys.argv[1])) if r.get("run_id")))' \
        "$dir/results.json" | while read -r run; do
        kept="$COLLECTED/$name/runs/$run"
        [ -f "$kept/events.jsonl.gz" ] && continue
        [ -f "$WORK/data/runs/$run/events.jsonl" ] || continue
        mkdir -p "$kept"
        gzip -9n <"$WORK/data/runs/$run/events.jsonl" >"$kept/events.jsonl.gz"
        [ -f "$WORK/data/runs/$run/summary.json" ] && cp "$WORK/data/runs/$run/summary.json" "$kept/"
      done
      log "collected $name into $COLLECTED/$name"
    done
    if [ -d "$COLLECTED" ]; then
      python3 scripts/eval-failures.py "$COLLECTED" --items >"$COLLECTED/failures.md"
      log "wrote $COLLECTED/failures.md (to publish the reading, attach an archive of $COLLECTED to a release)"
    fi
    ;;
  show)
    # One RLM run as `runs show` tells it: from the data directory, else from the trace
    # `collect` kept (unpacked into a scratch data directory).
    run="${2:?usage: scripts/eval-local.sh show RUN_ID}"
    if [ -d "$WORK/data/runs/$run" ]; then
      exec "$BIN" --data-dir "$WORK/data" runs show "$run"
    fi
    kept=$(find "$COLLECTED" -path "*/runs/$run" -type d -print -quit 2>/dev/null || true)
    [ -n "$kept" ] || { echo "eval-local: no run $run in $WORK/data or $COLLECTED: check RLM_EVAL_NAME and RLM_EVAL_COLLECT" >&2; exit 1; }
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    mkdir -p "$scratch/runs/$run"
    gzip -dc "$kept/events.jsonl.gz" >"$scratch/runs/$run/events.jsonl"
    [ -f "$kept/summary.json" ] && cp "$kept/summary.json" "$scratch/runs/$run/"
    "$BIN" --data-dir "$scratch" runs show "$run"
    ;;
  status)
    python3 "$ROOT/scripts/readings.py" status "$WORK"
    ;;
  table)
    python3 "$ROOT/scripts/readings.py" table "$WORK"
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
