// Package luks reads LUKS1 and LUKS2 headers (cryptsetup's on-disk
// formats), unlocks their keyslots, decrypts and encrypts their data
// segment without device-mapper, and writes LUKS2 headers that cryptsetup
// opens: new volumes, keyslots added, changed and removed, header backups
// and restores.
//
// Scope: data segments in aes-xts-plain64 (or aes-xts-plain where it is
// the same) with 256- or 512-bit keys and 512..4096-byte sectors; keyslots
// with PBKDF2 (sha1, sha2, sha3, ripemd160, blake2), Argon2i or Argon2id,
// the "luks1" AF splitter and aes-xts keyslot areas. Anything else (other
// ciphers, dm-integrity segments, reencryption in progress, unknown
// mandatory requirements, OPAL segments, several segments, keyslot types
// other than luks2) is refused with an *UnsupportedError naming it.
//
// Which headers are valid is cryptsetup's call: a LUKS2 header loads when
// cryptsetup 2.6.1 loads it (its JSON read as json-c reads it, then
// LUKS2_hdr_validate's rules), and is refused as damaged (*CorruptError)
// when cryptsetup refuses it; keyslots are tried in cryptsetup's order,
// stopping where it stops. A passphrase can be tested (TestPassphrase) on
// any header cryptsetup tests it on, whether or not its data is served
// here.
//
// Threat model: the image is written by someone who may be hostile and
// does not know the passphrase. A LUKS2 checksum is no authentication
// (anyone can recompute it), so every size, offset, count and cost read
// from a header is bounded before use: the JSON area by the header sizes
// the format allows, keyslot areas inside the keyslots area and not
// overlapping, the segment inside the data device, KDF costs by the
// caller's Limits. What the passphrase protects is the volume key; the
// data itself is XTS, which has no integrity (see package xts): a changed
// ciphertext decrypts to garbage without any error.
//
// Typical use (the CLI's decrypt):
//
//	h, err := luks.ReadHeader(hdrFile, hdrSize)   // the image, or --header
//	key, slot, err := h.Unlock(ctx, hdrFile, passphrase, luks.UnlockOptions{})
//	n, err := h.Decrypt(ctx, key, dataFile, dataSize, out)
package luks
