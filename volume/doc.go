// Package volume owns the xtsctl volume format (docs/FORMAT.md) and its
// sector I/O: two header copies, passphrase key slots (Argon2id,
// XChaCha20-Poly1305), a dm-crypt compatible data area, a keyed BLAKE2b tag
// per sector and an authenticated state area. It is a format of the format
// layer (package disk). Serving images as block devices is package
// blockdev's; cryptsetup's plain mode is package plain's.
//
// The volume API:
//
//   - Create writes a new volume; ReadHeaders reads the two header copies
//     without a key (for info), and Headers.UnlockWith finds the master key
//     (WithKey takes one that is already known).
//   - Open (or OpenWith, OpenDevice) gives a *Volume: ReadSectors checks
//     tags and never returns unverified plaintext, WriteSectors encrypts and
//     tags following the dirty-region protocol, Sync, Close (which marks a
//     written volume clean and wipes keys). Decrypt and Verify stream the
//     whole data area; Recover checks what a crash left; Upgrade turns a
//     version-1 volume into version 2.
//   - Layout.CryptTable is the dm-crypt table of the data area.
//   - AddSlot, ChangeSlot, RemoveSlot, Headers.Backup and Restore manage
//     passphrases and headers, crash-safely.
package volume
