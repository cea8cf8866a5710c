#!/usr/bin/env bash
# Fails when the release rlm-orchestrate is over 30 MiB, or when it no longer carries the
# line tables that let a panic backtrace name file and line (issue 21, item 8; how the
# release profile gets there: BENCHMARKS.md, "Release binary size").
#
# Usage: scripts/check_binary_size.sh [BINARY]
#   BINARY defaults to <cargo target dir>/release/rlm-orchestrate, as scripts/demo.sh
#   builds it; this script does not build. RLM_MAX_BINARY_MIB overrides the limit (30).
set -euo pipefail
# A relative BINARY is relative to where the script was called from.
if [ $# -eq 1 ] && [ -e "$1" ]; then set -- "$(cd "$(dirname "$1")" && pwd -P)/$(basename "$1")"; fi
cd "$(dirname "$0")/.."

max_mib=${RLM_MAX_BINARY_MIB:-30}
if [ $# -gt 1 ]; then
  echo "usage: $0 [BINARY]" >&2
  exit 2
fi
if [ $# -eq 1 ]; then
  bin=$1
else
  # Where cargo put it: target/ unless CARGO_TARGET_DIR or a cargo config says otherwise.
  target_dir=$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
  bin=$target_dir/release/rlm-orchestrate
fi
if [ ! -f "$bin" ]; then
  echo "error: no binary at $bin" >&2
  echo "hint: cargo build --release -p rlm-orchestrate --bin rlm-orchestrate (scripts/demo.sh does)" >&2
  exit 2
fi

# Size, and the sections that backtraces read (std's symbolizer reads .debug_line, plain
# or zlib-compressed, from the binary itself). Python's stdlib reads the ELF headers so
# the check needs no binutils.
python3 - "$bin" "$max_mib" <<'PY'
import struct, sys

path, max_mib = sys.argv[1], float(sys.argv[2])
with open(path, "rb") as f:
    data = f.read()
size = len(data)
limit = int(max_mib * 1024 * 1024)
if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
    sys.exit(f"error: {path} is not a 64-bit little-endian ELF file")
shoff, = struct.unpack_from("<Q", data, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
def header(i):
    name, _type, flags, _addr, off, sz = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
    return name, flags, off, sz
strtab_off = header(shstrndx)[2]
sections = {}
for i in range(shnum):
    name_off, flags, _off, sz = header(i)
    end = data.index(b"\0", strtab_off + name_off)
    sections[data[strtab_off + name_off:end].decode()] = (sz, flags)
debug = {n: s for n, (s, _) in sections.items() if n.startswith(".debug")}
mib = size / 1024 / 1024
print(f"{path}: {mib:.1f} MiB ({size} bytes), limit {max_mib:g} MiB; debug sections "
      f"{sum(debug.values()) / 1024 / 1024:.1f} MiB "
      f"({', '.join(f'{n} {s / 1024 / 1024:.1f}' for n, s in sorted(debug.items(), key=lambda x: -x[1])[:4])})")
failed = False
if size > limit:
    print(f"error: the release binary is {mib:.1f} MiB, over {max_mib:g} MiB", file=sys.stderr)
    print("hint: see BENCHMARKS.md, \"Release binary size\", for the profile that keeps it small",
          file=sys.stderr)
    failed = True
if debug.get(".debug_line", 0) == 0:
    print("error: the release binary has no .debug_line: panic backtraces would lose file and line",
          file=sys.stderr)
    print("hint: keep debug = \"line-tables-only\" for the workspace's crates and no strip of debuginfo",
          file=sys.stderr)
    failed = True
sys.exit(1 if failed else 0)
PY
