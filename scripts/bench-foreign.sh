#!/usr/bin/env bash
# bench-foreign.sh: xtsctl against the peers that read BitLocker and
# FileVault 2 images on Linux, side by side in one run, on the samples of
# bitlk/testdata and fvault2/testdata:
#   - a sequential read of the whole unlocked device, 1 MiB blocks: xtsctl's
#     (open --readonly; dd iflag=direct on its loop device) against
#     dislocker-fuse's and bdemount's FUSE files (BitLocker, AES-XTS-128,
#     unlocked with the startup key, so no secret goes in argv) and
#     fvdemount's (FileVault 2; it takes the sample's published passphrase
#     only in argv). Every round mounts afresh, so no page cache serves a
#     read twice.
#   - decrypting the BitLocker image to a file: xtsctl decrypt against
#     dislocker-file, each with its output synced (xtsctl decrypt syncs
#     before it names the output; dislocker-file is followed by sync FILE).
# Prints each round, then the medians, the ratios (xtsctl's speed over the
# peer's) and the load average seen during the measurements: the machine
# may be shared; compare the ratios, not the absolute numbers, across runs.
#
# Usage: scripts/bench-foreign.sh [-n ROUNDS] [-d DIR]
# Needs root, dislocker, libbde-utils, libfvde-utils (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=7 dir=/var/tmp/xtsctl-bench-foreign
while getopts n:d: opt; do
  case $opt in
    n) rounds=$OPTARG ;; d) dir=$OPTARG ;;
    *) echo "usage: $0 [-n ROUNDS] [-d DIR]" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "bench-foreign: needs root (loop devices, FUSE)" >&2; exit 1; }
for tool in dislocker-fuse dislocker-file bdemount fvdemount; do
  command -v "$tool" >/dev/null || { echo "bench-foreign: $tool missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
done

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
bin=$dir/xtsctl
go build -o "$bin" ./cmd/xtsctl
export XTSCTL_RUNDIR=$dir/run
mnt=$dir/mnt
mkdir -p "$mnt"
cleanup() {
  "$bin" close bench-foreign >/dev/null 2>&1 || true
  if mountpoint -q "$mnt"; then umount "$mnt" || true; fi
  rm -rf "$dir/bitlk" "$dir/fvault2" "$dir/out.img" "$dir/pass" "$XTSCTL_RUNDIR"
}
trap cleanup EXIT
tar xJSf bitlk/testdata/bitlk.tar.xz -C "$dir"
tar xJSf fvault2/testdata/fvault2.tar.xz -C "$dir"
bitlk=$dir/bitlk/bitlk-aes-xts-128-startup-key.img
bek=$dir/bitlk/4381F759-C4F8-4DE0-BB61-FC33A831BDA5.BEK
chmod 600 "$bek"
fvault2=$dir/fvault2/fvault2-small.img
# libfvde reads all four metadata copies and the secondary encrypted
# metadata, which the trimmed sample lacks: fill them from the first, as
# fvault2/peer_test.go's peerCopy does (nothing xtsctl reads changes).
python3 - "$fvault2" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(4096 + 8192 + 40); f.write(struct.pack("<Q", 2049))
    f.seek(0); pv = f.read(512)
    f.seek(4096); first = f.read(12288)
    for i in range(3):
        f.seek(struct.unpack_from("<Q", pv, 112 + 8 * i)[0] * 4096); f.write(first)
PY
fvpass=heslo123 # the sample's, published with it (fvault2/testdata/README.md)
printf %s "$fvpass" > "$dir/pass"
chmod 600 "$dir/pass"

now() { date +%s.%N; }
load() { cut -d' ' -f1 /proc/loadavg; }
# waitmount DIR: until a FUSE program that detaches has mounted DIR.
waitmount() {
  for _ in $(seq 500); do mountpoint -q "$1" && return 0; sleep 0.02; done
  echo "bench-foreign: nothing mounted on $1" >&2; return 1
}
# timed_read FILE [dd flags]: reads FILE whole, prints "seconds bytes".
timed_read() {
  local f=$1; shift
  local bytes t0 t1
  bytes=$(blockdev --getsize64 "$f" 2>/dev/null || stat -c %s "$f")
  t0=$(now)
  dd if="$f" of=/dev/null bs=1M "$@" status=none
  t1=$(now)
  echo "$(echo "$t1 - $t0" | bc -l) $bytes"
}

declare -A secs loads
record() { # record NAME "seconds bytes"
  local s=${2% *} b=${2#* }
  secs[$1]+="$s "
  loads[$1]+="$(load) "
  bytesof[$1]=$b
  printf '  %-28s %7.3f s  %8.1f MB/s  (load %s)\n' "$1" "$s" "$(echo "$b / $s / 1000000" | bc -l)" "$(load)"
}
declare -A bytesof

for r in $(seq "$rounds"); do
  echo "round $r"
  dev=$("$bin" open --readonly --key-file "$bek" "$bitlk" bench-foreign 2>/dev/null)
  record "bitlk read: xtsctl" "$(timed_read "$dev" iflag=direct)"
  "$bin" close bench-foreign 2>/dev/null

  dislocker-fuse -r -V "$bitlk" -f "$bek" -- "$mnt"
  waitmount "$mnt"
  record "bitlk read: dislocker-fuse" "$(timed_read "$mnt/dislocker-file")"
  umount "$mnt"

  bdemount -s "$bek" "$bitlk" "$mnt" >/dev/null
  waitmount "$mnt"
  record "bitlk read: bdemount" "$(timed_read "$mnt/bde1")"
  umount "$mnt"

  dev=$("$bin" open --readonly --passphrase-file "$dir/pass" "$fvault2" bench-foreign 2>/dev/null)
  record "fvault2 read: xtsctl" "$(timed_read "$dev" iflag=direct)"
  "$bin" close bench-foreign 2>/dev/null

  fvdemount -p "$fvpass" "$fvault2" "$mnt" >/dev/null
  waitmount "$mnt"
  record "fvault2 read: fvdemount" "$(timed_read "$mnt/fvde1")"
  umount "$mnt"

  size=$(stat -c %s "$bitlk")
  t0=$(now); "$bin" decrypt -q --key-file "$bek" "$bitlk" "$dir/out.img"; t1=$(now)
  record "bitlk decrypt: xtsctl" "$(echo "$t1 - $t0" | bc -l) $size"
  rm -f "$dir/out.img"
  # xtsctl decrypt syncs its output before it names it; so must the peer.
  t0=$(now); dislocker-file -q -V "$bitlk" -f "$bek" -- "$dir/out.img"; sync "$dir/out.img"; t1=$(now)
  record "bitlk decrypt: dislocker-file" "$(echo "$t1 - $t0" | bc -l) $size"
  rm -f "$dir/out.img"
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo
cpu() { grep -m1 "^$1" /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'; }
echo "$(cpu 'model name') (family $(cpu 'cpu family') model $(cpu 'model') stepping $(cpu 'stepping')), $(nproc) CPUs; $rounds rounds; medians"
declare -A med
for k in "bitlk read: xtsctl" "bitlk read: dislocker-fuse" "bitlk read: bdemount" "fvault2 read: xtsctl" "fvault2 read: fvdemount" "bitlk decrypt: xtsctl" "bitlk decrypt: dislocker-file"; do
  med[$k]=$(echo "${secs[$k]}" | median)
  printf '%-30s %7.3f s  %8.1f MB/s  load %s\n' "$k" "${med[$k]}" "$(echo "${bytesof[$k]} / ${med[$k]} / 1000000" | bc -l)" "$(echo "${loads[$k]}" | median)"
done
ratio() { printf '%-42s %6.1fx\n' "$1" "$(echo "${med[$3]} / ${med[$2]}" | bc -l)"; }
echo
ratio "bitlk read, xtsctl over dislocker-fuse" "bitlk read: xtsctl" "bitlk read: dislocker-fuse"
ratio "bitlk read, xtsctl over bdemount" "bitlk read: xtsctl" "bitlk read: bdemount"
ratio "fvault2 read, xtsctl over fvdemount" "fvault2 read: xtsctl" "fvault2 read: fvdemount"
ratio "bitlk decrypt, xtsctl over dislocker-file" "bitlk decrypt: xtsctl" "bitlk decrypt: dislocker-file"
