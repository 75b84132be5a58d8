#!/usr/bin/env bash
# bench-cores.bash: issue 28's "cores that add" figures, side by side in
# one run. Meant for a quiet machine: with other work on the CPUs, a
# scaling figure measures the neighbours.
#
#  1. xtsctl bench --threads N --peers: sector.Codec with N workers and
#     with 1 (1 MiB per call, 512- and 4096-byte sectors, XTS-AES-256),
#     beside openssl speed -elapsed with -multi N and with one process; the
#     "cores" lines give the codec's scaling over openssl's (goal: >= 0.95).
#  2. go test -bench CodecWorkers ./sector: encrypting and decrypting
#     calls of 128 KiB, 1 MiB and 8 MiB with 1 and N workers, MB/s and
#     context switches per call (a hand-off that puts a thread to sleep or
#     wakes one counts one).
#  3. TestMeasureWorkers (sector, -measure): the codec's N workers / 1,
#     encrypting and decrypting, beside N goroutines with a one-worker
#     codec each (nothing shared) and openssl speed -multi N / 1, all in the
#     same rounds: medians and quartiles of per-round ratios, and of the
#     share of openssl's gain (the ratio of the two ratios, round by round),
#     the figures to trust on a shared machine.
#  4. TestMeasureCores (internal/stream, -measure): the stream engine on
#     a 256 MiB file in /dev/shm, decrypt and encrypt as xtsctl runs them,
#     N CPUs / 1, the share of the time in the ordered writes, and the bound
#     of workers that pwrite their own chunks in no order.
#  5. CORES=1 scripts/bench-image.sh: whole images (1 GiB in tmpfs),
#     encrypt and decrypt without tags or digest, N CPUs against
#     GOMAXPROCS=1, the "cores" lines at the end.
#
#   scripts/bench-cores.bash            # THREADS=$(nproc), ROUNDS=5
#   RT=1 scripts/bench-cores.bash       # at real-time priority (root)
#
# RT=1 runs the timed programs under chrt -f 10: on a machine that others
# use, that keeps their processes off the CPUs while it measures (Linux
# still leaves them 5% of each second). Builds happen before, at normal
# priority.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
threads=${THREADS:-$(nproc)}
prio=()
if [[ ${RT:-0} == 1 ]]; then prio=(chrt -f 10); fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/xtsctl" ./cmd/xtsctl
go test -c -o "$tmp/sector.test" ./sector
go test -c -o "$tmp/stream.test" ./internal/stream

echo "== $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== 1. xtsctl bench --threads $threads --peers"
"${prio[@]}" "$tmp/xtsctl" bench --threads "$threads" --sizes 512,4096 --key-size 512 --peers --time 1s --runs 9
echo
echo "== 2. go test -bench CodecWorkers ./sector (load $(cut -d' ' -f1-3 /proc/loadavg))"
"${prio[@]}" "$tmp/sector.test" -test.run '^$' -test.bench CodecWorkers -test.benchtime 1s -test.count 3 | grep '^Benchmark'
echo
echo "== 3. TestMeasureWorkers (load $(cut -d' ' -f1-3 /proc/loadavg))"
"${prio[@]}" "$tmp/sector.test" -test.run TestMeasureWorkers -test.v -measure | grep -E '^ +measure'
echo
echo "== 4. TestMeasureCores (load $(cut -d' ' -f1-3 /proc/loadavg))"
"${prio[@]}" "$tmp/stream.test" -test.run TestMeasureCores -test.v -measure | grep -E '^ +measure'
echo
echo "== 5. CORES=1 scripts/bench-image.sh"
CORES=1 ROUNDS=${ROUNDS:-5} XTSCTL="$tmp/xtsctl" "${prio[@]}" scripts/bench-image.sh
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
