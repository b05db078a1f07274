#!/usr/bin/env bash
# Builds gmcl and its test binaries here (release, x86-64) into .gpu/ at the project root (git
# ignores it), stripped, so that the device tool can carry them to a GPU machine, which has no
# Rust toolchain. Usage, from anywhere in the checkout: scripts/gpu-prepare.sh [cargo args]
# Then run, with carry [".gpu"]: scripts/gpu-check.sh (tests, compute-sanitizer, engines side
# by side) or one of the scripts/bench-*.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu && mkdir -p .gpu/tests
cargo build --release --bins "$@"
cp target/release/gmcl .gpu/
# Every test binary (the integration tests, the separate ones, the library's and the
# binary's unit tests, the examples' tests), named by target.
cargo test --release --no-run --message-format=json "$@" 2>/dev/null | python3 -c '
import json, os, shutil, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"].get("test"):
        kind = m["target"]["kind"][0]
        name = m["target"]["name"] + ("" if kind == "test" else "-" + kind)
        shutil.copy(m["executable"], os.path.join(".gpu/tests", name))
'
strip .gpu/gmcl .gpu/tests/*
du -sh .gpu
ls .gpu .gpu/tests
cat <<'MSG'

Carry [".gpu"] and run from the project root on the GPU machine, e.g. scripts/gpu-check.sh.
The tests find the binary and the repository through GMCL_BIN and GMCL_ROOT, which
gpu-check.sh sets. The carried tree must stay under 64 MiB.
MSG
