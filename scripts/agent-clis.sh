#!/usr/bin/env bash
# The real agent CLIs the end-to-end tests drive (bin/rlm-orchestrate/tests/it/
# real_agents.rs and real_llm_agent.rs), pinned, installed into one directory:
#
#   $DIR/node_modules/.bin/claude   @anthropic-ai/claude-code 2.1.331 (npm)
#   $DIR/node_modules/.bin/codex    @openai/codex 0.169.0 (npm)
#   $DIR/llm-venv/bin/llm           llm 0.36 (PyPI, in its own venv)
#
# where DIR is ${RLM_AGENTS_DIR:-/opt/rlm-agents}. Idempotent: what is already there at
# the pinned version is left alone, so a second run only checks versions (a few
# seconds). Node and npm come from Debian (apt-get, as root) only when `npm` is missing;
# python3-venv only when `python3 -m venv` fails.
#
# npm warns that claude-code's postinstall script was not run; its native binary works
# anyway, and this script checks that (`claude --version`).
#
# Usage: bash scripts/agent-clis.sh        (RLM_AGENTS_DIR=/somewhere to install there)
set -euo pipefail

DIR="${RLM_AGENTS_DIR:-/opt/rlm-agents}"
CLAUDE_VERSION=2.1.331
CODEX_VERSION=0.169.0
LLM_VERSION=0.36

die() {
  echo "agent-clis: error: $*" >&2
  exit 1
}
say() { echo "agent-clis: $*"; }

apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install $* by hand"
  say "installing $* with apt-get"
  apt-get update -qq || die "apt-get update failed (installing $*)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null ||
    die "apt-get install $* failed"
}

# The version a CLI prints, or nothing when it is absent or does not run.
version_of() {
  [ -x "$1" ] || return 0
  "$1" --version 2>/dev/null | head -n 1 || true
}

mkdir -p "$DIR" || die "cannot create $DIR"
DIR="$(cd "$DIR" && pwd)"
started=$(date +%s)

# --- Claude Code and Codex (npm) ------------------------------------------------------
claude="$DIR/node_modules/.bin/claude"
codex="$DIR/node_modules/.bin/codex"
have_claude="$(version_of "$claude")"
have_codex="$(version_of "$codex")"
if [[ "$have_claude" == "$CLAUDE_VERSION "* && "$have_codex" == "codex-cli $CODEX_VERSION" ]]; then
  say "claude $CLAUDE_VERSION and codex $CODEX_VERSION already installed in $DIR/node_modules"
else
  say "claude: ${have_claude:-absent}; codex: ${have_codex:-absent}"
  if ! command -v npm >/dev/null 2>&1; then
    apt_install nodejs npm
    command -v npm >/dev/null 2>&1 || die "npm still missing after apt-get install nodejs npm"
  fi
  say "npm install @anthropic-ai/claude-code@$CLAUDE_VERSION @openai/codex@$CODEX_VERSION into $DIR"
  npm install --prefix "$DIR" --no-audit --no-fund --save-exact \
    "@anthropic-ai/claude-code@$CLAUDE_VERSION" "@openai/codex@$CODEX_VERSION" ||
    die "npm install failed"
  have_claude="$(version_of "$claude")"
  have_codex="$(version_of "$codex")"
  [[ "$have_claude" == "$CLAUDE_VERSION "* ]] ||
    die "$claude --version printed '${have_claude}', expected $CLAUDE_VERSION (Claude Code)"
  [[ "$have_codex" == "codex-cli $CODEX_VERSION" ]] ||
    die "$codex --version printed '${have_codex}', expected codex-cli $CODEX_VERSION"
  say "installed: $have_claude; $have_codex"
fi

# --- llm (PyPI, in a venv) ------------------------------------------------------------
venv="$DIR/llm-venv"
llm="$venv/bin/llm"
have_llm="$(version_of "$llm")"
if [ "$have_llm" = "llm, version $LLM_VERSION" ]; then
  say "llm $LLM_VERSION already installed in $venv"
else
  say "llm: ${have_llm:-absent}"
  command -v python3 >/dev/null 2>&1 || apt_install python3
  if [ ! -x "$venv/bin/python" ]; then
    rm -rf "$venv"
    if ! python3 -m venv "$venv" >/dev/null 2>&1; then
      rm -rf "$venv"
      apt_install python3-venv
      python3 -m venv "$venv" || die "python3 -m venv $venv failed after installing python3-venv"
    fi
    say "created the venv $venv ($("$venv/bin/python" --version 2>&1))"
  fi
  say "pip install llm==$LLM_VERSION into $venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "llm==$LLM_VERSION" ||
    die "pip install llm==$LLM_VERSION failed"
  have_llm="$(version_of "$llm")"
  [ "$have_llm" = "llm, version $LLM_VERSION" ] ||
    die "$llm --version printed '${have_llm}', expected llm, version $LLM_VERSION"
  say "installed: $have_llm"
fi

say "done in $(($(date +%s) - started)) s: $claude, $codex, $llm"
