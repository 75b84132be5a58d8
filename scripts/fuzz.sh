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
    log=$(mktemp)
    # Minimising each new interesting input may take 60 s by default,
    # during which the target stops fuzzing (with 8 KiB header copies it
    # never gets past the first one in a short run): bound it.
    if ! go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" -fuzzminimizetime=1s "$pkg" 2>&1 | tee "$log"; then
      # Go 1.26's fuzz coordinator can fail a target with a bare "context
      # deadline exceeded" as -fuzztime runs out, when a loaded machine
      # delays a worker (golang/go#75804, fixed in Go 1.27). That is no
      # finding: a real one says "Failing input written to" and leaves a
      # reproducer in testdata/fuzz. Anything else still fails the run.
      if grep -q 'context deadline exceeded' "$log" && ! grep -Eq 'Failing input written|panic:|_test\.go:[0-9]+:' "$log"; then
        echo "fuzz.sh: $target: the fuzz coordinator's deadline race (golang/go#75804), not a finding; ignored"
      else
        failed=1
      fi
    fi
    rm -f "$log"
  done
done
exit $failed
