#!/usr/bin/env bash
# test.bash: the whole test suite, as CI runs it (.ci/run calls this).
# Installs missing test dependencies first (scripts/install-deps.sh), then:
# formatting, vet (also for arm64 and purego), staticcheck, module checks,
# the tests, the tests again under -tags purego and cross-compiled for
# arm64 under qemu-user (the portable path), with the race detector on
# the concurrent packages, and with the wide CPU features masked off.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH 2>/dev/null || echo /root/go)/bin"

exec 9>/tmp/xtsctl-test.lock
flock 9 # two runs at once would fight over loop devices and mounts

step() { printf '\n== %s\n' "$*"; }

# The steps run with fd 9 closed (bash keeps the lock in a descriptor of
# its own, closed on exec): no program they start, a FUSE program a killed
# test left running among them, holds the lock after this script ends.
{

step install test dependencies
scripts/install-deps.sh

step gofmt
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then echo "gofmt would change: $bad"; exit 1; fi

step go vet
go vet ./...
GOARCH=arm64 go vet ./...
go vet -tags purego ./...

step staticcheck
staticcheck ./...

step go mod verify
go mod verify

# FUSE over io_uring (Linux 6.14+) is a fuse module parameter, off by
# default: turn it on for the tests where the kernel has it, and put it
# back afterwards. blockdev/fusefile tests both transports itself; the
# end-to-end open tests run over io_uring here and over /dev/fuse below.
uring=/sys/module/fuse/parameters/enable_uring
if [ -w "$uring" ]; then
  uring_was=$(cat "$uring")
  trap 'echo "$uring_was" > "$uring"' EXIT
  echo Y > "$uring"
  echo "FUSE over io_uring: enabled for the tests (was $uring_was)"
else
  echo "FUSE over io_uring: not in this kernel; every test uses /dev/fuse"
fi

step go test
go test -count=1 -timeout 40m ./...

if [ -w "$uring" ]; then
  step 'open and mount tests again over /dev/fuse'
  echo N > "$uring"
  go test -count=1 -run '^(TestOpen|TestVolumeOpen|TestVolumeKill|TestKillServer|TestConcurrentReaders|TestServerSIGTERM|TestImageShrinks)' ./cmd/xtsctl
  echo Y > "$uring"
fi

step go test -tags purego
go test -count=1 -timeout 40m -tags purego ./...

step 'the portable path on arm64, under qemu-user (correctness only; never quote its speed)'
armtests=$(mktemp -d)
for pkg in aesni xts sector blake2b; do
  GOARCH=arm64 go test -c -o "$armtests/$pkg.test" "./$pkg"
  (cd "$pkg" && qemu-aarch64-static "$armtests/$pkg.test" -test.short -test.count=1)
done
rm -rf "$armtests"

step go test -race
go test -count=1 -race ./sector ./volume/... ./luks/... ./inplace ./blockdev/... ./internal/...

step CPU features masked
GODEBUG=cpu.avx512f=off go test -count=1 ./aesni ./xts
GODEBUG=cpu.avx2=off,cpu.avx512f=off go test -count=1 ./aesni ./xts
GODEBUG=cpu.aes=off go test -count=1 ./aesni ./xts
GODEBUG=cpu.avx512f=off go test -count=1 ./blake2b
GODEBUG=cpu.avx2=off go test -count=1 ./blake2b

step generated assembly is fresh
scripts/check-generated.bash

step 'device-mapper in a qemu guest (the host kernel has none): our ioctls, then open --backend dm'
XTSCTL_DM_VM=1 go test -count=1 -run '^TestDMVM$' ./internal/devmapper
XTSCTL_DM_VM=1 go test -count=1 -run '^TestDMBackendVM$' ./cmd/xtsctl
XTSCTL_DM_VM=1 go test -count=1 -run '^TestKernelOpensOurImages$' ./luks

step fuzz targets, briefly
scripts/fuzz.sh 5s

step leftovers
if grep -q xtsctl /proc/mounts; then echo "leftover xtsctl mounts:"; grep xtsctl /proc/mounts; exit 1; fi

echo
echo "all tests passed"
} 9>&-
