#!/usr/bin/env bash
# bench-peers.sh: XTS-AES-256 encryption throughput of xtsctl (dispatched
# kernels, through package xts), golang.org/x/crypto/xts and
# `openssl speed -evp aes-256-xts`, in one run, with the ratios per size.
#
# All three figures are MB/s (10^6 bytes/s) of CPU time: `openssl speed`
# divides by the process's user CPU time unless given -elapsed, and the Go
# benchmarks report cpu-MB/s from the benchmark thread's CPU time. On a
# shared machine that keeps other processes' time slices out of the numbers
# (not their cache traffic). The peers run in ROUNDS alternating rounds (Go
# benchmarks for every size, then openssl for every size), so that all of
# them see the same neighbours; each figure is the median over the rounds.
#
# Usage: scripts/bench-peers.sh   (env: ROUNDS=5 BENCHTIME=200ms OPENSSL_SECONDS=1)
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
BENCHTIME=${BENCHTIME:-200ms}
OPENSSL_SECONDS=${OPENSSL_SECONDS:-1}
SIZES="16 64 127 128 512 1408 1420 4096 16384"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cpuinfo() { grep -m1 "^$1[[:space:]]*:" /proc/cpuinfo 2>/dev/null | sed 's/.*: //'; }
echo "cpu: $(cpuinfo 'model name') (family $(cpuinfo 'cpu family'), model $(cpuinfo model)), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "xtsctl: automatic dispatch; go test -bench Peers ./xts, -benchtime=$BENCHTIME per round"
have_openssl=false
if command -v openssl >/dev/null; then
	have_openssl=true
	echo "openssl: $(openssl version), speed -evp aes-256-xts -seconds $OPENSSL_SECONDS -bytes N per round"
else
	echo "openssl: not found; its column stays empty"
fi
echo "rounds: $ROUNDS"

go test -c -o "$tmp/xts.test" ./xts
for ((r = 1; r <= ROUNDS; r++)); do
	(cd xts && "$tmp/xts.test" -test.run '^$' -test.bench '^BenchmarkPeers$' -test.benchtime="$BENCHTIME") |
		awk '/^BenchmarkPeers\// {
			split($1, parts, "/"); peer = parts[2]; sub("peer=", "", peer)
			size = parts[3]; sub("size=", "", size); sub("-[0-9]+$", "", size)
			for (i = 2; i < NF; i++) if ($(i+1) == "cpu-MB/s") print peer, size, $i
		}' >>"$tmp/samples"
	if $have_openssl; then
		for n in $SIZES; do
			# The last line is "AES-256-XTS <rate>k": thousands of bytes per second.
			openssl speed -seconds "$OPENSSL_SECONDS" -evp aes-256-xts -bytes "$n" 2>/dev/null |
				awk -v n="$n" '/^AES-256-XTS/ { v = $NF; sub("k$", "", v); print "openssl", n, v / 1000 }' >>"$tmp/samples"
		done
	fi
done

# Median per (peer, size).
sort -k1,1 -k2,2n -k3,3g "$tmp/samples" | awk '
	{ key = $1 " " $2; n[key]++; v[key, n[key]] = $3 }
	END {
		for (key in n) {
			c = n[key]
			m = (c % 2) ? v[key, (c + 1) / 2] : (v[key, c / 2] + v[key, c / 2 + 1]) / 2
			print key, m
		}
	}' >"$tmp/median"

lookup() { awk -v p="$1" -v s="$2" '$1 == p && $2 == s { print $3 }' "$tmp/median"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%.2fx", a / b }'; }
fmt() { awk -v a="$1" 'BEGIN { if (a == "") print "-"; else printf "%.0f", a }'; }

printf '\n%-7s %12s %12s %12s %10s %10s\n' "bytes" "xtsctl" "x/crypto" "openssl" "vs x/cr." "vs openssl"
for n in $SIZES; do
	o=$(lookup xtsctl "$n"); x=$(lookup xcrypto "$n"); s=$(lookup openssl "$n")
	printf '%-7s %12s %12s %12s %10s %10s\n' "$n" "$(fmt "$o")" "$(fmt "$x")" "$(fmt "$s")" "$(ratio "$o" "$x")" "$(ratio "$o" "$s")"
done
for n in 512 4096; do
	o=$(lookup xtsctl-batch "$n"); s=$(lookup openssl "$n")
	printf '%-7s %12s %12s %12s %10s %10s\n' "${n}b" "$(fmt "$o")" "-" "$(fmt "$s")" "-" "$(ratio "$o" "$s")"
done
echo
echo "MB/s of CPU time, XTS-AES-256 encryption, medians of $ROUNDS rounds. 512b/4096b: 64 KiB"
echo "of 512- or 4096-byte sectors per EncryptSectors call (the sector layer's batch path),"
echo "against openssl at that sector size."
echo "xtsctl 1420 / 1408 bytes: $(ratio "$(lookup xtsctl 1420)" "$(lookup xtsctl 1408)")" \
	"(x/crypto/xts has no ciphertext stealing: no 127 or 1420 figure)"
