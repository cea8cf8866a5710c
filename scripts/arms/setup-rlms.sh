#!/usr/bin/env bash
# Installs the official RLM library (`rlms` 0.1.3 from PyPI, the reference
# implementation of the paper) into a virtual environment of its own, for the
# `scripts/arms/rlms.py` arm of `rlm-orchestrate eval` (docs/eval.md).
#
# Usage:
#   scripts/arms/setup-rlms.sh            create the venv (once) and install rlms
#   scripts/arms/setup-rlms.sh python     print the venv's python (after installing)
#
# The venv is ${RLM_ARMS_DIR:-.local-models}/rlms-venv (.local-models is at the
# repository root and ignored by git). Needs python3 >= 3.11 with venv and PyPI; takes a
# minute or two the first time (rlms pulls openai, anthropic, google-genai, portkey-ai…),
# a few seconds afterwards.
#
# Then, e.g.:
#   rlm-orchestrate eval --arms baseline \
#     --arm rlms="$(scripts/arms/setup-rlms.sh python) scripts/arms/rlms.py \
#        --base-url {base_url} --model {model} --context-file {context_file} \
#        --question-file {question_file} --output-file {output_file}" ...
set -euo pipefail
cd "$(dirname "$0")/../.."

version=0.1.3
dir=${RLM_ARMS_DIR:-.local-models}
venv=$dir/rlms-venv
python=$venv/bin/python

if [[ ${1:-} == python ]]; then
  if [[ ! -x $python ]]; then
    echo "no rlms venv at $venv: run scripts/arms/setup-rlms.sh first" >&2
    exit 1
  fi
  echo "$(cd "$(dirname "$python")" && pwd)/python"
  exit 0
fi

if ! python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "rlms $version needs Python >= 3.11; python3 is $(python3 --version 2>&1)" >&2
  exit 1
fi
mkdir -p "$dir"
if [[ ! -x $python ]]; then
  echo "==> creating $venv"
  python3 -m venv "$venv"
fi
if "$python" -c "import importlib.metadata as m, sys; sys.exit(m.version('rlms') != '$version')" 2>/dev/null; then
  echo "rlms $version is installed in $venv"
else
  echo "==> pip install rlms==$version into $venv"
  "$python" -m pip install -q --disable-pip-version-check "rlms==$version"
fi
"$python" -c 'from rlm import RLM; print("rlms ready:", RLM.__module__)'
echo "python: $(cd "$(dirname "$python")" && pwd)/python"
