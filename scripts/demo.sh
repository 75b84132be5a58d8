#!/usr/bin/env bash
# demo.sh: the main job on the data the repository ships. Builds xtsctl,
# encrypts testimages/plain/disk.img (a 2 MiB ext4 image) in cryptsetup
# plain mode, checks the result byte for byte against the same image
# encrypted by an independent implementation (and opened by the kernel's
# dm-crypt, see testimages/README.md), decrypts it back and compares. Then
# the same image as an xtsctl volume: encrypt with a passphrase, info,
# verify, decrypt; a golden volume made by an independent implementation
# of docs/FORMAT.md; a flipped bit found by verify; format.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
imgs=testimages/plain
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

say() { printf 'demo: %s\n' "$*"; }

say "building xtsctl"
go build -o "$work/xtsctl" ./cmd/xtsctl
"$work/xtsctl" version

install -m 600 "$imgs/test-256.key" "$work/test.key" # xtsctl warns about readable keys
for sectors in 512 4096; do
  say "encrypting $imgs/disk.img with $sectors-byte sectors"
  "$work/xtsctl" encrypt --type plain --key-file "$work/test.key" --sector-size "$sectors" \
    "$imgs/disk.img" "$work/disk-$sectors.enc"
  cmp "$work/disk-$sectors.enc" "$imgs/disk-$sectors.enc"
  say "identical to $imgs/disk-$sectors.enc (made by Python cryptography/OpenSSL, opened by dm-crypt)"
  "$work/xtsctl" decrypt --type plain --key-file "$work/test.key" --sector-size "$sectors" \
    "$work/disk-$sectors.enc" "$work/disk-$sectors.img"
  cmp "$work/disk-$sectors.img" "$imgs/disk.img"
  say "decrypted back: $(sha256sum < "$work/disk-$sectors.img" | cut -c1-16)... equals disk.img"
done

# xtsctl volumes. The passphrase hashing is calibrated to 300 ms and 64 MiB
# here to keep the demo short (the default is 2 s and up to 1 GiB).
golden=testimages/v2
x=$work/xtsctl
install -m 600 "$golden/passphrase.txt" "$work/pass"
pass=(--passphrase-file "$work/pass")
kdf=(--kdf-time 300ms --kdf-memory 64M)
say "encrypting $imgs/disk.img into an xtsctl volume (passphrase, BLAKE2b tags per sector)"
digest=$("$x" encrypt "${pass[@]}" "${kdf[@]}" "$imgs/disk.img" "$work/disk.vol")
say "end-to-end digest ${digest:0:16}... recorded (encrypted) in the header"
"$x" info "$work/disk.vol"
"$x" verify "${pass[@]}" "$work/disk.vol"
back=$("$x" decrypt "${pass[@]}" "$work/disk.vol" "$work/disk-vol.img")
cmp "$work/disk-vol.img" "$imgs/disk.img"
[ "$back" = "$digest" ]
say "decrypted back: equals disk.img, same digest"

say "decrypting $golden/disk-4096.vol, written by scripts/volume_ref.py (Python, from docs/FORMAT.md alone)"
"$x" decrypt -q "${pass[@]}" "$golden/disk-4096.vol" "$work/golden.img" >/dev/null
cmp "$work/golden.img" "$imgs/disk.img"
say "equals disk.img"

say "flipping one bit in sector 100 of a copy: verify names it, decrypt refuses"
cp "$work/disk.vol" "$work/bad.vol"
data_offset=$("$x" info --json "$work/bad.vol" | sed -n 's/.*"data_offset": \([0-9]*\).*/\1/p')
printf '\x01' | dd of="$work/bad.vol" bs=1 seek=$((data_offset + 100 * 4096 + 7)) conv=notrunc status=none
if "$x" verify "${pass[@]}" "$work/bad.vol"; then
  echo "demo: verify missed the flipped bit" >&2
  exit 1
fi
if "$x" decrypt -q "${pass[@]}" "$work/bad.vol" "$work/bad.img" 2>/dev/null || [ -e "$work/bad.img" ]; then
  echo "demo: decrypt did not refuse the damaged volume" >&2
  exit 1
fi

say "formatting an empty 16 MiB volume"
"$x" format "${pass[@]}" "${kdf[@]}" --size 16M "$work/empty.vol" >/dev/null
"$x" verify -q "${pass[@]}" "$work/empty.vol" >/dev/null
"$x" info --dm-table --device /dev/loop0 "$work/empty.vol"
say "ok"
