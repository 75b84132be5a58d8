#!/usr/bin/env bash
# ab-aesni.bash: time the XTS kernels of the working tree against those of
# an earlier revision, in one process (aesni/abtest): rounds of the two
# alternate in thread CPU time, and the table gives each one's MB/s, its
# fraction of the raw AES rate timed in the same rounds, and the median
# per-round ratio B/A with its spread.
#
#   scripts/ab-aesni.bash [-r REV] [TestAB flags...]
#
# REV (default main) is copied into aesni/abtest/_old/aesni (ignored by git
# and by ./...; removed afterwards). Flags go to TestAB, e.g.
#   -sizes 512,4096,16384 -keys 512,256 -ops encrypt,decrypt -rounds 201
#   -a old -b new:vaes512      (side = old|new[:variant])
#   -mode sectors -sizes 4096  (64 KiB of sectors per call)
#   -buffers 256               (unit mode: 256 buffers in turn, calls that do
#                               not wait for one another; default 1)
# As root it runs at real-time priority (chrt -f 10), which keeps other
# processes of the machine off its CPU while it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
rev=main
if [[ ${1:-} == -r ]]; then rev=$2; shift 2; fi
dst=aesni/abtest/_old/aesni
rm -rf "$dst"
mkdir -p "$dst"
trap 'rm -rf aesni/abtest/_old' EXIT
git archive "$rev" aesni | tar -x -C "$dst" --strip-components=1 --wildcards 'aesni/*.go' 'aesni/*.s'
rm -f "$dst"/*_test.go
sed -i 's/^const ImplPackage = "aesni"$/const ImplPackage = "aesni-old"/' "$dst/impl.go"
grep -q '"aesni-old"' "$dst/impl.go" || { echo "ab-aesni: could not rename the copy's ImplPackage" >&2; exit 1; }
go test -c -tags abtest -o aesni/abtest/_old/ab.test ./aesni/abtest
echo "old = $rev ($(git rev-parse --short "$rev")), new = working tree ($(git rev-parse --short HEAD)$(git diff --quiet -- aesni || echo ', modified')); load: $(cut -d' ' -f1-3 /proc/loadavg); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')"
prio=()
if [[ $(id -u) == 0 ]]; then prio=(chrt -f 10 nice -n -20); fi
"${prio[@]}" aesni/abtest/_old/ab.test -test.run '^TestAB$' -test.v -test.count=1 "$@" | grep -v '^=== RUN\|^--- PASS\|^PASS$'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
