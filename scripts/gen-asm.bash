#!/usr/bin/env bash
# gen-asm.bash: regenerate every avo-generated assembly file by running
# `go generate ./...` in each generator module (a directory named _asm with its
# own go.mod; `go generate ./...` from the root never reaches them). Inside the
# module, ./... covers a generator at its root (blake2b/_asm) and generators in
# subdirectories (aesni/_asm/xts).
set -euo pipefail
cd "$(dirname "$0")/.."
find . -type d -name _asm -not -path './.git/*' | sort | while read -r dir; do
  [ -f "$dir/go.mod" ] || continue
  echo "go generate in $dir"
  (cd "$dir" && go generate ./...)
done
