#!/usr/bin/env bash
# bench-image.sh: xtsctl volume encrypt and decrypt against cp, side by side
# in one run, on a 1 GiB image in the page cache.
#
# Everything lives in a tmpfs (/dev/shm by default, or $BENCH_DIR), so the
# disk is out of the picture and xtsctl's fsync before its rename costs
# nothing more than cp's lack of one. Each measurement is repeated
# (ROUNDS, default 5) with cp and xtsctl interleaved, and the median is
# kept: the machine may be shared. Argon2id is set to its minimum
# (--kdf-iterations 1 --kdf-memory 1M) so that passphrase hashing, a fixed
# cost, is not counted. Prints one line per case: median seconds, MiB/s,
# and the ratio to cp's throughput.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
rounds=${ROUNDS:-5}
size_mib=${SIZE_MIB:-1024}
dir=$(mktemp -d "${BENCH_DIR:-/dev/shm}/xtsctl-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT

go build -o "$dir/xtsctl" ./cmd/xtsctl
x=$dir/xtsctl
printf 'bench passphrase\n' > "$dir/pass" && chmod 600 "$dir/pass"
kdf=(--kdf-iterations 1 --kdf-memory 1M --passphrase-file "$dir/pass")
head -c $((size_mib << 20)) /dev/urandom > "$dir/in.img"
"$x" encrypt -q "${kdf[@]}" "$dir/in.img" "$dir/tagged.vol" >/dev/null
"$x" encrypt -q "${kdf[@]}" --integrity none "$dir/in.img" "$dir/untagged.vol" >/dev/null

# time_cmd prints the wall time of its command in seconds.
time_cmd() {
  local s e
  s=$(date +%s.%N)
  "$@" >/dev/null
  e=$(date +%s.%N)
  echo "$e - $s" | bc -l
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A times
run_case() { # name command...
  local name=$1; shift
  rm -f "$dir/out"
  times[$name]+="$(time_cmd "$@") "
}
for _ in $(seq "$rounds"); do
  run_case cp cp "$dir/in.img" "$dir/out"
  run_case cp-vol cp "$dir/tagged.vol" "$dir/out"
  run_case encrypt-tags "$x" encrypt -q "${kdf[@]}" "$dir/in.img" "$dir/out"
  run_case encrypt-none "$x" encrypt -q "${kdf[@]}" --integrity none "$dir/in.img" "$dir/out"
  run_case decrypt-tags "$x" decrypt -q --passphrase-file "$dir/pass" "$dir/tagged.vol" "$dir/out"
  run_case decrypt-none "$x" decrypt -q --passphrase-file "$dir/pass" "$dir/untagged.vol" "$dir/out"
done

med() { tr ' ' '\n' <<<"${times[$1]}" | grep . | median; }
cp_t=$(med cp)
echo "image: ${size_mib} MiB in $(df --output=fstype "$dir" | tail -1) ($dir); $rounds rounds, median; $(nproc) CPUs; $("$x" version)"
printf '%-14s %8s %9s %9s %s\n' case seconds MiB/s ratio target
for c in cp cp-vol encrypt-tags encrypt-none decrypt-tags decrypt-none; do
  t=$(med "$c")
  target=
  case $c in
    encrypt-tags|decrypt-tags) target='>= 0.5 x cp';;
    encrypt-none|decrypt-none) target='>= 0.7 x cp';;
  esac
  printf '%-14s %8.3f %9.0f %9.2f %s\n' "$c" "$t" "$(echo "$size_mib / $t" | bc -l)" "$(echo "$cp_t / $t" | bc -l)" "$target"
done
