#!/usr/bin/env bash
# Clang's thread-safety analysis (-Wthread-safety, as errors) over inferd's own translation units.
#
#   scripts/check_thread_safety.sh [BUILD_DIR]     # default: build; `make thread-safety` runs it
#
# GCC, which builds inferd, ignores the annotations of common/thread_annotations.h; this check
# re-runs the compile commands of BUILD_DIR/compile_commands.json with Debian's clang++ and
# -fsyntax-only (no code generation, so it costs a fraction of a build). The build dir must be
# built first (`make build`): the commands need the generated protobuf/gRPC headers.
#
# Checked: every .cc of src/ and tests/ that includes common/mutex.h or common/thread_annotations.h,
# directly or through project headers (found by following `#include "..."` lines, which is cheap);
# the others hold no annotated state. The project's GCC warning flags are dropped: this check is
# about locks, and clang's other warnings are not the build's contract.
#
# Environment: CLANGXX (default clang++), JOBS (default nproc). Exits 1 on any analysis error,
# printing the diagnostics of each failing file.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
CLANGXX=${CLANGXX:-clang++}
JOBS=${JOBS:-$(nproc)}

if [ ! -f "$BUILD/compile_commands.json" ]; then
  echo "check_thread_safety: $BUILD/compile_commands.json is missing; run \`make build\` first" >&2
  exit 2
fi
if ! command -v "$CLANGXX" >/dev/null; then
  echo "check_thread_safety: $CLANGXX not found (scripts/install_deps.sh installs clang)" >&2
  exit 2
fi

# -Wthread-safety-beta adds the checks still in development (e.g. on the pointees of guarded
# pointers); the tree passes them too. clang 14 parses libstdc++ 12's C++20 headers as used here
# without extra flags. One C++20 feature it lacks (until clang 16): a lambda cannot capture a
# structured binding (`for (auto& [k, v] : m) f([&] { return k; })` is an error); write an
# init-capture, `[&k = k]`, which GCC accepts too.
FLAGS=(-fsyntax-only -Wthread-safety -Wthread-safety-beta -Werror=thread-safety
       -Werror=thread-safety-beta)

WORK="$BUILD/thread-safety"
rm -rf "$WORK"
mkdir -p "$WORK"

# One response file per translation unit to check (clang reads its arguments from @file).
python3 - "$BUILD/compile_commands.json" "$WORK" "$PWD" "${FLAGS[@]}" <<'EOF'
import json, os, re, shlex, sys

db_path, work, root, flags = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
src = os.path.join(root, "src")
targets = {os.path.join(src, "common", h) for h in ("mutex.h", "thread_annotations.h")}
include_re = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
includes_of = {}

def includes(path):
    if path not in includes_of:
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            text = ""
        found = []
        for name in include_re.findall(text):
            for base in (os.path.dirname(path), src):
                candidate = os.path.normpath(os.path.join(base, name))
                if os.path.isfile(candidate):
                    found.append(candidate)
                    break
        includes_of[path] = found
    return includes_of[path]

def uses_annotations(path):
    seen, stack = set(), [path]
    while stack:
        p = stack.pop()
        if p in targets:
            return True
        if p not in seen:
            seen.add(p)
            stack.extend(includes(p))
    return False

def clang_args(entry):
    args = entry.get("arguments") or shlex.split(entry["command"])
    out, skip = [], False
    for a in args[1:]:  # args[0] is the compiler
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a == "-c" or a.startswith("-W"):
            continue
        else:
            out.append(a)
    return out + flags

n = total = 0
for entry in json.load(open(db_path)):
    path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    if not path.startswith(os.path.join(root, "")) or not path.endswith(".cc"):
        continue
    rel = os.path.relpath(path, root)
    if not rel.startswith(("src/", "tests/")):
        continue  # generated protobuf sources
    total += 1
    if not uses_annotations(path):
        continue
    n += 1
    with open(os.path.join(work, "%03d.rsp" % n), "w") as f:
        f.write(" ".join(shlex.quote(a) for a in clang_args(entry)) + "\n")
print("check_thread_safety: %d of %d translation units include the annotations" % (n, total))
EOF

start=$(date +%s)
rc=0
# Each file's diagnostics go to its .log and are printed only if it fails, so parallel jobs do not
# interleave their output.
find "$WORK" -name '*.rsp' -print0 | sort -z |
  xargs -0 -P "$JOBS" -n 1 sh -c '"$0" "@$1" >"$1.log" 2>&1 || { cat "$1.log"; exit 1; }' \
    "$CLANGXX" || rc=$?
echo "check_thread_safety: $(( $(date +%s) - start ))s with $JOBS jobs"
if [ "$rc" -ne 0 ]; then
  echo "check_thread_safety: FAILED (clang -Wthread-safety errors above)" >&2
  exit 1
fi
echo "check_thread_safety: OK"
