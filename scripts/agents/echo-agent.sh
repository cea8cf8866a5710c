#!/bin/sh
# echo-agent.sh — the smallest rlm sub-agent: it answers with its task.
#
# It prints the task part of the prompt (everything before the context-variable and
# how-to-answer sections rlm appends), which makes the plumbing visible: what the
# model asked, as the agent received it.
#
# Use it as:   --agent-cmd 'sh scripts/agents/echo-agent.sh {prompt_file}'
# or (stdin):  --agent-cmd 'sh scripts/agents/echo-agent.sh'
set -eu

if [ $# -ge 1 ]; then
  exec < "$1"
fi
# Stop at the first section heading; drop the blank lines before it.
awk '
  /^--- (Context variables|How to answer)/ { exit }
  /^$/ { blank++; next }
  { while (blank > 0) { print ""; blank-- } print }
'
