#!/usr/bin/python3
"""xts_ref.py: the independent AES-XTS the luks tests compare with.

usage: xts_ref.py enc|dec KEYFILE SECTOR_SIZE IV_START < IN > OUT

Encrypts or decrypts stdin, a whole number of SECTOR_SIZE-byte sectors,
with python3-cryptography's AES-XTS and dm-crypt's plain64 IVs: sector i
(from 0) gets the tweak IV_START + i*SECTOR_SIZE/512 as a 16-byte
little-endian number (what cryptsetup loads for LUKS: 512-byte IV units,
no iv_large_sectors, IV_START the segment's iv_tweak).
"""
import sys

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


def main():
    op, keyfile, sector_size, iv = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    key = open(keyfile, "rb").read()
    data = sys.stdin.buffer.read()
    if len(data) % sector_size:
        sys.exit("xts_ref.py: input is not a whole number of sectors")
    out = bytearray()
    for i in range(0, len(data), sector_size):
        tweak = (iv + i // 512).to_bytes(16, "little")
        c = Cipher(algorithms.AES(key), modes.XTS(tweak))
        x = c.encryptor() if op == "enc" else c.decryptor()
        out += x.update(data[i:i + sector_size]) + x.finalize()
    sys.stdout.buffer.write(out)


main()
