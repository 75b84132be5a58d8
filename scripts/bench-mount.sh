#!/usr/bin/env bash
# bench-mount.sh: throughput of a volume opened with `xtsctl open` (FUSE
# server + loop device) against an unencrypted image on a plain loop device,
# side by side in one run, with fio on the block devices:
#   sequential write and read of SIZE (default 1 GiB) in 1 MiB blocks,
#   4 KiB random reads for RANDTIME seconds,
# all with O_DIRECT (no page cache above the device) and the same queue
# depth on both devices. Page caches are dropped before every read phase.
# Prints MB/s and IOPS for both and the ratios (targets: reads >= 0.5x,
# writes >= 0.4x, random reads >= 0.3x).
#
# Usage: scripts/bench-mount.sh [-t plain|volume] [-s SIZE_MIB] [-r RANDTIME] [-n ROUNDS] [-S SECTOR] [-d DIR] [-F uring|devfuse]
# -t volume serves an xtsctl volume (integrity tags checked on every read,
# written with every write) instead of a plain image.
# -F picks how FUSE requests reach the server: uring (the default where the
# kernel has FUSE over io_uring: fuse.enable_uring is set for the run and
# restored after it) or devfuse (classic read/write on /dev/fuse).
# Needs root, fio, and a built xtsctl (built here). The images live in DIR
# (default /var/tmp/xtsctl-bench), on the same filesystem for both.
set -euo pipefail
cd "$(dirname "$0")/.."

uring=/sys/module/fuse/parameters/enable_uring
type=plain size_mib=1024 randtime=10 rounds=3 sector=4096 dir=/var/tmp/xtsctl-bench transport=devfuse
[ -e "$uring" ] && transport=uring
while getopts t:s:r:n:S:d:F: opt; do
  case $opt in
    t) type=$OPTARG ;; s) size_mib=$OPTARG ;; r) randtime=$OPTARG ;; n) rounds=$OPTARG ;;
    S) sector=$OPTARG ;; d) dir=$OPTARG ;; F) transport=$OPTARG ;;
    *) echo "usage: $0 [-t plain|volume] [-s SIZE_MIB] [-r RANDTIME] [-n ROUNDS] [-S SECTOR] [-d DIR] [-F uring|devfuse]" >&2; exit 2 ;;
  esac
done
case $type in plain|volume) ;; *) echo "bench-mount: -t plain or -t volume" >&2; exit 2 ;; esac
case $transport in uring|devfuse) ;; *) echo "bench-mount: -F uring or -F devfuse" >&2; exit 2 ;; esac
if [ "$transport" = uring ] && [ ! -e "$uring" ]; then
  echo "bench-mount: this kernel has no FUSE over io_uring ($uring missing); use -F devfuse" >&2; exit 1
fi
[ "$(id -u)" = 0 ] || { echo "bench-mount: needs root (loop devices, FUSE)" >&2; exit 1; }
command -v fio >/dev/null || { echo "bench-mount: fio missing (scripts/install-deps.sh installs it)" >&2; exit 1; }

mkdir -p "$dir"
bin=$dir/xtsctl
go build -o "$bin" ./cmd/xtsctl
name=bench-$$
raw_loop=
cleanup() {
  "$bin" close "$name" >/dev/null 2>&1 || true
  if [ -n "$raw_loop" ]; then losetup -d "$raw_loop" 2>/dev/null || true; fi
  rm -f "$dir/enc.img" "$dir/raw.img" "$dir/key" "$dir/pass" "${XTSCTL_RUNDIR:-/run/xtsctl}/$name.log"
}
trap cleanup EXIT
if [ -e "$uring" ]; then
  uring_was=$(cat "$uring")
  trap 'cleanup; echo "$uring_was" > "$uring"' EXIT
  if [ "$transport" = uring ]; then echo Y > "$uring"; else echo N > "$uring"; fi
fi

# Fully allocated images, so neither side pays for block allocation in
# the host filesystem during the measured writes.
fallocate -l "${size_mib}M" "$dir/raw.img"
if [ "$type" = volume ]; then
  # format writes every sector and its tag; a cheap KDF keeps the setup short.
  printf 'bench-mount\n' > "$dir/pass"
  chmod 600 "$dir/pass"
  "$bin" format -q --size "${size_mib}M" --sector-size "$sector" --kdf-memory 65536 --kdf-iterations 1 \
    --passphrase-file "$dir/pass" "$dir/enc.img" >/dev/null
  enc_dev=$("$bin" open -q --backend fuse --passphrase-file "$dir/pass" "$dir/enc.img" "$name")
else
  head -c 64 /dev/urandom > "$dir/key"
  chmod 600 "$dir/key"
  fallocate -l "${size_mib}M" "$dir/enc.img"
  enc_dev=$("$bin" open -q --backend fuse --type plain --sector-size "$sector" --key-file "$dir/key" "$dir/enc.img" "$name")
fi
# The baseline loop device is set up like the one xtsctl puts on its FUSE
# file: direct I/O, logical block size = sector size.
raw_loop=$(losetup --find --show --direct-io=on --sector-size "$sector" "$dir/raw.img")

drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# fio_run DEV RW BS [extra...]: prints "MB/s IOPS" for one job.
fio_run() {
  local dev=$1 rw=$2 bs=$3; shift 3
  fio --name=b --filename="$dev" --rw="$rw" --bs="$bs" --direct=1 --ioengine=libaio \
      --iodepth=16 --numjobs=1 --group_reporting --output-format=json "$@" 2>/dev/null |
    python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"][0]
k = "write" if j["write"]["io_bytes"] > 0 else "read"
print("%.1f %.0f" % (j[k]["bw_bytes"] / 1e6, j[k]["iops"]))'
}

declare -A sum
measure() { # measure LABEL DEV
  local label=$1 dev=$2 r
  r=$(fio_run "$dev" write 1M --size="${size_mib}M" --end_fsync=1); sum[$label.write]+=" ${r%% *}"
  drop
  r=$(fio_run "$dev" read 1M --size="${size_mib}M"); sum[$label.read]+=" ${r%% *}"
  drop
  r=$(fio_run "$dev" randread 4k --size="${size_mib}M" --time_based --runtime="$randtime" --randrepeat=0)
  sum[$label.rand]+=" ${r#* }"
}

echo "bench-mount: $type, ${size_mib} MiB, ${sector}-byte sectors, $rounds rounds, xtsctl $enc_dev vs plain loop $raw_loop"
echo "bench-mount: CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores"
echo "bench-mount: FUSE $("$bin" status "$name" | sed -n 's/^  FUSE: *//p')${uring_was:+ (fuse.enable_uring was $uring_was before this run)}"
for i in $(seq "$rounds"); do
  # Alternate the order so that neither side always runs first.
  if [ $((i % 2)) = 1 ]; then measure enc "$enc_dev"; measure raw "$raw_loop"
  else measure raw "$raw_loop"; measure enc "$enc_dev"; fi
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# Each round measures both devices back to back, under about the same load
# from whatever else runs on the machine, so the ratio is taken per round
# and its median reported (the medians of each side are shown too).
ratios() { # ratios "enc values" "raw values"
  paste -d' ' <(echo "$1" | tr ' ' '\n' | grep .) <(echo "$2" | tr ' ' '\n' | grep .) |
    awk '{printf " %.3f", $1 / $2}'
}
printf '\n%-26s %12s %12s %7s %7s\n' test xtsctl plain-loop ratio target
for t in write:"seq write 1M (MB/s)":0.4 read:"seq read 1M (MB/s)":0.5 rand:"rand read 4K (IOPS)":0.3; do
  key=${t%%:*}; rest=${t#*:}; label=${rest%:*}; target=${rest##*:}
  e=$(echo "${sum[enc.$key]}" | median); r=$(echo "${sum[raw.$key]}" | median)
  rs=$(ratios "${sum[enc.$key]}" "${sum[raw.$key]}")
  ratio=$(echo "$rs" | median)
  ok=$(awk -v x="$ratio" -v t="$target" 'BEGIN {print (x >= t) ? "ok" : "BELOW"}')
  printf '%-26s %12s %12s %6.2fx %5sx %s   (per round:%s)\n' "$label" "$e" "$r" "$ratio" "$target" "$ok" "$rs"
done
echo "(MB/s and IOPS: medians of $rounds rounds; ratio: median of the per-round ratios)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
