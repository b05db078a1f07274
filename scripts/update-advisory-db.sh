#!/usr/bin/env bash
# Refreshes .ci/advisory-db.tar.gz, the RustSec advisories that CI's cargo-audit reads offline
# (CI cannot reach GitHub). Usage: scripts/update-advisory-db.sh PATH-TO-ADVISORY-DB-CHECKOUT
# (a clone of https://github.com/rustsec/advisory-db, or a bare mirror of it). Only crates/ is
# kept; the archive is reproducible (sorted names, fixed times and owners).
set -euo pipefail
src="${1:?usage: $0 PATH-TO-ADVISORY-DB-CHECKOUT}"
cd "$(dirname "$0")/.."
out=.ci/advisory-db.tar.gz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$src" archive HEAD crates | tar -x -C "$tmp"
commit=$(git -C "$src" log -1 --format='%H %cs')
tar --sort=name --mtime='2000-01-01 00:00Z' --owner=0 --group=0 --numeric-owner \
    -C "$tmp" -cf - crates | gzip -9n > "$out"
echo "$commit" > .ci/advisory-db.commit
echo "wrote $out ($(du -h "$out" | cut -f1)): rustsec/advisory-db $commit, $(find "$tmp/crates" -name '*.md' | wc -l) advisories"
