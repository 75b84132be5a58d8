#!/usr/bin/env bash
# make-testimages-v1.sh: rebuild testimages/v1/, the golden xtsctl volumes
# of format version 1. Version 1 is no longer written (xtsctl writes
# version 2 and upgrades a version-1 volume on its first read-write open):
# these volumes are kept so that every release still reads and upgrades
# them. The xtsctl-made one needs an xtsctl from before version 2, which
# this script builds from commit e4cd597 in a temporary git worktree.
#
# The volumes hold testimages/plain/disk.img (make-testimages.sh). Two are
# written by scripts/volume_ref.py --version 1, an independent
# implementation of docs/FORMAT.md in Python (OpenSSL's AES-XTS, the
# reference Argon2, libsodium's XChaCha20-Poly1305, hashlib's BLAKE2b); one
# by xtsctl itself as it was. Volumes hold random keys, salts and
# UUIDs: rerunning this script gives different bytes, and the tests only
# need the passphrase and the plaintext. Argon2id costs are tiny (test
# images: never use them for data).
#
# Needs: Go, python3-cryptography python3-argon2 python3-nacl (Debian's
# /usr/bin/python3). Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
out=testimages/v1
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$out" && mkdir -p "$out"

printf 'xtsctl test passphrase\n' > "$out/passphrase.txt"
plain=testimages/plain/disk.img

"$py" scripts/volume_ref.py write "$plain" "$out/disk-4096.vol" "$out/passphrase.txt" --version 1
"$py" scripts/volume_ref.py write "$plain" "$out/disk-512-aes128-tag16.vol" "$out/passphrase.txt" \
  --sector-size 512 --tag-size 16 --key-bits 256 --label xtsctl-golden --version 1

git worktree add -q --detach "$work/src" e4cd597
(cd "$work/src" && go build -o "$work/xtsctl" ./cmd/xtsctl)
git worktree remove --force "$work/src"
install -m 600 "$out/passphrase.txt" "$work/pass" # xtsctl warns about readable passphrase files
"$work/xtsctl" encrypt -q --passphrase-file "$work/pass" --kdf-iterations 1 --kdf-memory 1M \
  --integrity none --sector-size 1024 --label xtsctl-made "$plain" "$out/disk-xtsctl-nointegrity.vol"

(cd "$out" && sha256sum *.vol > SHA256SUMS)
echo "made $(ls "$out" | wc -l) files in $out"
