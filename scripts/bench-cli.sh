#!/usr/bin/env bash
# Benchmark of the `vars` CLI on a huge text value: elapsed time and peak memory (max
# RSS) of `vars set big --file F` and `vars get big > /dev/null` with a 1 GiB file.
# Both stream, so max RSS should stay a few MiB whatever the size.
#
# Usage: scripts/bench-cli.sh            (1 GiB)
#        BENCH_SIZE_MIB=256 scripts/bench-cli.sh
#        BENCH_VERIFY=0 scripts/bench-cli.sh   (skip the untimed round-trip check)
# Scratch files go to a temporary directory under ${TMPDIR:-/tmp} (about 2.2x the size
# is needed) and are removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

size_mib=${BENCH_SIZE_MIB:-1024}
verify=${BENCH_VERIFY:-1}
target_dir=${CARGO_TARGET_DIR:-target}
bin="$target_dir/release/rlm-orchestrate"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/rlm-bench-cli.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
input="$scratch/big.log"
data_dir="$scratch/data"

echo "==> building the release binary"
cargo build --release --quiet -p rlm-orchestrate

echo "==> generating ${size_mib} MiB of text in $input"
# Whole lines only (no cut inside a multi-byte character); quotes, backslashes and
# non-ASCII make the JSON escaper work as on real logs.
line='2024-05-01T10:00:00.000Z ERROR auth: "token" expired user=é-😀 path=C:\tmp\x id=0123456789abcdef'
line_bytes=$(( $(printf '%s\n' "$line" | wc -c) ))
lines=$(( (size_mib * 1024 * 1024 + line_bytes - 1) / line_bytes ))
(yes "$line" || true) | head -n "$lines" > "$input"
input_bytes=$(wc -c < "$input")

# measure LABEL CMD… : runs CMD with stdout to /dev/null, prints elapsed and max RSS.
if [ -x /usr/bin/time ]; then
  measure() {
    local label=$1 report="$scratch/time.txt"
    shift
    /usr/bin/time -v -o "$report" "$@" > /dev/null
    local elapsed rss
    elapsed=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$report")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$report")
    printf '%-28s elapsed %10s   max RSS %8d KiB (%s MiB)\n' \
      "$label" "$elapsed" "$rss" "$(( rss / 1024 ))"
  }
elif command -v python3 > /dev/null; then
  # RUSAGE_CHILDREN's max RSS includes the forked python before exec: it overstates
  # the binary's peak by roughly python's own size (~10 MiB).
  measure() {
    local label=$1
    shift
    python3 - "$label" "$@" <<'PY'
import resource, subprocess, sys, time
label, cmd = sys.argv[1], sys.argv[2:]
start = time.monotonic()
code = subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode
elapsed = time.monotonic() - start
if code != 0:
    sys.exit(f"{label}: exit code {code}")
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
print(f"{label:<28} elapsed {elapsed:9.2f}s   max RSS {rss:8d} KiB ({rss // 1024} MiB)")
PY
  }
else
  echo "need /usr/bin/time or python3 to measure" >&2
  exit 1
fi

echo "==> input: $input_bytes bytes"
measure "vars set big --file F" \
  "$bin" --data-dir "$data_dir" vars set big --file "$input"
measure "vars get big > /dev/null" \
  "$bin" --data-dir "$data_dir" vars get big

stored=$(wc -c < "$("$bin" --data-dir "$data_dir" vars path big)")
echo "==> variable file: $stored bytes"

if [ "$verify" = 1 ]; then
  echo "==> verifying the round trip (untimed)"
  "$bin" --data-dir "$data_dir" vars get big | cmp -s - "$input" \
    && echo "round trip: identical" \
    || { echo "round trip: DIFFERENT" >&2; exit 1; }
fi
