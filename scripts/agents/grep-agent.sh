#!/bin/sh
# grep-agent.sh — an example rlm sub-agent that needs no model.
#
# It reads the prompt rlm gives it, finds the context variables it names (one line
# each: `Context variable "K" (N bytes, type: T): read /path — plain UTF-8 text …`: a
# text view of the variable, or the file a `file` variable refers to), and greps their
# lines for the pattern the task gives as `pattern: REGEX` (extended regular
# expression, as `grep -E`). It answers on stdout: the number of matching lines, then
# the first 20 of them. A JSON variable's view is its pretty-printed JSON.
#
# Use it as:   --agent-cmd 'sh scripts/agents/grep-agent.sh {prompt_file}'
# or (stdin):  --agent-cmd 'sh scripts/agents/grep-agent.sh'
# and a task such as:  spawn_agent("Count failed logins. pattern: login failed", refs=["logs"])
set -eu

max_lines=20
scratch=$(mktemp -d "${TMPDIR:-/tmp}/grep-agent.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
trap 'exit 143' INT TERM

if [ $# -ge 1 ]; then
  prompt_file=$1
else
  prompt_file=$scratch/prompt.txt
  cat > "$prompt_file"
fi

# The pattern: whatever follows the first "pattern:" in the prompt, to the end of line.
pattern=$(sed -n 's/.*pattern:[[:space:]]*//p' "$prompt_file" | head -n 1)
if [ -z "$pattern" ]; then
  echo "grep-agent: the task names no pattern; write it as 'pattern: REGEX'" >&2
  exit 2
fi

# The files: the path between "): read " and " — plain UTF-8 text" (a view) or
# " — a plain UTF-8 text file" (a `file` variable's own file).
sed -n 's/^Context variable .*): read \(.*\) — a\{0,1\} \{0,1\}plain UTF-8 text.*$/\1/p' \
  "$prompt_file" > "$scratch/paths"
if [ ! -s "$scratch/paths" ]; then
  echo "grep-agent: the prompt names no context variable" >&2
  exit 2
fi

while IFS= read -r path; do
  cat "$path"
  # A file need not end with a newline; the next one starts on its own line.
  [ -z "$(tail -c 1 "$path")" ] || echo
done < "$scratch/paths" > "$scratch/lines"

grep -E -e "$pattern" "$scratch/lines" > "$scratch/matches" || true
count=$(wc -l < "$scratch/matches" | tr -d ' ')
echo "$count matching lines for pattern \"$pattern\""
head -n "$max_lines" "$scratch/matches"
if [ "$count" -gt "$max_lines" ]; then
  echo "[… $((count - max_lines)) more matching lines not shown]"
fi
