// Package fvault2 reads FileVault 2 volumes on CoreStorage (macOS 10.7 to
// 10.12 and Macs that kept CoreStorage since): a format of the format layer
// (package disk), registered as "fvault2" (alias "filevault2").
//
// The chain, as docs/FORMATS.md and the fact sheet describe it: the
// physical volume header (CRC-32C) names the disk label, whose volume
// groups descriptor names the encrypted metadata; each 8 KiB metadata
// block is one AES-XTS-128 unit under the key in the header (key data ‖
// physical volume UUID), tweak = its index, with its own CRC-32C. The
// blocks give the logical volume's extents (type 0x0305), its size and
// family UUID (0x001a, an XML plist) and the encryption context (0x0019,
// an XML plist) with the passphrase-wrapped KEKs of the crypto users and
// the KEK-wrapped volume keys. Unlocking runs PBKDF2-SHA-256 on the
// passphrase (bounded: MaxIterations), unwraps the KEK and then the volume
// key (RFC 3394), and derives the tweak key from the volume key and the
// family UUID (SHA-256, first 16 bytes). The logical volume is
// AES-XTS-128 in 512-byte units numbered from its first sector.
//
// Nothing read from the image is trusted: every offset, count and length
// is bounded before it is used, the plists are parsed with size and depth
// limits, and the checksums are integrity checks against accidents only
// (anyone who writes the image can recompute them). FileVault 2 is served
// read-only. APFS volumes (FileVault on APFS) are a different format and
// are refused as such.
package fvault2
