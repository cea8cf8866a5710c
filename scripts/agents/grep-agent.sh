#!/bin/sh
# grep-agent.sh — an example rlm sub-agent that needs no model.
#
# It reads the prompt rlm gives it, finds the context variables it names (one line
# each: `Context variable "K" (N bytes, type: T): read /path/K.json — …`), loads each
# file's "value" with python3's json module (a `file` variable names a plain text
# file, read as is), and greps the lines for the pattern the
# task gives as `pattern: REGEX` (extended regular expression, as `grep -E`). It
# answers on stdout: the number of matching lines, then the first 20 of them.
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

# The variable files: the path between "): read " and " — the JSON file"; a `file`
# variable (a context referenced where it is) names the text file itself instead.
sed -n 's/^Context variable .*): read \(.*\) — the JSON file has a "value" field with the data\.$/json \1/p
s/^Context variable .*): read \(.*\) — a plain UTF-8 text file (the data itself, not JSON)\.$/text \1/p' \
  "$prompt_file" > "$scratch/paths"
if [ ! -s "$scratch/paths" ]; then
  echo "grep-agent: the prompt names no context variable" >&2
  exit 2
fi

# Each value as lines: a string as is, a list one item a line, an object "key: value".
while IFS= read -r entry; do
  kind=${entry%% *}
  path=${entry#* }
  if [ "$kind" = text ]; then
    cat "$path"
    continue
  fi
  python3 -c '
import json, sys
value = json.load(open(sys.argv[1], encoding="utf-8"))["value"]
def text(v):
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
if isinstance(value, list):
    items = [text(v) for v in value]
elif isinstance(value, dict):
    items = ["%s: %s" % (k, text(v)) for k, v in value.items()]
else:
    items = [text(value)]
for item in items:
    sys.stdout.write(item if item.endswith("\n") else item + "\n")
' "$path"
done < "$scratch/paths" > "$scratch/lines"

grep -E -e "$pattern" "$scratch/lines" > "$scratch/matches" || true
count=$(wc -l < "$scratch/matches" | tr -d ' ')
echo "$count matching lines for pattern \"$pattern\""
head -n "$max_lines" "$scratch/matches"
if [ "$count" -gt "$max_lines" ]; then
  echo "[… $((count - max_lines)) more matching lines not shown]"
fi
