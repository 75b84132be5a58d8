#!/usr/bin/env bash
# fuzz.sh [DURATION]: run every Go fuzz target in the module for DURATION
# each (default 2m; CI uses a few seconds). New crashers are written to the
# package's testdata/fuzz/ by go test: commit them as regression seeds once
# fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
fuzztime=${1:-2m}
failed=0
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "== $pkg $target ($fuzztime)"
    if ! go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg"; then
      failed=1
    fi
  done
done
exit $failed
