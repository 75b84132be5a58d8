#!/usr/bin/env bash
# check-generated.bash: fail if any committed generated file (.s, and the Go
# *_unrolled_test.go) differs from what its
# generator produces now (a stale or hand-edited generated file).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/gen-asm.bash
if ! git diff --exit-code --stat -- '*.s' '*_unrolled_test.go'; then
  echo "generated assembly is out of date: run scripts/gen-asm.bash and commit" >&2
  exit 1
fi
