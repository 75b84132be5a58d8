#!/usr/bin/env bash
# bench-peers.sh: XTS-AES-256 encryption throughput of xtsctl (dispatched
# kernels, through package xts), golang.org/x/crypto/xts and
# `openssl speed -evp aes-256-xts`, in one run, with the ratios per size.
#
# All three figures are MB/s (10^6 bytes/s) of CPU time: `openssl speed`
# divides by the process's user CPU time unless given -elapsed, and the Go
# benchmarks report cpu-MB/s from the benchmark thread's CPU time. On a
# shared machine that keeps other processes' load out of the numbers (it
# does not remove their cache and memory traffic). Each Go figure is the
# median of COUNT runs; openssl runs once per size for OPENSSL_SECONDS.
#
# Usage: scripts/bench-peers.sh   (env: COUNT=5 BENCHTIME=200ms OPENSSL_SECONDS=2)
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-200ms}
OPENSSL_SECONDS=${OPENSSL_SECONDS:-2}
SIZES="16 64 127 128 512 1408 1420 4096 16384"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //') (family $(grep -m1 'cpu family' /proc/cpuinfo 2>/dev/null | sed 's/.*: //'), model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "xtsctl: dispatch ${XTSCTL_XTS_IMPL:-auto}; go test -bench Peers ./xts -count=$COUNT -benchtime=$BENCHTIME"
go test -run '^$' -bench '^BenchmarkPeers$' -benchtime="$BENCHTIME" -count="$COUNT" ./xts >"$tmp/go.txt"

# median cpu-MB/s per benchmark: "peer size MBps". The median, not the
# best: thread CPU time keeps preemption out, but the other processes'
# cache traffic and the odd accounting glitch still scatter single runs.
awk '/^BenchmarkPeers\// {
	split($1, parts, "/"); peer = parts[2]; sub("peer=", "", peer)
	size = parts[3]; sub("size=", "", size); sub("-[0-9]+$", "", size)
	for (i = 2; i < NF; i++) if ($(i+1) == "cpu-MB/s") print peer, size, $i
}' "$tmp/go.txt" | sort -k1,1 -k2,2n -k3,3g | awk '
	{ key = $1 " " $2; n[key]++; v[key, n[key]] = $3 }
	END {
		for (key in n) {
			c = n[key]
			m = (c % 2) ? v[key, (c + 1) / 2] : (v[key, c / 2] + v[key, c / 2 + 1]) / 2
			print key, m
		}
	}' >"$tmp/go.best"

if ! command -v openssl >/dev/null; then
	echo "bench-peers: openssl not found; its column stays empty" >&2
fi
echo "openssl: $(openssl version 2>/dev/null || echo 'not found'), speed -evp aes-256-xts -seconds $OPENSSL_SECONDS -bytes N"
for n in $SIZES; do
	if command -v openssl >/dev/null; then
		# The last line is "AES-256-XTS <rate>k": thousands of bytes per second.
		openssl speed -seconds "$OPENSSL_SECONDS" -evp aes-256-xts -bytes "$n" 2>/dev/null |
			awk -v n="$n" '/^AES-256-XTS/ { v = $NF; sub("k$", "", v); print "openssl", n, v / 1000 }' >>"$tmp/go.best"
	fi
done

lookup() { awk -v p="$1" -v s="$2" '$1 == p && $2 == s { print $3 }' "$tmp/go.best"; }
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
o1420=$(lookup xtsctl 1420); o1408=$(lookup xtsctl 1408)
echo
echo "MB/s of CPU time, XTS-AES-256 encryption. 512b/4096b: 64 KiB of 512- or 4096-byte"
echo "sectors per EncryptSectors call (the sector layer's batch path), against openssl at that size."
echo "xtsctl 1420 / 1408 bytes: $(ratio "$o1420" "$o1408") (x/crypto/xts has no ciphertext stealing: no 127 or 1420 figure)"
