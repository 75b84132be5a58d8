#!/usr/bin/env bash
# bench-inplace.sh: encrypt and decrypt --in-place against encrypt and
# decrypt IN OUT of the same image, side by side in one run, in the page
# cache; then the journal's own cost (go test -bench InPlace ./inplace).
#
# Everything lives in a tmpfs (/dev/shm by default, or $BENCH_DIR). Each
# round runs every case once, one after the other; an in-place case works
# on a fresh copy of its input, made before its timer starts. A case's
# ratio in a round is the straight run's time over the in-place run's
# (how fast the in-place run goes, as a fraction of the straight one;
# both shared the machine's load of that moment); the reported ratio is
# the median over ROUNDS (default 5) rounds. Argon2id is set to its
# minimum: passphrase hashing is a fixed cost, not throughput.
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
head -c 64 /dev/urandom > "$dir/key" && chmod 600 "$dir/key"
kdf=(--kdf-iterations 1 --kdf-memory 1M --passphrase-file "$dir/pass")
head -c $((size_mib << 20)) /dev/urandom > "$dir/in.img"
"$x" encrypt -q --type plain --key-file "$dir/key" "$dir/in.img" "$dir/in.enc"
"$x" encrypt -q "${kdf[@]}" "$dir/in.img" "$dir/in.vol" >/dev/null 2>&1

# Each pair: the straight command, the in-place command (on $dir/t), the
# file the in-place run starts from.
pairs=(plain-encrypt plain-decrypt volume-encrypt volume-decrypt)
straight() {
  case $1 in
    plain-encrypt) echo "$x" encrypt -q -f --type plain --key-file "$dir/key" "$dir/in.img" "$dir/out" ;;
    plain-decrypt) echo "$x" decrypt -q -f --type plain --key-file "$dir/key" "$dir/in.enc" "$dir/out" ;;
    volume-encrypt) echo "$x" encrypt -q -f "${kdf[@]}" "$dir/in.img" "$dir/out" ;;
    volume-decrypt) echo "$x" decrypt -q -f --passphrase-file "$dir/pass" "$dir/in.vol" "$dir/out" ;;
  esac
}
inplace() {
  case $1 in
    plain-encrypt) echo "$x" encrypt -q --in-place --type plain --key-file "$dir/key" "$dir/t" ;;
    plain-decrypt) echo "$x" decrypt -q --in-place --type plain --key-file "$dir/key" "$dir/t" ;;
    volume-encrypt) echo "$x" encrypt -q --in-place "${kdf[@]}" "$dir/t" ;;
    volume-decrypt) echo "$x" decrypt -q --in-place --passphrase-file "$dir/pass" "$dir/t" ;;
  esac
}
source_of() {
  case $1 in
    plain-encrypt|volume-encrypt) echo "$dir/in.img" ;;
    plain-decrypt) echo "$dir/in.enc" ;;
    volume-decrypt) echo "$dir/in.vol" ;;
  esac
}
timed() { # prints the command's wall seconds
  /usr/bin/time -f '%e' -o "$dir/time" "$@" >/dev/null 2>&1
  cat "$dir/time"
}
declare -A ws wi ratio
for _ in $(seq "$rounds"); do
  for c in "${pairs[@]}"; do
    rm -f "$dir/out"
    # shellcheck disable=SC2046 # the command lines are split on purpose
    s=$(timed $(straight "$c"))
    rm -f "$dir/out"
    cp "$(source_of "$c")" "$dir/t"
    # shellcheck disable=SC2046
    i=$(timed $(inplace "$c"))
    ws[$c]+="$s "
    wi[$c]+="$i "
    ratio[$c]+="$(echo "$s / $i" | bc -l) "
  done
done
rm -f "$dir/out" "$dir/t"

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "image: ${size_mib} MiB on $(df --output=fstype "$dir" | tail -1); $rounds rounds, medians; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$("$x" version)"
printf '%-15s %10s %10s %12s %12s %8s  %s\n' case straight-s in-place-s straight-MiB/s in-place-MiB/s ratio target
for c in "${pairs[@]}"; do
  s=$(median "${ws[$c]}") i=$(median "${wi[$c]}")
  printf '%-15s %10.2f %10.2f %12.0f %12.0f %8.2f  %s  (per round: %s)\n' "$c" "$s" "$i" \
    "$(echo "$size_mib / $s" | bc -l)" "$(echo "$size_mib / $i" | bc -l)" "$(median "${ratio[$c]}")" '>= 0.5' \
    "$(for r in ${ratio[$c]}; do printf '%.2f ' "$r"; done)"
done

if [ "${JOURNAL_BENCH:-1}" = 1 ]; then
  echo
  echo "the journal's cost: go test -run '^\$' -bench InPlace -count $rounds ./inplace (256 MiB, plain, in the page cache)"
  out=$(go test -run '^$' -bench InPlace -count "$rounds" ./inplace)
  declare -A jm
  for k in journal shift unsafe; do
    jm[$k]=$(awk -v k="$k" '$1 ~ "^BenchmarkInPlace/"k"-" {print $5}' <<<"$out" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    printf '%-8s %8.0f MB/s (median)\n' "$k" "${jm[$k]}"
  done
  printf 'journal mode runs at %.2f of the same conversion without journal or records; shift mode (records only) at %.2f\n' \
    "$(echo "${jm[journal]} / ${jm[unsafe]}" | bc -l)" "$(echo "${jm[shift]} / ${jm[unsafe]}" | bc -l)"
fi
