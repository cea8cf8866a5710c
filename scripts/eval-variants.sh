#!/usr/bin/env bash
# Issue 50's reading: the RLM's own loop on the record suites (aggregate, pairs) in every
# form `eval --variant` gives them, with the corrections on and (where the binary has
# them) off, on the real local model. Resumable (`eval --resume`): run it again after a
# crash or a Ctrl-C and it goes on. Long (about a minute an item on two cores): run it in
# the background.
#
# The plan, fixed before any result is seen:
#   model     Qwen2.5-Coder-1.5B-Instruct Q4_K_M (scripts/local-model.sh), n_ctx 8192,
#             temperature 0, on 127.0.0.1:$RLM_EVAL_PORT (default 8091)
#   items     --seed $RLM_EVAL_SEED (default 101), 5 items per cell, --parallel 1
#   suites    aggregate, pairs; length 32k characters (past the window)
#   env       $RLM_EVAL_ENVS (default python)
#   cells     form default, reworded, json, csv  ×  corrections $RLM_EVAL_CORRECTIONS
#             (default "default"; "default none" on a binary with --corrections)
#   amended   2026-12-02, before any of those cells was run: with the corrections off,
#             the reworded, json and csv forms ask `aggregate` alone. Off, a `pairs` item
#             the model cannot solve runs all 20 iterations (the first took 45 minutes);
#             the 15 such items would have cost about 11 model hours, and `pairs` scored
#             0/5 in every form with the corrections on
#   arm       rlm only (the plain model and rlms do not change with the loop)
#
# Usage: RLM_EVAL_BIN=path/to/rlm-orchestrate RLM_EVAL_NAME=before scripts/eval-variants.sh run
#        RLM_EVAL_NAME=before scripts/eval-variants.sh table
# Work files live in $RLM_EVAL_DIR (default .local-models/variants-$RLM_EVAL_NAME).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
NAME="${RLM_EVAL_NAME:?set RLM_EVAL_NAME (before, after, ...)}"
WORK="${RLM_EVAL_DIR:-$ROOT/.local-models/variants-$NAME}"
BIN="${RLM_EVAL_BIN:-$ROOT/target/release/rlm-orchestrate}"
PORT="${RLM_EVAL_PORT:-8091}"
SEED="${RLM_EVAL_SEED:-101}"
MODEL=qwen2.5-coder-1.5b
read -r -a ENVS <<<"${RLM_EVAL_ENVS:-python}"
read -r -a CORRECTIONS <<<"${RLM_EVAL_CORRECTIONS:-default}"
FORMS=(default reworded json csv)
BASE_URL="http://127.0.0.1:$PORT/v1"

case "${1:-}" in
  run)
    [ -x "$BIN" ] || { echo "eval-variants: $BIN is not an executable (set RLM_EVAL_BIN)" >&2; exit 1; }
    if ! curl -sf "$BASE_URL/models" >/dev/null; then
      bash "$ROOT/scripts/local-model.sh" --model "$MODEL" start "$PORT"
    fi
    mkdir -p "$WORK"
    for env in "${ENVS[@]}"; do
      for corrections in "${CORRECTIONS[@]}"; do
        for form in "${FORMS[@]}"; do
          flags=()
          [ "$corrections" = default ] || flags+=(--corrections "$corrections")
          out="$WORK/$env-$form-corrections-$corrections"
          suites=aggregate,pairs
          # The amendment above.
          [ "$corrections" = default ] || [ "$form" = default ] || suites=aggregate
          echo "eval-variants: $env · $form · corrections $corrections · $suites"
          "$BIN" --data-dir "$WORK/data" eval --suite "$suites" --lengths 32k \
            --items 5 --seed "$SEED" --parallel 1 --variant "$form" --arms rlm \
            --base-url "$BASE_URL" --model "$MODEL" --temperature 0 \
            --request-timeout 900 --env "$env" --out "$out" --resume "${flags[@]}" ||
            echo "eval-variants: $out: items left unscored; run again to ask them"
        done
      done
    done
    ;;
  table)
    python3 "$ROOT/scripts/readings.py" table "$WORK"
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
