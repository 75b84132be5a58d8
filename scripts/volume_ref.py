#!/usr/bin/python3
"""volume_ref.py: an independent implementation of the xtsctl volume format,
versions 1 and 2, written from docs/FORMAT.md alone (no xtsctl code), with Debian's
Python libraries: cryptography (OpenSSL's AES-XTS), argon2-cffi (the
reference Argon2), PyNaCl (libsodium's XChaCha20-Poly1305) and hashlib
(BLAKE2b).

  volume_ref.py write IN OUT PASSFILE [--sector-size N] [--tag-size T]
                [--key-bits 256|512] [--label L] [--version V]
      make a volume holding IN (format version 2 unless --version says
      otherwise); prints the plaintext's end-to-end digest (its
      BLAKE2b-512, as b2sum prints it)
  volume_ref.py read IMAGE PASSFILE OUT
      unlock, check both header copies, the header MAC, the state records
      (authenticated in version 2), every tag and the digest (unless the
      state says it is stale), and write the plaintext to OUT; prints the
      digest. Exits 1 on any mismatch, naming it.

Needs: apt-get install python3-cryptography python3-argon2 python3-nacl.
Argon2id costs are fixed low (1 pass, 1 MiB, 1 lane): test images only.
"""
import hashlib
import os
import struct
import sys

from argon2.low_level import Type, hash_secret_raw
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from nacl.bindings import (crypto_aead_xchacha20poly1305_ietf_decrypt,
                           crypto_aead_xchacha20poly1305_ietf_encrypt)

MAGIC = b"XTSCTLVL"
MiB = 1 << 20


def roundup(n, m):
    return (n + m - 1) // m * m


def b2(data, size=64, key=b""):
    return hashlib.blake2b(data, digest_size=size, key=key).digest()


def layout(D, S, T, R=16 * MiB):
    """The layout formulas of FORMAT.md, "Layout"."""
    sectors = D // S
    regions = (D + R - 1) // R
    bitmap = roundup((regions + 7) // 8, 4096)
    state_len = 8192 + bitmap
    data_off = roundup(65536 + state_len, MiB)
    end = data_off + D
    tag_off = tag_len = 0
    if T:
        tag_off = roundup(end, 4096)
        tag_len = roundup(sectors * T, 4096)
        end = tag_off + tag_len
    sec = roundup(end, 65536)
    return dict(sectors=sectors, state_len=state_len, data_off=data_off, tag_off=tag_off,
                tag_len=tag_len, secondary=sec, size=sec + 65536, region=R)


def end_to_end_digest(data):
    """The end-to-end digest: FORMAT.md, "End-to-end digest": the unkeyed
    BLAKE2b-512 of the whole plaintext (what b2sum prints)."""
    return hashlib.blake2b(data, digest_size=64).digest()


def derive(mk, label, size):
    return b2(label.encode(), size, mk)


def xts(key, S, data, decrypt):
    out = bytearray()
    for i in range(len(data) // S):
        tweak = (i * S // 512).to_bytes(16, "little")
        c = Cipher(algorithms.AES(key), modes.XTS(tweak))
        op = c.decryptor() if decrypt else c.encryptor()
        out += op.update(data[i * S:(i + 1) * S]) + op.finalize()
    return bytes(out)


def tags(tag_key, T, S, ct):
    return b"".join(b2(struct.pack("<Q", i) + ct[i * S:(i + 1) * S], T, tag_key)
                    for i in range(len(ct) // S))


def slot_ad(slot, uuid, index, key_size):
    return bytes(slot[:56]) + uuid + struct.pack("<II", index, key_size)


def mac_input(block):
    b = bytearray(block[:4000])
    b[16:24] = bytes(8)      # generation
    b[344:376] = bytes(32)   # key slot area checksum
    return bytes(b)


STATE_RECORD = 4096
MAX_SEQUENCE = 1 << 62


def state_record(version, mk, uuid, seq, flags, bitmap):
    """A state record (FORMAT.md, "State records")."""
    r = bytearray(STATE_RECORD)
    r[0:8] = b"XTSSTATE" if version == 1 else b"XTSSTAT2"
    struct.pack_into("<Q", r, 8, seq)
    r[16:32] = uuid
    struct.pack_into("<I", r, 32, flags)
    if version != 1:
        r[40:72] = b2(bitmap, 32, derive(mk, "xtsctl volume v2: dirty-region bitmap", 64))
        r[4032:4064] = b2(bytes(r[:4032]), 32, derive(mk, "xtsctl volume v2: state records", 64))
    r[4064:4096] = b2(bytes(r[:4064]), 32)
    return bytes(r)


def read_state(img, version, mk, uuid, bitmap_len):
    """The state in force: (dirty, digest stale, bitmap trusted). A record
    is usable if intact, in its slot, below the sequence bound, of this
    uuid and, in version 2, if its MAC checks; the one with the highest
    sequence number is in force. No usable record: unknown (dirty, stale)."""
    usable = []
    for slot in range(2):
        r = img[65536 + slot * STATE_RECORD:65536 + (slot + 1) * STATE_RECORD]
        if r == bytes(STATE_RECORD):
            continue
        seq, flags = struct.unpack_from("<Q", r, 8)[0], struct.unpack_from("<I", r, 32)[0]
        magic = b"XTSSTATE" if version == 1 else b"XTSSTAT2"
        reserved = r[36:4064] if version == 1 else r[36:40] + r[72:4032]
        ok = (r[0:8] == magic and b2(r[:4064], 32) == r[4064:] and r[16:32] == uuid and
              flags & ~3 == 0 and reserved == bytes(len(reserved)) and
              seq < MAX_SEQUENCE and seq % 2 == slot)
        if ok and version != 1:
            ok = b2(r[:4032], 32, derive(mk, "xtsctl volume v2: state records", 64)) == r[4032:4064]
        if ok:
            usable.append((seq, flags, r[40:72]))
        else:
            print("volume_ref: state record %d is unusable" % slot, file=sys.stderr)
    if not usable:
        return True, True, False
    usable.sort()
    seq, flags, _ = usable[-1]
    bitmap = img[65536 + 2 * STATE_RECORD:65536 + 2 * STATE_RECORD + bitmap_len]
    trusted = version == 1 or b2(bitmap, 32, derive(mk, "xtsctl volume v2: dirty-region bitmap", 64)) in \
        [u[2] for u in usable]
    return bool(flags & 1), bool(flags & 2), trusted


def write(inp, out, passfile, S=4096, T=32, key_bits=512, label="", version=2):
    data = open(inp, "rb").read()
    passphrase = read_pass(passfile)
    D, K = len(data), key_bits // 8
    L = layout(D, S, T)
    uuid = bytearray(os.urandom(16))
    uuid[6] = uuid[6] & 0x0F | 0x40
    uuid[8] = uuid[8] & 0x3F | 0x80
    uuid = bytes(uuid)
    mk = os.urandom(K)

    # Key slot 0: Argon2id (1 pass, 1 MiB, 1 lane), XChaCha20-Poly1305.
    t, m, p = 1, 1024, 1
    salt, nonce = os.urandom(32), os.urandom(24)
    slot = bytearray(512)
    struct.pack_into("<IIIIII", slot, 0, 1, 1, t, m, p, 1)
    slot[24:56] = salt
    slot[56:80] = nonce
    wk = hash_secret_raw(passphrase, salt, t, m, p, 32, Type.ID, 0x13)
    wrapped = crypto_aead_xchacha20poly1305_ietf_encrypt(mk, slot_ad(slot, uuid, 0, K), nonce, wk)
    slot[80:80 + len(wrapped)] = wrapped
    slot[480:512] = b2(bytes(slot[:480]), 32)
    slots = bytes(slot) + bytes(7 * 512)

    ct = xts(mk, S, data, False)
    digest = end_to_end_digest(data)
    dnonce = os.urandom(24)
    sealed = dnonce + crypto_aead_xchacha20poly1305_ietf_encrypt(
        digest, uuid, dnonce, derive(mk, "xtsctl volume v1: digest", 32))

    h = bytearray(4096)
    h[0:8] = MAGIC
    struct.pack_into("<IIQ", h, 8, version, 4096, 1)
    h[24:40] = uuid
    h[40:40 + len(label.encode())] = label.encode()
    h[104:104 + 15] = b"aes-xts-plain64"
    struct.pack_into("<IIII", h, 136, K, S, 1 if T else 0, T)
    struct.pack_into("<QQQQQQQQQ", h, 152, L["data_off"], D, L["tag_off"], L["tag_len"],
                     65536, L["state_len"], L["region"], L["secondary"], L["size"])
    struct.pack_into("<IIII", h, 224, 4096, 512, 8, 1)  # slots; flags: digest recorded
    h[240:344] = sealed
    h[344:376] = b2(slots, 32)
    h[4000:4032] = b2(mac_input(h), 32, derive(mk, "xtsctl volume v1: header mac", 64))
    h[4032:4096] = b2(bytes(h[:4032]))
    copy = bytes(h) + slots

    # Sequence 0, flags 0 (clean, digest current), an all-zero bitmap.
    state = state_record(version, mk, uuid, 0, 0, bytes(L["state_len"] - 8192))

    img = bytearray(L["size"])
    img[0:8192] = copy
    img[65536:65536 + 4096] = state
    img[L["data_off"]:L["data_off"] + D] = ct
    if T:
        tg = tags(derive(mk, "xtsctl volume v1: sector tags", 64), T, S, ct)
        img[L["tag_off"]:L["tag_off"] + len(tg)] = tg
    img[L["secondary"]:L["secondary"] + 8192] = copy
    open(out, "wb").write(img)
    print(digest.hex())


def fail(msg):
    print("volume_ref: " + msg, file=sys.stderr)
    sys.exit(1)


def parse_copy(b):
    """Return the fields of a valid header copy, or None."""
    if len(b) < 8192 or b[0:8] != MAGIC or struct.unpack_from("<I", b, 8)[0] not in (1, 2):
        return None
    if b2(b[:4032]) != b[4032:4096] or b2(b[4096:8192], 32) != b[344:376]:
        return None
    f = dict(zip(["gen"], struct.unpack_from("<Q", b, 16)))
    f["version"] = struct.unpack_from("<I", b, 8)[0]
    f["uuid"] = b[24:40]
    f["K"], f["S"], f["mode"], f["T"] = struct.unpack_from("<IIII", b, 136)
    (f["data_off"], f["D"], f["tag_off"], f["tag_len"], state_off, f["state_len"], f["region"],
     f["secondary"], f["size"]) = struct.unpack_from("<QQQQQQQQQ", b, 152)
    f["flags"] = struct.unpack_from("<I", b, 236)[0]
    f["block"], f["slots"] = b[:4096], b[4096:8192]
    L = layout(f["D"], f["S"], f["T"], f["region"])
    if (f["data_off"], f["tag_off"], f["tag_len"], f["secondary"], f["size"], state_off) != \
            (L["data_off"], L["tag_off"], L["tag_len"], L["secondary"], L["size"], 65536):
        fail("header copy describes areas FORMAT.md would not put there")
    return f


def read(image, passfile, out):
    img = open(image, "rb").read()
    passphrase = read_pass(passfile)
    primary = parse_copy(img[0:8192])
    sec_off = primary["secondary"] if primary else (len(img) // 65536 - 1) * 65536
    secondary = parse_copy(img[sec_off:sec_off + 8192])
    if not primary and not secondary:
        fail("both header copies are damaged")
    if not primary or not secondary:
        print("volume_ref: one header copy is damaged", file=sys.stderr)
    h = primary
    if not h or secondary and secondary["gen"] > h["gen"]:
        h = secondary
    if len(img) < h["size"]:
        fail("truncated: %d bytes, the header says %d" % (len(img), h["size"]))
    K, S, T = h["K"], h["S"], h["T"]

    mk = None
    for i in range(8):
        s = h["slots"][i * 512:(i + 1) * 512]
        if s == bytes(512):
            continue
        if b2(s[:480], 32) != s[480:]:
            fail("key slot %d is damaged" % i)
        state, kdf, t, m, p, aead = struct.unpack_from("<IIIIII", s, 0)
        if (state, kdf, aead) != (1, 1, 1):
            fail("key slot %d: unknown algorithms" % i)
        wk = hash_secret_raw(passphrase, s[24:56], t, m, p, 32, Type.ID, 0x13)
        try:
            mk = crypto_aead_xchacha20poly1305_ietf_decrypt(
                s[80:80 + K + 16], slot_ad(s, h["uuid"], i, K), s[56:80], wk)
            break
        except Exception:
            continue
    if mk is None:
        fail("wrong passphrase")
    if b2(mac_input(h["block"]), 32, derive(mk, "xtsctl volume v1: header mac", 64)) != h["block"][4000:4032]:
        fail("header MAC mismatch")

    dirty, stale, trusted = read_state(img, h["version"], mk, h["uuid"], h["state_len"] - 8192)
    if dirty:
        print("volume_ref: the volume was not closed cleanly%s" %
              ("" if trusted else " (and its bitmap is not one a state record names)"), file=sys.stderr)
    ct = img[h["data_off"]:h["data_off"] + h["D"]]
    if T:
        want = tags(derive(mk, "xtsctl volume v1: sector tags", 64), T, S, ct)
        have = img[h["tag_off"]:h["tag_off"] + len(want)]
        bad = [i for i in range(len(ct) // S) if want[i * T:(i + 1) * T] != have[i * T:(i + 1) * T]]
        if bad:
            fail("bad sectors: " + " ".join(map(str, bad)))
    plain = xts(mk, S, ct, True)
    digest = end_to_end_digest(plain)
    if h["flags"] & 1 and not stale:
        sealed = h["block"][240:344]
        recorded = crypto_aead_xchacha20poly1305_ietf_decrypt(
            sealed[24:], h["uuid"], sealed[:24], derive(mk, "xtsctl volume v1: digest", 32))
        if recorded != digest:
            fail("digest mismatch")
    open(out, "wb").write(plain)
    print(digest.hex())


def read_pass(path):
    p = open(path, "rb").read()
    if p.endswith(b"\n"):
        p = p[:-1]
    return p


def main(argv):
    if len(argv) >= 4 and argv[1] == "write":
        opts = dict(S=4096, T=32, key_bits=512, label="", version=2)
        names = {"--sector-size": "S", "--tag-size": "T", "--key-bits": "key_bits",
                 "--label": "label", "--version": "version"}
        rest = argv[5:]
        for i in range(0, len(rest), 2):
            k = names[rest[i]]
            opts[k] = rest[i + 1] if k == "label" else int(rest[i + 1])
        write(argv[2], argv[3], argv[4], **opts)
    elif len(argv) == 5 and argv[1] == "read":
        read(argv[2], argv[3], argv[4])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
