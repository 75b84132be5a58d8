#!/usr/bin/env bash
# make-testimages.sh: rebuild testimages/plain/ from scratch.
#
# Makes a small ext4 filesystem image with known files (reproducibly: fixed
# UUID, hash seed and timestamps), a fixed test key, and the image encrypted
# by an independent implementation, Python's cryptography package (Debian's
# python3-cryptography, backed by OpenSSL), in the layouts cryptsetup's plain
# mode uses. The Go tests compare xtsctl's output with these files.
#
# Needs: e2fsprogs, python3 with python3-cryptography (apt-get install
# e2fsprogs python3-cryptography). Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
out=testimages/plain
py=/usr/bin/python3 # Debian's python, which has python3-cryptography
rm -rf "$out" && mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Known files: short text, a binary file spanning many sectors, a nested one.
mkdir -p "$work/root/docs"
printf 'hello from xtsctl\n' > "$work/root/hello.txt"
"$py" - "$work/root/random.bin" <<'PY'
import hashlib, sys
# 300 KiB of deterministic pseudo-random bytes: SHA-256 in counter mode.
with open(sys.argv[1], "wb") as f:
    for i in range(300 * 1024 // 32):
        f.write(hashlib.sha256(b"xtsctl test data %d" % i).digest())
PY
printf 'The quick brown fox jumps over the lazy dog.\n' > "$work/root/docs/fox.txt"
touch -d '2026-01-01 00:00:00 UTC' "$work/root" "$work/root"/* "$work/root/docs"/*

export E2FSPROGS_FAKE_TIME=1767225600 # 2026-01-01, so the image is reproducible
mkfs.ext4 -q -F -b 1024 -L xtsctl-test -U 0a7f5c1e-7b2d-4c55-9e3a-1d2c3b4a5f60 \
  -E hash_seed=5f0c1d2e-3b4a-4c5d-8e6f-708192a3b4c5,root_owner=0:0 \
  -d "$work/root" "$out/disk.img" 2M
# mkfs -d copies each file's ctime, which touch cannot set: pin every
# timestamp of every inode with debugfs so that reruns give the same bytes.
for f in / /hello.txt /random.bin /docs /docs/fox.txt /lost+found; do
  for field in atime ctime mtime crtime; do
    debugfs -w -R "set_inode_field $f $field 20260101000000" "$out/disk.img" 2>/dev/null
  done
done
e2fsck -fn "$out/disk.img" >/dev/null 2>&1

# The test key: 64 bytes (XTS-AES-256) and 32 bytes (XTS-AES-128), derived
# from fixed strings so the script is reproducible. Never use them for data.
"$py" -c 'import hashlib,sys; sys.stdout.buffer.write(hashlib.sha512(b"xtsctl test key 256").digest())' > "$out/test-256.key"
"$py" -c 'import hashlib,sys; sys.stdout.buffer.write(hashlib.sha256(b"xtsctl test key 128").digest())' > "$out/test-128.key"

# encrypt IN KEY OUT SECTOR_SIZE LARGE(0/1) SKIP OFFSET: what cryptsetup plain
# mode puts on the device: OFFSET*512 untouched (zero) bytes, then each
# sector encrypted with tweak le64(n) || 0^8, where n counts 512-byte units
# (or sectors with iv_large_sectors) from the start of the data, plus SKIP.
encrypt() {
  "$py" - "$@" <<'PY'
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
src, keyfile, dst, size, large, skip, offset = sys.argv[1:]
size, large, skip, offset = int(size), large == "1", int(skip), int(offset)
key = open(keyfile, "rb").read()
data = open(src, "rb").read()
assert len(data) % size == 0
out = bytearray(offset * 512)
units = size // 512
for i in range(len(data) // size):
    n = skip + i * units
    if large:
        n //= units
    enc = Cipher(algorithms.AES(key), modes.XTS(n.to_bytes(16, "little"))).encryptor()
    out += enc.update(data[i * size:(i + 1) * size]) + enc.finalize()
open(dst, "wb").write(out)
PY
}
encrypt "$out/disk.img" "$out/test-256.key" "$out/disk-512.enc" 512 0 0 0
encrypt "$out/disk.img" "$out/test-256.key" "$out/disk-4096.enc" 4096 0 0 0
encrypt "$out/disk.img" "$out/test-256.key" "$out/disk-4096-large.enc" 4096 1 0 0
encrypt "$out/disk.img" "$out/test-128.key" "$out/disk-aes128-skip16-offset8.enc" 512 0 16 8

(cd "$out" && sha256sum disk.img *.enc > SHA256SUMS)
(cd "$work/root" && sha256sum hello.txt random.bin docs/fox.txt) > "$out/FILES.sha256"
echo "made $(ls "$out" | wc -l) files in $out"
