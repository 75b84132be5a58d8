#!/usr/bin/env bash
# make-testimages-v2.sh: rebuild testimages/v2/, the golden xtsctl volumes
# of format version 2 (docs/FORMAT.md; version 1's are in testimages/v1).
#
# The volumes hold testimages/plain/disk.img (make-testimages.sh). Two are
# written by scripts/volume_ref.py, an independent implementation of
# docs/FORMAT.md in Python (OpenSSL's AES-XTS, the reference Argon2,
# libsodium's XChaCha20-Poly1305, hashlib's BLAKE2b); one by xtsctl itself,
# so that its own output of today stays readable tomorrow; one has a future
# format version and must be refused. Volumes hold random keys, salts and
# UUIDs: rerunning this script gives different bytes, and the tests only
# need the passphrase and the plaintext. Argon2id costs are tiny (test
# images: never use them for data).
#
# Needs: Go, python3-cryptography python3-argon2 python3-nacl (Debian's
# /usr/bin/python3). Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
out=testimages/v2
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$out" && mkdir -p "$out"

printf 'xtsctl test passphrase\n' > "$out/passphrase.txt"
plain=testimages/plain/disk.img

"$py" scripts/volume_ref.py write "$plain" "$out/disk-4096.vol" "$out/passphrase.txt" --version 2
"$py" scripts/volume_ref.py write "$plain" "$out/disk-512-aes128-tag16.vol" "$out/passphrase.txt" \
  --sector-size 512 --tag-size 16 --key-bits 256 --label xtsctl-golden --version 2

go build -o "$work/xtsctl" ./cmd/xtsctl
install -m 600 "$out/passphrase.txt" "$work/pass" # xtsctl warns about readable passphrase files
"$work/xtsctl" encrypt -q --passphrase-file "$work/pass" --kdf-iterations 1 --kdf-memory 1M \
  --integrity none --sector-size 1024 --label xtsctl-made "$plain" "$out/disk-xtsctl-nointegrity.vol"

head -c 65536 /dev/zero > "$work/zeros"
"$py" scripts/volume_ref.py write "$work/zeros" "$out/future-version.vol" "$out/passphrase.txt" --version 3 >/dev/null

(cd "$out" && sha256sum *.vol > SHA256SUMS)
echo "made $(ls "$out" | wc -l) files in $out"
