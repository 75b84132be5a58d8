#!/usr/bin/env bash
# bench-image.sh: xtsctl volume encrypt and decrypt against cp, side by side
# in one run, on a 1 GiB image in the page cache.
#
# Everything lives in a tmpfs (/dev/shm by default, or $BENCH_DIR), so the
# disk is out of the picture and xtsctl's fsync before its rename costs no
# more than cp's lack of one; cp+fsync (cp, then sync of the copy) is the
# data-safe baseline, which differs from cp only on a disk filesystem. Each round runs cp of the plaintext image and
# every xtsctl case one after the other; a case's ratio in a round is cp's
# time over its time (both shared the machine's load of that moment), and
# the reported ratio is the median over ROUNDS (default 7) rounds. Argon2id
# is set to its minimum (--kdf-iterations 1 --kdf-memory 1M): passphrase
# hashing is a fixed cost, not throughput. CPU seconds (user + system) are
# the median too: on a shared machine they move less than wall time.
# b2sum of the image (coreutils, one core) is the baseline of the cases with
# the end-to-end digest (the default, --digest blake2b): it is one
# BLAKE2b-512 stream, which no implementation can split over cores, so its
# time is a floor for encrypt and decrypt; --digest none takes it out, and
# those cases are compared with cp. Targets (issue 16): with the digest
# >= 0.9 x b2sum; without it >= 0.5 x cp with tags, >= 0.7 x cp without.
# CORES=1 also runs encrypt and decrypt without tags or digest (where the
# cores are the limit) on one CPU (GOMAXPROCS=1, same binary, same round)
# and prints how much faster all CPUs are: the per-round ratio of the
# one-CPU time to the all-CPU time, and its median. XTSCTL=path uses that
# binary instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
rounds=${ROUNDS:-7}
size_mib=${SIZE_MIB:-1024}
dir=$(mktemp -d "${BENCH_DIR:-/dev/shm}/xtsctl-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT

if [[ -n ${XTSCTL:-} ]]; then
  cp "$XTSCTL" "$dir/xtsctl" # a binary built beforehand (scripts/bench-cores.bash)
else
  go build -o "$dir/xtsctl" ./cmd/xtsctl
fi
x=$dir/xtsctl
printf 'bench passphrase\n' > "$dir/pass" && chmod 600 "$dir/pass"
kdf=(--kdf-iterations 1 --kdf-memory 1M --passphrase-file "$dir/pass")
head -c $((size_mib << 20)) /dev/urandom > "$dir/in.img"
printf '#!/bin/sh\ncp "$1" "$2" && sync "$2"\n' > "$dir/cp-fsync" && chmod +x "$dir/cp-fsync"
# (the minimal Argon2id draws a warning each time: expected here)
"$x" encrypt -q "${kdf[@]}" "$dir/in.img" "$dir/tagged.vol" >/dev/null 2>"$dir/warnings"
"$x" encrypt -q "${kdf[@]}" --integrity none "$dir/in.img" "$dir/untagged.vol" >/dev/null 2>"$dir/warnings"

cases=(cp cp+fsync b2sum
  encrypt-tags encrypt-notags decrypt-tags decrypt-notags
  encrypt-tags-nodigest encrypt-notags-nodigest decrypt-tags-nodigest decrypt-notags-nodigest)
if [[ ${CORES:-0} == 1 ]]; then
  cases+=(encrypt-notags-nodigest-1cpu decrypt-notags-nodigest-1cpu)
fi
cmd_of() {
  local digest=() one=()
  [[ $1 == *-nodigest* ]] && digest=(--digest none)
  [[ $1 == *-1cpu ]] && one=(env GOMAXPROCS=1)
  case $1 in
    cp) echo cp "$dir/in.img" "$dir/out" ;;
    cp+fsync) echo "$dir/cp-fsync" "$dir/in.img" "$dir/out" ;;
    b2sum) echo b2sum "$dir/in.img" ;;
    encrypt-tags*) echo "${one[@]}" "$x" encrypt -q "${kdf[@]}" "${digest[@]}" "$dir/in.img" "$dir/out" ;;
    encrypt-notags*) echo "${one[@]}" "$x" encrypt -q "${kdf[@]}" --integrity none "${digest[@]}" "$dir/in.img" "$dir/out" ;;
    decrypt-tags*) echo "${one[@]}" "$x" decrypt -q --passphrase-file "$dir/pass" "${digest[@]}" "$dir/tagged.vol" "$dir/out" ;;
    decrypt-notags*) echo "${one[@]}" "$x" decrypt -q --passphrase-file "$dir/pass" "${digest[@]}" "$dir/untagged.vol" "$dir/out" ;;
  esac
}
declare -A wall cpu ratio ratio_b2 scale
for _ in $(seq "$rounds"); do
  declare -A this=()
  for c in "${cases[@]}"; do
    rm -f "$dir/out"
    # shellcheck disable=SC2046 # the command line is split on purpose
    read -r w u s < <( { /usr/bin/time -f '%e %U %S' $(cmd_of "$c") >/dev/null; } 2>&1 | tail -1)
    this[$c]=$w
    wall[$c]+="$w "
    cpu[$c]+="$(echo "$u + $s" | bc -l) "
  done
  for c in "${cases[@]}"; do
    ratio[$c]+="$(echo "${this[cp]} / ${this[$c]}" | bc -l) "
    ratio_b2[$c]+="$(echo "${this[b2sum]} / ${this[$c]}" | bc -l) "
    if [[ $c == *-1cpu ]]; then
      scale[$c]+="$(echo "${this[$c]} / ${this[${c%-1cpu}]}" | bc -l) "
    fi
  done
done
rm -f "$dir/out"

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "image: ${size_mib} MiB on $(df --output=fstype "$dir" | tail -1); $rounds rounds, medians; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$("$x" version)"
printf '%-28s %7s %7s %7s %8s %7s  %-16s %s\n' case wall-s MiB/s x-cp x-b2sum cpu-s target holds
for c in "${cases[@]}"; do
  w=$(median "${wall[$c]}")
  rc=$(median "${ratio[$c]}")
  rb=$(median "${ratio_b2[$c]}")
  target= holds=
  case $c in
    *-tags-nodigest) target='>= 0.5 x cp' holds=$(echo "$rc >= 0.5" | bc -l) ;;
    *-notags-nodigest) target='>= 0.7 x cp' holds=$(echo "$rc >= 0.7" | bc -l) ;;
    *-1cpu) ;;
    encrypt-* | decrypt-*) target='>= 0.9 x b2sum' holds=$(echo "$rb >= 0.9" | bc -l) ;;
  esac
  case $holds in 1) holds=yes ;; 0) holds=NO ;; esac
  printf '%-28s %7.2f %7.0f %7.2f %8.2f %7.2f  %-16s %s\n' "$c" "$w" "$(echo "$size_mib / $w" | bc -l)" \
    "$rc" "$rb" "$(median "${cpu[$c]}")" "$target" "$holds"
done
for c in "${cases[@]}"; do
  [[ $c == *-1cpu ]] || continue
  printf 'cores: %s, %d CPUs / 1: %.2fx (per round: %s)\n' "${c%-1cpu}" "$(nproc)" "$(median "${scale[$c]}")" \
    "$(for v in ${scale[$c]}; do printf '%.2f ' "$v"; done)"
done
